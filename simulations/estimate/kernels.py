"""What a fused attention kernel takes on one GPU: by kernel, GPU, head dimension, causal mask, direction and
sequence length, from the kernels' own published benchmarks. Torch-free; the cost model (cost.py) asks it.

FLOP convention. The kernels' benchmarks count a forward pass as 4·s²·d per head (Q·Kᵀ and P·V), halved
under a causal mask (the kernel skips the masked blocks), and the backward as 2.5 times the forward (five
matmuls to two); their TFLOP/s are those FLOPs over the measured time. So the time here is the work the
kernel does: causal-halved FLOPs over the causal rate. The estimator's *model* FLOPs (models.Model.
model_flops) count attention whole, 4·s·h per token and layer forward, as Narayanan et al. (eq. 3),
Korthikanti et al. (appendix A), Megatron-LM's num_floating_point_operations and LLM Foundry's MFU
(scripts/train/benchmarking/README.md, attn_flops_per_seq) all count it, so that MFU compares with the
published rows.

Sources (TFLOP/s, bf16/fp16, one GPU, at sequence lengths 512, 1k, 2k, 4k, 8k, 16k; batch × sequence = 16k
tokens, hidden 2048):
- H100 SXM5: Shah et al., "FlashAttention-3", arXiv:2407.08608 (v2), Figure 5 (forward: non-causal and
  causal, head dim 64 and 128) and Figure 6 (backward, non-causal, head dim 64 and 128), bars for
  FlashAttention-2, cuDNN and FlashAttention-3, as the bars' labels print them (read from the figures'
  transcriptions; where two transcriptions of the 512-token bars of non-causal head dim 128 disagree on which
  of cuDNN and FA3 is 467 and which 497, the lower is taken for both).
- A100 SXM4 and H100 SXM5, forward + backward: Dao, "FlashAttention-2", arXiv:2307.08691, Figure 4 (A100 80GB:
  PyTorch, FlashAttention, xformers, FlashAttention in Triton, FlashAttention-2; non-causal and causal, head dim 64
  and 128) and Figure 7 (H100: PyTorch, FlashAttention, FlashAttention-2), the bars' printed labels as the
  flash-attention repository's assets/flash2_a100_fwd_bwd_benchmark.png and flash2_h100_fwd_bwd_benchmark.png show
  them (two A100 labels under the legend: see A100_FWD_BWD). fa2 and fa1 on A100 are these curves; fa1 on H100 is
  FlashAttention-2's H100 curve (FA3 paper) times FlashAttention's fraction of FlashAttention-2 in Figure 7 at the
  same point. The paper's Figures 5 and 6 (A100 forward, backward alone) are not in the repository and are not
  transcribed: a forward + backward rate is split into its two directions by FlashAttention-2's forward / backward
  ratio on H100 at the same head dim, mask and length (FA3 paper; 370 / 322 = 1.15 at head dim 128, 16k, against
  the FA2 paper's A100 best points, "73 %" forward and "63 %" backward of peak: 1.16).
- triton_fa1: the 2022 Triton FlashAttention (flash_attn_triton.py), which LLM Foundry's `attn_impl: triton` ran in
  its 2023 benchmarks: FlashAttention-2's rates divided by 1.9, the middle of the FA2 paper's "1.3-2.5× faster than
  FlashAttention in Triton". That range describes Figure 4's Triton bars, which are OpenAI's triton.ops
  flash_attention of mid 2023 (the repo's benchmarks/benchmark_flash_attention.py imports it), not this kernel; no
  per-length benchmark of this kernel is published. What is, and why the flat 1.9 stays: under a causal mask at
  4k-16k, Figure 4's Triton runs at FA2 / 2.05-2.14 (head dim 64) and / 2.33-2.36 (128); this kernel's own source
  says "Overall Triton forward + backward is slightly slower than CUDA forward + backward", and Figure 4's
  FlashAttention (v1, CUDA) runs at FA2 / 1.76-1.79 (64) and / 2.27-2.28 (128) there; users' forward-only timings
  of this kernel against v1 on A100 (flash-attention issues #142 and #405, 2023) have it faster than v1, and LLM
  Foundry's TUTORIAL.md (FAQ on `torch` / `flash` / `triton`, an answer from before FlashAttention-2 kept in a
  comment) says "In our experience, `triton` is slightly faster than `flash`" (v1). Neither figure has a causal
  Triton or v1 kernel faster than FA2 / 1.76 at long sequences, and neither is this kernel, so the range's middle
  is kept. (Either, per length, predicts LLM Foundry's long rows slower still: the ratchets'
  comments, tests/unit/test_estimate_other_stacks.py.)
Assumptions, stated so that they can be checked:
- H100 causal backward (not in the FA3 paper's Figure 6) runs at the non-causal backward rate times the forward's
  causal / non-causal ratio at the same length;
- other head dimensions take the nearest published one (≤ 64: 64; otherwise 128);
- A100 40 GB runs as the 80 GB part of Figure 4 (same chip and clocks; attention at these rates is not HBM-bound);
- H200 runs as H100 (same GH100 compute); B200 (no published FA3, which is Hopper-only) runs cuDNN at H100
  cuDNN's fraction of peak, and FlashAttention (v1) there FlashAttention's fraction of FlashAttention-2 on H100;
  a power-capped H100 (hardware.GPU.attention_vs_h100) runs the H100 curves at its matmul burst's fraction of H100's;
- lengths below 512 take the 512 rate, above 16k the 16k rate; between, interpolated in log(length);
- like the matmul rates these are one-GPU bursts, scaled by the GPU's sustained / burst ratio (hardware.py).
"""

from __future__ import annotations

import bisect
import math
from typing import Literal, get_args

from simulations.hardware import GPU

AttentionKernel = Literal["auto", "fa2", "fa3", "cudnn", "triton_fa1", "fa1"]
ATTENTION_KERNELS = get_args(AttentionKernel)

LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)

# (kernel, head dim, direction, causal) -> TFLOP/s at LENGTHS, H100 SXM5 (FA3 paper, Figures 5 and 6)
H100_ATTENTION: dict[tuple[str, int, str, bool], tuple[float, ...]] = {
    ("fa2", 64, "forward", False): (282, 306, 318, 321, 322, 324),
    ("fa2", 128, "forward", False): (309, 350, 362, 368, 370, 370),
    ("fa2", 64, "forward", True): (180, 229, 262, 284, 295, 299),
    ("fa2", 128, "forward", True): (191, 260, 298, 319, 333, 335),
    ("fa2", 64, "backward", False): (198, 238, 264, 279, 287, 291),
    ("fa2", 128, "backward", False): (214, 260, 291, 310, 318, 322),
    ("cudnn", 64, "forward", False): (335, 373, 395, 408, 412, 413),
    ("cudnn", 128, "forward", False): (467, 574, 617, 609, 600, 595),
    ("cudnn", 64, "forward", True): (225, 288, 334, 363, 379, 388),
    ("cudnn", 128, "forward", True): (315, 410, 484, 518, 529, 539),
    ("cudnn", 64, "backward", False): (266, 348, 395, 417, 432, 433),
    ("cudnn", 128, "backward", False): (305, 408, 465, 499, 518, 516),
    ("fa3", 64, "forward", False): (333, 392, 460, 476, 496, 497),
    ("fa3", 128, "forward", False): (467, 565, 625, 638, 646, 648),
    ("fa3", 64, "forward", True): (197, 265, 371, 420, 460, 473),
    ("fa3", 128, "forward", True): (292, 423, 521, 579, 602, 616),
    ("fa3", 64, "backward", False): (272, 363, 422, 453, 472, 474),
    ("fa3", 128, "backward", False): (316, 424, 501, 542, 559, 561),
}

# (kernel, head dim, causal) -> forward + backward TFLOP/s at LENGTHS, A100 SXM4 80GB: FlashAttention-2 paper
# (arXiv:2307.08691) Figure 4, the bars' printed labels (flash-attention repo,
# assets/flash2_a100_fwd_bwd_benchmark.png).
# Two FA2 labels sit under the legend: non-causal head dim 64 at 1k (153, legible through it) and non-causal head dim
# 128 at 512, read from the bar's height against the five labelled FA2 bars of that panel (151).
# "triton" is the figure's "FlashAttention Triton": triton.ops.flash_attention, OpenAI's Triton kernel of mid 2023
# (the repo's benchmarks/benchmark_flash_attention.py imports it), not the 2022 flash_attn_triton.py (see triton_fa1).
A100_FWD_BWD: dict[tuple[str, int, bool], tuple[float, ...]] = {
    ("fa2", 64, False): (132, 153, 162, 171, 175, 176),
    ("fa2", 128, False): (151, 173, 187, 196, 201, 203),
    ("fa2", 64, True): (88, 119, 140, 156, 165, 171),
    ("fa2", 128, True): (99, 133, 155, 173, 182, 189),
    ("fa1", 64, False): (91, 92, 104, 108, 110, 110),
    ("fa1", 128, False): (76, 72, 76, 80, 82, 83),
    ("fa1", 64, True): (58, 70, 77, 87, 92, 97),
    ("fa1", 128, True): (55, 62, 69, 76, 80, 83),
    ("triton", 64, False): (90, 102, 98, 98, 100, 100),
    ("triton", 128, False): (78, 85, 90, 93, 95, 95),
    ("triton", 64, True): (59, 75, 79, 76, 79, 80),
    ("triton", 128, True): (50, 61, 68, 74, 78, 80),
}
# the same, H100 SXM5 80GB: FlashAttention-2 paper Figure 7 (assets/flash2_h100_fwd_bwd_benchmark.png), FlashAttention
# (v1) and FlashAttention-2 only
H100_FWD_BWD: dict[tuple[str, int, bool], tuple[float, ...]] = {
    ("fa2", 64, False): (215, 254, 274, 288, 294, 296),
    ("fa2", 128, False): (248, 294, 320, 326, 335, 338),
    ("fa2", 64, True): (141, 192, 232, 257, 273, 284),
    ("fa2", 128, True): (163, 221, 265, 294, 308, 328),
    ("fa1", 64, False): (157, 159, 161, 161, 166, 168),
    ("fa1", 128, False): (127, 127, 128, 131, 137, 139),
    ("fa1", 64, True): (104, 123, 136, 138, 149, 156),
    ("fa1", 128, True): (98, 109, 108, 126, 135, 137),
}
TRITON_FA1_SLOWER = 1.9  # FA2 is 1.3-2.5× faster than FlashAttention in Triton (FA2 paper, sec. 4.1): the middle


def default_kernel(gpu: GPU) -> str:
    """Today's stack when the user does not say: FlashAttention-2 on A100 (FA3 is Hopper-only), cuDNN's fused
    attention elsewhere (TransformerEngine's default backend on Hopper and Blackwell, as NeMo and
    Megatron-core run it)."""
    return "fa2" if gpu.name.startswith("a100") else "cudnn"


def _curve(kernel: str, head_dim: int, direction: str, causal: bool) -> tuple[float, ...]:
    """H100 TFLOP/s at LENGTHS; causal backward from the forward's causal ratio (see above)."""
    if direction == "backward" and causal:
        back = H100_ATTENTION[(kernel, head_dim, "backward", False)]
        on, off = H100_ATTENTION[(kernel, head_dim, "forward", True)], H100_ATTENTION[(kernel, head_dim, "forward",
                                                                                        False)]
        return tuple(b * c / n for b, c, n in zip(back, on, off))
    return H100_ATTENTION[(kernel, head_dim, direction, causal)]


def _interpolate(curve: tuple[float, ...], length: float) -> float:
    if length <= LENGTHS[0]:
        return curve[0]
    if length >= LENGTHS[-1]:
        return curve[-1]
    i = bisect.bisect_right(LENGTHS, length) - 1
    x = (math.log(length) - math.log(LENGTHS[i])) / (math.log(LENGTHS[i + 1]) - math.log(LENGTHS[i]))
    return curve[i] + x * (curve[i + 1] - curve[i])


def _split(fwd_bwd: float, dim: int, direction: str, causal: bool, length: float) -> float:
    """One direction's rate from a forward + backward one (3.5 forward FLOPs over the time of both), the forward
    running `k` times the backward's rate, k as FlashAttention-2's on H100 (FA3 paper) at the same point."""
    k = (_interpolate(_curve("fa2", dim, "forward", causal), length)
         / _interpolate(_curve("fa2", dim, "backward", causal), length))
    backward = fwd_bwd * (1 / k + 2.5) / 3.5  # 1/f + 2.5/b = 3.5/fwd_bwd with f = k·b
    return k * backward if direction == "forward" else backward


def attention_rate(gpu: GPU, kernel: str, head_dim: int, direction: str, causal: bool, length: float) -> float:
    """FLOP/s (in the kernels' own count, see above) that `kernel` sustains on `gpu`."""
    if kernel == "auto":
        kernel = default_kernel(gpu)
    dim = 64 if head_dim <= 64 else 128
    ampere = gpu.name.startswith("a100")
    if ampere and kernel in ("fa3", "cudnn"):
        kernel = "fa2"  # FA3 is Hopper-only; cuDNN's fused flash attention needs sm90 for these rates
    table = "fa2" if kernel == "triton_fa1" else kernel
    slower = TRITON_FA1_SLOWER if kernel == "triton_fa1" else 1.0
    if ampere:  # FA2 paper, Figure 4, split into forward and backward
        rate = _split(_interpolate(A100_FWD_BWD[(table, dim, causal)], length), dim, direction, causal, length)
        return rate / slower * 1e12 * gpu.sustained_over_burst
    base = "fa2" if kernel in ("triton_fa1", "fa1") else kernel
    if gpu.name == "b200":
        base = "cudnn"
    rate = _interpolate(_curve(base, dim, direction, causal), length) * gpu.attention_vs_h100
    if kernel == "fa1":  # its measured fraction of FA2 on H100 (FA2 paper, Figure 7)
        rate *= (_interpolate(H100_FWD_BWD[("fa1", dim, causal)], length)
                 / _interpolate(H100_FWD_BWD[("fa2", dim, causal)], length))
    return rate / slower * 1e12 * gpu.sustained_over_burst


def attention_time(gpu: GPU, kernel: str, queries: float, context: float, head_dim: int, heads: float,
                   causal: bool = True) -> tuple[float, float]:
    """Seconds of fused attention forward and backward for `queries` query rows of `heads` heads over
    `context` keys: the kernel's FLOPs (causal-halved) at its rate for the context's length."""
    forward_flops = 4 * queries * context * head_dim * heads * (0.5 if causal else 1.0)
    forward = forward_flops / attention_rate(gpu, kernel, head_dim, "forward", causal, context)
    backward = 2.5 * forward_flops / attention_rate(gpu, kernel, head_dim, "backward", causal, context)
    return forward, backward
