"""The layout search: every TP·PP·CP (DP the rest), schedule and ZeRO stage that a cluster allows, a mixture
of experts' EP degrees, and hybrid sharding (HSDP), each with its fastest micro-batch and virtual-stage count;
ranked by step time among those that fit.

The whole grid is estimated with the schedules' bubble formulas (fast); the best few are then
re-estimated with the timed schedule, and the ranking is theirs.
"""

from __future__ import annotations

from dataclasses import replace

from simulations.estimate.cost import Estimate, _estimate, trials
from simulations.hardware import Cluster
from simulations.estimate.layout import Layout, LayoutError, validate
from simulations.estimate.models import Model


def _powers_of_two(limit: int) -> list[int]:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def expert_degrees(model: Model, dpc: int) -> list[int]:
    """EP degrees for a mixture of experts: the divisors of its expert count that also divide the DP·CP ranks
    it is carved out of (parallel folding, layout.py); 1 alone for a dense model."""
    if not model.experts:
        return [1]
    return [e for e in range(1, model.experts + 1) if model.experts % e == 0 and dpc % e == 0]


def hybrid_shard_groups(cluster: Cluster, tp: int, dpc: int) -> list[int]:
    """HSDP's shard-group sizes worth trying (Layout.zero_shards, in DP·CP ranks): one node's worth, so the
    ZeRO-3 gathers stay on NVLink and only one gradient all-reduce a step crosses the network (Zhao et al.,
    VLDB 2023, sec. 3.2.2), then 2, 4 and 8 nodes for models whose shards do not fit one node's memory.
    Only sizes that leave at least two replicas: one group of all dp·cp ranks is plain ZeRO-3."""
    per_node = max(1, cluster.gpus_per_node // tp)
    return [s for s in (per_node, 2 * per_node, 4 * per_node, 8 * per_node) if s < dpc and dpc % s == 0]


def candidates(model: Model, cluster: Cluster, base: Layout) -> list[Layout]:
    """Valid layouts: TP within a node, PP and CP powers of two, EP over the divisors of a mixture of experts'
    expert count, ZeRO 1 or 3 (3 also hybrid sharded, without PP or EP), 1F1B or interleaved."""
    out = []
    n = cluster.gpus
    for tp in _powers_of_two(min(cluster.gpus_per_node, model.heads)):
        for pp in _powers_of_two(min(model.layers, n // tp)):
            for cp in _powers_of_two(min(16, n // (tp * pp))):
                if n % (tp * pp * cp):
                    continue
                dpc = n // (tp * pp)
                for ep in expert_degrees(model, dpc):
                    for schedule in (("1f1b", "interleaved_1f1b") if pp > 1 else ("1f1b",)):
                        shardings = [(1, None)]
                        if pp == 1:  # ZeRO-3's gathers every micro-batch do not pay with pipeline stages
                            shardings.append((3, None))
                            if ep == 1:  # HSDP of expert-parallel layers is not modelled (layout.py)
                                shardings += [(3, s) for s in hybrid_shard_groups(cluster, tp, dpc)]
                        for zero, shards in shardings:
                            layout = replace(base, tp=tp, pp=pp, cp=cp, ep=ep, zero_stage=zero, zero_shards=shards,
                                             schedule=schedule, micro_batch=None,
                                             virtual_stages=None if schedule == "interleaved_1f1b" else 1)
                            try:
                                validate(model, cluster, layout)
                            except LayoutError:
                                continue
                            out.append(layout)
    return out


def best_of(model: Model, cluster: Cluster, layout: Layout, fast: bool) -> Estimate | None:
    """The layout's fastest micro-batch size and virtual-stage count that fit; None if nothing fits."""
    dp = layout.dp(cluster.gpus)
    per_replica = layout.global_batch // dp
    sizes = [b for b in (1, 2, 4, 8) if per_replica % b == 0]
    if layout.schedule == "interleaved_1f1b":
        per_stage = model.layers // layout.pp
        vs = [v for v in (2, 3, 4, 6, 8) if v <= per_stage]
    else:
        vs = [1]
    fitting = [e for e in trials(model, cluster, layout, sizes, vs, fast) if e.fits]
    best = min(fitting, key=lambda e: e.step_time_s, default=None)
    return best


def search(model: Model, cluster: Cluster, base: Layout | None = None, top: int = 5) -> list[Estimate]:
    """The `top` fastest layouts that fit, fastest first."""
    base = base or Layout()
    found = [e for layout in candidates(model, cluster, base) if (e := best_of(model, cluster, layout, True))]
    found.sort(key=lambda e: e.step_time_s)
    exact = [_estimate(model, cluster, e.layout, False) for e in found[: 3 * top]]
    exact = [e for e in exact if e.fits]
    exact.sort(key=lambda e: e.step_time_s)
    return exact[:top]
