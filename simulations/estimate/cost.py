"""The cost model: one training step of a model, laid out on a cluster, in seconds and bytes.

Compute: every matmul of a layer in waves of tiles over the SMs, each wave its main loop at the GPU's sustained
matmul rate (at its power cap, as training runs) and a fixed cost per tile (so short-K GEMMs run below it), the
last wave's idle SMs wasted; in eager execution no faster than the CPU issues the layer's kernels (compute.py);
attention fused at the rate its kernel's own benchmarks publish for the GPU,
head size, causal mask, direction and length (kernels.py), or unfused as two
batched matmuls and a softmax on a roofline; norms, activations, dropouts and residual adds are
memory-bound passes over HBM. Backward is twice the forward's matmuls (input and weight
gradients); recomputation replays the forward (full) or the attention core (selective). Also memory-bound:
the loss's backward over the logits, the input embedding's dense gradient, and, without gradient-accumulation
fusion, each micro-batch's weight gradients added to the accumulator (Megatron-LM's main_grad hook).

Communication, each collective from `collectives` (its algorithm and its group's placement),
on a stream beside compute with the dependencies a real step has:
- TP all-reduces (or all-gathers and reduce-scatters with sequence parallelism) sit on the
  critical path of the layer in forward; in backward they overlap the weight-gradient matmuls
  (Korthikanti et al. 2022, sec. 6.2);
- CP (`Layout.cp_comm`) passes K and V around a ring while attention computes (ring attention, Liu et
  al. 2023); or all-to-alls Q, K, V to head shards and O back (DeepSpeed-Ulysses, Jacobs et al. 2023), or
  all-gathers K and V and reduce-scatters their gradients (Llama 3, Dubey et al. 2024 sec. 3.3.2), both
  on the critical path; EP's dispatch and combine all-to-alls wait too;
- PP sends an activation per micro-batch to the next stage (beside compute, or blocking both ranks as
  Megatron-LM did before overlap_p2p_comm); the schedule (`schedule.run`) turns
  the stage durations into a makespan, and its idle time is the bubble;
- DP reduces the gradients at the end of the step, overlapping the last micro-batch's backward
  bucket by bucket when `overlap_grad_reduce`; ZeRO-3 gathers each layer's parameters one layer
  ahead (prefetch), in forward and again in backward, and reduce-scatters its gradients (what nothing hides:
  the root unit's and the first layer's gathers, the last reduce-scatters, zero3_fill_and_drain); hybrid
  sharding (`Layout.zero_shards`, HSDP) does that inside groups of consecutive ranks and all-reduces
  each gradient shard across the groups, bucket by bucket as DP does.
  Each parameter is reduced (and, under ZeRO, sharded) over the ranks that replicate it: the dense ones
  over DP·CP, a mixture of experts' expert weights over their expert-data-parallel group, dp·cp/ep ranks
  (`replica_groups`).
While a collective runs beside compute (ZeRO-3's gathers and scatters, DP's buckets, the overlapped parameter
all-gather) NCCL holds SMs no kernel shares, and the compute beside it runs on the rest (traffic.contention,
compute.LayerTime.held_rate_*): an overlapped collective costs the time it outlasts its window, or what it slows
the compute in it, whichever is more. TP's and CP's overlapped collectives are not slowed so (not modelled).
The optimizer step is a memory-bound pass over the shard each rank owns (a fused Adam, or torch's foreach AdamW and a
clipping pass in eager PyTorch); and the step waits for its slowest GPU (straggler_allowance).
Memory per GPU: simulations.formulas (model states by ZeRO stage, activations per layer).

Where each part lives: compute.py (a layer's kernels and its TP/CP/EP collectives), traffic.py (the bytes
each parallelism hands its collectives, and over which ranks), memory.py (what a GPU holds), kernels.py
(attention kernels' published rates), collectives.py (a collective's time on its links), schedule.py
(the pipeline on a clock). This module puts one step together from them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from simulations import formulas
from simulations.estimate import collectives, compute, kernels, memory, schedule, timeline, traffic, trust
from simulations.estimate.layout import Layout, LayoutError, check_micro_batches, kv_heads_per_tp_rank, validate
from simulations.estimate.models import BF16, Model
from simulations.hardware import (ALLOCATOR_FRAGMENTATION, ALLOCATOR_FRAGMENTATION_MEASURED, CUDA_RESERVED_BYTES,
                                  GPU_SPEED_SIGMA, Cluster)


@dataclass
class Estimate:
    model: Model
    cluster: Cluster
    layout: Layout  # with micro_batch and virtual_stages chosen
    dp: int
    micro_batches: int
    step_time_s: float
    pipeline_s: float
    bubble_fraction: float
    exposed_comm_s: float
    exposed_by_kind: dict[str, float]
    comm_total_s: dict[str, float]
    compute_s: float  # busy compute of the busiest stage, step total
    optimizer_s: float
    memory_per_gpu_bytes: dict[str, float]
    straggler_s: float
    tokens_per_s: float
    model_flops: float
    comm_bytes_per_gpu: dict[str, float] = field(default_factory=dict)
    stage_times: dict[str, float] = field(default_factory=dict)
    spans: list[dict] = field(default_factory=list)
    # the moment of the step memory_per_gpu_bytes describes: "step" (every role at once) or, for a stack whose
    # roles come and go (memory.hf_memory), "backward start", "end of backward" or "optimizer step"
    memory_peak: str = "step"

    @property
    def fits(self) -> bool:
        """What the step holds, with the caching allocator's least fragmentation (5 %), within what a process can
        allocate: the layouts the search and `auto` may choose. Estimate.fit says how safely."""
        return self.fit["optimistic_margin_bytes"] >= 0

    @property
    def fit(self) -> dict:
        """The fit verdict with its margin. What a process can allocate (the device's total less CUDA_RESERVED_BYTES)
        less the step's peak and the caching allocator's fragmentation on top of it: `margin_bytes` with the 15 %
        measured on LLM training (ALLOCATOR_FRAGMENTATION_MEASURED, GMLake), `optimistic_margin_bytes` with 5 %
        (ALLOCATOR_FRAGMENTATION, what `fits` uses); positive: bytes to spare, negative: bytes missing. The verdict:
        "fits with X GB to spare" when it fits even with 15 %, "does not fit: Y GB missing" when not even with 5 %,
        "may not fit" between. `dominant`: the roles held at the peak, largest first."""
        total = self.memory_per_gpu_bytes["total"]
        usable = self.cluster.gpu.usable_bytes
        margin = usable - total * (1 + ALLOCATOR_FRAGMENTATION_MEASURED)
        optimistic = usable - total * (1 + ALLOCATOR_FRAGMENTATION)
        roles = sorted(((role, b) for role, b in self.memory_per_gpu_bytes.items() if role != "total" and b > 0),
                       key=lambda rb: -rb[1])
        named = ", ".join(f"{role} {b / 1e9:.1f} GB" for role, b in roles[:3])
        if margin >= 0:
            verdict = f"fits with {margin / 1e9:.1f} GB to spare"
        elif optimistic < 0:
            verdict = f"does not fit: {-optimistic / 1e9:.1f} GB missing"
        else:
            verdict = (f"may not fit: {optimistic / 1e9:.1f} GB to spare if the allocator fragments 5 %, "
                       f"{-margin / 1e9:.1f} GB missing at the 15 % measured in LLM training")
        return {"margin_bytes": margin, "optimistic_margin_bytes": optimistic,
                "verdict": f"{verdict} (peak at {self.memory_peak}: {named})", "peak": self.memory_peak,
                "fragmentation_bytes": total * ALLOCATOR_FRAGMENTATION_MEASURED, "reserved_bytes": CUDA_RESERVED_BYTES,
                "dominant": [{"role": role, "bytes": b} for role, b in roles]}

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_time_s / self.cluster.gpus / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs per second over the peak of the precision the layers' matmuls run in (bf16, or FP8's, as
        LLM Foundry's FP8 table reports it)."""
        gpu = self.cluster.gpu
        peak = gpu.fp8_flops if self.layout.precision == "fp8" else gpu.peak_flops
        return self.model_flops / self.step_time_s / self.cluster.gpus / peak

    def as_dict(self) -> dict:
        return {
            "model": self.model.name,
            "gpu": self.cluster.gpu.name,
            "gpus": self.cluster.gpus,
            "gpus_per_node": self.cluster.gpus_per_node,
            "tp": self.layout.tp, "pp": self.layout.pp, "cp": self.layout.cp, "ep": self.layout.ep, "dp": self.dp,
            "zero_stage": self.layout.zero_stage,
            "cp_comm": self.layout.cp_comm,
            "zero_shards": self.layout.zero_shards,
            "schedule": self.layout.schedule,
            "recompute": self.layout.recompute,
            "recompute_every": self.layout.recompute_every,
            "precision": self.layout.precision,
            "execution": self.layout.executes,
            "fsdp": self.layout.fsdp,
            "fp8_param_gather": self.layout.fp8_param_gather,
            "attention_kernel": (kernels.default_kernel(self.cluster.gpu) if self.layout.attention_kernel == "auto"
                                 else self.layout.attention_kernel) if self.model.flash_attention else "unfused",
            "network_gbps": self.cluster.node_egress * 8 / 1e9,
            "global_batch": self.layout.global_batch,
            "micro_batch": self.layout.micro_batch,
            "virtual_stages": self.layout.virtual_stages,
            "micro_batches": self.micro_batches,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "bubble_fraction": self.bubble_fraction,
            "exposed_comm_s": self.exposed_comm_s,
            "exposed_comm_by_kind_s": self.exposed_by_kind,
            "comm_total_s": self.comm_total_s,
            "compute_s": self.compute_s,
            "optimizer_s": self.optimizer_s,
            "straggler_s": self.straggler_s,
            "comm_bytes_per_gpu": self.comm_bytes_per_gpu,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "gpu_memory_bytes": self.cluster.gpu.hbm_bytes,
            "usable_memory_bytes": self.cluster.gpu.usable_bytes / (1 + ALLOCATOR_FRAGMENTATION),
            "fits": self.fits,
            "fit": self.fit,
            "stack": self.layout.stack,
            "amp": self.layout.amp,
            "torch_compile": self.layout.torch_compile,
            # the estimator's error on published runs of this kind (trust.py; the validation tests' own tables)
            "validation": trust.trust(self.cluster.gpu.name, tp=self.layout.tp, pp=self.layout.pp,
                                      cp=self.layout.cp, zero_stage=self.layout.zero_stage),
        }


@functools.cache
def expected_slowest(ranks: int) -> float:
    """The expected largest of `ranks` standard normal draws (Blom's approximation, Φ⁻¹((n − 0.375)/(n + 0.25));
    0 for one rank): how many standard deviations the slowest GPU of a synchronous step lies from the mean."""
    return NormalDist().inv_cdf((ranks - 0.375) / (ranks + 0.25)) if ranks > 1 else 0.0


def zero3_fill_and_drain(gather: float, scatter: float, root_gather: float, root_scatter: float,
                         head_backward: float, embedding_backward: float) -> tuple[float, float, float]:
    """What ZeRO-3's one-layer-ahead prefetch leaves exposed in one micro-batch, (forward, backward, end), beyond the
    per-layer overlap: nothing computes before the first layer's gather, nor before the root unit's (the parameters
    outside the layers: embedding, output layer), which comes first and stays gathered through backward ("the root
    FSDP instance [...] its parameters would typically be immediately all-gathered for backward", so neither FSDP1's
    _post_forward_reshard nor FSDP2's fully_shard reshards it after forward: torch/distributed/fsdp/_runtime_utils.py,
    _fully_shard/fully_shard.py); backward's first gather, the last layer's, is issued by its pre-backward hook and
    runs beside the output layer's backward; the first layer's reduce-scatter runs beside the embedding's backward,
    and the root's, whose gradient is the last computed, after it, before the optimizer step (FSDP1's
    _post_backward_final_callback waits for the post-backward stream). The layer-by-layer timeline has the same
    dependencies (timeline.layer_spans)."""
    return (root_gather + gather, max(0.0, gather - head_backward),
            max(0.0, scatter - embedding_backward) + root_scatter)


def straggler_allowance(compute_s: float, ranks: int) -> float:
    """Seconds a synchronous step waits for its slowest GPU: every collective ties the ranks together, so the
    busiest stage's compute runs at the pace of the slowest of the `ranks` GPUs, GPU_SPEED_SIGMA (hardware.py,
    Sinha et al. SC'22) times the expected largest of that many normal draws slower. It grows with the ranks as
    sqrt(2 ln n): 8 GPUs +1.7 %, 512 +3.6 %, 16,384 +4.7 % of compute."""
    return compute_s * GPU_SPEED_SIGMA * expected_slowest(ranks)


def estimate(model: Model, cluster: Cluster, layout: Layout, keep_spans: bool = False) -> Estimate:
    """Estimate one step. `layout.micro_batch` / `virtual_stages` None: the fastest that fits."""
    validate(model, cluster, layout)
    if layout.micro_batch is None or layout.virtual_stages is None:
        return choose(model, cluster, layout, keep_spans)
    return _estimate(model, cluster, layout, keep_spans)


def trials(model: Model, cluster: Cluster, layout: Layout, sizes: list[int], virtual: list[int],
           fast: bool = False) -> list[Estimate]:
    """The layout with each micro-batch size and virtual-stage count that its schedule allows."""
    per_replica = layout.global_batch // layout.dp(cluster.gpus)
    out = []
    for b in sizes:
        for v in virtual:
            trial = replace(layout, micro_batch=b, virtual_stages=v)
            try:
                check_micro_batches(trial, per_replica // b)
            except LayoutError:
                continue
            out.append(_estimate(model, cluster, trial, False, fast=fast))
    return out


def choose(model: Model, cluster: Cluster, layout: Layout, keep_spans: bool = False) -> Estimate:
    """`auto`: try every micro-batch size dividing the per-replica batch and every virtual-stage count;
    keep the fastest that fits in memory.memory (the smallest footprint when none fits)."""
    dp = layout.dp(cluster.gpus)
    per_replica = layout.global_batch // dp
    sizes = [layout.micro_batch] if layout.micro_batch else [b for b in range(1, min(per_replica, 64) + 1)
                                                             if per_replica % b == 0]
    if layout.virtual_stages:
        vs = [layout.virtual_stages]
    elif layout.schedule == "interleaved_1f1b" and layout.pp > 1:
        per_stage = model.layers // layout.pp
        vs = [v for v in range(1, per_stage + 1) if per_stage % v == 0]
        vs += [v for v in {(model.layers + 1) / layout.pp, (model.layers + 2) / layout.pp}  # one layer a chunk
               if v == int(v) and v > per_stage]
        vs = [int(v) for v in vs]
    else:
        vs = [1]
    candidates = trials(model, cluster, layout, sizes, vs)
    if not candidates:
        raise LayoutError("micro_batch", "no micro-batch size gives interleaved_1f1b a multiple of pp micro-batches")
    fitting = [e for e in candidates if e.fits]
    best = min(fitting, key=lambda e: e.step_time_s) if fitting else min(
        candidates, key=lambda e: e.memory_per_gpu_bytes["total"])
    return _estimate(model, cluster, best.layout, keep_spans) if keep_spans else best


def _estimate(model: Model, cluster: Cluster, layout: Layout, keep_spans: bool, fast: bool = False) -> Estimate:
    t, p, c = layout.tp, layout.pp, layout.cp
    b, v = layout.micro_batch, layout.virtual_stages
    dp = layout.dp(cluster.gpus)
    m = layout.global_batch // dp // b
    g = traffic.groups(cluster, layout)
    lt = compute.layer_time(model, layout, cluster, b, g["tp"], g["cp"], g["ep"])
    tokens = b * model.seq_len / c
    # ZeRO-3: gather each layer's weights before its forward and again before its backward, and
    # reduce-scatter its gradients after, one layer ahead of compute (prefetch)
    # (dense weights over DP·CP, experts over their expert-data-parallel group, one after the other)
    replicas = traffic.replica_groups(model, layout, cluster, g)

    def stage_layers(r) -> float:
        """Parameters of a replica group's stage that sit in its layers (the busiest stage's share); the rest of
        the stage (r.stage) is the embedding and output layer: ZeRO-3's root unit, gathered in bf16."""
        return min(r.stage, math.ceil(model.layers / p) * r.layer)

    zero3_f = zero3_b = z3_gather = z3_scatter = 0.0
    # ZeRO-2/3 (FSDP): each layer's gradient copied into its reduce-scatter's input and pre-divided, every micro-batch
    # (compute.fsdp_reduce_input_bytes), after the weight gradients and beside the collectives like them
    fsdp_passes = compute.memory_time(memory.layer_params_local(model, layout) * compute.fsdp_reduce_input_bytes(layout),
                                      cluster) if layout.zero_stage >= 2 else 0.0
    if layout.zero_stage == 3 and replicas:
        z3_gather = sum(collectives.all_gather(layout.layer_gather_bytes * r.layer, r.group, cluster) for r in replicas)
        z3_scatter = sum(collectives.reduce_scatter(layout.grad_reduce_bytes * r.layer, r.group, cluster)
                         for r in replicas)
        # the gathers hold SMs while the layer computes beside them (traffic.contended)
        zero3_f = traffic.contended(z3_gather, lt.forward + lt.tp_forward, lt.forward, lt.held_rate_forward)
        # the backward window: input gradients (and replay), then the weight gradients or TP's backward
        # collectives beside them, whichever is longer
        tp_beside = lt.tp_backward if layout.overlap_tp_comm else 0.0
        window = lt.backward_input + lt.recompute + max(lt.backward_weight, tp_beside) + fsdp_passes + (
            0.0 if layout.overlap_tp_comm else lt.tp_backward)
        zero3_b = traffic.contended(z3_gather + z3_scatter, window,
                                    lt.backward_input + lt.recompute + lt.backward_weight, lt.held_rate_backward)
    # ZeRO-3's root unit: the parameters outside the layers (embedding, output layer), gathered once a micro-batch
    # and kept through backward, their gradients reduce-scattered last (zero3_fill_and_drain)
    root_gather = root_scatter = 0.0
    if layout.zero_stage == 3 and replicas:
        root_gather = sum(collectives.all_gather(BF16 * (r.stage - stage_layers(r)), r.group, cluster)
                          for r in replicas)
        root_scatter = sum(collectives.reduce_scatter(layout.grad_reduce_bytes * (r.stage - stage_layers(r)),
                                                      r.group, cluster) for r in replicas)
    layers_per_chunk = math.ceil(model.layers / (p * v))  # uneven splits: the busiest stage sets the pace
    f_layer = lt.forward + lt.tp_forward + lt.cp_forward_exposed + lt.ep_exposed / 2 + zero3_f
    tp_bwd_exposed = max(0.0, lt.tp_backward - lt.backward_weight) if layout.overlap_tp_comm else lt.tp_backward
    bi_layer = lt.backward_input + lt.recompute + tp_bwd_exposed + lt.cp_backward_exposed + lt.ep_exposed / 2
    # forwards per micro-batch and layer: a replayed one communicates again (one layer in every recompute_every)
    replays = 1 + 1 / layout.recompute_every if layout.recompute == "full" else 1
    if layout.recompute == "full":
        bi_layer += (lt.tp_forward + lt.cp_forward_exposed) / layout.recompute_every
    bw_compute = lt.backward_weight
    # the first and last stages also run the embedding and the output layer with its loss
    # the loss's passes over the logits by its kernel (compute.LOSS_BYTES)
    loss_f, loss_b = compute.loss_time(tokens, model.vocab / t, layout, cluster)
    logits_f = compute.matmul_time(tokens, model.vocab / t, model.hidden, cluster) + loss_f
    logits_b = compute.matmul_time(tokens, model.hidden, model.vocab / t, cluster) + compute.matmul_time(
        model.hidden, model.vocab / t, tokens, cluster) + loss_b
    if layout.stack == "hf":  # lm_head at its measured rate where there is one, the final norm and AMP's casts
        head_passes_f, head_passes_b = compute.hf_head_time(model, layout, cluster, tokens)
        logits_f = compute.gemm_time(tokens, model.vocab, model.hidden, cluster) + loss_f + head_passes_f
        logits_b = (compute.gemm_time(tokens, model.hidden, model.vocab, cluster)
                    + compute.gemm_time(model.hidden, model.vocab, tokens, cluster) + loss_b + head_passes_b)
    # the input embedding's backward is no GEMM: a dense bf16 gradient of the whole [V/t, h] table is written
    # (torch's embedding_dense_backward) and added to the accumulator (read 2, read and write the accumulator)
    accumulator = layout.grad_reduce_bytes
    embedding_b = compute.memory_time(model.vocab / t * model.hidden * (BF16 + BF16 + 2 * accumulator), cluster)
    # without gradient-accumulation fusion every weight gradient takes the same pass, once per micro-batch
    # (stack hf: counted with the layer, compute.hf_weight_passes)
    unfused = 0.0 if layout.grad_accumulation_fusion or layout.stack == "hf" else BF16 + 2 * accumulator
    bw_compute += compute.memory_time(memory.layer_params_local(model, layout) * unfused, cluster)
    bw_compute += fsdp_passes
    bw_layer = bw_compute + zero3_b
    logits_b += 2 * compute.memory_time(model.vocab / t * model.hidden * unfused, cluster)  # /2 below: on W
    # TP at the model's two ends (Megatron-LM): the vocab-parallel embedding sums its partial outputs
    # (reduce-scatter with SP, else all-reduce); the output layer gathers its input with SP (reduce-scatter
    # in backward), else all-reduces the input's gradient in backward
    embed_f = embed_b = head_f = head_b = 0.0
    if t > 1:
        whole = tokens * model.hidden * BF16
        if layout.sequence_parallel:
            gather_end = collectives.all_gather(whole, g["tp"], cluster)
            scatter_end = collectives.reduce_scatter(whole, g["tp"], cluster)
            embed_f, embed_b, head_f, head_b = scatter_end, gather_end, gather_end, scatter_end
        else:
            embed_f = head_b = collectives.all_reduce(whole, g["tp"], cluster)
    stages = p * v
    chunks = memory.chunk_layers(model.layers, p, v)
    dur = {"F": [f_layer * n for n in chunks], "B": [bi_layer * n for n in chunks], "W": [bw_layer * n for n in chunks]}
    dur["F"][-1] += logits_f
    dur["B"][-1] += logits_b / 2
    dur["W"][-1] += logits_b / 2
    dur["W"][0] += embedding_b
    dur["F"][0] += embed_f
    dur["B"][0] += embed_b
    dur["F"][-1] += head_f
    dur["B"][-1] += head_b
    fill_drain = 0.0
    if z3_gather:  # ZeRO-3's prefetch hides each layer's gather behind the layer before: not the first's, nor the last
        # reduce-scatter (zero3_fill_and_drain); charged at the model's ends, the first and the last chunk (with
        # pipeline stages, a chunk's first gather may run while its stage waits for its input: not charged)
        fill_f, fill_b, drain = zero3_fill_and_drain(z3_gather, z3_scatter, root_gather, root_scatter,
                                                     logits_b + head_b, embedding_b + embed_b)
        dur["F"][0] += fill_f
        dur["B"][-1] += fill_b
        dur["W"][0] += drain  # the first layer's and the root's reduce-scatters after the embedding's backward
        fill_drain = (fill_f + drain + (fill_b if p == 1 else 0.0)) * m  # on the first stage
    if layout.schedule != "zero_bubble":  # B carries the weight gradients too
        dur["B"] = [x + y for x, y in zip(dur["B"], dur["W"])]
    act = tokens * model.hidden * BF16 / t  # each TP rank sends its 1/t (SP, or Megatron's scatter/gather)
    hop = collectives.send(act, g["pp"].crosses_nodes, cluster) if p > 1 else 0.0
    if hop and not layout.overlap_p2p_comm:  # a blocking send: the sender's stream waits for the transfer
        dur["F"] = [d + hop * (s < stages - 1) for s, d in enumerate(dur["F"])]
        dur["B"] = [d + hop * (s > 0) for s, d in enumerate(dur["B"])]
    timed = schedule.pipeline_time(layout.schedule, p, m, v, dur, hop if layout.overlap_p2p_comm else 0.0, keep_spans, fast)
    # DP: gradients of the stage, at the end of the step
    last_backward = dur["B"][0] + (dur["W"][0] if layout.schedule == "zero_bubble" else 0.0)
    comm_total = {"tp": 2 * (lt.tp_forward + lt.tp_backward) * model.layers / p * m, "dp": 0.0, "pp": 2 * hop * m * v,
                  "zero3": 0.0, "cp": (replays * lt.cp_forward + lt.cp_backward) * model.layers / p * m,
                  "ep": lt.ep_exposed * model.layers / p * m}
    ends = (embed_f + embed_b + head_f + head_b) * m  # on the first and last stages, which set the pace
    comm_total["tp"] += ends
    exposed = {"tp": (lt.tp_forward * replays + tp_bwd_exposed) * model.layers / p * m
               + ends,
               "cp": (replays * lt.cp_forward_exposed + lt.cp_backward_exposed) * model.layers / p * m,
               "ep": lt.ep_exposed * model.layers / p * m,
               "zero3": (zero3_f + zero3_b) * model.layers / p * m, "dp": 0.0, "pp": 0.0}
    def gathered_bytes(r) -> float:
        """Bytes a parameter of the stage takes in ZeRO-1/2's all-gather: the layers' at Layout.layer_gather_bytes,
        the embedding's and output layer's in bf16."""
        layers = stage_layers(r)
        return (layers * layout.layer_gather_bytes + (r.stage - layers) * BF16) / r.stage if r.stage else BF16

    traffics = [traffic.sharded_traffic(r.stage, layout.zero_stage, r.ranks, r.across, m, layout.grad_reduce_bytes,
                                        gathered_bytes(r)) for r in replicas]
    reduce = gather = 0.0  # the data-parallel reduction of stages 0-2 and their parameter all-gather

    def bucket_lost(comm: float) -> float:
        """What the backward loses to a reduction's buckets in flight beside it: all but the last, which waits for
        the end of backward (traffic.contention)."""
        return traffic.contention(comm - comm / max(1.0, layers_per_chunk), last_backward, lt.held_rate_backward)

    def overlapped(comm: float) -> float:
        """A reduction issued bucket by bucket during the last backward: the buckets' own pace, or the backward
        slowed by them and the last bucket after it (traffic.overlapped_tail), whichever ends later."""
        tail = traffic.overlapped_tail(comm, last_backward, layers_per_chunk)
        return max(tail, comm / max(1.0, layers_per_chunk) + bucket_lost(comm))

    if replicas and layout.zero_stage < 3:
        for r, both in zip(replicas, traffics):  # dense, then experts (Megatron-core's DDP: separate buffers)
            shard_traffic = both["shard"]
            if layout.zero_stage == 0:
                reduce += traffic.bucketed(collectives.all_reduce, shard_traffic["all_reduce"], layout, r, cluster)
            else:
                per_reduce = shard_traffic["reduce_scatter"] / (m if layout.zero_stage == 2 else 1)
                reduce += traffic.bucketed(collectives.reduce_scatter, per_reduce, layout, r, cluster)
                gather += traffic.bucketed(collectives.all_gather, shard_traffic["all_gather"] * r.ranks, layout, r, cluster,
                                   element_bytes=BF16)
        if layout.zero_stage == 2 and m > 1:  # a reduce-scatter after every micro-batch's backward, overlapped
            per_mb = max(0.0, reduce - last_backward, bucket_lost(reduce))
            reduce_exposed = per_mb * (m - 1) + (overlapped(reduce) if layout.overlap_grad_reduce else reduce)
        elif layout.overlap_grad_reduce:  # buckets reduced while the last backward goes on; the last bucket waits
            reduce_exposed = overlapped(reduce)
        else:
            reduce_exposed = reduce
        # overlapped, the parameter all-gather runs beside the next step's first forward, holding its SMs
        exposed["dp"] = reduce_exposed + (traffic.contention(gather, sum(dur["F"]), lt.held_rate_forward)
                                          if layout.overlap_param_gather else gather)
        comm_total["dp"] = reduce + gather
    elif layout.zero_stage == 3 and replicas:
        comm_total["zero3"] = ((2 * z3_gather + z3_scatter) * model.layers / p + root_gather + root_scatter) * m
        exposed["zero3"] += fill_drain
        # HSDP: each layer's gradient shard all-reduced across the replica traffic.groups once its reduce-scatter is done,
        # in the last micro-batch only (the shards accumulate locally before it), one call per layer (FSDP's unit)
        calls = math.ceil(model.layers / p)
        reduce = sum(calls * collectives.all_reduce(both["replicate"]["all_reduce"] / calls, r.across_group, cluster)
                     for r, both in zip(replicas, traffics) if "replicate" in both)
        if layout.overlap_grad_reduce:
            exposed["dp"] = overlapped(reduce)
        else:
            exposed["dp"] = reduce
        comm_total["dp"] = reduce
    optimizer_params = sum(params / (ranks if layout.zero_stage >= 1 else 1)  # the optimizer steps the shard it owns
                           for params, ranks in zip(memory.stage_param_split(model, layout, 0), memory.shard_ranks(layout, dp * c)))
    optimizer = compute.optimizer_time(optimizer_params, layout, cluster)
    exposed["pp"] = max(0.0, timed.makespan - (sum(dur["F"]) + sum(dur["B"]) + sum(dur["W"]) * (
        layout.schedule == "zero_bubble")) * m / p) if p > 1 else 0.0
    exposed_total = sum(v for k, v in exposed.items() if k != "pp")
    compute_s = (lt.forward + lt.backward_input + lt.backward_weight + lt.recompute) * model.layers / p * m
    straggle = straggler_allowance(compute_s, cluster.gpus)
    step = timed.makespan + exposed["dp"] + optimizer + straggle
    if layout.stack == "hf":
        mem, peak = memory.hf_memory(model, layout, cluster, b, m)
    else:  # every role held at once (the busiest stage's in-flight activations with the states)
        mem, peak = memory.memory(model, layout, cluster, b, m, v), "step"
    activation_bytes = tokens * model.hidden * BF16
    # 2 in each forward (and in its replay under full recomputation), 2 backward
    tp_ops = (2 * replays + 2) * model.layers / p * m
    per_op = (2 * formulas.all_gather_bytes(activation_bytes, t) if layout.sequence_parallel
              else formulas.ring_all_reduce_bytes(activation_bytes, t))
    # ZeRO-3's gathers and scatters on the zero3 lane; the data-parallel reduction (HSDP's across replicas) on dp
    in_group = sum(traffic.wire_bytes(both["shard"], r.ranks) for r, both in zip(replicas, traffics))
    across = sum(traffic.wire_bytes(both.get("replicate", {}), r.across) for r, both in zip(replicas, traffics))
    wire = {"dp": across + (in_group if layout.zero_stage < 3 else 0.0),
            "zero3": in_group if layout.zero_stage == 3 else 0.0,
            "tp": tp_ops * per_op if t > 1 else 0.0, "pp": 2 * m * v * act if p > 1 else 0.0}
    if model.experts and layout.ep > 1:  # dispatch and combine, forward and backward: 4 all-to-alls a layer
        routed = tokens * model.hidden * BF16 * model.top_k
        wire["ep"] = 4 * formulas.all_to_all_bytes(routed, layout.ep) * model.layers / p * m
    if c > 1:
        cp = traffic.context_parallel_traffic(layout.cp_comm, tokens, model.heads / t, kv_heads_per_tp_rank(model, t),
                                      model.head_dim, c)
        wire["cp"] = (replays * traffic.sent_bytes(cp["forward"], c) + traffic.sent_bytes(cp["backward"], c)) * model.layers / p * m
    ring = layout.cp_comm == "ring"  # the ring's hops run beside attention; the others make compute wait
    cp_waits_backward = 0.0 if ring else lt.cp_backward_exposed + (replays - 1) * lt.cp_forward_exposed
    spans = []
    if keep_spans and p == 1:  # no stages: the step layer by layer, each communication on its stream
        spans = timeline.layer_spans(timeline.LayerCosts(
            layers=model.layers, micro_batches=m,
            forward=lt.forward + (lt.cp_forward_exposed if ring else 0.0),
            backward=bi_layer - tp_bwd_exposed - (replays - 1) * lt.tp_forward
            + (0.0 if layout.overlap_tp_comm else lt.tp_backward) - cp_waits_backward - lt.ep_exposed / 2,
            ep_waits=lt.ep_exposed / 2,
            weight=bw_compute, tp_forward=lt.tp_forward * replays,
            tp_backward=lt.tp_backward if layout.overlap_tp_comm else 0.0,
            embed_forward=embed_f, head_forward=logits_f + head_f,
            head_backward=logits_b + head_b, embed_backward=embedding_b + embed_b,
            cp_forward=lt.cp_forward if ring else 0.0, cp_backward=lt.cp_backward if ring else 0.0,
            cp_waits_forward=0.0 if ring else lt.cp_forward_exposed, cp_waits_backward=cp_waits_backward,
            gather=z3_gather, scatter=z3_scatter, root_gather=root_gather, root_scatter=root_scatter,
            bucket=reduce / model.layers,  # ZeRO-2: reduce is per micro-batch
            # what compute loses to the collectives beside it (traffic.contention)
            forward_lost=traffic.contention(z3_gather, lt.forward, lt.held_rate_forward),
            backward_lost=traffic.contention(z3_gather + z3_scatter, lt.backward_input + lt.recompute + lt.backward_weight,
                                             lt.held_rate_backward),
            bucket_lost=bucket_lost(reduce) if layout.overlap_grad_reduce else 0.0,
            gather_lost=traffic.contention(gather, sum(dur["F"]), lt.held_rate_forward)
            if layout.overlap_param_gather and layout.zero_stage < 3 else 0.0,
            reduce_every_micro_batch=layout.zero_stage == 2,
            overlap_reduce=layout.overlap_grad_reduce, optimizer=optimizer))
    elif keep_spans:
        for r, action, start, end in timed.spans:
            spans.append({"stream": "compute", "rank": r, "kind": action.kind, "stage": action.stage,
                          "mb": action.mb, "start": start, "end": end})
        if exposed["dp"] or comm_total["dp"]:
            spans.append({"stream": "comm", "rank": 0, "kind": "dp", "stage": 0, "mb": -1,
                          "start": max(0.0, timed.makespan - min(comm_total["dp"], last_backward)),
                          "end": timed.makespan + exposed["dp"]})
        for r in range(p):  # every stage steps its own optimizer once the gradients are reduced
            spans.append({"stream": "compute", "rank": r, "kind": "opt", "stage": r, "mb": -1,
                          "start": timed.makespan + exposed["dp"], "end": step - straggle})
    if spans and straggle:  # what the step waits for its slowest GPU, shown at its end (straggler_allowance)
        end = max(span["end"] for span in spans)
        spans += [{"stream": "compute", "rank": r, "kind": "wait", "stage": r, "mb": -1, "start": end,
                   "end": end + straggle} for r in range(p)]
    return Estimate(
        model=model, cluster=cluster, layout=layout, dp=dp, micro_batches=m, step_time_s=step,
        pipeline_s=timed.makespan, bubble_fraction=timed.bubble_fraction, exposed_comm_s=exposed_total,
        exposed_by_kind=exposed, comm_total_s=comm_total, compute_s=compute_s, optimizer_s=optimizer,
        straggler_s=straggle,
        memory_per_gpu_bytes=mem, memory_peak=peak, tokens_per_s=layout.global_batch * model.seq_len / step,
        model_flops=model.model_flops(layout.global_batch * model.seq_len),
        comm_bytes_per_gpu=wire,
        stage_times={"forward": dur["F"][0], "backward": dur["B"][0], "weight": dur["W"][0], "hop": hop},
        spans=spans)
