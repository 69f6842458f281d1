"""A step without pipeline stages, layer by layer: compute on one stream, each kind of communication on its
own (NCCL runs TP, data-parallel and ZeRO traffic on separate communicators and streams), with the
dependencies `cost` charges:

- TP (Megatron): the forward's collectives sit between the layer's matmuls, so compute waits for them;
  in backward they run beside the weight-gradient matmuls (Korthikanti et al. 2022, sec. 6.2) and the
  next layer waits only for what is left;
- ZeRO-3 / FSDP: each layer's parameters are all-gathered one layer ahead of the compute that needs them
  (prefetch), in forward and again in backward, and its gradients reduce-scattered after its backward
  (Rajbhandari et al. 2020; PyTorch FSDP, Zhao et al. 2023);
- DDP and ZeRO-1/2: gradients reduced bucket by bucket (a layer each) as backward produces them, during
  the last micro-batch (ZeRO-2: every micro-batch); the last bucket waits for the last layer; HSDP
  all-reduces each layer's gradient shard across the replica groups after its reduce-scatter, the same way;
- CP: with ring attention K and V pass around the ring while attention computes (Liu et al. 2023); Ulysses'
  all-to-alls (Jacobs et al. 2023) and Llama 3's all-gather of K and V (and reduce-scatter of their
  gradients) sit between the layer's matmuls, so compute waits for them, as for TP's forward;
- EP (a mixture of experts): the tokens' dispatch to their experts' ranks and the combine, all-to-alls that
  compute waits for (GShard; Megatron-LM's token dispatcher), in forward and in backward;
- the optimizer step after the last gradient is reduced.

Span times are seconds from the start of the step; `layer` −1 is the embedding, `layers` the output layer
and loss.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerCosts:
    layers: int
    micro_batches: int
    forward: float  # one layer, one micro-batch, compute (and CP or EP time it cannot hide)
    backward: float  # input gradients (+ recomputation), compute (and CP or EP time it cannot hide)
    weight: float  # weight-gradient matmuls
    tp_forward: float  # exposed, between the forward's matmuls
    tp_backward: float  # beside the weight gradients
    cp_forward: float  # CP's ring of K and V beside the layer's compute (what it cannot hide is in forward)
    cp_backward: float
    cp_waits_forward: float  # CP communication compute waits for (all-to-all, all-gather), after the forward
    cp_waits_backward: float  # and after the input gradients, before the weight gradients
    ep_waits: float  # MoE: the dispatch and combine all-to-alls, compute waits for them, in forward and in backward
    embed_forward: float  # TP's sum of the vocab-parallel embedding's partial outputs (exposed)
    head_forward: float  # output layer and loss (and TP's collectives there)
    head_backward: float
    embed_backward: float  # the embedding's dense gradient (and TP's all-gather of it with SP), last in backward
    gather: float  # ZeRO-3: one layer's parameters
    scatter: float  # ZeRO-3: one layer's gradients
    bucket: float  # DP: one layer's gradient reduction (0: none)
    reduce_every_micro_batch: bool  # ZeRO-2 reduce-scatters after each micro-batch
    overlap_reduce: bool  # buckets during backward; False: the whole reduction after it
    optimizer: float
    # compute lost to NCCL's SMs while a collective runs beside it (traffic.contention): each layer's forward and
    # backward beside ZeRO-3's gathers and scatters, a reducing micro-batch's backward beside its DP buckets (charged
    # before the last bucket), and the first forward beside ZeRO-1/2's overlapped parameter all-gather
    forward_lost: float = 0.0
    backward_lost: float = 0.0
    bucket_lost: float = 0.0
    gather_lost: float = 0.0
    # ZeRO-3's root unit (embedding, output layer): gathered before the first layer's gather and kept through backward,
    # its gradients reduce-scattered after the embedding's backward (cost.zero3_fill_and_drain)
    root_gather: float = 0.0
    root_scatter: float = 0.0


def layer_spans(c: LayerCosts) -> list[dict]:
    spans: list[dict] = []
    comm_free: dict[str, float] = {}  # each communication stream's clock

    def compute(kind: str, mb: int, layer: int, start: float, length: float) -> float:
        if length > 0:
            spans.append({"stream": "compute", "rank": 0, "kind": kind, "stage": 0, "mb": mb, "layer": layer,
                          "start": start, "end": start + length})
        return start + length

    def comm(kind: str, mb: int, layer: int, ready: float, length: float) -> float:
        start = max(ready, comm_free.get(kind, 0.0))
        comm_free[kind] = start + length
        if length > 0:
            spans.append({"stream": "comm", "rank": 0, "kind": kind, "stage": 0, "mb": mb, "layer": layer,
                          "start": start, "end": start + length})
        return start + length

    clock = 0.0
    zero3 = c.gather > 0
    for mb in range(c.micro_batches):
        # forward: gather layer l + 1 while layer l computes
        if c.embed_forward:
            clock = comm("tp", mb, -1, clock, c.embed_forward)
        if zero3 and c.root_gather:
            comm("zero3", mb, c.layers, clock, c.root_gather)
        gathered = comm("zero3", mb, 0, clock, c.gather) if zero3 else clock
        for layer in range(c.layers):
            start = max(clock, gathered)
            if zero3 and layer + 1 < c.layers:
                gathered = comm("zero3", mb, layer + 1, start, c.gather)
            if c.cp_forward:
                comm("cp", mb, layer, start, c.cp_forward)
            first = c.gather_lost if mb == 0 and layer == 0 else 0.0  # beside the parameter all-gather
            clock = compute("F", mb, layer, start, c.forward + c.forward_lost + first)
            if c.cp_waits_forward:
                clock = comm("cp", mb, layer, clock, c.cp_waits_forward)
            if c.ep_waits:
                clock = comm("ep", mb, layer, clock, c.ep_waits)
            if c.tp_forward:
                clock = comm("tp", mb, layer, clock, c.tp_forward)
        clock = compute("F", mb, c.layers, clock, c.head_forward)
        # backward, last layer first: its gather, issued by its pre-backward hook, beside the output layer's backward
        gathered = comm("zero3", mb, c.layers - 1, clock, c.gather) if zero3 else clock
        clock = compute("B", mb, c.layers, clock, c.head_backward)
        reduce_now = c.bucket > 0 and (c.reduce_every_micro_batch or mb == c.micro_batches - 1)
        for layer in reversed(range(c.layers)):
            start = max(clock, gathered)
            if zero3 and layer > 0:
                gathered = comm("zero3", mb, layer - 1, start, c.gather)
            if c.cp_backward:
                comm("cp", mb, layer, start, c.cp_backward)
            inputs_done = compute("B", mb, layer, start, c.backward + c.backward_lost)
            if c.cp_waits_backward:
                inputs_done = comm("cp", mb, layer, inputs_done, c.cp_waits_backward)
            if c.ep_waits:
                inputs_done = comm("ep", mb, layer, inputs_done, c.ep_waits)
            weights_done = compute("W", mb, layer, inputs_done, c.weight)
            tp_done = comm("tp", mb, layer, inputs_done, c.tp_backward) if c.tp_backward else inputs_done
            clock = max(weights_done, tp_done)
            scattered = comm("zero3", mb, layer, clock, c.scatter) if zero3 else clock
            if reduce_now and c.overlap_reduce and layer > 0:  # HSDP: the shard, once reduce-scattered
                comm("dp", mb, layer, scattered, c.bucket)
        clock = compute("B", mb, -1, clock, c.embed_backward + (c.bucket_lost if reduce_now and c.overlap_reduce else 0.0))
        if zero3 and c.root_scatter:  # the root's gradients, the embedding's the last computed
            comm("zero3", mb, -1, clock, c.root_scatter)
        if reduce_now and c.overlap_reduce:  # the first layer shares the last bucket with the embedding
            comm("dp", mb, 0, clock, c.bucket)
        if reduce_now and not c.overlap_reduce:
            clock = comm("dp", mb, -1, clock, c.bucket * c.layers)
    done = max([clock, *comm_free.values()])  # the optimizer needs every gradient reduced
    compute("opt", -1, -1, done, c.optimizer)
    return spans


def span_count(e) -> int:
    """Spans the timeline of estimate `e` would hold: F and B (and W) of every micro-batch on every stage;
    without stages, layer by layer: F, B, W and each kind of communication's spans per layer and micro-batch
    (ZeRO-3: two gathers and a reduce-scatter; TP, CP and EP: one each way; a DP bucket). Cheap to ask before
    keeping the spans of a large step."""
    lay = e.layout
    if lay.pp == 1:
        comm = (3 * (lay.zero_stage == 3) + 2 * (lay.tp > 1) + 2 * (lay.cp > 1)
                + 2 * (lay.ep > 1 and e.model.experts > 0) + 1)
        return (3 + comm) * (e.model.layers + 1) * e.micro_batches
    per = 3 if lay.schedule == "zero_bubble" else 2
    return lay.pp * lay.virtual_stages * e.micro_batches * per
