"""DiLoCo on a modelled cluster: one outer round, H inner steps and one synchronisation.

Douillard et al., "DiLoCo: Distributed Low-Communication Training of Language Models" (arXiv:2311.08105),
Algorithm 1, as simulations/scenarios/diloco.py runs it: every worker takes H inner steps on its own data
with no communication between workers, then all-reduces its pseudo-gradient Δ = θ − θ_i (the parameters'
change over the round) and applies the outer optimizer, SGD with Nesterov momentum, to the global θ.

The round here: one worker's inner step is an ordinary estimate (`cost.estimate` of the worker's layout on
its own GPUs: TP, and data parallelism inside it if it has several replicas); the outer synchronisation is a
ring all-reduce, across the workers, of the pseudo-gradient share each GPU holds (its TP shard), in fp32 as
the global θ and Δ are kept (the live run's dtype too); the outer step is a memory-bound pass over that
share. Nothing overlaps the synchronisation: in Algorithm 1 the next round starts from the new θ.
The workers' link is the cluster's network (the node's egress): DiLoCo's workers may sit in different
datacenters, on a slower wide-area link, so the synchronisation time is a lower bound there.

Beside it, the data-parallel baseline the live run also trains: the same layout across all the workers'
GPUs, all-reducing the gradients every step (`comm_total_s["dp_baseline"]`: its H steps' reductions).
"""

from __future__ import annotations

from dataclasses import replace

from simulations import formulas
from simulations.estimate import collectives, compute, memory
from simulations.estimate.cost import Estimate, estimate
from simulations.hardware import Cluster
from simulations.estimate.layout import Layout, LayoutError
from simulations.estimate.models import Model

FP32 = 4
# The outer Nesterov step per parameter (fp32): read Δ, θ and the momentum (12), write θ and the momentum (8).
OUTER_STEP_BYTES = 12 + 8
# Outer optimizer state per parameter on each worker: the global θ kept apart from the inner one, and the
# outer momentum, fp32 each.
OUTER_STATE_BYTES = 4 + 4


def outer_round(model: Model, cluster: Cluster, layout: Layout, workers: int, inner_steps: int) -> Estimate:
    """One DiLoCo round of `workers` workers on `cluster` (split evenly between them), each running `layout`
    (its global_batch: one worker's sequences per inner step) for `inner_steps` steps, then the outer sync.
    The returned estimate is the round's: its step time, throughput and timeline cover all H inner steps."""
    if workers < 1 or cluster.gpus % workers:
        raise LayoutError("workers", f"must divide the GPUs ({cluster.gpus}), got {workers}")
    if inner_steps < 1:
        raise LayoutError("inner_steps", f"must be ≥ 1, got {inner_steps}")
    per_worker = cluster.gpus // workers
    inner = estimate(model, replace(cluster, gpus=per_worker), layout)
    h = inner_steps
    # each GPU all-reduces the share of Δ it holds with the GPUs holding the same share in the other workers
    share = memory.stage_params(model, inner.layout, 0)
    group = collectives.place(workers, per_worker, cluster.gpus_per_node)
    sync = collectives.all_reduce(FP32 * share, group, cluster)
    outer_step = compute.memory_time(OUTER_STEP_BYTES * share, cluster)
    step = h * inner.step_time_s + sync + outer_step
    # the baseline: plain data parallelism over every worker's GPUs, the gradients all-reduced every step
    baseline = estimate(model, cluster, replace(inner.layout, zero_stage=0, global_batch=inner.layout.global_batch
                                                * workers))
    spans = [{"stream": "compute", "rank": 0, "kind": "step", "stage": 0, "mb": i,
              "start": i * inner.step_time_s, "end": (i + 1) * inner.step_time_s} for i in range(h)]
    spans.append({"stream": "comm", "rank": 0, "kind": "outer", "stage": 0, "mb": -1,
                  "start": h * inner.step_time_s, "end": h * inner.step_time_s + sync})
    spans.append({"stream": "compute", "rank": 0, "kind": "opt", "stage": 0, "mb": -1,
                  "start": h * inner.step_time_s + sync, "end": step})
    held = {**inner.memory_per_gpu_bytes, "outer": OUTER_STATE_BYTES * share}
    held["total"] = inner.memory_per_gpu_bytes["total"] + held["outer"]
    sequences = inner.layout.global_batch * workers  # per inner step, all workers
    return replace(
        inner, cluster=cluster, layout=replace(inner.layout, global_batch=sequences), dp=inner.dp * workers,
        step_time_s=step, pipeline_s=h * inner.pipeline_s,
        exposed_comm_s=h * inner.exposed_comm_s + sync,
        exposed_by_kind={**{k: h * v for k, v in inner.exposed_by_kind.items()}, "outer": sync},
        comm_total_s={**{k: h * v for k, v in inner.comm_total_s.items()}, "outer": sync,
                      "dp_baseline": h * baseline.comm_total_s["dp"]},
        compute_s=h * inner.compute_s, optimizer_s=h * inner.optimizer_s + outer_step, straggler_s=h * inner.straggler_s,
        memory_per_gpu_bytes=held, tokens_per_s=h * sequences * model.seq_len / step,
        model_flops=h * model.model_flops(sequences * model.seq_len),
        comm_bytes_per_gpu={**{k: h * v for k, v in inner.comm_bytes_per_gpu.items()},
                            "outer": formulas.ring_all_reduce_bytes(FP32 * share, workers),
                            "dp_baseline": h * baseline.comm_bytes_per_gpu["dp"]},
        stage_times={**inner.stage_times, "inner_step": inner.step_time_s, "baseline_step": baseline.step_time_s},
        spans=spans)
