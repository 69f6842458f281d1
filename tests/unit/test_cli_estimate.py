"""`distdeck estimate`: a readable table, or --json with the listed keys; bad layouts exit 2 with a message."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()

KEYS = {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu", "bubble_fraction", "exposed_comm_s",
        "memory_per_gpu_bytes", "fits", "micro_batch", "virtual_stages"}


def test_json_has_the_listed_keys_and_chooses_auto_values():
    result = runner.invoke(cli, ["estimate", "--model", "llama3-70b", "--gpu", "h100-80gb", "--gpus", "512",
                                 "--tp", "8", "--pp", "4", "--schedule", "interleaved_1f1b", "--global-batch", "512",
                                 "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert KEYS <= out.keys()
    assert out["dp"] == 16 and isinstance(out["micro_batch"], int) and isinstance(out["virtual_stages"], int)
    assert out["memory_per_gpu_bytes"]["total"] == pytest.approx(
        sum(v for k, v in out["memory_per_gpu_bytes"].items() if k != "total"))
    assert 0 < out["mfu"] < 1 and out["fits"] is True


def test_custom_model_prints_a_table():
    result = runner.invoke(cli, ["estimate", "--model", "custom", "--layers", "24", "--hidden", "2048", "--heads",
                                 "16", "--vocab", "32000", "--seq-len", "4096", "--gpus", "64", "--tp", "2",
                                 "--global-batch", "256", "--micro-batch", "2"])
    assert result.exit_code == 0, result.output
    for words in ("step time", "MFU", "memory: total", "fits", "TP 2"):
        assert words in result.output


@pytest.mark.parametrize("args, message", [
    (["--tp", "3", "--gpus", "96"], "--tp must divide the attention heads (64), got 3"),
    (["--gpus", "1000", "--pp", "2"], "--gpus must be a multiple of tp·pp·cp = 16, got 1000"),
    (["--pp", "4", "--virtual-stages", "2"], "--virtual-stages more than 1 needs schedule interleaved_1f1b"),
    (["--micro-batch", "lots"], "--micro-batch must be auto or a positive integer"),
    (["--gpu", "tpu"], "--gpu must be one of a100-80gb, a100-40gb, h100-80gb, h200, b200"),
    (["--model", "custom", "--layers", "4"], "--hidden model=custom needs hidden, heads, vocab, seq_len"),
    (["--cp", "16", "--cp-comm", "all_to_all"], "--cp all_to_all needs cp to divide the attention heads per TP rank"),
    (["--cp-comm", "zigzag"], "--cp-comm must be one of ring, all_to_all, all_gather, got 'zigzag'"),
    (["--zero-stage", "3", "--zero-shards", "3"], "--zero-shards must divide dp·cp (128), got 3"),
    (["--zero-shards", "8"], "--zero-shards hybrid sharding needs zero_stage 3"),
    (["--zero-shards", "many"], "Invalid value for '--zero-shards'"),
    (["--grad-reduce-dtype", "fp16"], "--grad-reduce-dtype must be bf16 or fp32, got 'fp16'"),
    (["--attention-kernel", "fa9"], "--attention-kernel must be one of auto, fa2, fa3, cudnn, triton_fa1, fa1, got 'fa9'"),
    (["--network-gbps", "0"], "--network-gbps must be at least 1"),
    (["--precision", "fp8", "--gpu", "a100-80gb"], "--precision fp8 needs FP8 tensor cores"),
    (["--precision", "int4"], "--precision must be bf16 or fp8, got 'int4'"),
    (["--fp8-param-gather"], "--fp8-param-gather gathers FP8 weights, so it needs precision fp8, got bf16"),
])
def test_invalid_layouts_exit_2_with_a_message(args, message):
    result = runner.invoke(cli, ["estimate", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_hybrid_sharding_and_ulysses_show_in_the_table_and_json():
    args = ["estimate", "--model", "llama3-70b", "--gpus", "256", "--tp", "8", "--cp", "4", "--cp-comm", "all_to_all",
            "--zero-stage", "3", "--zero-shards", "8", "--global-batch", "64", "--micro-batch", "1"]
    table = runner.invoke(cli, args)
    assert table.exit_code == 0, table.output
    assert "ZeRO-3 in groups of 8" in table.output and "CP by all_to_all" in table.output
    out = json.loads(runner.invoke(cli, [*args, "--json"]).output)
    assert (out["cp_comm"], out["zero_shards"]) == ("all_to_all", 8)


def test_the_software_and_the_network_are_inputs():
    """The attention kernel and the node's network bandwidth change the estimate the way they should: FA3 beats
    the 2022 Triton kernel on a long sequence; a slower network never makes a data-parallel step faster."""
    base = ["estimate", "--model", "llama3-8b", "--seq-len", "16384", "--gpus", "64", "--tp", "1",
            "--global-batch", "64", "--micro-batch", "1", "--json"]
    runs = {k: json.loads(runner.invoke(cli, [*base, "--attention-kernel", k]).output) for k in ("fa3", "triton_fa1")}
    assert runs["fa3"]["attention_kernel"] == "fa3"
    assert runs["fa3"]["step_time_s"] < runs["triton_fa1"]["step_time_s"]
    auto = json.loads(runner.invoke(cli, base).output)
    assert auto["attention_kernel"] == "cudnn" and auto["network_gbps"] == pytest.approx(3200)
    slow = json.loads(runner.invoke(cli, [*base, "--network-gbps", "100"]).output)
    assert slow["network_gbps"] == pytest.approx(100) and slow["step_time_s"] > auto["step_time_s"]


def test_search_prints_the_fastest_layouts_with_ep_and_hsdp():
    """`--search`: the layout chooser's ranking in the terminal; a mixture of experts gets an EP column > 1, the
    chooser's default question (Llama 3 70B on 1,024 H100s) at 2,048 tokens hybrid-sharded ZeRO-3 among its rows; --json is
    the API's list."""
    moe = runner.invoke(cli, ["estimate", "--model", "mixtral-8x7b", "--gpus", "256", "--global-batch", "256",
                              "--seq-len", "4096", "--search", "--top", "3", "--json"])
    assert moe.exit_code == 0, moe.output
    rows = json.loads(moe.output)
    assert len(rows) == 3 and rows[0]["ep"] > 1
    assert [r["step_time_s"] for r in rows] == sorted(r["step_time_s"] for r in rows)
    table = runner.invoke(cli, ["estimate", "--model", "llama3-70b", "--gpus", "1024", "--seq-len", "2048",
                                "--search", "--top", "12"])
    assert table.exit_code == 0, table.output
    assert "EP" in table.output and "HSDP" in table.output and "fastest layouts that fit" in table.output
    bad = runner.invoke(cli, ["estimate", "--search", "--gpus", "12"])
    assert bad.exit_code == 2 and "--gpus must fill whole nodes" in bad.output


def test_optimizer_state_and_loss_dtypes_change_the_memory_and_bad_ones_exit_2():
    """--optimizer-dtype bf16 halves Adam's 12 bytes a parameter; --cross-entropy fused keeps 4 bytes a logit, not 6."""
    base = ["estimate", "--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--zero-stage", "1", "--micro-batch", "1",
            "--global-batch", "8", "--recompute", "full", "--json"]

    def memory(*extra):
        result = runner.invoke(cli, [*base, *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["memory_per_gpu_bytes"]

    default, bf16, fused = memory(), memory("--optimizer-dtype", "bf16"), memory("--cross-entropy", "fused")
    assert bf16["optimizer"] == pytest.approx(default["optimizer"] / 2)
    assert default["activations"] - fused["activations"] == pytest.approx(8192 * 128000 * 2)
    for flag, value in (("--optimizer-dtype", "fp16"), ("--cross-entropy", "bf16")):
        bad = runner.invoke(cli, [*base, flag, value])
        assert bad.exit_code == 2 and flag in bad.output, bad.output


def test_execution_is_a_cli_input():
    """--execution reaches the estimate (the table and --json name it); a bad value exits 2 naming the flag."""
    base = ["estimate", "--model", "custom", "--layers", "12", "--hidden", "768", "--heads", "12", "--vocab", "50368",
            "--seq-len", "512", "--gpus", "8", "--tp", "1", "--zero-stage", "3", "--global-batch", "8",
            "--micro-batch", "1"]
    runs = {k: json.loads(runner.invoke(cli, [*base, "--execution", k, "--json"]).output) for k in ("eager", "compiled")}
    assert runs["eager"]["execution"] == "eager" and runs["compiled"]["step_time_s"] < runs["eager"]["step_time_s"]
    assert "eager" in runner.invoke(cli, base).output
    bad = runner.invoke(cli, [*base, "--execution", "jit"])
    assert bad.exit_code == 2 and "--execution must be one of" in bad.output


def test_fsdp_version_is_an_input_fsdp1_pays_more_gradient_passes():
    """`--fsdp`: FSDP1 (FullyShardedDataParallel) concatenates, casts and pre-divides each micro-batch's gradient
    before its reduce-scatter, FSDP2 copies it in once (compute.fsdp_reduce_input_bytes): the same ZeRO-3 run is slower
    with FSDP1; a name outside the two is refused with exit code 2, naming the field."""
    base = ["estimate", "--model", "llama3-8b", "--gpus", "16", "--tp", "1", "--zero-stage", "3", "--global-batch", "32",
            "--micro-batch", "1", "--grad-reduce-dtype", "fp32", "--json"]
    runs = {k: json.loads(runner.invoke(cli, [*base, "--fsdp", k]).output) for k in ("fsdp1", "fsdp2")}
    assert runs["fsdp1"]["fsdp"] == "fsdp1" and runs["fsdp1"]["step_time_s"] > runs["fsdp2"]["step_time_s"]
    bad = runner.invoke(cli, [*base, "--fsdp", "fsdp3"])
    assert bad.exit_code == 2 and "fsdp" in bad.output
