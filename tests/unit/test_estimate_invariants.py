"""What must hold of any estimate, whatever the layout: checked by hand against the kernels' published figures,
and over random valid layouts (a fixed seed, so a failure reproduces).

- the attention kernel's time is its FLOPs over the rate the FlashAttention-3 paper prints, forward and backward
  each at its own rate (typed here from the paper, not read from kernels.py);
- sequence parallelism splits the memory-bound passes of the norms and residual adds over the TP ranks;
- no MFU above what the GPU sustains on matmuls (sustained ÷ peak);
- more network bandwidth, or more memory, never makes an estimate worse;
- every estimate's parts add up: memory by role to its total, exposed communication within the total of its kind,
  compute within the step.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from simulations.estimate import GPUS, Layout, LayoutError, build, cluster, estimate, gpt
from simulations.estimate.collectives import Group
from simulations.estimate.compute import layer_time
from simulations.estimate.kernels import attention_time

H100 = GPUS["h100-80gb"]
SUSTAINED_OVER_BURST = 698.6 / 794.5  # hardware.py: H100 sustained (MSMF as H200, all 8 busy) / its MAMF


def test_attention_forward_and_backward_each_at_their_published_rate():
    """FA3 on H100, head dim 128, 16k tokens, no mask: the paper's Figure 5 prints 648 TFLOP/s forward, Figure 6
    561 backward; the backward does 2.5 times the forward's FLOPs."""
    queries = context = 16384
    heads, head_dim = 16, 128
    flops = 4 * queries * context * head_dim * heads
    forward, backward = attention_time(H100, "fa3", queries, context, head_dim, heads, causal=False)
    assert forward == pytest.approx(flops / (648e12 * SUSTAINED_OVER_BURST), rel=1e-9)
    assert backward == pytest.approx(2.5 * flops / (561e12 * SUSTAINED_OVER_BURST), rel=1e-9)
    # causal: half the FLOPs, at the causal forward rate (616 at 16k, Figure 5)
    causal_forward, _ = attention_time(H100, "fa3", queries, context, head_dim, heads, causal=True)
    assert causal_forward == pytest.approx(flops / 2 / (616e12 * SUSTAINED_OVER_BURST), rel=1e-9)


def test_head_dim_64_and_fa2_on_h100_are_slower_than_fa3_at_128():
    """The papers' ordering: FA2 reaches about 35 % of H100's peak, FA3 about 60 %; head dim 64 lower still."""
    rate = {(k, d): attention_time(H100, k, 8192, 8192, d, 2048 // d)[0] for k in ("fa2", "fa3") for d in (64, 128)}
    assert rate[("fa3", 128)] < rate[("fa3", 64)] < rate[("fa2", 64)]
    assert rate[("fa3", 128)] < rate[("fa2", 128)]


def test_sequence_parallelism_splits_the_norm_and_residual_passes():
    """With SP the two norms (read h, write h in bf16: 4h bytes a token each) and the two residual adds (read two
    bf16 [tokens, h] tensors, write one: 6h bytes each) run on a TP rank's 1/t of the tokens; without it every TP rank
    runs them all. The forward differs by exactly those bytes over HBM at its streaming efficiency (0.85 of
    3.35 TB/s). (The adds were once counted at half their bytes, 3h: this caught it.)"""
    model = gpt(24, 4096, 32, seq_len=4096)
    model = replace(model, dropout=False, flash_attention=True)
    hw = cluster("h100-80gb", 8)
    t, tokens = 8, 4096
    tp = Group(8, 8)
    forward = {sp: layer_time(model, Layout(tp=t, sequence_parallel=sp), hw, 1, tp, Group(1, 1), Group(1, 1)).forward
               for sp in (True, False)}
    norm_and_residual_bytes = tokens * (2 * 4 * 4096 + 2 * 6 * 4096)
    by_hand = norm_and_residual_bytes * (1 - 1 / t) / (3350e9 * 0.85)
    assert forward[False] - forward[True] == pytest.approx(by_hand, rel=1e-6)


def _random_layouts(count: int, seed: int = 2026):
    """Valid layouts of the presets and a few custom GPTs on 8-4096 GPUs, with fixed micro-batch and V."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        model = rng.choice(["llama3-8b", "llama3-70b", "gpt3-175b", "custom"])
        shape = dict(layers=24, hidden=2048, heads=16, vocab=50368, seq_len=rng.choice([1024, 2048, 8192])) \
            if model == "custom" else {}
        gpu = rng.choice(list(GPUS))
        tp, pp, cp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4]), rng.choice([1, 1, 2])
        gpus = tp * pp * cp * rng.choice([1, 2, 4, 16, 64])
        dp = gpus // (tp * pp * cp)
        micro = rng.choice([1, 2])
        zero = rng.choice([0, 1, 3]) if pp == 1 else rng.choice([0, 1])
        batch = dp * micro * pp * rng.choice([1, 2, 4])
        kw = dict(gpu=gpu, gpus=max(gpus, 1), tp=tp, pp=pp, cp=cp, zero_stage=zero, micro_batch=micro,
                  global_batch=batch, recompute=rng.choice(["none", "selective", "full"]),
                  attention_kernel=rng.choice(["auto", "fa2", "fa3", "cudnn", "triton_fa1"]),
                  execution=rng.choice(["auto", "eager", "fused", "compiled"]), virtual_stages=1, **shape)
        try:
            out.append((model, kw, estimate(*build(model, **kw))))
        except LayoutError:
            continue
    return out


@pytest.fixture(scope="module")
def random_estimates():
    return _random_layouts(40)


def test_no_mfu_above_what_the_gpu_sustains(random_estimates):
    for model, kw, e in random_estimates:
        gpu = e.cluster.gpu
        assert e.mfu <= gpu.sustained_flops / gpu.peak_flops, (model, kw, e.mfu)


def test_every_estimate_adds_up(random_estimates):
    for model, kw, e in random_estimates:
        memory = e.memory_per_gpu_bytes
        assert memory["total"] == pytest.approx(sum(v for k, v in memory.items() if k != "total"))
        assert 0 < e.compute_s <= e.step_time_s * (1 + 1e-9), (model, kw)
        assert 0 <= e.bubble_fraction < 1
        for kind, exposed in e.exposed_by_kind.items():
            if kind != "pp":
                assert exposed <= e.comm_total_s.get(kind, 0.0) * (1 + 1e-9) + 1e-12, (model, kw, kind)


def test_compiled_is_never_slower_than_eager_issue(random_estimates):
    """CUDA graphs remove the CPU's per-kernel cost and nothing else: the same layout compiled is never slower than
    issued eagerly with the same (fused) kernels."""
    for model, kw, e in random_estimates[:15]:
        fused = estimate(*build(model, **{**kw, "execution": "fused"}))
        compiled = estimate(*build(model, **{**kw, "execution": "compiled"}))
        assert compiled.step_time_s <= fused.step_time_s * (1 + 1e-9), (model, kw)


def test_more_network_bandwidth_never_makes_a_step_slower(random_estimates):
    for model, kw, e in random_estimates[:15]:
        faster = estimate(*build(model, **kw, network_gbps=e.cluster.node_egress * 8 / 1e9 * 4))
        assert faster.step_time_s <= e.step_time_s * (1 + 1e-9), (model, kw)


def test_more_memory_never_makes_the_chosen_layout_worse():
    """`auto` picks the fastest micro-batch that fits: a GPU with twice the memory can only do as well or better."""
    model, hw, layout = build("llama3-8b", gpus=64, tp=1, global_batch=512, recompute="none")
    bigger = replace(hw, gpu=replace(hw.gpu, memory_total=2 * hw.gpu.usable_bytes))
    small, large = estimate(model, hw, layout), estimate(model, bigger, layout)
    assert large.fits and large.step_time_s <= small.step_time_s


def test_llama3_one_layer_a_chunk_is_placeable():
    """Llama 3 405B's V = 8 on 16 stages (126 layers + the embedding's and the output's chunks) was refused."""
    model, hw, layout = build("llama3-405b", gpus=8192, tp=8, pp=16, schedule="interleaved_1f1b", virtual_stages=8,
                              micro_batch=1, global_batch=2048, recompute="none")
    e = estimate(model, hw, layout)
    assert e.layout.virtual_stages == 8
    # the first stage's chunks hold 7 layers and the embedding: fewer activations than 8 layers would
    eight = estimate(*build("llama3-405b", gpus=8192, tp=8, pp=16, schedule="interleaved_1f1b", virtual_stages=4,
                            micro_batch=1, global_batch=2048, recompute="none"))
    assert e.bubble_fraction < eight.bubble_fraction
    with pytest.raises(LayoutError, match="layers \\+ 2"):
        build("llama3-405b", gpus=8192, tp=8, pp=16, schedule="interleaved_1f1b", virtual_stages=9)


def _nvlink_ring_all_gather(size: float) -> float:
    """An all-gather (or reduce-scatter) of `size` bytes over 8 H100s of one node, by hand: 7/8 of it at the measured
    bus bandwidth (370 GB/s), ramped for the message size (half at 58 MB · (370/150 − 1)), plus NCCL's 8.4 µs and
    7 ring steps of 3.4 µs (hardware.py's sources)."""
    bandwidth = 370e9
    half = 58e6 * (370 / 150 - 1) * bandwidth / 450e9
    return size * 7 / 8 / (bandwidth * size / (size + half)) + (8.4 + 7 * 3.4) * 1e-6


@pytest.mark.parametrize("dtype, grad_bytes", [("fp32", 4), ("bf16", 2)])
def test_zero3_gathers_in_bf16_and_reduces_in_the_gradient_dtype(dtype, grad_bytes):
    """FSDP on one node: per layer and micro-batch, the bf16 parameters gathered twice (forward, backward) and the
    gradients reduce-scattered in the reduction's dtype (fp32 under Composer's DEFAULT mixed precision); the root
    unit's (embedding, output layer) gathered once, kept through backward, and reduce-scattered."""
    model, hw, layout = build("custom", layers=4, hidden=1024, heads=8, vocab=32000, seq_len=2048, gpus=8, tp=1,
                              zero_stage=3, micro_batch=1, global_batch=16, grad_reduce_dtype=dtype)
    e = estimate(model, hw, layout)
    layer = model.layer_params()
    root = 2 * model.vocab * model.hidden  # the root unit: embedding and output layer, gathered once, reduced once
    by_hand = e.micro_batches * (model.layers * (2 * _nvlink_ring_all_gather(2 * layer)
                                                 + _nvlink_ring_all_gather(grad_bytes * layer))
                                 + _nvlink_ring_all_gather(2 * root) + _nvlink_ring_all_gather(grad_bytes * root))
    assert e.comm_total_s["zero3"] == pytest.approx(by_hand, rel=1e-9)


def _h100_wave_by_hand(k: int, speedup: float = 1.0) -> float:
    """One wave of 128 × 256 tiles on H100, by hand: every SM loads its first k-block ((128 + 256) rows × 128 bytes)
    and stores its bf16 output tile (128 · 256 · 2 bytes), all 132 at once at 0.85 of 3.35 TB/s; the main loop at the
    per-SM rate that makes the MAMF shape (2048 × 2048 × 13312: 128 tiles, one wave; ml-engineering's table) run at
    the sustained 698.6 TFLOP/s."""
    overhead = ((128 + 256) * 128 + 128 * 256 * 2) * 132 / (3350e9 * 0.85)
    best_wave = 2 * 2048 * 2048 * 13312 / 698.6e12
    per_sm = 2 * 128 * 256 * 13312 / (best_wave - overhead)
    return 2 * 128 * 256 * k / (per_sm * speedup) + overhead


def test_matmuls_run_in_waves_and_short_k_runs_below_the_sustained_rate():
    """The MAMF shape itself runs at the sustained rate; an 8192³ GEMM (2048 tiles: 16 waves over 132 SMs) takes 16
    waves; a small model's Q/K/V GEMM (K = hidden = 2048) runs well below the sustained rate on H100, and further
    below it than on A100, whose SMs are slower against the same fixed cost a tile pays."""
    from simulations.estimate.compute import matmul_time

    hw = cluster("h100-80gb", 8)
    assert matmul_time(2048, 2048, 13312, hw) == pytest.approx(2 * 2048 * 2048 * 13312 / 698.6e12, rel=1e-9)
    assert matmul_time(8192, 8192, 8192, hw) == pytest.approx(16 * _h100_wave_by_hand(8192), rel=1e-9)

    def efficiency(gpu: str, hidden: int) -> float:
        part = cluster(gpu, 8)
        rows = 16 * 2048
        return 2 * rows * 3 * hidden * hidden / matmul_time(rows, 3 * hidden, hidden, part) / part.gpu.sustained_flops

    assert efficiency("h100-80gb", 2048) < 0.9
    assert efficiency("h100-80gb", 2048) < efficiency("a100-80gb", 2048) <= 1.0
    assert efficiency("h100-80gb", 768) < efficiency("h100-80gb", 2048) < efficiency("h100-80gb", 8192) <= 1.0


def test_fp8_matmuls_run_at_the_fp8_rate_and_pay_their_casts():
    """H100's FP8 peak is twice its bf16 one (1,979 against 989 TFLOP/s dense, datasheet), at the same sustained
    fraction; an 8192³ GEMM runs 2048 tiles of 128 × 256 in 16 waves over 132 SMs, each wave's main loop twice as
    fast and its fixed cost the same. The casts cost HBM passes: an FP8 run is faster than bf16, but by less than 2×;
    MFU is then counted against the FP8 peak."""
    from simulations.estimate.compute import matmul_time

    hw = cluster("h100-80gb", 8)
    assert matmul_time(8192, 8192, 8192, hw, fp8=True) == pytest.approx(
        16 * _h100_wave_by_hand(8192, 1979 / 989), rel=1e-9)
    runs = {p: estimate(*build("llama3-70b", gpus=64, tp=8, global_batch=64, micro_batch=1, precision=p))
            for p in ("bf16", "fp8")}
    assert runs["bf16"].step_time_s / 2 < runs["fp8"].step_time_s < runs["bf16"].step_time_s
    assert runs["fp8"].mfu <= 698.6 / 989


def test_recomputing_every_other_layer_lies_between_none_and_full():
    """Partial checkpointing, one layer in two (torchtitan's selective_ac_option "2"): half the replayed forward,
    and activations halfway between keeping every layer's and keeping only the inputs."""
    def run(recompute, every=1):
        return estimate(*build("llama3-8b", gpus=8, tp=1, global_batch=8, micro_batch=1, recompute=recompute,
                               recompute_every=every))

    none, half, full = run("none"), run("full", 2), run("full")
    assert none.step_time_s < half.step_time_s < full.step_time_s
    assert half.compute_s - none.compute_s == pytest.approx((full.compute_s - none.compute_s) / 2, rel=1e-9)
    acts = {k: e.memory_per_gpu_bytes["activations"] for k, e in (("none", none), ("half", half), ("full", full))}
    assert acts["full"] < acts["half"] < acts["none"]
    # halfway, but for the one layer a replay holds whole for a moment (counted with full recomputation)
    assert acts["half"] == pytest.approx((acts["none"] + acts["full"]) / 2, rel=0.05)
    with pytest.raises(LayoutError, match="needs recompute full"):
        build("llama3-8b", gpus=8, tp=1, global_batch=8, recompute="selective", recompute_every=2)


def _megatron_interleaved_peak(chunks: list[int], p: int, v: int, m: int, stage: int) -> int:
    """Reference: replay Megatron-LM's interleaved order on one stage, all m·v steps (schedules.py: the warm-up's
    forwards, then one forward and one backward each, then the cool-down's backwards; get_model_chunk_id: forward
    k runs chunk (k mod p·v) // p, backward k chunk v − 1 − that) and return the most layers it holds at once."""
    own = chunks[stage::p]
    total = m * v
    warmup = min(total, (p - stage - 1) * 2 + (v - 1) * p)

    def layers(k, backward):
        c = (k % (p * v)) // p
        return own[v - 1 - c if backward else c]

    held = peak = 0
    for k in range(warmup):
        held += layers(k, False)
        peak = max(peak, held)
    for k in range(total - warmup):
        held += layers(warmup + k, False)
        peak = max(peak, held)
        held -= layers(k, True)
    return peak


@pytest.mark.parametrize("layers,p,v,m", [(126, 16, 8, 16), (126, 16, 8, 32), (96, 8, 12, 64), (96, 8, 3, 16),
                                           (80, 4, 5, 12), (32, 4, 9, 8)])
def test_interleaved_layers_in_flight_replays_megatrons_order(layers, p, v, m):
    from simulations.estimate.memory import chunk_layers, interleaved_layers_in_flight
    chunks = chunk_layers(layers, p, v)
    for stage in range(p):
        assert interleaved_layers_in_flight(chunks, p, v, m, stage) == _megatron_interleaved_peak(
            chunks, p, v, m, stage), stage


def test_llama3_placement_memory_is_the_second_stages():
    """Llama 3 405B at V = 8 (first chunk the embedding's): the second stage holds 8 layers, the first 7, so the
    fit check must read the second: 141 layers in flight at 32 micro-batches (16·8 + 13 of the next round)."""
    from dataclasses import replace as _replace

    from simulations.estimate import MODELS, Layout, cluster, estimate
    from simulations.estimate.memory import layer_activation_bytes
    model = _replace(MODELS["llama3-405b"], vocab=128256)
    layout = Layout(tp=8, pp=16, zero_stage=1, schedule="interleaved_1f1b", virtual_stages=8, micro_batch=1,
                    global_batch=64 * 32, recompute="none")
    e = estimate(model, cluster("h100-80gb", 8192), layout)
    per_layer = layer_activation_bytes(model, layout, 1, "none")
    assert e.memory_per_gpu_bytes["activations"] == pytest.approx(141 * per_layer)


def _tiny_gpt_fsdp(execution: str):
    """A GPT so small that its kernels run shorter than the CPU takes to issue them: 256 wide, 128 tokens."""
    return build("custom", layers=2, hidden=256, heads=4, vocab=1024, seq_len=128, gpus=8, tp=1, zero_stage=3,
                 micro_batch=1, global_batch=8, execution=execution)


def test_eager_kernels_wait_for_the_cpu_that_issues_them():
    """Eager PyTorch issues each op from the CPU, about 5 µs each (2 µs PyTorch's dispatcher, 3 µs CUDA's launch);
    counted by hand, a GPT layer under FSDP issues in forward 4 GEMMs, attention, 2 norms, GeLU and 2 residual adds,
    and FSDP's cast, all-gather and copy-out: 13 kernels, 65 µs, more than the tiny layer's GPU time. Compiled (CUDA
    graphs) pays none of it."""
    model, hw, layout = _tiny_gpt_fsdp("eager")
    one = Group(1, 1)
    eager = layer_time(model, layout, hw, 1, one, one, one)
    compiled = layer_time(model, replace(layout, execution="compiled"), hw, 1, one, one, one)
    assert eager.forward == pytest.approx(13 * 5e-6, rel=1e-12)
    assert compiled.forward < eager.forward
    # backward: 8 GEMMs, attention's 2, 5 element-wise, FSDP's gather (3) and reduce-scatter (2): 20 kernels
    assert eager.backward_input + eager.backward_weight == pytest.approx(20 * 5e-6, rel=1e-12)


def test_eager_optimizer_is_torchs_foreach_adamw_on_the_shard():
    """Eager PyTorch FSDP steps torch.optim.AdamW (foreach) on its fp32 shard, after clip_grad_norm_: weight decay
    (8 bytes), lerp of m (12), v's mul and addcmul (8 + 12), sqrt, div and add of the denominator (3 × 8), addcdiv
    (16), and the clipping's read and scale (4 + 8): 92 bytes a parameter at 0.85 of HBM; Megatron's fused Adam
    38. Each rank steps 1/8 of the parameters."""
    model, hw, layout = _tiny_gpt_fsdp("eager")
    params = model.params() / 8
    for execution, per_param in (("eager", 92), ("fused", 38)):
        e = estimate(model, hw, replace(layout, execution=execution))
        assert e.optimizer_s == pytest.approx(params * per_param / (3350e9 * 0.85), rel=1e-9), execution


def test_an_eager_llama_block_pays_its_unfused_norms_rotary_and_swiglu():
    """A gated-MLP (Llama) block run op by op, by hand, beyond the fused passes every stack pays: two RMSNorms in
    fp32 (36 bytes an element forward against a fused norm's 4; 68 backward against 6), rotary positions over Q and K
    (20 each way) and SwiGLU's silu and product as two kernels (10 against 6 forward; 18 against 9 backward). On
    8,192 tokens of a 4,096-wide layer (32 heads, 8 KV heads of 128, FFN 14,336), at 0.85 of H100's 3.35 TB/s.
    Fused and compiled stacks pay none of it, nor does a GPT block (LayerNorm is one kernel even in eager)."""
    hw = cluster("h100-80gb", 8)
    one = Group(1, 1)
    model, _, layout = build("custom", layers=2, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=1024,
                             seq_len=8192, gated_mlp=True, gpus=8, tp=1, micro_batch=1, global_batch=8)
    times = {e: layer_time(model, replace(layout, execution=e), hw, 1, one, one, one) for e in ("eager", "fused")}
    bandwidth = 3350e9 * 0.85
    tokens, h, qk, f = 8192, 4096, (32 + 8) * 128, 14336
    forward = tokens * (2 * (36 - 4) * h + 20 * qk + (10 - 6) * f) / bandwidth
    backward = tokens * (2 * (68 - 6) * h + 20 * qk + (18 - 9) * f) / bandwidth
    assert times["eager"].forward - times["fused"].forward == pytest.approx(forward, rel=1e-9)
    assert times["eager"].backward_input - times["fused"].backward_input == pytest.approx(backward, rel=1e-9)
    gpt_block = replace(model, gated_mlp=False)
    assert layer_time(gpt_block, replace(layout, execution="eager"), hw, 1, one, one, one).forward == pytest.approx(
        layer_time(gpt_block, replace(layout, execution="fused"), hw, 1, one, one, one).forward, rel=1e-12)


def test_the_loss_moves_what_its_kernel_moves_a_logit():
    """The loss's memory-bound passes over [tokens, vocab], by hand: Megatron's fp32 vocab-parallel cross entropy
    forward casts to fp32 (2 + 4), takes the max (4), subtracts it (4 + 4), exponentiates (4 + 4), sums (4) and divides
    (4 + 4): 38 bytes a logit; backward scales the saved softmax (4 + 4) and casts it to bf16 (4 + 2): 14. flash-attn's
    fused xentropy reads the bf16 row twice forward (4) and once backward, writing a bf16 gradient (4). At 0.85 of
    H100's 3.35 TB/s. The step differs by exactly the difference, the rest of it unchanged."""
    from simulations.estimate.compute import loss_time

    hw = cluster("h100-80gb", 8)
    tokens, vocab = 8 * 4096, 128256
    bandwidth = 3350e9 * 0.85
    for kind, forward, backward in (("fp32", 38, 14), ("fused", 4, 4)):
        got = loss_time(tokens, vocab, Layout(cross_entropy=kind), hw)
        assert got == pytest.approx((tokens * vocab * forward / bandwidth, tokens * vocab * backward / bandwidth),
                                    rel=1e-12), kind
    model, hw8, layout = build("llama3-8b", gpus=8, tp=1, global_batch=8, micro_batch=1, recompute="none")
    runs = {kind: estimate(model, hw8, replace(layout, cross_entropy=kind)) for kind in ("fp32", "fused")}
    moved = model.seq_len * model.vocab * (38 + 14 - 4 - 4)
    assert runs["fp32"].pipeline_s - runs["fused"].pipeline_s == pytest.approx(moved / bandwidth, rel=1e-6)


def test_the_step_waits_for_its_slowest_gpu_more_as_ranks_grow():
    """GPUs of one SKU vary by 8 % (Sinha et al. SC'22, taken as the range over 1,000 GPUs: σ = 8 % / (2 · 3.24));
    a synchronous step runs at its slowest GPU's pace: compute × σ × the expected largest of n normals (Blom:
    Φ⁻¹((n − 0.375) / (n + 0.25))). Weak scaling therefore slows as the GPUs grow, compute per GPU unchanged."""
    from statistics import NormalDist

    sigma = 0.08 / (2 * 3.24)
    runs = {}
    for gpus in (8, 512):
        e = estimate(*build("llama3-8b", gpus=gpus, tp=1, zero_stage=1, micro_batch=1, global_batch=gpus,
                            recompute="none"))
        slowest = NormalDist().inv_cdf((gpus - 0.375) / (gpus + 0.25))
        assert e.straggler_s == pytest.approx(e.compute_s * sigma * slowest, rel=1e-12), gpus
        runs[gpus] = e
    assert runs[512].compute_s == pytest.approx(runs[8].compute_s, rel=1e-12)
    assert runs[512].straggler_s > 1.3 * runs[8].straggler_s


def test_a_gemm_beside_a_collective_runs_in_waves_over_the_sms_it_leaves():
    """NCCL holds 16 SMs while it runs (hardware.NCCL_COLLECTIVE_SMS; nccl#689): an 8192³ GEMM's 2048 tiles then run
    in ceil(2048 / 116) = 18 waves on H100, not 16, each wave's fixed cost paid by 116 SMs, not 132."""
    from simulations.estimate.compute import matmul_time

    hw = cluster("h100-80gb", 8)
    overhead = ((128 + 256) * 128 + 128 * 256 * 2) * 132 / (3350e9 * 0.85)
    wave_left = _h100_wave_by_hand(8192) - overhead * 16 / 132
    assert matmul_time(8192, 8192, 8192, hw, held=16) == pytest.approx(18 * wave_left, rel=1e-9)
    assert matmul_time(8192, 8192, 8192, hw, held=0) == matmul_time(8192, 8192, 8192, hw)
    # few tiles: one wave either way, as fast (the 96 tiles of a 1024 × 3072 output fit on the 116 SMs left)
    assert matmul_time(1024, 3072, 4096, hw, held=16) == pytest.approx(matmul_time(1024, 3072, 4096, hw), rel=0.15)


def test_contention_by_hand_and_only_while_both_run():
    """Compute at 0.8 of its speed beside a collective: 10 ms of it beside 5 ms of collective loses 0.2 × 5 = 1 ms;
    beside 20 ms it runs slowed to its end, 10 / 0.8 = 12.5 ms, and loses 2.5 ms, never more (the collective's
    time after the compute is over slows nothing). Nothing when either side is empty."""
    from simulations.estimate.traffic import contended, contention

    assert contention(5e-3, 10e-3, 0.8) == pytest.approx(1e-3)
    assert contention(20e-3, 10e-3, 0.8) == pytest.approx(2.5e-3)
    assert contention(0.0, 10e-3, 0.8) == contention(5e-3, 0.0, 0.8) == contention(5e-3, 10e-3, 1.0) == 0.0
    assert contended(20e-3, 10e-3, 10e-3, 0.8) == pytest.approx(10e-3)  # the collective outlasts the window
    assert contended(5e-3, 10e-3, 10e-3, 0.8) == pytest.approx(1e-3)
    rng = random.Random(21)
    for _ in range(200):
        comm, compute, rate = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.5, 1)
        lost = contention(comm, compute, rate)
        assert 0 <= lost <= min(comm * (1 - rate), compute * (1 / rate - 1)) + 1e-12
        assert contention(comm * 1.5, compute, rate) >= lost  # more collective never loses less


def test_collectives_beside_compute_never_make_a_step_faster(random_estimates, monkeypatch):
    """With NCCL holding no SMs (every held rate 1) no estimate is slower than with them; a run with nothing to
    communicate (one GPU) is the same either way; an FSDP run's layers lose time to their gathers."""
    from simulations.estimate import compute

    with_sms = [(model, kw, e.step_time_s) for model, kw, e in random_estimates[:20]]
    single = build("custom", layers=4, hidden=1024, heads=8, vocab=32000, seq_len=2048, gpus=1, tp=1,
                   micro_batch=1, global_batch=4)
    fsdp = build("llama3-8b", gpus=16, tp=1, zero_stage=3, micro_batch=1, global_batch=64)
    alone, sharded = estimate(*single).step_time_s, estimate(*fsdp).step_time_s
    monkeypatch.setattr(compute, "NCCL_COLLECTIVE_SMS", 0)
    for model, kw, step in with_sms:
        assert estimate(*build(model, **kw)).step_time_s <= step * (1 + 1e-12), (model, kw)
    assert estimate(*single).step_time_s == alone
    assert estimate(*fsdp).step_time_s < sharded


@pytest.mark.parametrize(("dtype", "fsdp", "execution", "per_param"), [
    ("fp32", "fsdp1", "eager", (2 + 2) + (2 + 4) + (4 + 4)), ("bf16", "fsdp1", "eager", (2 + 2) + (2 + 2)),
    ("fp32", "fsdp2", "eager", 2 + 4), ("bf16", "fsdp2", "eager", 2 + 2), ("fp32", "fsdp1", "compiled", 2 + 4)])
def test_fsdp_pays_its_gradient_passes_before_every_reduce_scatter(dtype, fsdp, execution, per_param):
    """ZeRO-2 (FSDP's SHARD_GRAD_OP): each micro-batch's weight-gradient stage carries, beyond its matmuls, what FSDP
    does to the gradient before reduce-scattering it, by hand: FSDP1 concatenates the flat bf16 gradient (read 2,
    write 2), casts it to an fp32 reduction's dtype (2, 4) and pre-divides it in place (r, r); FSDP2 copies it into
    the reduce-scatter input in the reduction's dtype (2, r) and lets NCCL average; compiled, one fused pass.
    A 256-token vocabulary keeps the output layer and the embedding's backward out of the way (well under 1 %)."""
    layers, hidden = 8, 2048
    model, hw, layout = build("custom", layers=layers, hidden=hidden, heads=16, vocab=256, seq_len=2048, gpu="h100-80gb",
                              gpus=8, tp=1, pp=1, zero_stage=2, micro_batch=1, global_batch=16, recompute="none",
                              grad_reduce_dtype=dtype, execution=execution, fsdp=fsdp)
    e = estimate(model, hw, layout)
    one = Group(1, 1)
    lt = layer_time(model, layout, hw, 1, one, one, one)
    params = 12 * hidden * hidden  # Q/K/V, O, FFN up and down (4h); no biases, norm weights below 0.1 %
    passes = layers * params * per_param / (H100.hbm_bandwidth * 0.85)
    beyond_matmuls = e.stage_times["weight"] - layers * lt.backward_weight
    assert passes <= beyond_matmuls <= passes * 1.01 + 20e-6, (beyond_matmuls, passes)
