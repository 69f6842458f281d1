"""`distdeck calibrate` writes a hardware profile, and the estimator runs on it (issue 37, item 3).

The profile is measured once, in quick mode (the tiny Llama's shapes, small buffers: seconds); the checks on how the
estimate uses it scale that measured profile, so they hold whatever this machine measured.
"""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from app.cli import cli
from simulations import estimate as est
from simulations.calibrate import llama
from simulations.estimate import compute, profile

runner = CliRunner()
SECTIONS = ("device", "software", "host", "gemm", "attention", "memory_copy", "eager_op", "elementwise", "optimizer")


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("calibrate") / "profile.json"
    result = runner.invoke(cli, ["calibrate", "--quick", "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "profile:" in result.output and "bfloat16" in result.output or "float32" in result.output
    return json.loads(out.read_text())


def test_quick_calibrate_writes_every_figure_with_its_shape(measured):
    assert measured["format"] == profile.FORMAT and all(measured[name] for name in SECTIONS)
    assert measured["device"]["type"] == "cpu" and measured["device"]["dtype"] in ("float32", "bfloat16")
    probe = measured["gemm"]["dtype_probe"]  # the CPU's dtype is the faster of the two, and says so
    assert probe["chosen"] == max(probe["flops_per_s"], key=probe["flops_per_s"].get) == measured["device"]["dtype"]
    shapes = {(r["m"], r["k"], r["n"]) for r in measured["gemm"]["rows"]}
    assert shapes == set(llama.gemm_shapes(llama.TINY_LLAMA, 2 * llama.TINY_LLAMA.seq_len))
    kernels = {r["kernel"] for r in measured["attention"]["rows"]}
    assert measured["attention"]["default_kernel"] in kernels and "math" in kernels
    assert set(measured["optimizer"]["rows"]) | set(measured["optimizer"]["errors"]) == {"foreach", "fused", "clip"}
    assert measured["interconnect"] is None  # quick mode starts no second rank
    checked = profile.from_dict(measured)
    assert checked.best_gemm.flops_per_s == max(r["flops_per_s"] for r in measured["gemm"]["rows"])


def scaled(data: dict, slower: float) -> dict:
    """The same machine `slower` times slower in every figure: times multiplied, rates divided."""
    out = copy.deepcopy(data)
    for row in out["gemm"]["rows"]:
        row["seconds"] *= slower
        row["flops_per_s"] /= slower
    for row in out["attention"]["rows"]:
        for name in ("forward_s", "forward_backward_s"):
            row[name] *= slower
        for name in ("forward_flops_per_s", "backward_flops_per_s"):
            row[name] /= slower
    out["memory_copy"]["seconds"] *= slower
    out["memory_copy"]["bytes_per_s"] /= slower
    out["eager_op"]["seconds_per_op"] *= slower
    for row in out["elementwise"]["rows"].values():
        row["seconds"] *= slower
        row["bytes_per_s"] /= slower
    for row in out["optimizer"]["rows"].values():
        row["seconds"] *= slower
        row["seconds_per_param"] *= slower
    return out


STACKS = {"hf-amp": {"stack": "hf", "amp": True}, "eager": {"execution": "eager", "cross_entropy": "torch"}}


def on(data: dict, gpus: int = 1, stack: str = "hf-amp") -> est.Estimate:
    """The tiny Llama's step on the profile's machine: Hugging Face's Llama under AMP (the single-GPU stack, which
    reads the measured GEMMs, SDPA, AdamW and eager op), or the eager PyTorch stack (the datasheet-shaped model, on
    the profile's best GEMM rate, copy bandwidth and attention ratio)."""
    shape = llama.TINY_LLAMA
    model, cluster, layout = est.build(
        "custom", layers=shape.layers, hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
        ffn_hidden=shape.ffn_hidden, vocab=shape.vocab, seq_len=shape.seq_len, gated_mlp=True, dropout=False,
        gpus=gpus, tp=1, zero_stage=0, global_batch=2 * gpus, micro_batch=2, recompute="none",
        hardware=profile.to_gpu(profile.from_dict(data)), **STACKS[stack])
    return est.estimate(model, cluster, layout)


def test_the_best_measured_gemm_runs_at_its_measured_time(measured):
    """The profile's best shape is the datasheet-shaped model's calibration point (compute.mainloop_flops_per_sm): it
    runs in the time calibrate measured for it, or in its bf16 bytes over the measured copy rate if that is longer (a
    small GEMM's operands stay in cache, a copy's do not); halve every rate and it takes twice as long."""
    times = []
    for slower in (1.0, 2.0):
        data = scaled(measured, slower)
        gpu = profile.to_gpu(profile.from_dict(data))
        best = profile.from_dict(data).best_gemm
        moved = 2 * (best.m * best.k + best.k * best.n + best.m * best.n)
        expected = max(best.seconds, moved / data["memory_copy"]["bytes_per_s"])
        times.append(compute.matmul_time(best.m, best.n, best.k, est.Cluster(gpu, 1, 1, 0.0)))
        assert times[-1] == pytest.approx(expected, rel=1e-9)
    assert times[1] == pytest.approx(2 * times[0], rel=1e-9)


@pytest.mark.parametrize("stack", STACKS)
def test_a_machine_twice_as_slow_in_every_figure_takes_twice_as_long(measured, stack):
    """Every time the estimator adds up is work over a measured rate (hf-amp: each GEMM at its measured time, SDPA,
    AdamW and the eager op as measured, element-wise passes over the copy bandwidth; eager: GEMMs in waves calibrated
    at the best shape, a tile's fixed cost and every memory-bound pass over the copy bandwidth, attention at its
    measured fraction of the kernel curve), so dividing every rate by 2 doubles the step, to rounding."""
    base, slow = on(measured, stack=stack), on(scaled(measured, 2.0), stack=stack)
    assert slow.step_time_s == pytest.approx(2 * base.step_time_s, rel=1e-9)
    assert slow.compute_s == pytest.approx(2 * base.compute_s, rel=1e-9)
    assert slow.optimizer_s == pytest.approx(2 * base.optimizer_s, rel=1e-9)


def test_the_optimizer_step_is_the_measured_adamw_and_clip(measured):
    """Stack hf: torch.optim.AdamW (foreach) and clip_grad_norm_ at the seconds a parameter calibrate measured."""
    rows = measured["optimizer"]["rows"]
    per_param = rows["foreach"]["seconds_per_param"] + rows["clip"]["seconds_per_param"]
    assert on(measured).optimizer_s == pytest.approx(llama.TINY_LLAMA.params() * per_param, rel=1e-9)


def test_the_copy_bandwidth_sets_the_memory_bound_passes(measured):
    """Eager stack: the optimizer step is a memory-bound pass, its bytes over the measured copy rate."""
    e = on(measured, stack="eager")
    params = llama.TINY_LLAMA.params()
    expected = params * compute.FOREACH_ADAMW_BYTES_PER_PARAM / measured["memory_copy"]["bytes_per_s"]
    assert e.optimizer_s == pytest.approx(expected, rel=1e-9)


def test_each_gemm_runs_at_the_time_calibrate_measured_for_its_shape(measured):
    """The single-GPU stack times every GEMM of the layer at its own measured shape: halving one shape's rate (its
    time doubled) lengthens the step by exactly that GEMM's time for each time a layer runs that shape."""
    shape = llama.TINY_LLAMA
    tokens = 2 * shape.seq_len
    down = next(r for r in measured["gemm"]["rows"] if (r["m"], r["k"], r["n"]) == (tokens, shape.ffn_hidden,
                                                                                       shape.hidden))
    slower = copy.deepcopy(measured)
    row = next(r for r in slower["gemm"]["rows"] if (r["m"], r["k"], r["n"]) == (tokens, shape.ffn_hidden,
                                                                                  shape.hidden))
    row["seconds"] *= 2
    row["flops_per_s"] /= 2
    base, slow = on(measured), on(slower)
    # a layer's seven linears (q, k, v, o, gate, up, down as (k, n)); each runs forward [t, k]·[k, n], its input
    # gradient [t, n]·[n, k] and its weight gradient [k, t]·[t, n]: the down projection's forward and the input
    # gradients of gate and up have this shape
    h, kv, f = shape.hidden, shape.kv_heads * shape.head_dim, shape.ffn_hidden
    linears = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]
    runs = sum([(tokens, k, n), (tokens, n, k), (k, tokens, n)].count((tokens, f, h)) for k, n in linears)
    assert runs == 3
    assert slow.compute_s - base.compute_s == pytest.approx(shape.layers * runs * down["seconds"], rel=1e-6)


def test_more_devices_than_the_profile_links_is_refused(measured):
    with pytest.raises(est.LayoutError) as caught:
        on(measured, gpus=2)
    assert caught.value.field == "gpus"


def test_estimate_cli_runs_on_a_profile_and_names_the_machine(measured, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(measured))
    shape = llama.TINY_LLAMA
    args = ["estimate", "--hardware-profile", str(path), "--model", "custom", "--layers", str(shape.layers),
            "--hidden", str(shape.hidden), "--heads", str(shape.heads), "--vocab", str(shape.vocab), "--seq-len",
            str(shape.seq_len), "--gpus", "1", "--tp", "1", "--global-batch", "2", "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["gpu"] == profile.to_gpu(profile.from_dict(measured)).name
    assert out["gpu_memory_bytes"] == measured["device"]["memory_bytes"]
    assert "none published on a calibrated machine" in out["validation"]["summary"]  # no run was published on it


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("format"), "format: must be"),
    (lambda d: d["gemm"]["rows"][0].update(seconds=-1.0), "gemm.rows[0].seconds: must be a finite number > 0"),
    (lambda d: d["gemm"]["rows"][0].update(flops_per_s=1.0), "gemm.rows[0].flops_per_s: must be 2·m·k·n / seconds"),
    (lambda d: d["device"].update(type="tpu"), "device.type: must be one of cuda, cpu"),
    (lambda d: d["memory_copy"].pop("bytes_per_s"), "memory_copy.bytes_per_s: missing"),
])
def test_a_bad_profile_exits_2_naming_the_field(measured, tmp_path, change, message):
    data = copy.deepcopy(measured)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(cli, ["estimate", "--hardware-profile", str(path), "--gpus", "1", "--tp", "1"])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_unreadable_profile_and_bad_calibrate_options_exit_2(tmp_path):
    (tmp_path / "not.json").write_text("{")
    for args, message in [
        (["estimate", "--hardware-profile", str(tmp_path / "missing.json")], "cannot read"),
        (["estimate", "--hardware-profile", str(tmp_path / "not.json")], "is not JSON"),
        (["calibrate", "--device", "tpu"], "--device must be cuda, cpu or auto"),
        (["calibrate", "--out", str(tmp_path)], "is a folder"),
        (["calibrate", "--out", str(tmp_path / "no" / "such" / "p.json")], "does not exist"),
    ]:
        result = runner.invoke(cli, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)


def test_calibrate_on_cuda_without_a_gpu_exits_2(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    result = runner.invoke(cli, ["calibrate", "--device", "cuda"])
    assert result.exit_code == 2 and "torch sees no CUDA GPU" in result.output


def test_the_cpu_clock_needs_one_thread():
    result = runner.invoke(cli, ["calibrate", "--device", "cpu", "--clock", "cpu"])
    assert result.exit_code == 2 and "--threads 1" in result.output


def test_on_a_gpu_calibrate_plans_llama_shapes_and_records_the_device(monkeypatch):
    """The CUDA path with torch's CUDA answers patched (no GPU here): auto picks the GPU, measures a Llama 3 8B layer
    at 4,096 tokens with GPU-sized buffers, and the profile says which GPU, SMs, memory, driver and cuDNN."""
    import subprocess
    from types import SimpleNamespace

    import torch

    from simulations.calibrate import measure

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    props = SimpleNamespace(name="NVIDIA H200", total_memory=150_012_000_000, multi_processor_count=132, major=9,
                            minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91900)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=0, stdout="580.159.04\n"))
    p = measure.plan("auto")
    assert p.device.type == "cuda" and p.shape.name == "llama3-8b" and p.tokens == 4096
    assert p.copy_bytes == 2 * 2**30 and p.interconnect
    env = measure.environment(p)
    assert env["device"] == {"type": "cuda", "name": "NVIDIA H200", "memory_bytes": 150_012_000_000,
                             "compute_units": 132, "driver": "580.159.04", "capability": "9.0", "dtype": "bfloat16"}
    assert env["software"]["cudnn"] == 91900
    assert set(measure.attention_backends(p.device)) >= {"flash", "efficient", "math"}
