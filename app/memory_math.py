"""The memory figures the "why distributed training" slides quote, for Jinja (`mem` in slides).

The formulas themselves live once, in simulations.formulas (REFERENCE.md: ZeRO paper, the
Ultra-Scale Playbook, Korthikanti et al.); this module only names what the slides need and
formats it. The slides call these at render time, so no number on them is typed by hand.
"""

from app.calculator import CalculatorParams, calculate
from simulations import formulas, hardware

GB = formulas.GB  # decimal gigabytes, as spec sheets and the Playbook's tables count

# What one GPU holds, in GB, as the slides name them (the catalog: simulations.hardware).
GPU_MEMORY_GB = {name: round(hardware.gpu(name).hbm_bytes / GB) for name in ("H100", "H200", "B200")}

# The Playbook's memory table: model sizes (nominal Ψ) whose 16Ψ the memory-wall slide shows.
MODEL_SIZES = {name: shape.params for name, shape in formulas.PRESETS.items()}

# A Llama-2-7B shape (h 4096, 32 layers, 32 heads), for the activation figures.
LLAMA_7B = formulas.PRESETS["7B"]


def model_state_bytes(params: float, ranks: int = 1, zero_stage: int = 0) -> dict[str, float]:
    """Bytes per rank of bf16 params, bf16 grads and fp32 Adam states; ZeRO stage 1-3 shard them."""
    by_role = formulas.model_state_bytes(params, "bf16", zero_stage=zero_stage, ranks=ranks)
    return {"params": by_role["parameters"], "grads": by_role["gradients"], "optimizer": by_role["optimizer"]}


def activation_bytes(
    seq: int, micro_batch: int, hidden: int, heads: int, layers: int, recompute: str = "none"
) -> float:
    """Activation bytes of all layers in 16-bit, one GPU, no tensor or pipeline parallelism."""
    return formulas.activation_bytes(seq, micro_batch, hidden, heads, layers, recompute=recompute)


def zero_run_params(width: int, depth: int) -> int:
    """Ψ of the MLP the live ZeRO scenario trains at this width and depth (its own input and output sizes)."""
    from simulations.scenarios.zero import IN_FEATURES, OUT_FEATURES  # the scenario imports torch: only when asked

    return formulas.mlp_params(IN_FEATURES, width, depth, OUT_FEATURES)


def calculator(params: dict) -> dict:
    """What the memory calculator (GET /api/calculator, and the page's copy of it) shows for `params`,
    its own defaults filling the rest: a slide's note quotes the figures the calculator beside it shows."""
    return calculate(CalculatorParams(**params)).model_dump()


gpus_to_hold = formulas.gpus_to_hold


def gb(n_bytes: float, digits: int = 0) -> str:
    """Format bytes as decimal gigabytes, e.g. 14000000000 -> '14 GB'."""
    return f"{n_bytes / GB:,.{digits}f} GB"
