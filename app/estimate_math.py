"""The at-scale figures the conclusion's slides quote, for Jinja (`scale` in slides).

Every time on those slides comes from simulations.estimate: its collectives (ring or tree, NVLink
inside a node, the node's egress across nodes), its GPU catalog and its cost model. This module
only names what the slides ask and formats it; the slides call it at render time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from simulations import estimate as est
from simulations.estimate import collectives
from simulations.estimate.traffic import data_parallel_traffic, wire_bytes

GPU = "h100-80gb"
BF16 = 2


def gpu(name: str = GPU) -> est.GPU:
    return est.GPUS[name]


@dataclass(frozen=True)
class Sync:
    """One data-parallel step's traffic for one GPU: bytes it sends, and how long they take."""

    sent: float  # bytes on the wire, ring algorithm
    seconds: float
    per_node: int  # members of the DP group in one node (8: whole nodes in the ring; 1: one GPU per node)


def dp_sync(psi: float, zero_stage: int, dp: int, stride: int = 1, gpu_name: str = GPU) -> Sync:
    """Bytes and seconds of one step's data-parallel traffic for `psi` parameters per GPU, `dp` replicas
    `stride` GPUs apart (the TP·CP ranks inside them), on a cluster of that GPU: no overlap counted."""
    c = est.cluster(gpu_name, dp * stride)
    group = collectives.place(dp, stride, c.gpus_per_node)
    traffic = data_parallel_traffic(psi, zero_stage, dp, 1, BF16, BF16)
    whole = psi * BF16
    if zero_stage == 0:
        seconds = collectives.all_reduce(whole, group, c)
    else:  # reduce-scatter the gradients; all-gather the parameters (twice a step under ZeRO-3)
        gathers = 2 if zero_stage == 3 else 1
        seconds = collectives.reduce_scatter(whole, group, c) + gathers * collectives.all_gather(whole, group, c)
    return Sync(wire_bytes(traffic, dp), seconds, group.per_node)


def compute_per_token(psi: float, gpu_name: str = GPU) -> float:
    """Seconds one GPU needs for the 6Ψ FLOPs of one token (forward and backward) at the catalog's
    sustained matmul rate: a lower bound on compute."""
    return 6 * psi / gpu(gpu_name).sustained_flops


def tokens_to_hide(sync: Sync, psi: float, gpu_name: str = GPU) -> float:
    """Tokens per replica per step whose compute lasts as long as the step's traffic."""
    return sync.seconds / compute_per_token(psi, gpu_name)


def tp_per_token(hidden: int, layers: int, tp: int, spread: bool, tokens: int = 4096, gpu_name: str = GPU) -> float:
    """Seconds per token of tensor parallelism's 4 all-reduces per layer (2 forward, 2 backward) of a
    `tokens`-token micro-batch, the group inside one node or spread one GPU per node."""
    c = est.cluster(gpu_name, tp * (8 if spread else 1))
    group = collectives.place(tp, 8 if spread else 1, c.gpus_per_node)
    return 4 * layers * collectives.all_reduce(tokens * hidden * BF16, group, c) / tokens


def estimate(model: str, **layout) -> est.Estimate:
    """A full step estimate for the slides (simulations.estimate.build's options)."""
    return est.estimate(*est.build(model, **layout))


def seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    return f"{s:.1f} s"


@lru_cache(maxsize=32)
def ranked(model: str = "llama3-70b", gpu_name: str = GPU, gpus: int = 1024, global_batch: int = 1024,
           seq_len: int | None = None, top: int = 5) -> tuple[dict, ...]:
    """The layout chooser's first answer, rendered into the slide (the same as GET /api/estimate/search)."""
    found = est.search(*est.build(model, gpu=gpu_name, gpus=gpus, global_batch=global_batch, seq_len=seq_len,
                                         check_layout=False),
                       top=top)
    return tuple(e.as_dict() for e in found)


@dataclass(frozen=True)
class Hiding:
    """The DP gradient all-reduce against the backward it overlaps, as micro-batches grow."""

    tokens: tuple[int, ...]  # per GPU per micro-batch
    backward_s: tuple[float, ...]  # one micro-batch's backward on one GPU
    allreduce_s: dict[int, float]  # GPUs per node -> the step's all-reduce (no overlap)
    exposed_s: dict[int, tuple[float, ...]]  # GPUs per node -> what the estimator leaves exposed
    crossover: dict[int, float]  # GPUs per node -> tokens where backward = all-reduce


@lru_cache(maxsize=8)
def hiding(model: str = "llama3-8b", gpus: int = 512, seq_len: int = 2048,
           sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32), placements: tuple[int, ...] = (8, 1),
           accumulation: int = 4, zero_stage: int = 0) -> Hiding:
    """Data parallelism (TP 1, ZeRO `zero_stage` 0 to 2) of `model` on `gpus` H100s, 8 to a node (rings over
    whole nodes, node egress) or 1 to a node (one NIC each), for micro-batches of `sizes` sequences,
    `accumulation` per step. ZeRO-1 sends DDP's bytes (a reduce-scatter and an all-gather for the all-reduce)
    and holds a 1/N slice of Adam's states: Llama 3 8B fits an 80 GB H100 under it, not under DDP."""
    tokens = tuple(b * seq_len for b in sizes)
    backward, allreduce, exposed = [], {}, {}
    for per_node in placements:
        runs = [estimate(model, gpus=gpus, gpus_per_node=per_node, tp=1, zero_stage=zero_stage, micro_batch=b,
                         global_batch=gpus * b * accumulation, seq_len=seq_len) for b in sizes]
        backward = [e.stage_times["backward"] for e in runs]
        allreduce[per_node] = runs[0].comm_total_s["dp"]
        exposed[per_node] = tuple(e.exposed_by_kind["dp"] for e in runs)
    per_token = backward[0] / tokens[0]  # backward time is linear in the tokens
    crossover = {n: allreduce[n] / per_token for n in placements}
    return Hiding(tokens, tuple(backward), allreduce, exposed, crossover)


def log_scale(value: float, low: float, high: float, start: float, end: float) -> float:
    """Pixel position of `value` on a log axis from `low` (at `start`) to `high` (at `end`)."""
    import math

    return start + (math.log(value) - math.log(low)) / (math.log(high) - math.log(low)) * (end - start)


class NoProjection(ValueError):
    """The live scenario has no modelled counterpart (yet)."""


REPLAYED = ("basics", "pipeline", "ddp", "zero", "hsdp", "tensor_parallel", "parallel_3d", "ring_attention", "ulysses",
            "expert_parallel", "diloco", "failures")
# The estimator's field for the live run's own, so that a mapping the modelled cluster cannot take is a 422
# naming the parameter the user set (a Ulysses degree that does not divide the model's heads: world_size).
LIVE_FIELDS = {"ring_attention": {"cp": "world_size"}, "ulysses": {"cp": "world_size"},
               "expert_parallel": {"ep": "world_size"}, "diloco": {"workers": "world_size"}}


def replay(scenario: str, params: dict, model: str = "llama3-70b", gpu_name: str = GPU,
           gpus: int | None = None) -> est.Estimate:
    """A live run's structure (its parallelism, degrees, schedule and micro-batches) with `model` on
    `gpu_name`s. Every live rank that stands for a whole replica becomes a node (TP 8 inside it, the
    data-parallel, ZeRO or context-parallel group across nodes); the tensor-parallel run's ranks stay GPUs
    of one node; the 3D run keeps its TP × PP × DP degrees. `gpus` (None: the run's own size) scales the
    run by data parallelism, each replica keeping its batch. Returns the estimate with its timeline.

    The others: the basics run is one GPU; HSDP's shard group a node (NVLink), its replicas other nodes;
    Ulysses' ranks nodes, as the ring's; the expert-parallel ranks GPUs of one node, the run's experts and
    top-k on the preset's shape; DiLoCo's workers nodes, and its step one outer round (`est.outer_round`)."""
    options = replay_layout(scenario, params)
    inner_steps = options.pop("inner_steps", None)
    if gpus is not None:
        options = scale_by_data_parallelism(options, gpus)
    if scenario == "hsdp":  # a cluster smaller than a node holds one shard group
        options["zero_shards"] = min(options["zero_shards"], options["gpus"])
    try:
        spec, cluster, layout = est.build(model, gpu=gpu_name, **options)
        if scenario == "diloco":  # every worker a node: its DDP layout is the baseline, its replica a worker
            workers = layout.dp(cluster.gpus)
            return est.outer_round(spec, cluster, replace(layout, global_batch=layout.global_batch // workers),
                                   workers, inner_steps)
        return est.estimate(spec, cluster, layout, keep_spans=True)
    except est.LayoutError as exc:
        field = LIVE_FIELDS.get(scenario, {}).get(exc.field)
        if field is None:
            raise
        raise est.LayoutError(field, f"{exc.message} (the run's {field} is the modelled {exc.field})") from None


def replay_layout(scenario: str, params: dict) -> dict:
    """`est.build`'s layout options for the live run of `scenario` with its `params` (the run's own size)."""
    def number(name: str, default: int) -> int:
        try:
            return int(params.get(name, default))
        except (TypeError, ValueError):
            raise est.LayoutError(name, f"must be an integer, got {params.get(name)!r}") from None

    def flag(name: str, default: bool) -> bool:
        value = str(params.get(name, default)).lower()
        if value not in ("true", "false", "1", "0"):
            raise est.LayoutError(name, f"must be true or false, got {params.get(name)!r}")
        return value in ("true", "1")

    if scenario == "pipeline":
        stages, m = number("stages", 4), number("microbatches", 8)
        schedule = params.get("schedule", "1f1b")
        v = number("virtual_stages", 0) or (2 if schedule == "interleaved_1f1b" else 1)
        return dict(gpus=8 * stages, tp=8, pp=stages, schedule=schedule, virtual_stages=v, micro_batch=1,
                    global_batch=m)
    if scenario == "ddp":
        ranks = number("world_size", 4)
        return dict(gpus=8 * ranks, tp=8, zero_stage=0, micro_batch=1,
                    global_batch=ranks * number("batch_per_rank", 2))
    if scenario == "zero":  # each rank a node; its micro-batches of samples become sequences
        ranks, g = number("world_size", 4), number("grad_accumulation", 1)
        return dict(gpus=8 * ranks, tp=8, zero_stage=number("stage", 3), micro_batch=1, global_batch=ranks * g,
                    recompute="full" if flag("activation_checkpointing", False) else "selective")
    if scenario == "tensor_parallel":  # the TP ranks are GPUs of one node, one micro-batch
        tp, b = number("tp", 4), number("batch", 1)
        return dict(gpus=tp, tp=tp, zero_stage=0, micro_batch=b, global_batch=b,
                    sequence_parallel=flag("sequence_parallel", False))
    if scenario == "parallel_3d":  # the same degrees, GPipe as the live run
        tp, pp, dp = number("tp", 2), number("pp", 2), number("dp", 2)
        return dict(gpus=tp * pp * dp, tp=tp, pp=pp, zero_stage=0, schedule="gpipe", virtual_stages=1,
                    micro_batch=1, global_batch=dp * number("microbatches", 2))
    if scenario == "ring_attention":  # each rank on the ring a node, the sequence split over them
        ranks = number("world_size", 4)
        return dict(gpus=8 * ranks, tp=8, cp=ranks, zero_stage=1, micro_batch=1, global_batch=1)
    if scenario == "ulysses":  # as the ring: each rank a node; Ulysses' all-to-alls or Llama 3's K/V all-gather
        ranks, method = number("world_size", 4), params.get("method", "all_to_all")
        if method not in ("all_to_all", "all_gather_kv"):
            raise est.LayoutError("method", f"must be all_to_all or all_gather_kv, got {method!r}")
        return dict(gpus=8 * ranks, tp=8, cp=ranks, cp_comm="all_to_all" if method == "all_to_all" else "all_gather",
                    zero_stage=1, micro_batch=1, global_batch=1)
    if scenario == "hsdp":
        # The point of the slide: shard inside a node, on NVLink; replicate across nodes. So a shard group is a
        # node, its S live ranks standing for the node's 8 GPUs (TP 1, ZeRO-3 over them), and each of the R
        # replica groups another node; the gradient shard is all-reduced across the nodes. S = 1 is no sharding.
        replicas, shards, b = number("replicas", 2), number("shards", 2), number("micro_batch", 2)
        return dict(gpus=8 * replicas, tp=1, zero_stage=3, zero_shards=8 if shards > 1 else 1, micro_batch=b,
                    global_batch=8 * replicas * b)
    if scenario == "expert_parallel":  # each rank a GPU of one node (all-to-alls on NVLink), one sequence each
        ranks = number("world_size", 4)
        return dict(gpus=ranks, tp=1, ep=ranks, experts=number("experts", 8), top_k=number("top_k", 2), zero_stage=1,
                    micro_batch=1, global_batch=ranks)
    if scenario == "diloco":  # each worker a node, TP 8; its samples per step become sequences
        workers, b = number("world_size", 4), number("batch_per_worker", 8)
        return dict(gpus=8 * workers, tp=8, zero_stage=0, micro_batch=1, global_batch=workers * b,
                    inner_steps=number("inner_steps", 5))
    if scenario == "failures":  # a training step before the failure: each rank a node, FSDP (ZeRO-3) across them
        ranks = number("world_size", 4)
        return dict(gpus=8 * ranks, tp=8, zero_stage=3, micro_batch=1, global_batch=ranks)
    if scenario == "basics":  # one GPU; the run's batch of samples becomes one micro-batch of sequences
        b = number("batch", 4)
        return dict(gpus=1, tp=1, zero_stage=0, micro_batch=b, global_batch=b)
    raise NoProjection(f"no modelled cluster for the {scenario!r} scenario yet: {', '.join(REPLAYED)} have one")


def scale_by_data_parallelism(options: dict, gpus: int) -> dict:
    """The same layout on `gpus` GPUs: TP, PP and CP kept, the data-parallel degree what remains, each
    replica keeping its share of the batch (so its micro-batches, and its timeline, stay the run's)."""
    unit = options.get("tp", 1) * options.get("pp", 1) * options.get("cp", 1)
    if gpus % unit:
        raise est.LayoutError("gpus", f"must be a multiple of the run's tp·pp·cp = {unit}, got {gpus}")
    replicas = options["gpus"] // unit
    per_replica = options["global_batch"] // replicas
    return {**options, "gpus": gpus, "global_batch": per_replica * (gpus // unit)}


# "My model on my GPU" (issue 37): Hugging Face Transformers' Llama shapes (their config.json on the Hub:
# meta-llama/Llama-3.2-1B and -3B: hidden 2048 / 3072, intermediate 8192, 16 / 28 layers, 32 / 24 heads, 8 key-value
# heads, vocabulary 128,256; Llama 3 8B: the estimator's preset), counted with untied embeddings as the estimator
# counts every model (so Llama 3.2 3B is the 3.6B Llama that issue 37's session ran out of memory with on an 80 GB
# H100 at 4,096 tokens under AMP).
ONE_GPU_MODELS = {
    "1.5B (Llama 3.2 1B, untied)": dict(model="custom", layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256),
    "3.6B (Llama 3.2 3B, untied)": dict(model="custom", layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192, vocab=128256),
    "Llama 3 8B": dict(model="llama3-8b"),
}


def one_gpu(name: str, gpu_name: str, seq_len: int = 4096, **stack) -> est.Estimate:
    """One sequence of `seq_len` tokens a step on one GPU, no recomputation, the stack most single-GPU runs use
    unless `stack` says otherwise: Transformers' Llama, eager, under AMP (autocast over fp32 weights, AdamW)."""
    options = dict(gated_mlp=True, dropout=False, seq_len=seq_len, gpu=gpu_name, gpus=1, gpus_per_node=1, tp=1,
                   zero_stage=0, micro_batch=1, global_batch=1, recompute="none", stack="hf", amp=True)
    return est.estimate(*est.build(**{**ONE_GPU_MODELS[name], **options, **stack}))
