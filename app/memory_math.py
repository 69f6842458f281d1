"""The analytic memory figures the "why distributed training" slides quote.

Formulas are the ones in ../shared/REFERENCE.md (ZeRO paper arXiv 1910.02054, the
Ultra-Scale Playbook, Korthikanti et al. arXiv 2205.05198). The slides call these at
render time so no number on them is typed by hand.
"""

from dataclasses import dataclass
from math import ceil

GB = 10**9  # the Playbook's tables and GPU spec sheets count decimal gigabytes

# Mixed precision with Adam: bf16 params, bf16 grads, fp32 master params + momentum + variance.
BYTES_PER_PARAM = {"params": 2, "grads": 2, "optimizer": 12}

GPU_MEMORY_GB = {"H100": 80, "H200": 141}


def model_state_bytes(params: float, ranks: int = 1, zero_stage: int = 0) -> dict[str, float]:
    """Bytes per rank for parameters, gradients and Adam states (REFERENCE.md, memory per rank).

    zero_stage 0 is plain data parallel (16 bytes per parameter on every rank); stages 1, 2 and 3
    shard the optimizer states, then the gradients, then the parameters over `ranks`.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0..3, got {zero_stage}")
    sharded = {"optimizer": zero_stage >= 1, "grads": zero_stage >= 2, "params": zero_stage >= 3}
    return {
        role: per_param * params / (ranks if sharded[role] else 1)
        for role, per_param in BYTES_PER_PARAM.items()
    }


def activation_bytes(
    seq: int, micro_batch: int, hidden: int, heads: int, layers: int, recompute: str = "none"
) -> float:
    """Activation bytes of a transformer's layers in 16-bit, no tensor parallelism.

    Per layer s·b·h·(34 + 5·a·s/h) without recomputation; selective recomputation drops the
    attention-score term 5·a·s/h; full recomputation keeps only each layer's input, 2·s·b·h.
    """
    sbh = seq * micro_batch * hidden
    per_layer = {
        "none": sbh * (34 + 5 * heads * seq / hidden),
        "selective": sbh * 34,
        "full": 2 * sbh,
    }[recompute]
    return per_layer * layers


def transformer_params(hidden: int, vocab: int, layers: int) -> int:
    """Parameter count of a decoder-only transformer: h·v + L·(12h² + 13h) + 2h (Playbook)."""
    return hidden * vocab + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden


@dataclass(frozen=True)
class ModelShape:
    """A Llama-2-7B-like shape, used for the activation figures."""

    name: str
    params: float
    hidden: int
    heads: int
    layers: int
    vocab: int


LLAMA_7B = ModelShape(name="7B", params=7e9, hidden=4096, heads=32, layers=32, vocab=32000)

# The Playbook's memory table: model sizes whose 16Ψ the memory-wall slide shows.
MODEL_SIZES = {"1B": 1e9, "7B": 7e9, "70B": 70e9, "405B": 405e9}


def gpus_to_hold(total_bytes: float, gpu: str = "H100") -> int:
    """How many GPUs of this kind it takes just to hold `total_bytes`, if it could be split evenly."""
    return ceil(total_bytes / (GPU_MEMORY_GB[gpu] * GB))


def gb(n_bytes: float, digits: int = 0) -> str:
    """Format bytes as decimal gigabytes, e.g. 14000000000 -> '14 GB'."""
    return f"{n_bytes / GB:,.{digits}f} GB"
