"""The cost model: one training step of a model, laid out on a cluster, in seconds and bytes.

Compute: every matmul of a layer at the GPU's sustained matmul rate (at its power cap, as training
runs), less the waves its tiles leave idle; attention fused at the rate its kernel's own benchmarks publish for the GPU,
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
  ahead (prefetch), in forward and again in backward, and reduce-scatters its gradients; hybrid
  sharding (`Layout.zero_shards`, HSDP) does that inside groups of consecutive ranks and all-reduces
  each gradient shard across the groups, bucket by bucket as DP does.
  Each parameter is reduced (and, under ZeRO, sharded) over the ranks that replicate it: the dense ones
  over DP·CP, a mixture of experts' expert weights over their expert-data-parallel group, dp·cp/ep ranks
  (`replica_groups`).
Memory per GPU: simulations.formulas (model states by ZeRO stage, activations per layer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from simulations import formulas
from simulations.estimate import collectives, kernels, schedule, timeline, trust
from simulations.estimate.collectives import Group, place
from simulations.hardware import ALLOCATOR_FRAGMENTATION, HBM_EFFICIENCY, Cluster
from simulations.estimate.layout import Layout, LayoutError, check_micro_batches, kv_heads_per_tp_rank, validate
from simulations.estimate.models import Model
from simulations.scenarios.pipeline_schedules import Action, bubble_formula

BF16 = 2
TILE_M, TILE_N = 128, 256  # a large bf16 cuBLAS/CUTLASS tile: a matmul runs in waves of these over the SMs
# The optimizer step per parameter it owns, all memory-bound passes (Megatron-LM's mixed-precision
# optimizer): the gradient norm reads the fp32 gradient (4); Adam reads gradient, master, m, v (16) and
# writes master, m, v (12); the updated master is copied into the bf16 weight (read 4, write 2).
ADAM_BYTES_PER_PARAM = 4 + 16 + 12 + 6


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
    tokens_per_s: float
    model_flops: float
    comm_bytes_per_gpu: dict[str, float] = field(default_factory=dict)
    stage_times: dict[str, float] = field(default_factory=dict)
    spans: list[dict] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """What the step holds, with the caching allocator's fragmentation, within what a process can allocate."""
        return self.memory_per_gpu_bytes["total"] * (1 + ALLOCATOR_FRAGMENTATION) <= self.cluster.gpu.usable_bytes

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
            "comm_bytes_per_gpu": self.comm_bytes_per_gpu,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "gpu_memory_bytes": self.cluster.gpu.hbm_bytes,
            "usable_memory_bytes": self.cluster.gpu.usable_bytes / (1 + ALLOCATOR_FRAGMENTATION),
            "fits": self.fits,
            # the estimator's error on published runs of this kind (trust.py; the validation tests' own tables)
            "validation": trust.trust(self.cluster.gpu.name, self.layout.tp, self.layout.pp, self.layout.zero_stage),
        }


# -- compute ---------------------------------------------------------------------------------------

def matmul_time(m: float, n: float, k: float, cluster: Cluster, fp8: bool = False) -> float:
    """[m, k] × [k, n] in bf16: the sustained rate, less idle SMs in the last wave; or HBM-bound. `fp8`: the
    inputs in FP8 at the GPU's FP8 rate (hardware.GPU.fp8_flops; the same sustained fraction), 1 byte an input."""
    gpu = cluster.gpu
    tiles = math.ceil(m / TILE_M) * math.ceil(n / TILE_N)
    waves = math.ceil(tiles / gpu.sms)
    busy = tiles / (waves * gpu.sms)
    flops = 2 * m * n * k
    rate = gpu.sustained_flops * (gpu.fp8_flops / gpu.peak_flops if fp8 else 1.0)
    moved = (1 if fp8 else BF16) * (m * k + k * n) + BF16 * m * n
    return max(flops / (rate * busy), moved / (gpu.hbm_bandwidth * HBM_EFFICIENCY))


def fp8_cast_bytes(rows: float, n: float, k: float) -> tuple[float, float]:
    """HBM bytes of TransformerEngine's per-tensor FP8 casts around one linear layer [rows, k] × [k, n], forward and
    backward: forward casts its input and its weight (read 2 bytes, write the FP8 copy and its transpose for the
    backward's GEMMs, 1 + 1); backward casts the output's gradient the same way (TE's cast_transpose; the amax
    reductions ride along). Delayed scaling: the scale comes from the previous steps' amax history, no extra pass."""
    cast = 2 + 1 + 1
    return cast * (rows * k + k * n), cast * rows * n


def memory_time(moved: float, cluster: Cluster) -> float:
    return moved / (cluster.gpu.hbm_bandwidth * HBM_EFFICIENCY)


@dataclass(frozen=True)
class LayerTime:
    forward: float  # compute, one micro-batch, one layer, one GPU
    backward_input: float  # input gradients and element-wise backward
    backward_weight: float  # weight-gradient matmuls
    recompute: float  # replayed in backward
    tp_forward: float  # TP collectives in forward (exposed)
    tp_backward: float  # TP collectives in backward (overlap the weight gradients)
    ep_exposed: float
    attention_core: float  # forward time of attention itself (the part selective recomputation replays)
    # CP's communication in forward and backward, and what of it compute waits for: the ring's hops run beside
    # attention (exposed: what outlasts it); Ulysses' all-to-alls and the K/V all-gather sit on the critical path
    cp_forward: float = 0.0
    cp_backward: float = 0.0
    cp_forward_exposed: float = 0.0
    cp_backward_exposed: float = 0.0


def ring_merge_bytes(model: Model, tokens: float, t: int, c: int) -> tuple[float, float]:
    """Bytes ring attention moves to merge each of its c steps' partial results into the running one, a bf16
    pass each (read the step's, read and write the running: 6 bytes an element), forward and backward.
    Forward: the output, rescaled by the step's log-sum-exp (TransformerEngine's
    flash_attn_fwd_out_correction); backward: dQ, dK and dV summed over the steps (dq.add_, dkv.add_).
    The slowest rank runs all c steps in full."""
    kv = 2 * model.kv_heads * model.head_dim
    return c * 6 * tokens * model.hidden / t, c * 6 * tokens * (model.hidden + kv) / t


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


def layer_time(model: Model, layout: Layout, cluster: Cluster, micro_batch: int,
               tp_group: Group, cp_group: Group, ep_group: Group) -> LayerTime:
    t, c = layout.tp, layout.cp
    h, f, s = model.hidden, model.ffn_hidden, model.seq_len
    tokens = micro_batch * s / c  # rows of every matmul on this rank
    qkv_cols = (h + 2 * model.kv_heads * model.head_dim) / t
    ffn_up = f * (2 if model.gated_mlp else 1) / t
    shapes = [(qkv_cols, h), (h, h / t), (ffn_up, h), (h, f / t)]  # (n, k) of Q/K/V, O, FFN up, FFN down
    experts = model.top_k if model.experts else 1
    forward_mm = backward_in = backward_w = 0.0
    fp8 = layout.precision == "fp8"  # the layers' linears in FP8 (TransformerEngine); attention and logits in bf16
    for i, (n, k) in enumerate(shapes):
        rows = tokens * (experts if i >= 2 else 1)
        forward_mm += matmul_time(rows, n, k, cluster, fp8)
        backward_in += matmul_time(rows, k, n, cluster, fp8)  # dX = dY · Wᵀ
        backward_w += matmul_time(k, n, rows, cluster, fp8)  # dW = Xᵀ · dY
        if fp8:
            cast_f, cast_b = fp8_cast_bytes(rows, n, k)
            forward_mm += memory_time(cast_f, cluster)
            backward_in += memory_time(cast_b, cluster)
    # attention core, this rank's heads and queries over the whole context
    heads = model.heads / t
    if model.flash_attention:  # the kernel's published rate for this GPU, head size, mask, direction, length
        attn_fwd, attn_bwd = kernels.attention_time(cluster.gpu, layout.attention_kernel, tokens, s, model.head_dim,
                                                    heads)
    else:
        scores = tokens * s * heads * BF16  # this rank's s×s scores, written once by Q·Kᵀ
        qk = max(2 * tokens * s * model.head_dim * heads / cluster.gpu.sustained_flops,
                 memory_time(scores + 2 * BF16 * tokens * h / t, cluster))
        softmax = memory_time(2 * scores, cluster)  # fused scale, mask, softmax: read and write
        dropout = memory_time(2.5 * scores, cluster) if model.dropout else 0.0  # read, write, 1-byte mask
        av = max(2 * tokens * s * model.head_dim * heads / cluster.gpu.sustained_flops,
                 memory_time(scores + 2 * BF16 * tokens * h / t, cluster))
        attn_fwd = qk + softmax + dropout + av
        attn_bwd = 2 * (qk + av) + 1.5 * (softmax + dropout)
    # memory-bound passes over [tokens, h] (replicated on TP ranks without sequence parallelism)
    sp = t if (layout.sequence_parallel and t > 1) else 1
    per_row = 2 * 4 * h + 2 * (3.5 if model.dropout else 3) * h  # 2 norms, 2 (dropout +) residual adds
    per_row_tp = (6 if model.gated_mlp else 4) * f * experts / t  # GeLU or SwiGLU
    elementwise = memory_time(BF16 / 2 * (tokens * per_row / sp + tokens * per_row_tp), cluster)
    forward = forward_mm + attn_fwd + elementwise
    backward_input = backward_in + attn_bwd + 1.5 * elementwise
    if c > 1 and layout.cp_comm == "ring":
        merge_f, merge_b = ring_merge_bytes(model, tokens, t, c)
        forward += memory_time(merge_f, cluster)
        backward_input += memory_time(merge_b, cluster)
    if layout.recompute == "full":
        recompute = forward
    elif layout.recompute == "selective" and not model.flash_attention:
        recompute = attn_fwd
    else:
        recompute = 0.0  # FlashAttention recomputes its scores inside its own backward already
    if layout.recompute == "full":  # one layer in every `recompute_every` replayed (the average layer)
        recompute /= layout.recompute_every
    # TP: two collectives of the [tokens, h] activation each way
    activation = tokens * h * BF16
    if t > 1:
        if layout.sequence_parallel:
            one = collectives.all_gather(activation, tp_group, cluster) + collectives.reduce_scatter(
                activation, tp_group, cluster)
        else:
            one = collectives.all_reduce(activation, tp_group, cluster)
        tp_forward, tp_backward = 2 * one, 2 * one
    else:
        tp_forward = tp_backward = 0.0
    cp_f = cp_b = cp_f_exposed = cp_b_exposed = 0.0
    if c > 1:
        traffic = context_parallel_traffic(layout.cp_comm, tokens, model.heads / t, kv_heads_per_tp_rank(model, t),
                                           model.head_dim, c)
        if layout.cp_comm == "ring":  # K and V passed around beside the attention compute, one block a hop
            hop = collectives.send(traffic["forward"]["send"] / (c - 1), cp_group.crosses_nodes, cluster)
            cp_f = (c - 1) * hop  # K, V on to the next rank, c − 1 times
            cp_b = (2 * c - 1) * hop  # K, V again, and the dK, dV accumulators all the way home: c hops
            cp_f_exposed, cp_b_exposed = max(0.0, cp_f - attn_fwd), max(0.0, cp_b - attn_bwd)
        elif layout.cp_comm == "all_to_all":  # QKV out and O back; dO out and dQKV back: all on the critical path
            out = tokens * model.heads / t * model.head_dim * BF16  # O (forward) or dO (backward)
            qkv = traffic["forward"]["all_to_all"] - out
            cp_f = cp_b = cp_f_exposed = cp_b_exposed = (collectives.all_to_all(qkv, cp_group, cluster)
                                                         + collectives.all_to_all(out, cp_group, cluster))
        else:  # all-gather K, V before attention; reduce-scatter dK, dV after its backward (Llama 3: exposed)
            cp_f = cp_f_exposed = collectives.all_gather(traffic["forward"]["all_gather"] * c, cp_group, cluster)
            cp_b = cp_b_exposed = collectives.reduce_scatter(traffic["backward"]["reduce_scatter"], cp_group, cluster)
    ep_exposed = 0.0
    if model.experts and layout.ep > 1:  # dispatch and combine, forward and backward
        ep_exposed = 4 * collectives.all_to_all(activation * model.top_k, ep_group, cluster)
    return LayerTime(forward, backward_input, backward_w, recompute, tp_forward, tp_backward, ep_exposed, attn_fwd,
                     cp_f, cp_b, cp_f_exposed, cp_b_exposed)


# -- data-parallel traffic ------------------------------------------------------------------------

def data_parallel_traffic(psi: float, zero_stage: int, ranks: int, grad_accumulation: int = 1,
                          grad_bytes: int = BF16, param_bytes: int = BF16) -> dict[str, float]:
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


# -- the step --------------------------------------------------------------------------------------

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


def layer_param_split(model: Model, layout: Layout) -> tuple[float, float]:
    """One layer's parameters on one GPU, (dense, expert): attention and norms split over TP; a mixture of
    experts' FFNs also over EP. A dense model's FFN, and experts not split over EP (ep = 1, so replicated
    on every data-parallel rank as the dense weights are), count as dense."""
    ffn = (3 if model.gated_mlp else 2) * model.hidden * model.ffn_hidden * max(1, model.experts)
    attn = model.layer_params() - ffn
    if not model.experts or layout.ep == 1:
        return (attn + ffn) / layout.tp, 0.0
    return attn / layout.tp, ffn / layout.ep / layout.tp


def layer_params_local(model: Model, layout: Layout) -> float:
    """One layer's parameters on one GPU: attention split over TP, experts also over EP."""
    return sum(layer_param_split(model, layout))


def stage_param_split(model: Model, layout: Layout, stage: int) -> tuple[float, float]:
    """Parameters one GPU of `stage` holds, (dense, expert): its layers' share, plus an embedding on the
    first and the output layer on the last stage (dense), all split over TP (and the experts over EP)."""
    p = layout.pp
    embeddings = (stage == 0) + (stage == p - 1)
    layers = math.ceil(model.layers / p)  # an uneven split: the busiest stage
    dense, expert = layer_param_split(model, layout)
    return layers * dense + embeddings * model.vocab * model.hidden / layout.tp, layers * expert


def stage_params(model: Model, layout: Layout, stage: int) -> float:
    return sum(stage_param_split(model, layout, stage))


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


def shard_ranks(layout: Layout, dpc: int) -> tuple[int, int]:
    """The ranks over which (dense, expert) parameters' gradients are reduced and, under ZeRO, their states
    sharded: the dense over DP·CP (hybrid sharded: `zero_shards` of them); a mixture of experts' expert weights
    over their expert-data-parallel group, dp·cp/ep ranks."""
    return layout.zero_shards or dpc, dpc // layout.ep


def replica_groups(model: Model, layout: Layout, cluster: Cluster, g: dict[str, Group]) -> list[Replicas]:
    """The dense parameters over the DP·CP ranks (or, hybrid sharded, over `zero_shards` of them, replicated
    across the rest); a mixture of experts' expert parameters over the expert-data-parallel ranks, dp·cp/ep of
    them (Megatron-core's expert_data_parallel group); groups of one rank (nothing to reduce) left out."""
    dpc = layout.dp(cluster.gpus) * layout.cp
    (dense, expert), (dense_stage, expert_stage) = (layer_param_split(model, layout),
                                                    stage_param_split(model, layout, 0))
    shards, expert_ranks = shard_ranks(layout, dpc)
    n, t = cluster.gpus_per_node, layout.tp
    replicas = dpc // shards  # consecutive ranks shard; the ranks holding the same shard are t·shards apart
    found = [Replicas(dense, dense_stage, shards, place(shards, t, n), replicas, place(replicas, t * shards, n)),
             Replicas(expert, expert_stage, expert_ranks, g["edp"])]
    return [r for r in found if r.stage > 0 and r.ranks * r.across > 1]


def sharded_traffic(psi: float, zero_stage: int, shards: int, replicas: int = 1, grad_accumulation: int = 1,
                    grad_bytes: int = BF16, param_bytes: int = BF16) -> dict[str, dict[str, float]]:
    """Bytes each rank hands each collective per step, per mesh dimension: ZeRO's traffic inside the group of
    `shards` ranks (data_parallel_traffic), and, hybrid sharded, an all-reduce of the rank's gradient shard
    across the `replicas` groups, once per step (FSDP's HSDP, Zhao et al. 2023 sec. 3.2.2; the live hsdp run)."""
    out = {"shard": data_parallel_traffic(psi, zero_stage, shards, grad_accumulation, grad_bytes, param_bytes)}
    if replicas > 1:
        out["replicate"] = {"all_reduce": psi * grad_bytes / shards}
    return out


def chunk_layers(layers: int, p: int, v: int) -> list[int]:
    """Layers of each of the p·v model chunks, in stage order. Up to one layer a chunk: ceil(L/(p·v)) each, the
    busiest split, which sets the pace. Beyond (p·v = L + 1 or L + 2), Llama 3's placement (Dubey et al. 2024,
    sec. 3.3.2, "Pipeline parallelism"): one layer a chunk, the first chunk holding only the embedding and, with
    L + 2 chunks, the last only the output layer and the loss."""
    chunks = p * v
    if chunks <= layers:
        return [math.ceil(layers / chunks)] * chunks
    return [0] + [1] * layers + [0] * (chunks - layers - 1)


def interleaved_layers_in_flight(chunks: list[int], p: int, v: int, m: int, stage: int) -> int:
    """The most layers whose activations `stage` holds at once under Megatron's interleaved schedule
    (Narayanan et al. 2021 sec. 2.2.2; Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving):
    a warm-up of (p − stage − 1)·2 + (v − 1)·p chunk forwards, then one forward and one backward each, forward k
    running the stage's chunk (k mod p·v) // p and backward k the chunk v − 1 − that. With equal chunks of k
    layers the peak is the warm-up's end, (p·v + p − 1)·k: the first stage's L·(1 + (p − 1)/(p·v)) of
    Korthikanti et al. (sec. 4.2.3). With Llama 3's placement the first stage's embedding-only chunk holds
    nothing, the second stage holds a layer more, and the steady phase can go above the warm-up (a layer's
    forward in while an empty chunk's backward goes out); the steady phase repeats every p·v steps, so one
    period of it is replayed."""
    own = chunks[stage::p]
    total = m * v
    warmup = min(total, (p - stage - 1) * 2 + (v - 1) * p)
    cycles, rest = divmod(warmup, p * v)
    full, part = divmod(rest, p)
    held = cycles * p * sum(own) + p * sum(own[:full]) + (part * own[full] if full < v else 0)
    peak = held
    for k in range(min(total - warmup, p * v)):
        held += own[((warmup + k) % (p * v)) // p]
        peak = max(peak, held)
        held -= own[v - 1 - (k % (p * v)) // p]
    return peak


def layer_activation_bytes_per_token(model: Model) -> float:
    """Bytes one layer keeps for backward per token, bf16, the attention scores aside (fused, or recomputed), in
    Korthikanti et al.'s decomposition (sec. 4.1): the two norms' inputs, the Q/K/V projection's input, Q, K, V
    (K and V of the key/value heads only), the attention output, the MLP's input, 2 bytes an element; the MLP's
    activations (GeLU: its input and output, 2·f each; SwiGLU: gate, up and their product, 3·f; the routed
    experts' top_k copies); a 1-byte dropout mask after attention and after the MLP. A GPT-3 layer (MHA,
    GeLU of 4h, dropout) comes to their 34·h."""
    h, kv = model.hidden, model.kv_heads * model.head_dim
    f = model.ffn_hidden * (model.top_k if model.experts else 1)
    mlp = (6 if model.gated_mlp else 4) * f
    masks = 2 * h if model.dropout else 0
    return 2 * (6 * h + 2 * kv) + mlp + masks


def layer_activation_bytes(model: Model, layout: Layout, micro_batch: int, recompute: str) -> float:
    """Bytes one layer keeps for backward on one GPU: formulas' (Korthikanti's) count, with this model's own
    tensors (layer_activation_bytes_per_token) and, with CP by all-gather, the other ranks' K and V."""
    t, c = layout.tp, layout.cp
    if recompute == "none" and model.flash_attention:
        recompute = "selective"  # FlashAttention never stores the s×s scores (REFERENCE.md)
    per_layer = formulas.activation_bytes_per_layer(model.seq_len // c, micro_batch, model.hidden, model.heads, t,
                                                    recompute, layout.sequence_parallel)
    if recompute != "full":  # Korthikanti's 34·h bytes a token are a GPT-3 layer's; this model's own, tensor by tensor
        per_layer += micro_batch * model.seq_len / c * (layer_activation_bytes_per_token(model) - 34 * model.hidden) / t
    if c > 1 and layout.cp_comm == "all_gather" and recompute != "full":  # the other ranks' K, V kept for backward
        kv_heads = kv_heads_per_tp_rank(model, t)
        per_layer += (c - 1) * 2 * micro_batch * model.seq_len / c * kv_heads * model.head_dim * BF16
    return per_layer


def memory(model: Model, layout: Layout, cluster: Cluster, micro_batch: int, m: int, v: int) -> dict[str, float]:
    """Bytes per GPU by role on the busiest stage (first or last), formulas' model states and activations."""
    dp = layout.dp(cluster.gpus)
    t, p, c = layout.tp, layout.pp, layout.cp
    recompute = layout.recompute
    if recompute == "full" and layout.recompute_every > 1:  # the average layer: 1 in n keeps its input only
        kept = layer_activation_bytes(model, layout, micro_batch, "none")
        per_layer = (layer_activation_bytes(model, layout, micro_batch, "full")
                     + (layout.recompute_every - 1) * kept) / layout.recompute_every
    else:
        per_layer = layer_activation_bytes(model, layout, micro_batch, recompute)
    chunks = chunk_layers(model.layers, p, v)
    if layout.schedule == "gpipe":
        in_flight = m
    else:
        in_flight = min(p, m) * (1 + (p - 1) / (p * v) if v > 1 else 1)
    best = None
    # the first and last stages hold the embedding and the output; with Llama 3's placement the second holds a
    # layer more than the first (its first chunk is the embedding's)
    for stage in {0, min(1, p - 1), p - 1}:
        states: dict[str, float] = {}  # dense and expert weights, each sharded over its own replicas
        for params, ranks in zip(stage_param_split(model, layout, stage), shard_ranks(layout, dp * c)):
            for role, nbytes in formulas.model_state_bytes(params, "bf16", layout.zero_stage, ranks).items():
                states[role] = states.get(role, 0.0) + nbytes
        layers = sum(chunks[stage::p])  # the stage's chunks (Llama 3's placement: the first holds no layer)
        if layout.schedule == "interleaved_1f1b" and v > 1 and m >= p:
            acts = per_layer * interleaved_layers_in_flight(chunks, p, v, m, stage)
        elif stage == p - 1:  # 1F1B: the last stage runs each micro-batch's backward right after its forward
            acts = per_layer * layers * min(in_flight, max(1, v))
        else:
            acts = per_layer * layers * in_flight
        if recompute == "full":  # the layer being replayed holds its whole activations for a moment
            acts += formulas.activation_bytes_per_layer(model.seq_len // c, micro_batch, model.hidden, model.heads,
                                                        t, "selective", layout.sequence_parallel)
        if stage == p - 1:  # logits in bf16 and their fp32 softmax, this rank's vocabulary share
            acts += micro_batch * model.seq_len / c * model.vocab / t * (BF16 + 4)
        if layout.zero_stage == 3:  # the gathered layer and the one prefetched
            states["parameters"] += 2 * BF16 * layer_params_local(model, layout)
        roles = {**states, "activations": acts}
        roles["total"] = sum(roles.values())
        if best is None or roles["total"] > best["total"]:
            best = roles
    return best


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
    keep the fastest that fits in memory (the smallest footprint when none fits)."""
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
    g = groups(cluster, layout)
    lt = layer_time(model, layout, cluster, b, g["tp"], g["cp"], g["ep"])
    tokens = b * model.seq_len / c
    # ZeRO-3: gather each layer's weights before its forward and again before its backward, and
    # reduce-scatter its gradients after, one layer ahead of compute (prefetch)
    # (dense weights over DP·CP, experts over their expert-data-parallel group, one after the other)
    replicas = replica_groups(model, layout, cluster, g)
    zero3_f = zero3_b = z3_gather = z3_scatter = 0.0
    if layout.zero_stage == 3 and replicas:
        z3_gather = sum(collectives.all_gather(BF16 * r.layer, r.group, cluster) for r in replicas)
        z3_scatter = sum(collectives.reduce_scatter(layout.grad_reduce_bytes * r.layer, r.group, cluster)
                         for r in replicas)
        zero3_f = max(0.0, z3_gather - lt.forward - lt.tp_forward)
        # the backward window: input gradients (and replay), then the weight gradients or TP's backward
        # collectives beside them, whichever is longer
        tp_beside = lt.tp_backward if layout.overlap_tp_comm else 0.0
        window = lt.backward_input + lt.recompute + max(lt.backward_weight, tp_beside) + (
            0.0 if layout.overlap_tp_comm else lt.tp_backward)
        zero3_b = max(0.0, z3_gather + z3_scatter - window)
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
    logits_f = matmul_time(tokens, model.vocab / t, model.hidden, cluster) + memory_time(
        tokens * model.vocab / t * (BF16 + 4) * 2, cluster)
    logits_b = matmul_time(tokens, model.hidden, model.vocab / t, cluster) + matmul_time(
        model.hidden, model.vocab / t, tokens, cluster)
    # the loss's backward (Megatron's vocab-parallel cross entropy): the saved fp32 softmax minus the one-hot
    # target, scaled in place (read 4, write 4), then cast to bf16 for the logit GEMMs (read 4, write 2)
    logits_b += memory_time(tokens * model.vocab / t * (4 + 4 + 4 + BF16), cluster)
    # the input embedding's backward is no GEMM: a dense bf16 gradient of the whole [V/t, h] table is written
    # (torch's embedding_dense_backward) and added to the accumulator (read 2, read and write the accumulator)
    accumulator = layout.grad_reduce_bytes
    embedding_b = memory_time(model.vocab / t * model.hidden * (BF16 + BF16 + 2 * accumulator), cluster)
    # without gradient-accumulation fusion every weight gradient takes the same pass, once per micro-batch
    unfused = 0.0 if layout.grad_accumulation_fusion else BF16 + 2 * accumulator
    bw_compute += memory_time(layer_params_local(model, layout) * unfused, cluster)
    bw_layer = bw_compute + zero3_b
    logits_b += 2 * memory_time(model.vocab / t * model.hidden * unfused, cluster)  # /2 below: on W
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
    chunks = chunk_layers(model.layers, p, v)
    dur = {"F": [f_layer * n for n in chunks], "B": [bi_layer * n for n in chunks], "W": [bw_layer * n for n in chunks]}
    dur["F"][-1] += logits_f
    dur["B"][-1] += logits_b / 2
    dur["W"][-1] += logits_b / 2
    dur["W"][0] += embedding_b
    dur["F"][0] += embed_f
    dur["B"][0] += embed_b
    dur["F"][-1] += head_f
    dur["B"][-1] += head_b
    if layout.schedule != "zero_bubble":  # B carries the weight gradients too
        dur["B"] = [x + y for x, y in zip(dur["B"], dur["W"])]
    act = tokens * model.hidden * BF16 / t  # each TP rank sends its 1/t (SP, or Megatron's scatter/gather)
    hop = collectives.send(act, g["pp"].crosses_nodes, cluster) if p > 1 else 0.0
    if hop and not layout.overlap_p2p_comm:  # a blocking send: the sender's stream waits for the transfer
        dur["F"] = [d + hop * (s < stages - 1) for s, d in enumerate(dur["F"])]
        dur["B"] = [d + hop * (s > 0) for s, d in enumerate(dur["B"])]
    timed = pipeline_time(layout.schedule, p, m, v, dur, hop if layout.overlap_p2p_comm else 0.0, keep_spans, fast)
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
    traffics = [sharded_traffic(r.stage, layout.zero_stage, r.ranks, r.across, m, layout.grad_reduce_bytes, BF16)
                for r in replicas]
    reduce = gather = 0.0  # the data-parallel reduction of stages 0-2 and their parameter all-gather
    if replicas and layout.zero_stage < 3:
        for r, both in zip(replicas, traffics):  # dense, then experts (Megatron-core's DDP: separate buffers)
            traffic = both["shard"]
            if layout.zero_stage == 0:
                reduce += bucketed(collectives.all_reduce, traffic["all_reduce"], layout, r, cluster)
            else:
                per_reduce = traffic["reduce_scatter"] / (m if layout.zero_stage == 2 else 1)
                reduce += bucketed(collectives.reduce_scatter, per_reduce, layout, r, cluster)
                gather += bucketed(collectives.all_gather, traffic["all_gather"] * r.ranks, layout, r, cluster,
                                   element_bytes=BF16)
        if layout.zero_stage == 2 and m > 1:  # a reduce-scatter after every micro-batch's backward, overlapped
            per_mb = max(0.0, reduce - last_backward)
            reduce_exposed = per_mb * (m - 1) + (overlapped_tail(reduce, last_backward, layers_per_chunk)
                                                 if layout.overlap_grad_reduce else reduce)
        elif layout.overlap_grad_reduce:  # buckets reduced while the last backward goes on; the last bucket waits
            reduce_exposed = overlapped_tail(reduce, last_backward, layers_per_chunk)
        else:
            reduce_exposed = reduce
        exposed["dp"] = reduce_exposed + (0.0 if layout.overlap_param_gather else gather)
        comm_total["dp"] = reduce + gather
    elif layout.zero_stage == 3 and replicas:
        comm_total["zero3"] = (2 * z3_gather + z3_scatter) * model.layers / p * m
        # HSDP: each layer's gradient shard all-reduced across the replica groups once its reduce-scatter is done,
        # in the last micro-batch only (the shards accumulate locally before it), one call per layer (FSDP's unit)
        calls = math.ceil(model.layers / p)
        reduce = sum(calls * collectives.all_reduce(both["replicate"]["all_reduce"] / calls, r.across_group, cluster)
                     for r, both in zip(replicas, traffics) if "replicate" in both)
        if layout.overlap_grad_reduce:
            exposed["dp"] = overlapped_tail(reduce, last_backward, layers_per_chunk)
        else:
            exposed["dp"] = reduce
        comm_total["dp"] = reduce
    optimizer_params = sum(params / (ranks if layout.zero_stage >= 1 else 1)  # the optimizer steps the shard it owns
                           for params, ranks in zip(stage_param_split(model, layout, 0), shard_ranks(layout, dp * c)))
    optimizer = memory_time(optimizer_params * ADAM_BYTES_PER_PARAM, cluster)
    step = timed.makespan + exposed["dp"] + optimizer
    exposed["pp"] = max(0.0, timed.makespan - (sum(dur["F"]) + sum(dur["B"]) + sum(dur["W"]) * (
        layout.schedule == "zero_bubble")) * m / p) if p > 1 else 0.0
    exposed_total = sum(v for k, v in exposed.items() if k != "pp")
    compute = (lt.forward + lt.backward_input + lt.backward_weight + lt.recompute) * model.layers / p * m
    mem = memory(model, layout, cluster, b, m, v)
    activation_bytes = tokens * model.hidden * BF16
    # 2 in each forward (and in its replay under full recomputation), 2 backward
    tp_ops = (2 * replays + 2) * model.layers / p * m
    per_op = (2 * formulas.all_gather_bytes(activation_bytes, t) if layout.sequence_parallel
              else formulas.ring_all_reduce_bytes(activation_bytes, t))
    # ZeRO-3's gathers and scatters on the zero3 lane; the data-parallel reduction (HSDP's across replicas) on dp
    in_group = sum(wire_bytes(both["shard"], r.ranks) for r, both in zip(replicas, traffics))
    across = sum(wire_bytes(both.get("replicate", {}), r.across) for r, both in zip(replicas, traffics))
    wire = {"dp": across + (in_group if layout.zero_stage < 3 else 0.0),
            "zero3": in_group if layout.zero_stage == 3 else 0.0,
            "tp": tp_ops * per_op if t > 1 else 0.0, "pp": 2 * m * v * act if p > 1 else 0.0}
    if model.experts and layout.ep > 1:  # dispatch and combine, forward and backward: 4 all-to-alls a layer
        routed = tokens * model.hidden * BF16 * model.top_k
        wire["ep"] = 4 * formulas.all_to_all_bytes(routed, layout.ep) * model.layers / p * m
    if c > 1:
        cp = context_parallel_traffic(layout.cp_comm, tokens, model.heads / t, kv_heads_per_tp_rank(model, t),
                                      model.head_dim, c)
        wire["cp"] = (replays * sent_bytes(cp["forward"], c) + sent_bytes(cp["backward"], c)) * model.layers / p * m
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
            gather=z3_gather, scatter=z3_scatter, bucket=reduce / model.layers,  # ZeRO-2: reduce is per micro-batch
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
                          "start": timed.makespan + exposed["dp"], "end": step})
    return Estimate(
        model=model, cluster=cluster, layout=layout, dp=dp, micro_batches=m, step_time_s=step,
        pipeline_s=timed.makespan, bubble_fraction=timed.bubble_fraction, exposed_comm_s=exposed_total,
        exposed_by_kind=exposed, comm_total_s=comm_total, compute_s=compute, optimizer_s=optimizer,
        memory_per_gpu_bytes=mem, tokens_per_s=layout.global_batch * model.seq_len / step,
        model_flops=model.model_flops(layout.global_batch * model.seq_len),
        comm_bytes_per_gpu=wire,
        stage_times={"forward": dur["F"][0], "backward": dur["B"][0], "weight": dur["W"][0], "hop": hop},
        spans=spans)


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


MAX_TIMED_ACTIONS = 20_000


def pipeline_time(kind: str, p: int, m: int, v: int, dur: dict[str, list[float]], hop: float,
                  keep_spans: bool, fast: bool = False) -> schedule.Timed:
    """The schedule on a clock; past MAX_TIMED_ACTIONS actions, the same schedule with fewer micro-batches
    scaled up (its steady state is periodic). `fast` (the layout search): the schedule's bubble formula
    (pipeline_schedules.bubble_formula, exact for uniform stages) plus the hops of warm-up and drain."""
    if p == 1:
        per = dur["F"][0] + dur["B"][0] + (dur["W"][0] if kind == "zero_bubble" else 0.0)
        total = sum(dur["F"]) + sum(dur["B"]) + (sum(dur["W"]) if kind == "zero_bubble" else 0.0)
        spans = []
        if keep_spans:
            for i in range(m):
                spans.append((0, Action("F", 0, i), i * per, i * per + dur["F"][0]))
                spans.append((0, Action("B", 0, i), i * per + dur["F"][0], (i + 1) * per))
        return schedule.Timed(total * m, [total * m], spans)
    if fast:
        busy = m * max(sum(dur["F"][r::p]) + sum(dur["B"][r::p])
                       + (sum(dur["W"][r::p]) if kind == "zero_bubble" else 0.0) for r in range(p))
        num, den = bubble_formula(kind, p, m, v)
        idle = busy * num / (den - num) + 2 * (p - 1) * hop
        return schedule.Timed(busy + idle, [busy] * p, [])
    actions = p * m * v * (3 if kind == "zero_bubble" else 2)
    if actions <= MAX_TIMED_ACTIONS or keep_spans:
        return schedule.run(kind, p, m, v, dur, hop, keep_spans)
    rounds = max(2, MAX_TIMED_ACTIONS // (p * v * 3))
    small_m = max(p, (rounds // p) * p) if kind == "interleaved_1f1b" else rounds
    small_m = min(small_m, m)
    small = schedule.run(kind, p, small_m, v, dur, hop)
    per_mb = sum(small.busy) / p / small_m
    idle = small.makespan - per_mb * small_m  # warm-up and drain: independent of m
    makespan = per_mb * m + idle
    return schedule.Timed(makespan, [per_mb * m] * p, [])
