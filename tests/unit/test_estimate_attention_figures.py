"""The attention kernels' A100 and H100 forward + backward rates are the FlashAttention-2 paper's printed bars
(arXiv:2307.08691, Figure 4: A100 80GB; Figure 7: H100), typed here from the figures, not read from kernels.py."""

from __future__ import annotations

import pytest

from simulations.estimate import GPUS
from simulations.estimate.kernels import attention_time

A100, A100_40, H100 = GPUS["a100-80gb"], GPUS["a100-40gb"], GPUS["h100-80gb"]
A100_SUSTAINED_OVER_BURST = 698.6 / 823.9  # hardware.py: A100 sustains H200's MSMF / MAMF fraction


def fwd_bwd_rate(gpu, kernel, length, head_dim, causal):
    """Forward + backward FLOP/s as the paper counts them: 3.5 forward FLOPs (causal-halved) over both times."""
    heads = 2048 // head_dim
    forward, backward = attention_time(gpu, kernel, length, length, head_dim, heads, causal=causal)
    flops = 4 * length * length * head_dim * heads * (0.5 if causal else 1.0)
    return 3.5 * flops / (forward + backward)


@pytest.mark.parametrize("kernel, length, head_dim, causal, printed", [
    ("fa2", 16384, 128, True, 189), ("fa2", 2048, 64, True, 140), ("fa2", 512, 64, False, 132),
    ("fa2", 8192, 128, False, 201), ("fa1", 4096, 64, True, 87), ("fa1", 16384, 128, False, 83),
])
def test_a100_forward_and_backward_at_figure_4(kernel, length, head_dim, causal, printed):
    for gpu in (A100, A100_40):
        rate = fwd_bwd_rate(gpu, kernel, length, head_dim, causal)
        assert rate == pytest.approx(printed * 1e12 * A100_SUSTAINED_OVER_BURST, rel=1e-9)


def test_a100_forward_runs_faster_than_its_backward():
    """The paper's A100 bests: "up to 73 %" of peak forward, "up to 63 %" backward (sec. 4.1)."""
    forward, backward = attention_time(A100, "fa2", 16384, 16384, 128, 16, causal=False)
    assert 1.1 < backward / (2.5 * forward) < 1.2  # forward rate / backward rate (backward does 2.5× the FLOPs)


def test_fa1_on_h100_is_figure_7s_fraction_of_fa2():
    """Figure 7, causal, head dim 128, 16k: FlashAttention 137 TFLOP/s against FlashAttention-2's 328."""
    ratio = fwd_bwd_rate(H100, "fa1", 16384, 128, True) / fwd_bwd_rate(H100, "fa2", 16384, 128, True)
    assert ratio == pytest.approx(137 / 328, rel=1e-9)


def test_longer_than_the_figures_takes_the_16k_rate():
    assert fwd_bwd_rate(A100, "fa2", 65536, 64, True) == pytest.approx(fwd_bwd_rate(A100, "fa2", 16384, 64, True))
