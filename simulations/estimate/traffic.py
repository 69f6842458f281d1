"""What each parallelism hands its collectives, in bytes per rank, and over which ranks: the context-parallel
exchanges of a layer, the data-parallel (ZeRO, HSDP) reductions of a step, Megatron-LM's rank order that
places each group on the nodes, and the buckets a reduction is issued in. Timed by collectives.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulations import formulas
from simulations.estimate import memory
from simulations.estimate.collectives import Group, place
from simulations.estimate.layout import Layout
from simulations.estimate.models import BF16, Model
from simulations.hardware import Cluster


def context_parallel_traffic(cp_comm: str, tokens: float, q_heads: float, kv_heads: float, head_dim: int,
                             ranks: int, element: int = BF16) -> dict[str, dict[str, float]]:
    """What one rank hands each context-parallel collective for one layer and micro-batch, forward and
    backward, as the live runs trace it (an all-to-all's or reduce-scatter's whole input, an all-gather's
    shard, a ring's sends): `tokens` its sequence share, `q_heads` and `kv_heads` its TP share of the heads.

    - all_to_all (DeepSpeed-Ulysses): forward, Q, K, V to head shards (one all-to-all) and O back; backward,
      dO to the head shards and dQ, dK, dV back. K/V heads fewer than ranks are repeated up to `ranks`
      (layout.check_ulysses_heads), so each rank receives one;
    - all_gather (Llama 3): forward, this rank's K and V into the whole sequence's; backward, the whole
      sequence's partial dK, dV reduce-scattered home. The gathered K, V stay for backward;
    - ring: K and V sent on c − 1 hops forward, again in backward with the dK, dV accumulators' c hops
      (formulas.context_parallel_bytes).
    """
    q = tokens * q_heads * head_dim * element
    if cp_comm == "all_to_all":
        kv = 2 * tokens * max(kv_heads, ranks) * head_dim * element
        return {"forward": {"all_to_all": q + kv + q}, "backward": {"all_to_all": q + q + kv}}
    kv = 2 * tokens * kv_heads * head_dim * element
    if cp_comm == "all_gather":
        return {"forward": {"all_gather": kv}, "backward": {"reduce_scatter": ranks * kv}}
    return {"forward": {"send": (ranks - 1) * kv}, "backward": {"send": (ranks - 1) * kv + ranks * kv}}


def sent_bytes(traffic: dict[str, float], ranks: int) -> float:
    """Bytes one rank sends for the collectives it handed `traffic` (formulas' ring and all-to-all counts)."""
    return sum(size if op == "send" else formulas.collective_sent_bytes(op, size, ranks) for op, size in traffic.items())


def data_parallel_traffic(psi: float, zero_stage: int, ranks: int, grad_accumulation: int = 1,
                          grad_bytes: int = BF16, param_bytes: float = BF16) -> dict[str, float]:
    """Bytes each rank hands to each collective per optimizer step, as the live runs trace them
    (all-reduce and reduce-scatter: the whole buffer; all-gather: the rank's shard).

    Counting an all-reduce as 2S, a reduce-scatter as S and an all-gather as N × its shard gives the
    ZeRO paper's volume, formulas.zero_comm_elements: 2Ψ (stages 0, 1), (g + 1)Ψ (2), 3gΨ (3).
    """
    g = grad_accumulation
    if ranks <= 1:
        return {}
    if zero_stage == 0:
        return {"all_reduce": psi * grad_bytes}
    if zero_stage == 1:
        return {"reduce_scatter": psi * grad_bytes, "all_gather": psi * param_bytes / ranks}
    if zero_stage == 2:
        return {"reduce_scatter": g * psi * grad_bytes, "all_gather": psi * param_bytes / ranks}
    return {"all_gather": 2 * g * psi * param_bytes / ranks, "reduce_scatter": g * psi * grad_bytes}


def wire_bytes(traffic: dict[str, float], ranks: int) -> float:
    """Bytes one rank sends on the wire for `traffic` in ring algorithms (formulas' ring counts)."""
    return (formulas.ring_all_reduce_bytes(traffic.get("all_reduce", 0.0), ranks)
            + formulas.all_gather_bytes(traffic.get("reduce_scatter", 0.0), ranks)
            + formulas.all_gather_bytes(traffic.get("all_gather", 0.0) * ranks, ranks))


def groups(cluster: Cluster, layout: Layout) -> dict[str, Group]:
    """Megatron-LM's rank order, fastest first: TP, CP, DP, PP for the dense layers. The MoE layers fold
    the same ranks as TP, EP, expert-DP, PP (Megatron-core's expert rank order, "parallel folding": EP is
    carved out of DP·CP), so an EP group's ranks are TP apart and an expert-data-parallel group's TP·EP apart.

    "dpcp" reduces the dense gradients (Megatron-core's data-parallel group with context parallelism);
    "edp" the experts' (its expert-data-parallel group): each expert has dp·cp/ep replicas, not dp·cp."""
    n = cluster.gpus_per_node
    t, c, p, e = layout.tp, layout.cp, layout.pp, layout.ep
    dp = layout.dp(cluster.gpus)
    return {"tp": place(t, 1, n), "cp": place(c, t, n), "dp": place(dp, t * c, n),
            "ep": place(e, t, n), "pp": place(p, t * c * dp, n),
            "dpcp": place(dp * c, t, n), "edp": place(dp * c // e, t * e, n)}


@dataclass(frozen=True)
class Replicas:
    """Parameters replicated over one data-parallel group: their gradients are reduced over it and, under
    ZeRO, their states sharded over it. `layer`: one layer's share, `stage`: the busiest stage's.
    Hybrid sharding (HSDP) shards them over `ranks` only, a `group` of consecutive ranks, and all-reduces
    each gradient shard across the `across` such groups (`across_group`: the ranks holding the same shard)."""

    layer: float
    stage: float
    ranks: int
    group: Group
    across: int = 1
    across_group: Group = Group(1, 1)


def replica_groups(model: Model, layout: Layout, cluster: Cluster, g: dict[str, Group]) -> list[Replicas]:
    """The dense parameters over the DP·CP ranks (or, hybrid sharded, over `zero_shards` of them, replicated
    across the rest); a mixture of experts' expert parameters over the expert-data-parallel ranks, dp·cp/ep of
    them (Megatron-core's expert_data_parallel group); groups of one rank (nothing to reduce) left out."""
    dpc = layout.dp(cluster.gpus) * layout.cp
    (dense, expert), (dense_stage, expert_stage) = (memory.layer_param_split(model, layout),
                                                    memory.stage_param_split(model, layout, 0))
    shards, expert_ranks = memory.shard_ranks(layout, dpc)
    n, t = cluster.gpus_per_node, layout.tp
    replicas = dpc // shards  # consecutive ranks shard; the ranks holding the same shard are t·shards apart
    found = [Replicas(dense, dense_stage, shards, place(shards, t, n), replicas, place(replicas, t * shards, n)),
             Replicas(expert, expert_stage, expert_ranks, g["edp"])]
    return [r for r in found if r.stage > 0 and r.ranks * r.across > 1]


def sharded_traffic(psi: float, zero_stage: int, shards: int, replicas: int = 1, grad_accumulation: int = 1,
                    grad_bytes: int = BF16, param_bytes: float = BF16) -> dict[str, dict[str, float]]:
    """Bytes each rank hands each collective per step, per mesh dimension: ZeRO's traffic inside the group of
    `shards` ranks (data_parallel_traffic), and, hybrid sharded, an all-reduce of the rank's gradient shard
    across the `replicas` groups, once per step (FSDP's HSDP, Zhao et al. 2023 sec. 3.2.2; the live hsdp run)."""
    out = {"shard": data_parallel_traffic(psi, zero_stage, shards, grad_accumulation, grad_bytes, param_bytes)}
    if replicas > 1:
        out["replicate"] = {"all_reduce": psi * grad_bytes / shards}
    return out


def overlapped_tail(reduce: float, backward: float, buckets: float) -> float:
    """What a reduction of `reduce` seconds leaves exposed after a backward of `backward` seconds that hands it
    `buckets` equal buckets as it goes: it cannot start before the first bucket is ready, and the last bucket
    waits for the end of backward, so it ends at max(backward + reduce/buckets, backward/buckets + reduce)."""
    buckets = max(1.0, buckets)
    return max(reduce / buckets, reduce - backward * (buckets - 1) / buckets)


def bucket_params(layout: Layout, ranks: int) -> float:
    """Parameters per DP bucket: Megatron-core's default, max(40M, 1M × DP size) ("larger DP sizes need larger
    buckets to ensure collectives do not become latency-bound"; megatron/core/distributed/
    distributed_data_parallel_config.py)."""
    return max(40e6, 1e6 * ranks)


def bucketed(collective, size: float, layout: Layout, replicas, cluster: Cluster, element_bytes: int | None = None):
    """`collective` over `replicas`' group, issued bucket by bucket as Megatron-core's DDP does: each bucket a call of
    its own, paying NCCL's latency again, with its smaller message."""
    if size <= 0:
        return 0.0
    elements = size / (element_bytes or layout.grad_reduce_bytes)
    calls = max(1, math.ceil(elements / bucket_params(layout, replicas.ranks)))
    return calls * collective(size / calls, replicas.group, cluster)


def contention(comm: float, compute: float, rate: float) -> float:
    """Seconds `compute` seconds of kernels lose to a collective of `comm` seconds running beside them: while it
    runs, NCCL holds NCCL_COLLECTIVE_SMS of the GPU's SMs and compute proceeds at `rate` of its speed
    (compute.LayerTime.held_rate_*: its matmuls in waves over the SMs left), for as long as both run; nothing when
    either is zero. Measured overlap costs compute more than the SMs alone (Lee et al. 2025, arXiv 2507.03114:
    18.9 % on average, up to 40 %, on A100 and H100, HBM contention among the causes): a lower bound."""
    if comm <= 0 or compute <= 0 or rate >= 1:
        return 0.0
    return (1 - rate) * min(comm, compute / rate)


def contended(comm: float, window: float, compute: float, rate: float) -> float:
    """What a collective of `comm` seconds adds to a `window` it runs beside, `compute` seconds of which are
    kernels: what outlasts the window, or what the kernels lose to it (`contention`), whichever is more."""
    return max(0.0, comm - window, contention(comm, compute, rate))
