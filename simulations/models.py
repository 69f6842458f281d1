"""The small models and data the scenarios train: the same seed gives the same model on every rank."""

from __future__ import annotations

import torch
from torch import nn


def mlp(in_features: int, width: int, depth: int, out_features: int, seed: int) -> nn.Sequential:
    """`depth` hidden Linear+ReLU layers, then a Linear head; initialised from `seed`."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    features = in_features
    for _ in range(depth):
        layers += [nn.Linear(features, width), nn.ReLU()]
        features = width
    layers.append(nn.Linear(features, out_features))
    model = nn.Sequential(*layers)
    torch.random.set_rng_state(generator_state)
    return model


def regression_batch(size: int, in_features: int, out_features: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random regression batch: inputs and targets."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(size, in_features, generator=g)
    y = torch.randn(size, out_features, generator=g)
    return x, y


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors])


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.to(torch.float64) - b.to(torch.float64)).abs().max()) if a.numel() else 0.0


FP32_EPS = 2.0 ** -24  # unit round-off of fp32


def fp32_tolerance(reference32: torch.Tensor, reference64: torch.Tensor, terms: int) -> float:
    """How far a correct fp32 computation may land from the fp32 reference, from fp32 round-off.

    A correct run and the reference both round, each about as far from the exact (fp64) value as the
    reference is: 4× the reference's own distance from fp64. Never under terms·ε·max|x|: a sum of
    `terms` values added in another order moves by up to terms·ε·Σ|values| (Higham, "Accuracy and
    Stability of Numerical Algorithms", section 4.2).
    """
    own = max_abs_diff(reference32, reference64)
    return max(4 * own, terms * FP32_EPS * float(reference64.abs().max()))


def fp32_reorder_bound(abs_sum: torch.Tensor | float, terms: int) -> torch.Tensor | float:
    """How far two fp32 sums of the same `terms` values, added in different orders, may lie apart.

    Each lies within (terms − 1)·ε·Σ|values| of the exact sum (Higham, "Accuracy and Stability of Numerical
    Algorithms", section 4.2, to first order), so the two within twice that; `abs_sum` is Σ|values|.
    """
    return 2 * max(terms - 1, 0) * FP32_EPS * abs_sum
