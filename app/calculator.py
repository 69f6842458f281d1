"""The memory calculator: bytes per GPU by role for a model, a precision, a ZeRO stage and a 3D layout.

GET /api/calculator?model=7B&precision=bf16&zero_stage=3&gpus=8&tp=1&pp=1
    &activation_checkpointing=false&seq_len=4096&micro_batch=1

Every figure comes from simulations.formulas, the same functions the `zero` scenario's
summary checks its measured bytes against (REFERENCE.md's formulas). Bad input is a 422
naming the field and its bound.

Owns: CalculatorParams (the inputs and their bounds), CalculatorResult and calculate. No HTTP: the route is
app/routers/calculator.py, and the slides quote the same figures (app.memory_math.calculator). Imports
simulations only.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulations import formulas, hardware

CUSTOM_FIELDS = ("hidden", "layers", "heads", "vocab")


class CalculatorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: Literal["1B", "7B", "70B", "405B", "custom"] = Field("7B", description="Preset size, or custom")
    hidden: int | None = Field(None, ge=64, le=65536, description="Hidden size h (custom model)")
    layers: int | None = Field(None, ge=1, le=1024, description="Transformer layers L (custom model)")
    heads: int | None = Field(None, ge=1, le=1024, description="Attention heads a (custom model)")
    vocab: int | None = Field(None, ge=1, le=1_048_576, description="Vocabulary size v (custom model)")
    psi: int | None = Field(None, ge=1, le=10**13, description="Parameter count Ψ (custom model without "
                            "a transformer shape: model states only, e.g. the small MLP a live run trains)")
    precision: Literal["bf16", "fp32"] = "bf16"
    zero_stage: int = Field(0, ge=0, le=3, description="ZeRO stage over the data-parallel ranks")
    gpus: int = Field(8, ge=1, le=131072)
    tp: int = Field(1, ge=1, le=64, description="Tensor-parallel degree")
    pp: int = Field(1, ge=1, le=256, description="Pipeline-parallel degree")
    activation_checkpointing: bool = False
    # FlashAttention (every Llama-class run) never stores the a·s² attention scores (Ultra-Scale Playbook).
    flash_attention: bool = Field(True, description="Attention by FlashAttention: no stored score matrices")
    cpu_offload: bool = False
    seq_len: int = Field(4096, ge=1, le=1_048_576)
    micro_batch: int = Field(1, ge=1, le=1024)

    @model_validator(mode="after")
    def _consistent(self) -> "CalculatorParams":
        if self.gpus % (self.tp * self.pp):
            raise ValueError(f"gpus must be a multiple of tp·pp = {self.tp * self.pp}, got gpus = {self.gpus}")
        if self.model == "custom":
            missing = [name for name in CUSTOM_FIELDS if getattr(self, name) is None]
            if missing and self.psi is None:
                raise ValueError(f"model=custom needs psi, or all of hidden, layers, heads, vocab "
                                 f"(missing {', '.join(missing)})")
        return self


class Capacity(BaseModel):
    name: str
    bytes: int
    fits: bool


class CalculatorResult(BaseModel):
    model: str
    psi: float = Field(description="Parameters Ψ")
    hidden: int
    layers: int
    heads: int
    vocab: int
    dp: int = Field(description="Data-parallel degree gpus/(tp·pp): the ranks ZeRO shards over")
    per_gpu: dict[str, float] = Field(description="Bytes per GPU by role")
    host_per_gpu: float = Field(description="Host bytes per GPU holding the offloaded optimizer")
    total: float
    capacities: list[Capacity]
    formula: str


def calculate(p: CalculatorParams) -> CalculatorResult:
    if p.model == "custom" and p.psi is not None and p.hidden is None:
        # Model states only: no transformer shape, so no activation formula.
        shape = formulas.ModelShape("custom", p.psi, hidden=0, layers=0, heads=0, vocab=0)
        psi = float(p.psi)
    elif p.model == "custom":
        shape = formulas.ModelShape("custom", 0, hidden=p.hidden, layers=p.layers, heads=p.heads, vocab=p.vocab)
        psi = float(p.psi or formulas.transformer_params(p.hidden, p.layers, p.vocab))
    else:
        shape = formulas.PRESETS[p.model]
        psi = shape.params
    per_gpu = formulas.per_gpu_memory(psi, shape, precision=p.precision, zero_stage=p.zero_stage, gpus=p.gpus,
                                      tp=p.tp, pp=p.pp, activation_checkpointing=p.activation_checkpointing,
                                      seq_len=p.seq_len, micro_batch=p.micro_batch, cpu_offload=p.cpu_offload,
                                      flash_attention=p.flash_attention)
    dp = p.gpus // (p.tp * p.pp)
    total = sum(per_gpu.values())
    sharded = formulas.sharded_roles(p.zero_stage)
    k = formulas.bytes_per_parameter(p.precision)
    terms = [f"{k[role]}Ψ'" + (f"/{dp}" if role in sharded else "") for role in formulas.MODEL_STATE_ROLES
             if not (role == "optimizer" and p.cpu_offload)]
    formula = (" + ".join(terms) + f" + activations, Ψ' = Ψ/(tp·pp) = Ψ/{p.tp * p.pp}")
    return CalculatorResult(
        model=shape.name, psi=psi, hidden=shape.hidden, layers=shape.layers, heads=shape.heads, vocab=shape.vocab,
        dp=dp, per_gpu=per_gpu,
        host_per_gpu=formulas.host_bytes(psi / (p.tp * p.pp), p.zero_stage, dp, p.cpu_offload),
        total=total,
        capacities=[Capacity(name=name, bytes=capacity, fits=total <= capacity)
                    for name, capacity in hardware.MEMORY_LINES.items()],
        formula=formula,
    )
