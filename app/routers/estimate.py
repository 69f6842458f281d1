"""Time at scale: one training step of a model on a modelled GPU cluster (simulations.estimate).

GET /api/estimate?model=llama3-70b&gpu=h100-80gb&gpus=1024&tp=8&pp=4&schedule=interleaved_1f1b
    &virtual_stages=auto&micro_batch=auto&global_batch=1024&recompute=selective
GET /api/estimate/search?model=...&gpus=...   the fastest layouts that fit, ranked
POST /api/estimate  {"hardware_profile": {...}, "model": ..., ...}   the same estimate on a calibrated machine

A hardware profile (`distdeck calibrate`'s JSON, simulations.estimate.profile) travels in the POST body, whole:
it is the user's own file, 10-40 kB of nested figures, too long for a query string (proxies and browsers cap URLs
at about 8 kB) and not a name the server could know. In the body it needs no upload folder, no server state and no
clean-up, works the same against a public deck and a local one, and a browser sends it straight from a file input.

Bad input is a 422 naming the field and the constraint, from the field bounds here or from the
estimator's own layout rules (TP divides the heads, GPUs a multiple of TP·PP·CP, ...).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field

from app import estimate_math
from simulations import estimate as est
from simulations.estimate import profile
from simulations.estimate.kernels import AttentionKernel
from simulations.estimate.layout import CPComm, CrossEntropy, Execution, FsdpVersion, OptimizerDtype, Precision, Recompute, Schedule
from simulations.estimate.stacks import Stack
from simulations.estimate.timeline import span_count

router = APIRouter(prefix="/api", tags=["estimate"])

MAX_SPANS = 20_000

Auto = Literal["auto"] | Annotated[int, Field(ge=1, le=4096)]
# The choices are the estimator's own catalogs, so a preset or GPU added there is offered here too.
Preset = Literal[tuple(est.MODELS)]
PresetOrCustom = Literal[(*est.MODELS, "custom")]
GpuName = Literal[tuple(est.GPUS)]


class EstimateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: PresetOrCustom = "llama3-70b"
    layers: int | None = Field(None, ge=1, le=1024)
    hidden: int | None = Field(None, ge=64, le=131072)
    heads: int | None = Field(None, ge=1, le=1024)
    kv_heads: int | None = Field(None, ge=1, le=1024)
    ffn_hidden: int | None = Field(None, ge=1, le=524288)
    vocab: int | None = Field(None, ge=1, le=1_048_576)
    seq_len: int | None = Field(None, ge=1, le=1_048_576)
    experts: int | None = Field(None, ge=0, le=1024, description="FFN experts per layer (mixture of experts); 0: dense")
    top_k: int | None = Field(None, ge=1, le=64, description="Experts each token is routed to")
    gpu: GpuName = "h100-80gb"
    gpus: int = Field(1024, ge=1, le=131072)
    gpus_per_node: int = Field(8, ge=1, le=72)
    tp: int = Field(8, ge=1, le=72)
    pp: int = Field(1, ge=1, le=1024)
    cp: int = Field(1, ge=1, le=1024)
    ep: int = Field(1, ge=1, le=1024)
    zero_stage: int = Field(1, ge=0, le=3)
    cp_comm: CPComm = Field(
        "ring", description="Context parallelism: ring attention, Ulysses all-to-all, or Llama 3's K/V all-gather")
    zero_shards: int | None = Field(None, ge=1, le=131072, description="Hybrid sharding (HSDP, ZeRO-3 only): shard "
                                    "over groups of this many data-parallel ranks, replicate across them; "
                                    "default: shard over all")
    schedule: Schedule = "1f1b"
    virtual_stages: Auto = "auto"
    micro_batch: Auto = "auto"
    global_batch: int = Field(1024, ge=1, le=10_000_000)
    recompute: Recompute = "selective"
    sequence_parallel: bool = Field(True, description="Sequence parallelism with TP (Korthikanti et al.)")
    flash_attention: bool | None = Field(None, description="Fused attention; default: what the preset's paper ran")
    gated_mlp: bool | None = Field(None, description="SwiGLU MLP (three matrices); default: the preset's, GPT's "
                                                     "two-matrix MLP for custom")
    dropout: bool | None = Field(None, description="Dropout after attention and MLP; default: the preset's, none "
                                                   "for custom")
    overlap_grad_reduce: bool = Field(True, description="DP gradient reduction overlaps backward, bucket by bucket")
    overlap_param_gather: bool = Field(True, description="ZeRO-1/2 parameter all-gather behind the next forward")
    overlap_tp_comm: bool = Field(True, description="TP's backward collectives beside the weight-gradient GEMMs")
    overlap_p2p_comm: bool = Field(True, description="Pipeline sends beside compute (False: blocking, as "
                                                      "Megatron-LM before 2023)")
    grad_accumulation_fusion: bool = Field(True, description="Weight gradients accumulate inside the GEMM")
    grad_reduce_dtype: Literal["bf16", "fp32"] = Field("bf16", description="Gradients on the wire")
    attention_kernel: AttentionKernel = Field("auto", description="Fused attention kernel: auto (FlashAttention-2 on "
                                          "A100, cuDNN on H100/H200/B200), fa2, fa3, cudnn, triton_fa1 or fa1")
    precision: Precision = Field("bf16", description="The layers' matmuls: bf16, or fp8 (TransformerEngine's "
                                 "per-tensor scaling; H100, H200, B200)")
    recompute_every: int = Field(1, ge=1, le=1024, description="With recompute full: recompute one layer in every "
                                 "N, the others keep their activations (partial activation checkpointing)")
    network_gbps: float | None = Field(None, ge=1, le=1e6, description="Network bandwidth leaving one node, all its "
                                       "NICs together, Gb/s; default: the GPU's DGX node")
    optimizer_dtype: OptimizerDtype = Field("fp32", description="Adam's state: fp32 master weights, m and "
                                                     "v (12 bytes a parameter), or bf16 (Apex's distributed Adam: 6)")
    cross_entropy: CrossEntropy | None = Field(None, description="The loss: fp32 (Megatron-LM's: an fp32 softmax "
                                                    "beside the bf16 logits), fused (flash-attn's kernel) or torch "
                                                    "(torch's cross_entropy on fp32 logits, eager, as torchtitan) or "
                                                    "loss_parallel (the same under torch's loss_parallel, with TP) or "
                                                    "hf (Transformers' ForCausalLMLoss); default: the stack's")
    execution: Execution = Field("auto", description="How kernels reach the GPU: eager (PyTorch ops, one kernel "
                                 "each, foreach AdamW: FSDP stacks), fused (Megatron-core / TransformerEngine), "
                                 "compiled (torch.compile or CUDA graphs: no per-kernel CPU cost); auto: eager with "
                                 "ZeRO-3, fused otherwise")
    fsdp: FsdpVersion = Field("fsdp2", description="Which PyTorch FSDP prepares a ZeRO-2/3 gradient for its "
                              "reduce-scatter: fsdp2 (fully_shard: a copy-in, NCCL averages) or fsdp1 "
                              "(FullyShardedDataParallel: flat gradient, cast, pre-divide)")
    fp8_param_gather: bool = Field(False, description="With precision fp8: ZeRO's parameter all-gathers move the "
                                   "layers' weights in FP8 (torchao's FSDP float8 all-gather, Megatron-LM's "
                                   "--fp8-param-gather)")
    stack: Stack = Field("auto", description="The training code: auto (Megatron-core fused, or eager PyTorch FSDP "
                         "with ZeRO-3), hf (Transformers' Llama-family model, eager, op by op), torchtitan, megatron")
    amp: bool = Field(False, description="With stack hf: torch.autocast(bf16) over fp32 weights and torch.optim.AdamW; "
                      "false: bf16 weights with fp32 master weights")
    torch_compile: bool = Field(False, description="torch.compile of the model: inductor's fused element-wise kernels")


class EstimateQuery(EstimateParams):
    timeline: bool = Field(False, description="Also return the step's spans per pipeline rank (at most "
                                              f"{MAX_SPANS} spans: per stage, or per layer without stages)")


class Span(BaseModel):
    stream: Literal["compute", "comm"]
    rank: int = Field(description="Pipeline rank (stage index without virtual stages)")
    kind: str = Field(description="F, B, W, opt, step (a DiLoCo inner step) or wait (for the slowest GPU) (compute); "
                                  "dp, tp, zero3, cp, ep or "
                                  "outer (DiLoCo's pseudo-gradient all-reduce) (communication)")
    stage: int
    mb: int = Field(description="Micro-batch; -1 for the step's DP reduction and the optimizer step")
    layer: int | None = Field(None, description="Layer, in a timeline without pipeline stages (-1: none, "
                                                "the model's layer count: the output layer and loss)")
    start: float = Field(description="Seconds from the start of the step")
    end: float


class Validation(BaseModel):
    runs: int = Field(description="Published runs of this kind the estimator was compared with")
    scope: str
    median_error: float = Field(description="Median |predicted / published − 1|")
    worst_error: float
    optimistic_share: float = Field(description="Share of those runs the estimate was too fast for")
    tables: list[str]
    summary: str = Field(description="All of it in words: \"within ±x % (median y %) on N published ... runs on "
                                     "GPU; too fast on z % of them\", as the CLI and the projected view print it")


class Role(BaseModel):
    role: str
    bytes: float


class Fit(BaseModel):
    margin_bytes: float = Field(description="What a process can allocate less the peak and the allocator's "
                                            "fragmentation measured in LLM training (15 %): positive to spare, "
                                            "negative missing")
    optimistic_margin_bytes: float = Field(description="The same with 5 % fragmentation")
    verdict: str = Field(description="\"fits with X GB to spare\", \"may not fit: ...\" or \"does not fit: Y GB "
                                     "missing\", with the peak's moment and its largest roles")
    peak: str = Field(description="The moment of the step the memory describes: step (every role at once), backward "
                                  "start, end of backward or optimizer step")
    fragmentation_bytes: float
    reserved_bytes: float = Field(description="CUDA context, cuBLAS workspaces: kept out of what can be allocated")
    dominant: list[Role] = Field(description="The roles held at the peak, largest first")


class EstimateResult(BaseModel):
    model: str
    gpu: str
    gpus: int
    gpus_per_node: int
    tp: int
    pp: int
    cp: int
    ep: int
    dp: int
    zero_stage: int
    cp_comm: str
    zero_shards: int | None
    schedule: str
    recompute: str
    attention_kernel: str = Field(description="The attention kernel timed (auto resolved), or unfused")
    precision: str
    execution: str = Field(description="The execution timed (auto resolved): eager, fused or compiled")
    fsdp: str = Field(description="The FSDP whose gradient passes are timed (ZeRO-2/3): fsdp2 or fsdp1")
    fp8_param_gather: bool = Field(description="ZeRO's parameter all-gathers in FP8 (the layers' weights)")
    network_gbps: float = Field(description="Network bandwidth leaving one node, Gb/s")
    global_batch: int
    micro_batch: int = Field(description="Sequences per micro-batch (chosen when auto)")
    virtual_stages: int = Field(description="Stages per pipeline rank (chosen when auto)")
    micro_batches: int
    step_time_s: float
    tokens_per_s: float
    model_tflops_per_gpu: float
    mfu: float = Field(description="Model FLOPs utilization: model FLOPs per second / (GPUs × dense bf16 peak)")
    bubble_fraction: float
    exposed_comm_s: float = Field(description="Communication on the critical path (not hidden behind compute)")
    exposed_comm_by_kind_s: dict[str, float]
    comm_total_s: dict[str, float]
    comm_bytes_per_gpu: dict[str, float] = Field(description="Bytes one GPU sends per step, by kind (ring counts)")
    compute_s: float
    optimizer_s: float
    straggler_s: float = Field(description="What the step waits for its slowest GPU (GPU-to-GPU speed spread, growing "
                                           "with the GPUs that synchronise)")
    memory_per_gpu_bytes: dict[str, float] = Field(description="Bytes per GPU by role, and total")
    gpu_memory_bytes: float = Field(description="The datasheet's capacity (80 GB); the device reports more, as its "
                                              "binary figure (81,920 MiB = 85.9 GB on A100 80 GB), which is where "
                                              "usable_memory_bytes starts")
    usable_memory_bytes: float = Field(description="What the step may hold: the device's total less CUDA's reserve, "
                                                   "over 1 + the allocator's fragmentation")
    fits: bool = Field(description="Fits with the caching allocator's least fragmentation (5 %): fit says how safely")
    fit: Fit
    stack: str
    amp: bool
    torch_compile: bool
    validation: Validation = Field(description="How far to trust it: the estimator's error on published runs of this "
                                               "kind (same GPU; data parallelism alone, or TP, PP or CP), from its "
                                               "validation tables")
    timeline: list[Span] | None = None


class ReplayParams(BaseModel):
    model_config = ConfigDict(extra="allow")  # the live scenario's own parameters ride along

    scenario: Literal[estimate_math.REPLAYED]
    model: Preset = "llama3-70b"
    gpu: GpuName = "h100-80gb"
    gpus: int | None = Field(None, ge=1, le=131072, description="GPUs of the modelled cluster; the run is scaled "
                                                              "by data parallelism (default: the run's own size)")


class SearchResult(BaseModel):
    layouts: list[EstimateResult] = Field(description="Fastest first; empty when no layout fits")


class ProfileEstimateBody(EstimateQuery):
    hardware_profile: dict = Field(description="A hardware profile written by `distdeck calibrate` (the file's "
                                               "JSON): the estimate runs on its measured rates instead of the "
                                               "catalog GPU's datasheet figures (`gpu` is ignored)")


def _invalid(p: EstimateParams, exc: est.LayoutError, where: str = "query") -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": (where, exc.field), "msg": exc.message,
                                    "input": getattr(p, exc.field, None)}])


def _build(p: EstimateParams, check_layout: bool = True, hardware: est.GPU | None = None, where: str = "query"):
    try:
        return est.build(**p.model_dump(exclude={"timeline", "hardware_profile"}), check_layout=check_layout,
                         hardware=hardware)
    except est.LayoutError as exc:
        raise _invalid(p, exc, where) from None


@router.get("/estimate", response_model=EstimateResult,
            summary="Step time, throughput, MFU and memory per GPU of a layout on a modelled cluster")
def estimate(params: Annotated[EstimateQuery, Query()]) -> EstimateResult:
    return _estimate(params, *_build(params))


@router.post("/estimate", response_model=EstimateResult,
             summary="The same estimate on a calibrated machine: its hardware profile in the body")
def estimate_on_profile(body: ProfileEstimateBody) -> EstimateResult:
    try:
        hardware = profile.to_gpu(profile.from_dict(body.hardware_profile))
    except profile.ProfileError as exc:
        path = tuple(part for part in re.split(r"[.\[\]]+", exc.field) if part)
        raise RequestValidationError([{"type": "value_error", "loc": ("body", "hardware_profile", *path),
                                       "msg": exc.message, "input": None}]) from None
    return _estimate(body, *_build(body, hardware=hardware, where="body"), where="body")


def _estimate(params: EstimateQuery, model, cluster, layout, where: str = "query") -> EstimateResult:
    try:  # `auto` can still find no micro-batch size the schedule accepts
        result = est.estimate(model, cluster, layout)
    except est.LayoutError as exc:
        raise _invalid(params, exc, where) from None
    timeline = None
    if params.timeline:
        actions = span_count(result)
        if actions > MAX_SPANS:
            raise RequestValidationError([{"type": "value_error", "loc": (where, "timeline"), "input": True,
                                           "msg": f"a timeline of {actions} spans is more than {MAX_SPANS}: "
                                                  "fewer micro-batches or virtual stages"}])
        result = est.estimate(model, cluster, result.layout, keep_spans=True)
        timeline = [Span(**span) for span in result.spans]
    return EstimateResult(**result.as_dict(), timeline=timeline)


@router.get("/estimate/search", response_model=SearchResult,
            summary="The fastest layouts that fit (TP, PP, CP, EP, ZeRO or HSDP, schedule, micro-batch), ranked")
def search(params: Annotated[EstimateParams, Query()]) -> SearchResult:
    model, cluster, layout = _build(params, check_layout=False)  # the search picks TP, PP, CP, EP and the sharding itself
    return SearchResult(layouts=[EstimateResult(**e.as_dict()) for e in est.search(model, cluster, layout)])


@router.get("/estimate/replay", response_model=EstimateResult,
            summary="A live run's structure on a modelled cluster: its schedule re-timed with a preset model")
def replay(params: Annotated[ReplayParams, Query()]) -> EstimateResult:
    live = {k: v for k, v in (params.model_extra or {}).items()}
    try:
        result = estimate_math.replay(params.scenario, live, params.model, params.gpu, params.gpus)
    except (est.LayoutError, ValueError) as exc:
        field = getattr(exc, "field", "scenario")
        raise RequestValidationError([{"type": "value_error", "loc": ("query", field), "msg": str(exc),
                                       "input": live}]) from None
    return EstimateResult(**result.as_dict(), timeline=[Span(**span) for span in result.spans])
