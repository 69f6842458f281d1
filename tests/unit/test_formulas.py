"""simulations.formulas reproduces REFERENCE.md's figures (no ranks: fast)."""

import pytest

from simulations import formulas as f
from simulations import hardware
from simulations.formulas import GB


@pytest.mark.parametrize("size, total_gb, with_fp32_grads_gb",
                         [("1B", 16, 20), ("7B", 112, 140), ("70B", 1120, 1400), ("405B", 6480, 8100)])
def test_playbook_memory_table(size, total_gb, with_fp32_grads_gb):
    psi = f.PRESETS[size].params
    assert f.model_state_total(psi) == pytest.approx(total_gb * GB)
    states = f.model_state_bytes(psi, fp32_grad_accumulation=True)
    assert sum(states.values()) == pytest.approx(with_fp32_grads_gb * GB)


def test_zero_stages_per_rank_bytes():
    psi, n = 7e9, 8
    assert f.model_state_bytes(psi, "bf16", 0, n) == {"parameters": 2 * psi, "gradients": 2 * psi,
                                                      "optimizer": 12 * psi}
    assert f.model_state_total(psi, "bf16", 1, n) == pytest.approx(2 * psi + 2 * psi + 12 * psi / n)
    assert f.model_state_total(psi, "bf16", 2, n) == pytest.approx(2 * psi + 14 * psi / n)
    assert f.model_state_total(psi, "bf16", 3, n) == pytest.approx(16 * psi / n)
    # fp32: 4P x 4 bytes, sharded to 4P/N under ZeRO-3 (the seed README's form).
    assert f.model_state_bytes(psi, "fp32", 0) == {"parameters": 4 * psi, "gradients": 4 * psi, "optimizer": 8 * psi}
    assert f.model_state_total(psi, "fp32", 3, n) == pytest.approx(16 * psi / n)


def test_offload_moves_the_optimizer_to_the_host():
    psi, n = 1e9, 4
    device = f.model_state_bytes(psi, "bf16", 2, n, cpu_offload=True)
    assert device["optimizer"] == 0 and device["parameters"] == 2 * psi
    assert f.host_bytes(psi, 2, n, cpu_offload=True) == pytest.approx(12 * psi / n)
    assert f.host_bytes(psi, 2, n, cpu_offload=False) == 0


def test_bad_stage_is_refused():
    with pytest.raises(ValueError, match="zero_stage"):
        f.model_state_bytes(1e9, zero_stage=4)
    with pytest.raises(ValueError, match="precision"):
        f.bytes_per_parameter("fp8")


def test_transformer_parameter_count():
    # Llama-2-7B-like shape: 4096 hidden, 32 layers, 32000 vocab -> about 6.6 B (no SwiGLU, tied embedding).
    n = f.transformer_params(hidden=4096, layers=32, vocab=32000)
    assert n == 4096 * 32000 + 32 * (12 * 4096**2 + 13 * 4096) + 2 * 4096
    assert 6.4e9 < n < 6.7e9


def test_activations_korthikanti():
    s, b, h, a = 4096, 1, 4096, 32
    none = f.activation_bytes_per_layer(s, b, h, a)
    assert none == s * b * h * (34 + 5 * a * s / h)
    assert f.activation_bytes_per_layer(s, b, h, a, recompute="selective") == 34 * s * b * h
    assert f.activation_bytes_per_layer(s, b, h, a, recompute="full") == 2 * s * b * h
    assert f.activation_bytes_per_layer(s, b, h, a, tp=8) == none / 8
    # 32 layers of the 7B at 4096 tokens: ~ 100 GB without recomputation (the why-memory slide).
    assert 90 * GB < f.activation_bytes(s, b, h, a, 32) < 110 * GB
    # Pipeline stages keep L/p layers but p micro-batches in flight under 1F1B.
    assert f.activation_bytes(s, b, h, a, 32, pp=4) == pytest.approx(f.activation_bytes(s, b, h, a, 32))


def test_communication_volumes():
    assert f.ring_all_reduce_bytes(1000, 4) == 1500
    assert f.all_gather_bytes(1000, 4) == 750
    psi = 100
    assert [f.zero_comm_elements(psi, s) for s in range(4)] == [200, 200, 200, 300]
    assert [f.zero_comm_elements(psi, s, grad_accumulation=4) for s in range(4)] == [200, 200, 500, 1200]


def test_pipeline_bubble():
    assert f.bubble_fraction(4, 1) == pytest.approx(3 / 4)  # naive
    assert f.bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert f.bubble_fraction(4, 8, virtual=2) == pytest.approx(3 / 19)
    assert f.bubble_over_ideal(4, 8) == pytest.approx(3 / 8)


def test_per_gpu_memory_layout():
    shape = f.PRESETS["70B"]
    flat = f.per_gpu_memory(shape.params, shape, zero_stage=3, gpus=64)
    assert flat["parameters"] == pytest.approx(2 * 70e9 / 64)
    layered = f.per_gpu_memory(shape.params, shape, zero_stage=1, gpus=64, tp=8, pp=2)
    assert layered["parameters"] == pytest.approx(2 * 70e9 / 16)  # TP·PP split the model
    assert layered["optimizer"] == pytest.approx(12 * 70e9 / 16 / 4)  # ZeRO-1 over DP = 4
    checkpointed = f.per_gpu_memory(shape.params, shape, gpus=64, tp=8, activation_checkpointing=True)
    assert checkpointed["activations"] < layered["activations"]
    with pytest.raises(ValueError, match="multiple"):
        f.per_gpu_memory(shape.params, shape, gpus=12, tp=8)


# -- the calculator endpoint (its own app: the router alone) ---------------------------------------

@pytest.fixture(scope="module")
def client():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from app.routers import calculator

    app = FastAPI()
    app.include_router(calculator.router)
    return TestClient(app)


def test_calculator_7b_zero3_on_8_gpus(client):
    r = client.get("/api/calculator", params={"model": "7B", "precision": "bf16", "zero_stage": 3, "gpus": 8,
                                              "tp": 1, "pp": 1, "activation_checkpointing": "false",
                                              "seq_len": 4096, "micro_batch": 1})
    assert r.status_code == 200
    body = r.json()
    assert body["per_gpu"]["parameters"] == pytest.approx(2 * 7e9 / 8)
    assert body["per_gpu"]["optimizer"] == pytest.approx(12 * 7e9 / 8)
    assert body["total"] == pytest.approx(sum(body["per_gpu"].values()))
    assert [c["name"] for c in body["capacities"]] == ["A100/H100", "H200"]
    assert [c["bytes"] for c in body["capacities"]] == [80 * GB, 141 * GB]
    # With FlashAttention (the default) the 7B at 4096 tokens fits 80 GB without checkpointing;
    # storing the attention scores, it needs checkpointing to fit.
    assert body["per_gpu"]["activations"] == pytest.approx(
        f.activation_bytes(4096, 1, 4096, 32, 32, flash_attention=True))
    assert body["capacities"][0]["fits"]
    scores = client.get("/api/calculator", params={"zero_stage": 3, "flash_attention": "false"}).json()
    small = client.get("/api/calculator", params={"zero_stage": 3, "flash_attention": "false",
                                                  "activation_checkpointing": "true"}).json()
    assert small["capacities"][0]["fits"] and not scores["capacities"][0]["fits"]


def test_calculator_custom_shapes_and_parameter_counts(client):
    shaped = client.get("/api/calculator", params={"model": "custom", "hidden": 4096, "layers": 32, "heads": 32,
                                                   "vocab": 32000, "gpus": 1}).json()
    assert shaped["psi"] == f.transformer_params(4096, 32, 32000)
    # A bare Ψ (a live run's small MLP): model states only, the same numbers as the zero scenario's check.
    bare = client.get("/api/calculator", params={"model": "custom", "psi": 1282, "precision": "fp32",
                                                 "zero_stage": 3, "gpus": 4}).json()
    assert bare["per_gpu"] == {**f.model_state_bytes(1282, "fp32", 3, 4), "activations": 0.0}


@pytest.mark.parametrize("query, field", [({"zero_stage": 7}, "zero_stage"), ({"gpus": 0}, "gpus"),
                                          ({"tp": 65}, "tp"), ({"precision": "fp8"}, "precision"),
                                          ({"model": "13B"}, "model"), ({"bogus": 1}, "bogus")])
def test_calculator_rejects_bad_input_naming_the_field(client, query, field):
    r = client.get("/api/calculator", params=query)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["query", field]


def test_calculator_rejects_inconsistent_layouts(client):
    r = client.get("/api/calculator", params={"gpus": 12, "tp": 8})
    assert r.status_code == 422 and "multiple of tp·pp" in r.text
    r = client.get("/api/calculator", params={"model": "custom", "hidden": 1024})
    assert r.status_code == 422 and "layers" in r.text


def test_flash_attention_drops_the_score_term():
    s7 = f.PRESETS["7B"]
    plain = f.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers)
    flash = f.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers, flash_attention=True)
    # Korthikanti's 34·s·b·h per layer without the 5·a·s/h term: 34 · 4096 · 4096 · 32 bytes ≈ 18 GB.
    assert flash == 34 * 4096 * s7.hidden * s7.layers
    assert plain == (34 + 5 * s7.heads * 4096 / s7.hidden) * 4096 * s7.hidden * s7.layers
    assert flash == f.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers, recompute="selective")
    # Full recomputation keeps the layer inputs whatever the attention kernel.
    assert f.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers, recompute="full", flash_attention=True) \
        == 2 * 4096 * s7.hidden * s7.layers
    # 7B on 8 GPUs under ZeRO-3 at 4,096 tokens fits an 80 GB GPU without checkpointing once scores are not stored.
    per_gpu = f.per_gpu_memory(s7.params, s7, zero_stage=3, gpus=8, flash_attention=True)
    assert sum(per_gpu.values()) < hardware.gpu("H100").hbm_bytes
    assert sum(f.per_gpu_memory(s7.params, s7, zero_stage=3, gpus=8).values()) > hardware.gpu("H100").hbm_bytes


# The Playbook's table of FP8 recipes, bytes per parameter (total column).
@pytest.mark.parametrize("recipe, total", [
    ("bf16 + fp32 master, fp32 grad accumulation", 20), ("bf16 + fp32 master", 16), ("fp32", 16),
    ("FP8, Transformer Engine", 16), ("FP8, DeepSeek-V3", 15), ("FP8, Nanotron", 10), ("FP8, FP8-LM O3", 9)])
def test_precision_recipes_match_the_playbook_totals(recipe, total):
    assert f.PRECISION_RECIPES[recipe].total == total
    assert f.precision_state_bytes(1e9, recipe) == pytest.approx(total * GB)


def test_precision_recipes_agree_with_model_state_bytes():
    psi, n = 7e9, 8
    for stage in range(4):
        assert f.precision_state_bytes(psi, "bf16 + fp32 master", stage, n) == pytest.approx(
            f.model_state_total(psi, "bf16", stage, n))
        assert f.precision_state_bytes(psi, "fp32", stage, n) == pytest.approx(f.model_state_total(psi, "fp32", stage, n))
        assert f.precision_state_bytes(psi, "bf16 + fp32 master, fp32 grad accumulation", stage, n) == pytest.approx(
            sum(f.model_state_bytes(psi, "bf16", stage, n, fp32_grad_accumulation=True).values()))


def test_gradient_reduction_dtype_doubles_the_wire_bytes():
    psi, n = 70e9, 64
    assert f.gradient_reduce_bytes(psi, n, 4) == 2 * f.gradient_reduce_bytes(psi, n, 2)
    assert f.gradient_reduce_bytes(psi, n, 2) == f.ring_all_reduce_bytes(2 * psi, n)


def test_hardware_anchors_and_gpu_counts():
    assert f.gpus_to_hold(f.model_state_total(70e9), "H100") == 14  # 1,120 GB over 80 GB GPUs
    # NVIDIA's DGX B200 user guide: 1,440 GB of HBM3e in 8 GPUs, 180 GB each: 1,120 / 180 -> 7.
    assert f.gpus_to_hold(f.model_state_total(70e9), "B200") == 7
    assert hardware.gpu("B200").hbm_bytes == 180 * GB
    assert hardware.gpu("B200").hbm_bytes > hardware.gpu("H200").hbm_bytes > hardware.gpu("H100").hbm_bytes


def test_ring_attention_overlap_needs_blocks_of_flops_over_bandwidth():
    h100 = hardware.gpu("H100")
    # 16-bit K/V: c ≥ F/B tokens; about 2k on NVLink and 20k across a 400 Gb/s port.
    assert f.ring_attention_min_block(h100.peak_flops, h100.nvlink_bandwidth) == pytest.approx(989e12 / 450e9)
    assert 2000 < f.ring_attention_min_block(h100.peak_flops, h100.nvlink_bandwidth) < 2300
    assert 19000 < f.ring_attention_min_block(h100.peak_flops, h100.network_per_gpu) < 21000
    # fp32 blocks carry twice the bytes: twice the tokens.
    assert f.ring_attention_min_block(1e12, 1e9, 4) == 2 * f.ring_attention_min_block(1e12, 1e9)
    # Causal with zig-zag: half a block's work per step, a whole block sent: twice the tokens, 2F/B.
    assert f.ring_attention_min_block(1e12, 1e9, causal=True) == 2 * f.ring_attention_min_block(1e12, 1e9)


def test_collective_sent_bytes_from_the_buffer_handed_to_the_op():
    from simulations.formulas import collective_sent_bytes
    assert collective_sent_bytes("all_gather", 100, 4) == 300  # the other three shards
    assert collective_sent_bytes("reduce_scatter", 400, 4) == 300  # (N−1)/N of the whole
    assert collective_sent_bytes("all_to_all", 400, 4) == 300  # its own block stays
    assert collective_sent_bytes("all_reduce", 400, 4) == 600  # ring: reduce-scatter + all-gather
    with pytest.raises(ValueError, match="no formula for collective 'broadcast'"):
        collective_sent_bytes("broadcast", 1, 2)


def test_context_parallel_and_hsdp_bytes():
    from simulations.formulas import context_parallel_bytes, hsdp_bytes
    block = 8 * (64 // 4) * 16 * 4
    assert context_parallel_bytes("all_to_all", 64, 8, 16, 4) == {
        "forward": 3 * block, "backward": 3 * block, "total": 6 * block, "block": block}
    assert context_parallel_bytes("all_gather_kv", 64, 8, 16, 4)["total"] == 2 * 3 * 2 * block
    assert context_parallel_bytes("ring", 64, 8, 16, 4)["total"] == 3 * 2 * block * 2 + 4 * 2 * block
    with pytest.raises(ValueError, match=r"seq \(10\) must be divisible by ranks \(4\)"):
        context_parallel_bytes("ring", 10, 8, 16, 4)
    assert hsdp_bytes(1200, shards=4, replicas=2) == {"shard": 3 * 900, "replicate": 300}
    assert hsdp_bytes(1200, shards=1, replicas=4)["shard"] == 0


@pytest.mark.parametrize("width,depth", [(16, 1), (64, 2), (128, 4)])
def test_mlp_params_counts_what_torch_builds(width, depth):
    """The calculator-vs-measured slide's Ψ: the formula against the parameters of the module torch builds."""
    from simulations.scenarios.zero import IN_FEATURES, OUT_FEATURES, Params, mlp

    model = mlp(Params(width=width, depth=depth))
    assert f.mlp_params(IN_FEATURES, width, depth, OUT_FEATURES) == sum(p.numel() for p in model.parameters())


def test_one_gpu_catalog_for_the_whole_project():
    """GPU capacities are read from simulations.hardware everywhere: no module, script or slide types one again
    (the B200 was 192 GB in one catalog and 180 GB in another)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    typed = re.compile(r"\b(40|80|141|180|192) \* GB\b")
    sources = [p for d in ("app", "simulations", "static/js", "slides") for p in (root / d).rglob("*")
               if p.suffix in {".py", ".js", ".j2"} and p.name != "hardware.py"]
    assert sources
    offenders = [f"{p.relative_to(root)}: {m.group(0)}" for p in sources for m in typed.finditer(p.read_text())]
    assert not offenders, offenders
