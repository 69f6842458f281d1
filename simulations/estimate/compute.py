"""A layer's compute on one GPU, one micro-batch: its matmuls on the GPU's sustained rate less the waves
their tiles leave idle, attention at its kernel's published rate (kernels.py), memory-bound passes over HBM,
and the TP, CP and EP collectives the layer waits for (collectives.py). Assembled into a step by cost.py.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from simulations.estimate import collectives, kernels, stacks, traffic
from simulations.estimate.collectives import Group
from simulations.estimate.layout import Layout, kv_heads_per_tp_rank
from simulations.estimate.models import BF16, Model
from simulations.hardware import GPU, HBM_EFFICIENCY, NCCL_COLLECTIVE_SMS, Cluster


# The optimizer step per parameter it owns, all memory-bound passes (Megatron-LM's mixed-precision
# optimizer): the gradient norm reads the fp32 gradient (4); Adam reads gradient, master, m, v (16) and
# writes master, m, v (12); the updated master is copied into the bf16 weight (read 4, write 2).
ADAM_BYTES_PER_PARAM = 4 + 16 + 12 + 6
# PyTorch's own AdamW (torch/optim/adamw.py, _multi_tensor_adamw, the foreach default on CUDA), on the fp32 shard
# FSDP keeps (its flat parameter is the master copy): weight decay param.mul_ (read 4, write 4); exp_avg.lerp_(grad)
# (8, 4); exp_avg_sq.mul_ (4, 4) then addcmul_(grad, grad) (8, 4); the denominator by _foreach_sqrt, _foreach_div_
# and _foreach_add_(eps) (4, 4 each); param.addcdiv_(exp_avg, denom) (12, 4): 80 bytes. Before it
# torch.nn.utils.clip_grad_norm_ reads every gradient for the norm (4) and scales it in place (4, 4).
FOREACH_ADAMW_BYTES_PER_PARAM = 8 + 12 + 8 + 12 + 3 * 8 + 16 + 4 + 8
# What PyTorch spends on the CPU to issue one eager kernel: its dispatcher, "on the order of 2 μs" a call on a
# torch.Tensor (pytorch/pytorch, benchmarks/overrides_benchmark/README.md), and CUDA's launch of it, about 3 µs on
# recent GPUs and drivers (NVIDIA developer forums, "Too much time for kernel launch latency", 2022: null kernels'
# launch overhead). CUDA graphs replay a captured sequence without either (CUDA programming guide, "CUDA Graphs").
EAGER_KERNEL_CPU_S = (2 + 3) * 1e-6
# The loss over the vocabulary: HBM bytes a logit (this rank's vocabulary share) moves, forward and backward, by
# Layout.cross_entropy. "fp32": Megatron-LM's vocab-parallel cross entropy (megatron/core/tensor_parallel/
# cross_entropy.py, unfused, Megatron-core's default): forward logits.float() (read 2, write 4), the max over the
# vocabulary (read 4), the in-place subtraction of it (4, 4), torch.exp in place (4, 4), the sum (4) and the in-place
# division into the softmax it saves (4, 4): 38; backward the saved softmax minus the one-hot target, scaled in place
# by the loss's gradient (4, 4), then cast back to bf16 for the logit GEMMs (4, 2): 14.
# "torch": torch.nn.functional.cross_entropy on logits.float(), eager (torchtitan): the cast (read 2, write 4); aten's
# log_softmax (aten/src/ATen/native/cuda/SoftMax.cu: a row of 128,256 fp32 fits neither the registers nor shared
# memory, so cunn_SoftMaxForward reduces the max (read 4), the sum of exponentials (read 4), then writes the output
# (read 4, write 4)); nll_loss reads one logit a row: 22. Backward: nll_loss's dense gradient (write 4), the
# log_softmax backward (the gradient's sum over the row, read 4; then read 4 + 4, write 4), the cast back (4, 2): 26.
# "loss_parallel": torch's loss_parallel (torch/distributed/tensor/parallel/loss.py, torchtitan with TP): the cast
# (2, 4), amax (4), x − max (4, 4), exp (4, 4), its sum (4), the result (4, 4): 38; backward zeros_like (write 4),
# exp(x) (4, 4), the sum with the one-hot (8, 4), times the gradient (4, 4), the cast back (4, 2): 38.
# "fused": flash-attn's xentropy kernel (csrc/xentropy/xentropy_kernel.cu, LLM Foundry's default loss_fn): its forward,
# one block a row, reads the bf16 row twice (max and sum, then the sum of exponentials: 2 + 2) and writes one
# log-sum-exp a row; its backward reads the bf16 logits once and writes the bf16 gradient (2 + 2).
# "hf": Transformers' ForCausalLMLoss (loss/loss_utils.py: logits.float(), then nn.functional.cross_entropy): the same
# kernels as "torch".
LOSS_BYTES = {"fp32": (2 + 4 + 4 + 8 + 8 + 4 + 8, 8 + 4 + BF16), "fused": (BF16 + BF16, BF16 + BF16),
              "torch": (2 + 4 + 4 + 4 + 8, 4 + 4 + 8 + 4 + 4 + BF16),
              "hf": (2 + 4 + 4 + 4 + 8, 4 + 4 + 8 + 4 + 4 + BF16),
              "loss_parallel": (2 + 4 + 4 + 8 + 8 + 4 + 8, 4 + 8 + 12 + 8 + 4 + BF16)}
# A Llama block (pre-normalisation by RMSNorm, SwiGLU, rotary positions: Touvron et al., "LLaMA", arXiv:2302.13971,
# sec. 2.2, kept by Llama 2 and 3 and Mixtral; here every gated-MLP model) run op by op in eager PyTorch, HBM bytes an
# element of each pass, (forward, backward), beyond the fused kernels layer_time counts for every stack (a norm: read
# 2, write 2, backward 1.5 times that; SwiGLU 6, backward 9). As Meta's reference (meta-llama/llama, llama/model.py:
# RMSNorm, apply_rotary_emb, FeedForward) and after it torchtitan (torchtitan/models/norms.py RMSNorm;
# models/llama/model.py apply_rotary_emb and FeedForward, at 7e76ecb) and fms-fsdp (fms's LayerNormParameterized and
# RotaryEmbedding) write them:
# - RMSNorm, over [tokens, h]: x.float() (read 2, write 4), pow (4, 4), mean (4), x * rsqrt (4, 4), type_as (4, 2),
#   * weight (2, 2): 36 forward; autograd's backward of those: * weight (the input's gradient 2, 2; the weight's, a
#   product 2 + 2, 2, then summed over tokens, 2), type_as (2, 4), x * rsqrt (the input's gradient 4, 4; rsqrt's, a
#   product 4 + 4, 4, summed over the row, 4), pow (4, 4), the two gradient paths added (4 + 4, 4), float() (4, 2): 68;
# - rotary positions, over Q and K: q.float() (2, 4), the complex product (4, 4), type_as (4, 2): 20; backward the
#   same three in reverse: 20;
# - SwiGLU, over [tokens, ffn]: F.silu(w1(x)) (2, 2), times w3(x) (2 + 2, 2): 10; backward the product's two
#   gradients (2 + 2, 2 each) and silu's (2 + 2, 2): 18.
# Fused (Megatron-core's TransformerEngine kernels) and compiled (torch.compile) stacks fuse each into one pass.
# The fused passes every stack is charged (layer_time), bytes an element, (forward, backward: 1.5 times): a norm reads
# and writes bf16 (2 + 2); SwiGLU reads the gate and the up projection and writes their product (2 + 2 + 2).
FUSED_NORM_BYTES, FUSED_SWIGLU_BYTES = (4, 6), (6, 9)
EAGER_RMSNORM_BYTES = (2 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 2 + 2 + 2,
                       (2 + 2) + (2 + 2 + 2) + 2 + (2 + 4) + (4 + 4) + (4 + 4 + 4) + 4 + (4 + 4) + (4 + 4 + 4) + (4 + 2))
EAGER_ROPE_BYTES = (2 + 4 + 4 + 4 + 4 + 2, 2 + 4 + 4 + 4 + 4 + 2)
EAGER_SWIGLU_BYTES = (2 + 2 + 2 + 2 + 2, 2 * (2 + 2 + 2) + 2 + 2 + 2)
TILE_M, TILE_N = 128, 256  # a large bf16 cuBLAS/CUTLASS tile: a matmul runs in waves of these over the SMs
# A tile's k-block: 64 bf16 (or 128 FP8) elements, 128 bytes a row (CUTLASS's sm90 128×256×64 bf16 and ×128 FP8 tiles)
TILE_K_BYTES = 128


def tile_overhead(gpu: GPU) -> float:
    """Seconds a wave of tiles spends beside its main loop, whatever its K: every SM loads its first k-block of A
    and B before the first multiply ((128 + 256) rows of 128 bytes) and stores its 128 × 256 bf16 output after the
    last, all SMs at once over HBM. From the datasheet's bandwidth and SM count (hardware.py), not measured."""
    per_tile = (TILE_M + TILE_N) * TILE_K_BYTES + TILE_M * TILE_N * BF16
    return per_tile * gpu.sms / (gpu.hbm_bandwidth * HBM_EFFICIENCY)


def waves(m: float, n: float, gpu: GPU, held: int = 0) -> int:
    """Waves of tiles over the SMs, `held` of them taken by a collective running beside (NCCL_COLLECTIVE_SMS)."""
    return math.ceil(math.ceil(m / TILE_M) * math.ceil(n / TILE_N) / (gpu.sms - held))


@functools.cache
def mainloop_flops_per_sm(gpu: GPU) -> float:
    """FLOP/s one SM's main loop sustains, from the GPU's one measured point: at the shape that reached its MAMF
    (hardware.GPU.mamf_shape), the sustained rate, waves of (main loop + tile_overhead). So that shape runs at
    exactly the sustained rate, and a GEMM of short K (a small model's Q/K/V, O and FFN-up, K = hidden) below it."""
    m, n, k = gpu.mamf_shape
    per_wave = 2 * m * n * k / gpu.sustained_flops / waves(m, n, gpu)
    return 2 * TILE_M * TILE_N * k / (per_wave - tile_overhead(gpu))


@functools.lru_cache(maxsize=1 << 16)  # a search asks the same shapes of many layouts
def matmul_time(m: float, n: float, k: float, cluster: Cluster, fp8: bool = False, held: int = 0) -> float:
    """[m, k] × [k, n] in bf16: waves of 128 × 256 tiles over the SMs (the last wave's idle SMs wasted), each wave its
    main loop over K plus what a tile pays once (tile_overhead), never faster than the sustained rate; or HBM-bound. `fp8`: the
    inputs in FP8 at the GPU's FP8 rate (hardware.GPU.fp8_flops; the same sustained fraction), 1 byte an input.
    `held`: SMs a collective beside it holds; the tiles run in waves over the others, each at the same per-SM rate."""
    gpu = cluster.gpu
    fp8_speedup = gpu.fp8_flops / gpu.peak_flops if fp8 else 1.0
    left = (gpu.sms - held) / gpu.sms
    per_wave = 2 * TILE_M * TILE_N * k / (mainloop_flops_per_sm(gpu) * fp8_speedup) + tile_overhead(gpu) * left
    # never above the sustained rate: the MAMF is the best of every shape scanned, so no shape beats it
    compute = max(waves(m, n, gpu, held) * per_wave, 2 * m * n * k / (gpu.sustained_flops * fp8_speedup * left))
    moved = (1 if fp8 else BF16) * (m * k + k * n) + BF16 * m * n
    return max(compute, moved / (gpu.hbm_bandwidth * HBM_EFFICIENCY))


def optimizer_bytes_per_param(layout: Layout) -> float:
    """HBM bytes the optimizer step moves per parameter it owns: torch.optim's foreach AdamW and a clipping pass in
    an eager PyTorch stack, a fused Adam otherwise (Megatron-core's; torch.compile fuses the foreach passes too)."""
    return FOREACH_ADAMW_BYTES_PER_PARAM if layout.executes == "eager" else ADAM_BYTES_PER_PARAM


def fsdp_reduce_input_bytes(layout: Layout) -> float:
    """HBM bytes a parameter's gradient moves every micro-batch before ZeRO-2/3 (FSDP) reduce-scatters it, beside the
    collective itself, by the FSDP that runs (Layout.fsdp; r, the reduction's bytes an element):
    - "fsdp2" (fully_shard): the bf16 gradients copied into the reduce-scatter input in the reduction's dtype (read 2,
      write r: torch._chunk_cat in foreach_reduce, torch/distributed/_composable/fsdp/_fsdp_collectives.py); for fp32
      and bf16 reductions the averaging is NCCL's own (_get_gradient_divide_factors returns no pre- or post-divide
      factor: "we use NCCL's built-in division to avoid separate div kernels"), no pass;
    - "fsdp1" (FullyShardedDataParallel, torch/distributed/fsdp): the layer's parameters are views of one flat
      parameter (torch.split, _use_unsharded_views), so autograd writes the flat gradient by concatenating theirs
      (SplitWithSizesBackward: read 2, write 2); _post_backward_hook casts it to the reduce dtype where that differs
      (read 2, write r); _reduce_grad divides it in place by the pre-divide factor first (_div_if_needed: read r,
      write r) and the shard by the post-divide factor after (a 1/N part, not counted).
    Compiled (torch.compile, XLA), the copy-in and any division are taken to fuse into one pass (read 2, write r).
    The passes run on FSDP's own stream beside the next layer's backward, timed here as if alone on the GPU
    (assumption: HBM-bound kernels hold the SMs their blocks occupy while they run, as NCCL's do, traffic.contention)."""
    reduce = layout.grad_reduce_bytes
    if layout.fsdp == "fsdp2" or layout.executes == "compiled":
        return BF16 + reduce
    return (BF16 + BF16) + (BF16 + reduce if reduce != BF16 else 0) + 2 * reduce


def layer_kernels(model: Model, layout: Layout) -> tuple[int, int]:
    """Kernels one layer issues per micro-batch, forward and backward, one per op as eager PyTorch runs them: two
    norms, the Q/K/V, O, FFN-up (and gate) and FFN-down GEMMs, attention, the activation (and SwiGLU's product), two
    residual adds (and two dropouts). Backward: two GEMMs per GEMM (input and weight gradients), attention's
    backward (its pre-processing pass and the kernel), and one per element-wise op, the residual's gradient adds
    among them. ZeRO-3 (FSDP) adds per unit: the cast of the shard, its all-gather and the copy out of the flat
    buffer before forward and again before backward, and the gradient's cast and reduce-scatter after it."""
    gemms = 5 if model.gated_mlp else 4
    elementwise = 2 + (2 if model.gated_mlp else 1) + 2 + (2 if model.dropout else 0)  # norms, activation, adds, drops
    forward = gemms + 1 + elementwise
    backward = 2 * gemms + 2 + elementwise
    if layout.zero_stage == 3:
        forward, backward = forward + 3, backward + 3 + 2
    return forward, backward


def fp8_cast_bytes(rows: float, n: float, k: float) -> tuple[float, float]:
    """HBM bytes of TransformerEngine's per-tensor FP8 casts around one linear layer [rows, k] × [k, n], forward and
    backward: forward casts its input and its weight (read 2 bytes, write the FP8 copy and its transpose for the
    backward's GEMMs, 1 + 1); backward casts the output's gradient the same way (TE's cast_transpose; the amax
    reductions ride along). Delayed scaling: the scale comes from the previous steps' amax history, no extra pass."""
    cast = 2 + 1 + 1
    return cast * (rows * k + k * n), cast * rows * n


def loss_time(tokens: float, vocab: float, layout: Layout, cluster: Cluster) -> tuple[float, float]:
    """Seconds of the loss's memory-bound passes over `tokens` × `vocab` logits (this rank's share), forward and
    backward (LOSS_BYTES by the layout's cross_entropy); the logit GEMMs are timed apart."""
    forward, backward = LOSS_BYTES[layout.cross_entropy]
    return memory_time(tokens * vocab * forward, cluster), memory_time(tokens * vocab * backward, cluster)


def memory_time(moved: float, cluster: Cluster) -> float:
    return moved / (cluster.gpu.hbm_bandwidth * HBM_EFFICIENCY)


@dataclass(frozen=True)
class LayerTime:
    forward: float  # compute, one micro-batch, one layer, one GPU
    backward_input: float  # input gradients and element-wise backward
    backward_weight: float  # weight-gradient matmuls
    recompute: float  # replayed in backward
    tp_forward: float  # TP collectives in forward (exposed)
    tp_backward: float  # TP collectives in backward (overlap the weight gradients)
    ep_exposed: float
    attention_core: float  # forward time of attention itself (the part selective recomputation replays)
    # CP's communication in forward and backward, and what of it compute waits for: the ring's hops run beside
    # attention (exposed: what outlasts it); Ulysses' all-to-alls and the K/V all-gather sit on the critical path
    cp_forward: float = 0.0
    cp_backward: float = 0.0
    cp_forward_exposed: float = 0.0
    cp_backward_exposed: float = 0.0
    # the rate compute keeps while a collective holds NCCL_COLLECTIVE_SMS beside it (1: unslowed), forward and
    # backward: matmuls in waves over the SMs left, attention on them, HBM-bound passes as fast
    held_rate_forward: float = 1.0
    held_rate_backward: float = 1.0


def ring_merge_bytes(model: Model, tokens: float, t: int, c: int) -> tuple[float, float]:
    """Bytes ring attention moves to merge each of its c steps' partial results into the running one, a bf16
    pass each (read the step's, read and write the running: 6 bytes an element), forward and backward.
    Forward: the output, rescaled by the step's log-sum-exp (TransformerEngine's
    flash_attn_fwd_out_correction); backward: dQ, dK and dV summed over the steps (dq.add_, dkv.add_).
    The slowest rank runs all c steps in full."""
    kv = 2 * model.kv_heads * model.head_dim
    return c * 6 * tokens * model.hidden / t, c * 6 * tokens * (model.hidden + kv) / t


def layer_time(model: Model, layout: Layout, cluster: Cluster, micro_batch: int,
               tp_group: Group, cp_group: Group, ep_group: Group) -> LayerTime:
    if layout.stack == "hf":  # Transformers' layer op by op (stacks.py): no TP, CP or EP
        return hf_layer_time(model, layout, cluster, micro_batch)
    t, c = layout.tp, layout.cp
    h, f, s = model.hidden, model.ffn_hidden, model.seq_len
    tokens = micro_batch * s / c  # rows of every matmul on this rank
    qkv_cols = (h + 2 * model.kv_heads * model.head_dim) / t
    ffn_up = f * (2 if model.gated_mlp else 1) / t
    shapes = [(qkv_cols, h), (h, h / t), (ffn_up, h), (h, f / t)]  # (n, k) of Q/K/V, O, FFN up, FFN down
    experts = model.top_k if model.experts else 1
    forward_mm = backward_in = backward_w = 0.0
    held = NCCL_COLLECTIVE_SMS
    held_mm_f = held_mm_b = 0.0  # the same matmuls with the collective's SMs held
    fp8 = layout.precision == "fp8"  # the layers' linears in FP8 (TransformerEngine); attention and logits in bf16
    for i, (n, k) in enumerate(shapes):
        rows = tokens * (experts if i >= 2 else 1)
        forward_mm += matmul_time(rows, n, k, cluster, fp8)
        backward_in += matmul_time(rows, k, n, cluster, fp8)  # dX = dY · Wᵀ
        backward_w += matmul_time(k, n, rows, cluster, fp8)  # dW = Xᵀ · dY
        held_mm_f += matmul_time(rows, n, k, cluster, fp8, held)
        held_mm_b += matmul_time(rows, k, n, cluster, fp8, held) + matmul_time(k, n, rows, cluster, fp8, held)
        if fp8:
            cast_f, cast_b = fp8_cast_bytes(rows, n, k)
            forward_mm += memory_time(cast_f, cluster)
            backward_in += memory_time(cast_b, cluster)
            held_mm_f += memory_time(cast_f, cluster)
            held_mm_b += memory_time(cast_b, cluster)
    # attention core, this rank's heads and queries over the whole context
    heads = model.heads / t
    if model.flash_attention:  # the kernel's published rate for this GPU, head size, mask, direction, length
        attn_fwd, attn_bwd = kernels.attention_time(cluster.gpu, layout.attention_kernel, tokens, s, model.head_dim,
                                                    heads)
    else:
        scores = tokens * s * heads * BF16  # this rank's s×s scores, written once by Q·Kᵀ
        qk = max(2 * tokens * s * model.head_dim * heads / cluster.gpu.sustained_flops,
                 memory_time(scores + 2 * BF16 * tokens * h / t, cluster))
        softmax = memory_time(2 * scores, cluster)  # fused scale, mask, softmax: read and write
        dropout = memory_time(2.5 * scores, cluster) if model.dropout else 0.0  # read, write, 1-byte mask
        av = max(2 * tokens * s * model.head_dim * heads / cluster.gpu.sustained_flops,
                 memory_time(scores + 2 * BF16 * tokens * h / t, cluster))
        attn_fwd = qk + softmax + dropout + av
        attn_bwd = 2 * (qk + av) + 1.5 * (softmax + dropout)
    # memory-bound passes over [tokens, h] (replicated on TP ranks without sequence parallelism)
    sp = t if (layout.sequence_parallel and t > 1) else 1
    # 2 norms (read h, write h in bf16: 4h bytes); 2 residual adds, each reading two [tokens, h] and writing one (6h),
    # with dropout fused in (Megatron's bias-dropout-add: and its 1-byte mask, 7h) or, eager, a dropout pass of its own
    # first (read 2h, write 2h and the mask: 5h more)
    add = 2 * BF16 + BF16 + (1 + (2 * BF16 + 1 if layout.executes == "eager" else 0) if model.dropout else 0)
    per_row = 2 * FUSED_NORM_BYTES[0] * h + 2 * add * h
    per_row_tp = (FUSED_SWIGLU_BYTES[0] if model.gated_mlp else 4) * f * experts / t  # GeLU or SwiGLU
    elementwise = memory_time(tokens * per_row / sp + tokens * per_row_tp, cluster)
    eager_f = eager_b = 0.0
    if layout.executes == "eager" and model.gated_mlp:  # a Llama block op by op: what its passes move beyond fused ones
        qk = (model.heads + model.kv_heads) * model.head_dim / t
        eager_f, eager_b = (memory_time(tokens * (2 * (norm - fused_norm) * h / sp + rope * qk
                                                  + (swiglu - fused_swiglu) * f * experts / t), cluster)
                            for norm, rope, swiglu, fused_norm, fused_swiglu in zip(
                                EAGER_RMSNORM_BYTES, EAGER_ROPE_BYTES, EAGER_SWIGLU_BYTES, FUSED_NORM_BYTES, FUSED_SWIGLU_BYTES))
    forward = forward_mm + attn_fwd + elementwise + eager_f
    backward_input = backward_in + attn_bwd + 1.5 * elementwise + eager_b
    attn_held = cluster.gpu.sms / (cluster.gpu.sms - held)  # attention's blocks over the SMs left
    held_f = held_mm_f + attn_fwd * attn_held + elementwise + eager_f
    held_b = held_mm_b + attn_bwd * attn_held + 1.5 * elementwise + eager_b
    if c > 1 and layout.cp_comm == "ring":
        merge_f, merge_b = ring_merge_bytes(model, tokens, t, c)
        forward += memory_time(merge_f, cluster)
        backward_input += memory_time(merge_b, cluster)
    if layout.executes != "compiled":  # the GPU waits when the CPU issues a layer's kernels slower than they run
        kernels_f, kernels_b = layer_kernels(model, layout)
        forward = max(forward, kernels_f * EAGER_KERNEL_CPU_S)
        backward_input += max(0.0, kernels_b * EAGER_KERNEL_CPU_S - backward_input - backward_w)
        held_f = max(held_f, kernels_f * EAGER_KERNEL_CPU_S)  # CPU-bound: the GPU waits either way
        held_b = max(held_b, kernels_b * EAGER_KERNEL_CPU_S)
    if layout.recompute == "full":
        recompute = forward
    elif layout.recompute == "op":  # every second matmul and the element-wise passes; attention's output is kept
        recompute = sum(matmul_time(tokens * copies, n, k, cluster, fp8)
                        for _, n, k, copies in model.op_recomputed_matmuls(t)) + elementwise + eager_f
        if not model.flash_attention:  # unfused attention's scores and softmax are element-wise ops too
            recompute += attn_fwd
    elif layout.recompute == "selective" and not model.flash_attention:
        recompute = attn_fwd
    else:
        recompute = 0.0  # FlashAttention recomputes its scores inside its own backward already
    if layout.recompute == "full":  # one layer in every `recompute_every` replayed (the average layer)
        recompute /= layout.recompute_every
    # TP: two collectives of the [tokens, h] activation each way
    activation = tokens * h * BF16
    if t > 1:
        if layout.sequence_parallel:
            one = collectives.all_gather(activation, tp_group, cluster) + collectives.reduce_scatter(
                activation, tp_group, cluster)
        else:
            one = collectives.all_reduce(activation, tp_group, cluster)
        tp_forward, tp_backward = 2 * one, 2 * one
    else:
        tp_forward = tp_backward = 0.0
    cp_f = cp_b = cp_f_exposed = cp_b_exposed = 0.0
    if c > 1:
        cp_traffic = traffic.context_parallel_traffic(layout.cp_comm, tokens, model.heads / t, kv_heads_per_tp_rank(model, t),
                                           model.head_dim, c)
        if layout.cp_comm == "ring":  # K and V passed around beside the attention compute, one block a hop
            hop = collectives.send(cp_traffic["forward"]["send"] / (c - 1), cp_group.crosses_nodes, cluster)
            cp_f = (c - 1) * hop  # K, V on to the next rank, c − 1 times
            cp_b = (2 * c - 1) * hop  # K, V again, and the dK, dV accumulators all the way home: c hops
            cp_f_exposed, cp_b_exposed = max(0.0, cp_f - attn_fwd), max(0.0, cp_b - attn_bwd)
        elif layout.cp_comm == "all_to_all":  # QKV out and O back; dO out and dQKV back: all on the critical path
            out = tokens * model.heads / t * model.head_dim * BF16  # O (forward) or dO (backward)
            qkv = cp_traffic["forward"]["all_to_all"] - out
            cp_f = cp_b = cp_f_exposed = cp_b_exposed = (collectives.all_to_all(qkv, cp_group, cluster)
                                                         + collectives.all_to_all(out, cp_group, cluster))
        else:  # all-gather K, V before attention; reduce-scatter dK, dV after its backward (Llama 3: exposed)
            cp_f = cp_f_exposed = collectives.all_gather(cp_traffic["forward"]["all_gather"] * c, cp_group, cluster)
            cp_b = cp_b_exposed = collectives.reduce_scatter(cp_traffic["backward"]["reduce_scatter"], cp_group, cluster)
    ep_exposed = 0.0
    if model.experts and layout.ep > 1:  # dispatch and combine, forward and backward
        ep_exposed = 4 * collectives.all_to_all(activation * model.top_k, ep_group, cluster)
    return LayerTime(forward, backward_input, backward_w, recompute, tp_forward, tp_backward, ep_exposed, attn_fwd,
                     cp_f, cp_b, cp_f_exposed, cp_b_exposed,
                     min(1.0, forward / held_f), min(1.0, (backward_input + backward_w) / held_b))


def measured_gemm_time(gpu: GPU, m: float, n: float, k: float) -> float | None:
    """Seconds of [m, k] × [k, n] where the GPU's measured GEMMs (hardware.GPU.gemm_seconds) hold that K and N: the
    row of the nearest M, scaled by M (a GEMM of these sizes is many waves of tiles: its time goes with its rows),
    if within a factor of 2 of it; None where none was measured."""
    rows = [(rm, seconds) for rm, rk, rn, seconds in gpu.gemm_seconds if rk == k and rn == n and m / 2 <= rm <= 2 * m]
    if not rows:
        return None
    rm, seconds = min(rows, key=lambda row: abs(math.log(row[0] / m)))
    return seconds * m / rm


def gemm_time(m: float, n: float, k: float, cluster: Cluster) -> float:
    """A single-GPU stack's GEMM: measured at this shape where the GPU has it, else matmul_time's model."""
    measured = measured_gemm_time(cluster.gpu, m, n, k)
    return matmul_time(m, n, k, cluster) if measured is None else measured


def sdpa_time(model: Model, layout: Layout, cluster: Cluster, micro_batch: int) -> tuple[float, float]:
    """Causal SDPA forward and backward seconds of one micro-batch: the GPU's measured kernel (torch's default pick,
    hardware.GPU.sdpa_seconds) at this sequence, head count and head dim, scaled by the sequences in the micro-batch;
    else the attention kernel's published rate (kernels.attention_time)."""
    s = model.seq_len
    for b, heads, length, dim, forward, both in cluster.gpu.sdpa_seconds:
        if (heads, length, dim) == (model.heads, s, model.head_dim):
            return forward * micro_batch / b, (both - forward) * micro_batch / b
    return kernels.attention_time(cluster.gpu, layout.attention_kernel, micro_batch * s, s, model.head_dim,
                                  model.heads)


def eager_op_seconds(cluster: Cluster) -> float:
    """Host seconds per eager op: the GPU's measured figure (hardware.GPU.eager_op_s), else EAGER_KERNEL_CPU_S."""
    return cluster.gpu.eager_op_s or EAGER_KERNEL_CPU_S


def streaming_time(moved: float, cluster: Cluster) -> float:
    """Seconds of an element-wise pass moving `moved` bytes at the GPU's streaming bandwidth (measured copy)."""
    return moved / cluster.gpu.streaming_bandwidth


def hf_weight_passes(model: Model, layout: Layout, micro_batches: int) -> tuple[float, float]:
    """HBM bytes a layer's weights take each micro-batch beside its GEMMs, forward and backward: under AMP autocast
    casts each fp32 linear weight to bf16 (read 4, write 2) and the bf16 weight gradient back (read 2, write 4);
    from the second micro-batch on, each gradient is added to .grad (read 2·g, write g; the first is stored as is,
    AccumulateGrad), averaged over the step's micro-batches."""
    weights = stacks.linear_weights(model)
    grad = 4 if layout.amp else BF16
    accumulate = 3 * grad * model.layer_params() * (micro_batches - 1) / micro_batches
    cast = (4 + BF16) * weights if layout.amp else 0.0
    return cast, cast + accumulate


def hf_layer_time(model: Model, layout: Layout, cluster: Cluster, micro_batch: int) -> LayerTime:
    """One Transformers Llama layer on one GPU (stacks.py): its seven GEMMs (q, k, v, o, gate, up, down: separate
    nn.Linear calls) forward and their two backward GEMMs each, SDPA, and the element-wise passes the eager ops (or
    torch.compile's fused kernels) move, at the GPU's streaming bandwidth; in eager execution no faster than the host
    issues the layer's ops (eager_op_seconds each; compiled, each generated or extern kernel is still launched from
    inductor's Python wrapper: counted at the same cost, an upper bound)."""
    tokens = micro_batch * model.seq_len
    m = max(1, layout.global_batch // layout.dp(cluster.gpus) // micro_batch)
    forward_mm = backward_in = backward_w = 0.0
    for _, n, k in stacks.layer_gemms(model):
        forward_mm += gemm_time(tokens, n, k, cluster)
        backward_in += gemm_time(tokens, k, n, cluster)  # dX = dY · Wᵀ
        backward_w += gemm_time(k, n, tokens, cluster)  # dW = dYᵀ · X
    attn_f, attn_b = sdpa_time(model, layout, cluster, micro_batch)
    table = stacks.hf_llama_layer_compiled if layout.torch_compile else stacks.hf_llama_layer
    passes_f, passes_b = table(model, layout.amp)
    weights_f, weights_b = hf_weight_passes(model, layout, m)
    forward = forward_mm + attn_f + streaming_time(tokens * sum(p.bytes for p in passes_f) + weights_f, cluster)
    backward_input = backward_in + attn_b + streaming_time(tokens * sum(p.bytes for p in passes_b) + weights_b,
                                                           cluster)
    gemms = len(stacks.layer_gemms(model))
    casts = gemms if layout.amp else 0  # one weight cast a linear each way
    kernels_f = sum(p.kernels for p in passes_f) + gemms + 1 + casts
    kernels_b = sum(p.kernels for p in passes_b) + 2 * gemms + 1 + casts + (gemms + 2 if m > 1 else 0)
    host = eager_op_seconds(cluster)
    forward = max(forward, kernels_f * host)
    backward_input += max(0.0, kernels_b * host - backward_input - backward_w)
    recompute = forward if layout.recompute == "full" else 0.0
    return LayerTime(forward, backward_input, backward_w, recompute, 0.0, 0.0, 0.0, attn_f)


def optimizer_time(params: float, layout: Layout, cluster: Cluster) -> float:
    """The optimizer step over `params` parameters. Stack hf: torch.optim.AdamW (foreach, CUDA's default; the model's
    compile leaves it eager) and clip_grad_norm_ (HF Trainer's max_grad_norm 1.0), at the GPU's measured seconds a
    parameter where it has them; otherwise, and for the other stacks, the passes optimizer_bytes_per_param counts."""
    gpu = cluster.gpu
    if layout.stack == "hf":
        if gpu.adamw_seconds("foreach"):
            return params * (gpu.adamw_seconds("foreach") + gpu.adamw_seconds("clip"))
        return streaming_time(params * FOREACH_ADAMW_BYTES_PER_PARAM, cluster)
    return memory_time(params * optimizer_bytes_per_param(layout), cluster)


def hf_head_time(model: Model, layout: Layout, cluster: Cluster, tokens: float) -> tuple[float, float]:
    """What Transformers' model end adds beside the output GEMMs and the loss, forward and backward: the final
    LlamaRMSNorm's passes and, under AMP, lm_head's input cast (4, 2; back 2, 4) and its weight's cast (V·h: 4, 2) and
    its gradient's (2, 4)."""
    norm_f, norm_b = stacks.rms_norm_passes(model.hidden, layout.amp)
    cast_input = (4 + BF16) * model.hidden if layout.amp else 0.0
    cast_weight = (4 + BF16) * model.vocab * model.hidden if layout.amp else 0.0
    if layout.torch_compile:  # the norm and the cast fuse into one kernel each way
        norm_f = [stacks.norm_chain_forward(model.hidden, layout.amp)]
        norm_b = [stacks.norm_chain_backward(model.hidden, layout.amp, 1)]
        cast_input = 0.0
    forward = streaming_time(tokens * (sum(p.bytes for p in norm_f) + cast_input) + cast_weight, cluster)
    backward = streaming_time(tokens * (sum(p.bytes for p in norm_b) + cast_input) + cast_weight, cluster)
    return forward, backward
