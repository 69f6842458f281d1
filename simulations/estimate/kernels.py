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
- A100 SXM4: Dao, "FlashAttention-2", arXiv:2307.08691, sec. 4.1: FlashAttention-2 reaches "up to 73 % of
  the theoretical maximum FLOPs/s" forward and "up to 63 %" backward, and is "1.3-2.5× faster than
  FlashAttention in Triton". The per-length, per-head-dim and causal shape of its curves is not transcribed
  here: the A100 curves are the H100 FlashAttention-2 curves scaled so that their best point (non-causal,
  head dim 128, 16k) is 73 % (forward) and 63 % (backward) of A100's 312 TFLOP/s (assumption: the same
  mma.sync kernel on both GPUs, FA2 not using Hopper's instructions).
- triton_fa1: the 2022 Triton FlashAttention (flash_attn_triton.py), which LLM Foundry's `attn_impl: triton`
  ran in its 2023 benchmarks: FlashAttention-2's rates divided by 1.9, the middle of the paper's 1.3-2.5×;
- fa1: FlashAttention (v1, CUDA), FlashAttention-2's rates divided by 2.35, the middle of the paper's "1.7-3.0×
  faster than FlashAttention".
Assumptions, stated so that they can be checked:
- causal backward (not in Figure 6) runs at the non-causal backward rate times the forward's causal /
  non-causal ratio at the same length;
- other head dimensions take the nearest published one (≤ 64: 64; otherwise 128);
- H200 runs as H100 (same GH100 compute); B200 (no published FA3, which is Hopper-only) runs cuDNN at H100
  cuDNN's fraction of peak;
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
H100_PEAK = 989.0
A100_PEAK = 312.0
FA2_A100_BEST = {"forward": 0.73, "backward": 0.63}  # of peak (FA2 paper, sec. 4.1)
TRITON_FA1_SLOWER = 1.9  # FA2 is 1.3-2.5× faster than FlashAttention in Triton (FA2 paper): the middle
FA1_SLOWER = 2.35  # FA2 is 1.7-3.0× faster than FlashAttention (FA2 paper, sec. 4.1): the middle


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


def attention_rate(gpu: GPU, kernel: str, head_dim: int, direction: str, causal: bool, length: float) -> float:
    """FLOP/s (in the kernels' own count, see above) that `kernel` sustains on `gpu`."""
    if kernel == "auto":
        kernel = default_kernel(gpu)
    dim = 64 if head_dim <= 64 else 128
    ampere = gpu.name.startswith("a100")
    if ampere and kernel in ("fa3", "cudnn"):
        kernel = "fa2"  # FA3 is Hopper-only; cuDNN's fused flash attention needs sm90 for these rates
    base = "fa2" if kernel in ("triton_fa1", "fa1") else kernel
    if gpu.name == "b200":
        base = "cudnn"
    rate = _interpolate(_curve(base, dim, direction, causal), length)
    if ampere:  # FA2's H100 curve scaled to its published best on A100
        best = _curve("fa2", 128, direction, False)[-1]
        rate *= FA2_A100_BEST[direction] * A100_PEAK / best
    elif gpu.name == "b200":
        rate *= gpu.peak_flops / 1e12 / H100_PEAK
    if kernel == "triton_fa1":
        rate /= TRITON_FA1_SLOWER
    elif kernel == "fa1":
        rate /= FA1_SLOWER
    return rate * 1e12 * gpu.sustained_over_burst


def attention_time(gpu: GPU, kernel: str, queries: float, context: float, head_dim: int, heads: float,
                   causal: bool = True) -> tuple[float, float]:
    """Seconds of fused attention forward and backward for `queries` query rows of `heads` heads over
    `context` keys: the kernel's FLOPs (causal-halved) at its rate for the context's length."""
    forward_flops = 4 * queries * context * head_dim * heads * (0.5 if causal else 1.0)
    forward = forward_flops / attention_rate(gpu, kernel, head_dim, "forward", causal, context)
    backward = 2.5 * forward_flops / attention_rate(gpu, kernel, head_dim, "backward", causal, context)
    return forward, backward
