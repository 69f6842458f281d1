"""Tensor parallelism: every rank holds a slice of each weight matrix and all ranks compute one layer together.

Megatron-LM (Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language
Models Using Model Parallelism", arXiv:1909.08053) splits a transformer layer so that
it needs only two all-reduces forward and two backward:

- attention: the QKV projection is split by columns (whole heads per rank), each rank
  attends with its own heads, the output projection is split by rows;
- MLP: the first Linear is split by columns (the GeLU stays local), the second by rows.

A row-parallel Linear leaves every rank with a *partial sum* of the output, so an
all-reduce (`g`) joins them; its conjugate `f` sits before the column-parallel Linear:
identity forward, all-reduce of the input gradient backward.

Sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", arXiv:2205.05198) also splits the LayerNorms and residuals along the
sequence: `f` becomes an all-gather (reduce-scatter backward) and `g` a reduce-scatter
(all-gather backward), the same bytes on the wire, and activations outside the matmuls
shrink t-fold. The replicated LayerNorm and bias parameters then see only part of the
sequence, so their gradients are all-reduced over the tensor-parallel group.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_tolerance, max_abs_diff
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import tensor_view
from simulations.words import counted


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tp: int = Field(4, ge=1, le=8, description="Tensor-parallel ranks (world size)")
    hidden: int = Field(16, ge=2, le=64, description="Hidden size h")
    heads: int = Field(8, ge=1, le=16, description="Attention heads (split across ranks)")
    seq_len: int = Field(4, ge=1, le=64, description="Sequence length s")
    batch: int = Field(1, ge=1, le=4, description="Micro-batch size b")
    sequence_parallel: bool = Field(False, description="Sequence parallelism (all-gather/reduce-scatter)")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _divisible(self) -> Params:
        if self.heads % self.tp:
            raise ValueError(f"heads ({self.heads}) must be a multiple of tp ({self.tp}): each rank takes whole heads")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.sequence_parallel and self.seq_len % self.tp:
            raise ValueError(f"seq_len ({self.seq_len}) must be a multiple of tp ({self.tp}) "
                             f"with sequence_parallel: each rank keeps s/tp positions")
        return self


Show = Callable[[str, str, torch.Tensor], None] | None  # (phase, caption, result): draw a collective


# -- the f and g operators ---------------------------------------------------------------------------
# Each is an autograd.Function whose forward and backward are conjugate collectives on the TP group.
# `show`, when given, draws a frame right after the collective (the 3D scenario passes None).

def gather_sequence(shard: torch.Tensor, group, tp: int) -> torch.Tensor:
    """All-gather the tp sequence shards (dim 0) into the full sequence."""
    full = shard.new_empty((shard.shape[0] * tp, *shard.shape[1:]))
    return comm.all_gather_into_tensor(full, shard.contiguous(), group=group)


def scatter_sequence(full: torch.Tensor, group, tp: int) -> torch.Tensor:
    """Reduce-scatter along the sequence (dim 0): the sum over ranks, each keeping its own positions."""
    shard = full.new_empty((full.shape[0] // tp, *full.shape[1:]))
    return comm.reduce_scatter_tensor(shard, full.contiguous(), group=group)


class CopyToTP(torch.autograd.Function):
    """f: identity forward; all-reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x, group, show: Show = None):
        ctx.group, ctx.show = group, show
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = comm.all_reduce(grad.contiguous().clone(), group=ctx.group)
        if ctx.show:
            ctx.show("f_backward", "f backward: all-reduce the input gradient (each rank's heads/columns "
                     "contributed a part)", grad)
        return grad, None, None


class ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward (sum the row-parallel partial outputs); identity backward."""

    @staticmethod
    def forward(ctx, partial, group, show: Show = None):
        out = comm.all_reduce(partial.contiguous().clone(), group=group)
        if show:
            show("g_forward", "g forward: all-reduce sums the partial outputs; every rank now holds the "
                 "full result", out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class GatherFromSP(torch.autograd.Function):
    """f with sequence parallelism: all-gather the sequence shards forward; reduce-scatter backward."""

    @staticmethod
    def forward(ctx, shard, group, tp: int, show: Show = None):
        ctx.group, ctx.tp, ctx.show = group, tp, show
        full = gather_sequence(shard, group, tp)
        if show:
            show("f_forward", "f forward (SP): all-gather the sequence shards into the full sequence", full)
        return full

    @staticmethod
    def backward(ctx, grad):
        shard = scatter_sequence(grad, ctx.group, ctx.tp)
        if ctx.show:
            ctx.show("f_backward", "f backward (SP): reduce-scatter sums the input gradient and leaves each "
                     "rank its own positions", shard)
        return shard, None, None, None


class ScatterToSP(torch.autograd.Function):
    """g with sequence parallelism: reduce-scatter the partial outputs forward; all-gather backward."""

    @staticmethod
    def forward(ctx, partial, group, tp: int, show: Show = None):
        ctx.group, ctx.tp, ctx.show = group, tp, show
        shard = scatter_sequence(partial, group, tp)
        if show:
            show("g_forward", "g forward (SP): reduce-scatter sums the partial outputs, each rank keeping "
                 "its own positions", shard)
        return shard

    @staticmethod
    def backward(ctx, grad):
        full = gather_sequence(grad, ctx.group, ctx.tp)
        if ctx.show:
            ctx.show("g_backward", "g backward (SP): all-gather the output gradient of every position", full)
        return full, None, None, None


def enter_tp(x, group, tp: int, sequence_parallel: bool, show: Show = None):
    """Before a column-parallel Linear: f (or its SP form)."""
    return GatherFromSP.apply(x, group, tp, show) if sequence_parallel else CopyToTP.apply(x, group, show)


def leave_tp(partial, group, tp: int, sequence_parallel: bool, show: Show = None):
    """After a row-parallel Linear: g (or its SP form)."""
    return ScatterToSP.apply(partial, group, tp, show) if sequence_parallel else ReduceFromTP.apply(partial, group, show)


# -- the dense block and its slices -----------------------------------------------------------------

def dense_block(hidden: int, seed: int) -> nn.ModuleDict:
    """One pre-LayerNorm transformer layer's weights: attention, then a 4h MLP."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    block = nn.ModuleDict({
        "ln1": nn.LayerNorm(hidden), "qkv": nn.Linear(hidden, 3 * hidden), "proj": nn.Linear(hidden, hidden),
        "ln2": nn.LayerNorm(hidden), "fc1": nn.Linear(hidden, 4 * hidden), "fc2": nn.Linear(4 * hidden, hidden),
    })
    with torch.no_grad():  # LayerNorm starts at (1, 0); perturb it so its gradients are a real check
        for name in ("ln1", "ln2"):
            block[name].weight.add_(0.1 * torch.randn(hidden))
            block[name].bias.add_(0.1 * torch.randn(hidden))
    torch.random.set_rng_state(state)
    return block


def shard_index(name: str, shape, rank: int, tp: int, heads: int):
    """Which part of dense parameter `name` rank `rank` holds, as an index into a view of it.

    Returns (view_shape or None, index): column-parallel weights are split by output rows
    (QKV by whole heads of each of q, k and v), row-parallel weights by input columns;
    LayerNorms and the row-parallel biases are replicated (index None).
    """
    if name in ("qkv.weight", "qkv.bias"):
        per = heads // tp
        view = (3, heads, -1, *shape[1:])
        return view, (slice(None), slice(rank * per, (rank + 1) * per))
    if name in ("fc1.weight", "fc1.bias"):
        n = shape[0] // tp
        return None, (slice(rank * n, (rank + 1) * n),)
    if name in ("proj.weight", "fc2.weight"):
        n = shape[1] // tp
        return None, (slice(None), slice(rank * n, (rank + 1) * n))
    return None, None


def take_shard(t: torch.Tensor, name: str, rank: int, tp: int, heads: int) -> torch.Tensor:
    view, index = shard_index(name, t.shape, rank, tp, heads)
    if index is None:
        return t.detach().clone()
    if view is None:
        return t.detach()[index].clone()
    return t.detach().reshape(view)[index].reshape(-1, *t.shape[1:]).clone()  # whole heads of q, k and v


def place_shard(part: torch.Tensor, name: str, shape, rank: int, tp: int, heads: int) -> torch.Tensor:
    """The inverse of take_shard: a dense-shaped zero tensor holding this rank's part."""
    full = torch.zeros(shape, dtype=part.dtype)
    view, index = shard_index(name, shape, rank, tp, heads)
    if index is None:
        return part.detach().clone()
    target = full.view(view) if view else full
    target[index] = part.detach().reshape(target[index].shape)
    return full


def attend(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    """Causal softmax attention over [s, b, 3·heads·d] -> [s, b, heads·d] (any number of local heads)."""
    s, b, _ = qkv.shape
    q, k, v = (t.reshape(s, b, heads, -1).permute(1, 2, 0, 3) for t in qkv.chunk(3, dim=-1))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    out = scores.softmax(-1) @ v  # [b, heads, s, d]
    return out.permute(2, 0, 1, 3).reshape(s, b, -1)


def block_forward(w: dict[str, torch.Tensor], x: torch.Tensor, heads: int, enter, leave, on_partial=None):
    """The layer, written once: dense when enter/leave are identities, Megatron when they are f and g."""
    h = x.shape[-1]
    a = enter(F.layer_norm(x, (h,), w["ln1.weight"], w["ln1.bias"]))
    context = attend(F.linear(a, w["qkv.weight"], w["qkv.bias"]), heads)
    partial = F.linear(context, w["proj.weight"])  # row-parallel: a partial sum on each rank
    if on_partial:
        on_partial("attention", partial)
    x = x + leave(partial) + w["proj.bias"]

    a = enter(F.layer_norm(x, (h,), w["ln2.weight"], w["ln2.bias"]))
    partial = F.linear(F.gelu(F.linear(a, w["fc1.weight"], w["fc1.bias"])), w["fc2.weight"])
    if on_partial:
        on_partial("mlp", partial)
    return x + leave(partial) + w["fc2.bias"]


def data(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(p.seed + 1)
    x = torch.randn(p.seq_len, p.batch, p.hidden, generator=g)
    return x, torch.randn(p.seq_len, p.batch, p.hidden, generator=g)


# -- one rank's program ------------------------------------------------------------------------------

REPLICATED = ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "proj.bias", "fc2.bias")


def run(ctx: RankContext, p: Params) -> dict:
    tp, rank, sp = p.tp, ctx.rank, p.sequence_parallel
    group = comm.subgroup(range(tp), ctx.group, tag="tp")
    comm.name_group(group, "tp")
    local_heads = p.heads // tp
    show = _frames(rank, tp)

    dense = dense_block(p.hidden, p.seed)
    weights = {name: nn.Parameter(take_shard(t, name, rank, tp, p.heads).to(ctx.device))
               for name, t in dense.named_parameters()}
    trace.frame("shard", f"Each of the {tp} ranks holds 1/{tp} of every weight matrix: QKV and fc1 split by "
                f"columns ({local_heads} of {p.heads} heads here), proj and fc2 by rows. "
                f"LayerNorms and output biases are replicated." if tp > 1 else
                f"The 1 rank holds every weight matrix whole ({counted(p.heads, 'head')}): with tp = 1 nothing is "
                f"split, and nothing moves between ranks.",
                tensors=[tensor_view(n, "parameters", t, shard=(rank, tp)) for n, t in weights.items()
                         if n.endswith("weight") and n not in REPLICATED],
                memory={"parameters": list(weights.values())}, extra=show.extra, rank_extra=show.coord)

    x_full, y_full = data(p)
    x = (x_full.chunk(tp)[rank] if sp else x_full).to(ctx.device).requires_grad_()
    y = (y_full.chunk(tp)[rank] if sp else y_full).to(ctx.device)
    trace.frame("input", f"The input, {p.seq_len}×{p.batch}×{p.hidden} (s×b×h): " +
                (f"sequence parallel, so each rank keeps {p.seq_len // tp} of the {p.seq_len} positions"
                 if sp else "every rank holds all of it"),
                tensors=[tensor_view("x", "activations", x, shard=(rank, tp) if sp else None)],
                extra=show.extra, rank_extra=show.coord)

    with trace.span("forward"):
        out = block_forward(weights, x, local_heads,
                            enter=lambda a: enter_tp(a, group, tp, sp, show),
                            leave=lambda a: leave_tp(a, group, tp, sp, show),
                            on_partial=show.partial)
        # The mean squared error over the whole output; with SP each rank sums its own positions.
        loss = ((out - y) ** 2).sum() / y_full.numel()
    trace.frame("loss", "Forward done: " + ("each rank holds the output for its positions and their part of "
                "the loss" if sp else "every rank holds the same full output and loss"),
                tensors=[tensor_view("out", "activations", out, shard=(rank, tp) if sp else None)],
                status=f"loss {loss.item():.5f}", extra=show.extra, rank_extra={**show.coord, "loss": loss.item()})

    with trace.span("backward"):
        loss.backward()  # the f/g backward collectives draw their own frames
    if sp:  # LayerNorms and biases saw only this rank's positions: sum their gradients over the TP group
        replicated = [weights[n].grad for n in REPLICATED]
        flat = comm.all_reduce(torch.cat([g.reshape(-1) for g in replicated]), group=group)
        for g, part in zip(replicated, flat.split([g.numel() for g in replicated])):
            g.copy_(part.view_as(g))
        show("sp_param_grads", "Sequence parallel: the replicated LayerNorm and bias gradients are "
             "all-reduced, since each rank saw only its own positions", flat)
    trace.frame("grads", "Backward done: each rank holds the gradients of its own weight slices",
                tensors=[tensor_view(f"{n}.grad", "gradients", t.grad, shard=(rank, tp)) for n, t in weights.items()
                         if n.endswith("weight") and n not in REPLICATED],
                memory={"parameters": list(weights.values()), "gradients": [t.grad for t in weights.values()]},
                extra=show.extra, rank_extra=show.coord)

    return {"loss": loss.item(), "out": out.detach().cpu(), "x_grad": x.grad.cpu(),
            "grads": {n: t.grad.cpu() for n, t in weights.items()},
            "param_bytes": sum(t.numel() * t.element_size() for t in weights.values())}


class _frames:
    """Draws the frames of the story: partial outputs and each collective's result (all ranks alike)."""

    def __init__(self, rank: int, tp: int):
        self.rank, self.tp = rank, tp
        self.extra = {"mesh": {"dp": 1, "pp": 1, "tp": tp}}
        self.coord = {"coord": {"dp": 0, "pp": 0, "tp": rank}}

    def partial(self, part: str, partial: torch.Tensor) -> None:
        trace.frame("partial", f"{part.upper() if part == 'mlp' else part.capitalize()}: the row-parallel Linear leaves each rank a partial sum "
                    f"of the output; they differ until g adds them up",
                    tensors=[tensor_view(f"{part} partial", "activations", partial)],
                    extra={**self.extra, "block": part}, rank_extra=self.coord)

    def __call__(self, phase: str, caption: str, result: torch.Tensor) -> None:
        trace.frame(phase, caption, tensors=[tensor_view(phase, "activations", result)],
                    extra=self.extra, rank_extra=self.coord)


# -- the dense reference and the checks -------------------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The same layer, unsplit, in one process, written with torch's own modules and ops: nn.LayerNorm,
    nn.Linear, F.scaled_dot_product_attention(is_causal=True), F.gelu. It shares no code with the run's
    `block_forward`/`attend`, only the initial weights (`dense_block`) and the data. `dtype` float64: the
    same fp32 weights and data in float64, the nearly exact values fp32 round-off is measured from."""
    dense = dense_block(p.hidden, p.seed).to(dtype)
    x, y = (t.to(dtype) for t in data(p))
    x.requires_grad_()
    s, b, h = x.shape

    def heads(t: torch.Tensor) -> torch.Tensor:  # [s, b, h] -> [b, heads, s, h / heads]
        return t.reshape(s, b, p.heads, h // p.heads).permute(1, 2, 0, 3)

    q, k, v = dense["qkv"](dense["ln1"](x)).split(h, dim=-1)
    context = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    x1 = x + dense["proj"](context.permute(2, 0, 1, 3).reshape(s, b, h))
    out = x1 + dense["fc2"](F.gelu(dense["fc1"](dense["ln2"](x1))))
    loss = F.mse_loss(out, y)
    loss.backward()
    w = dict(dense.named_parameters())
    return {"loss": loss.item(), "out": out.detach(), "x_grad": x.grad,
            "grads": {n: t.grad for n, t in w.items()}, "shapes": {n: t.shape for n, t in w.items()}}


ACTIVATION_PHASES = ("f_forward", "g_forward", "f_backward", "g_backward")
WIRE = {"all_reduce": lambda b, t: 2 * (t - 1) / t * b,  # ring: reduce-scatter then all-gather
        "all_gather": lambda b, t: (t - 1) * b,  # b is this rank's shard
        "reduce_scatter": lambda b, t: (t - 1) / t * b}  # b is the full buffer


def _count(ops: list[tuple[str, int]]) -> str:
    """[("all_reduce", 256), ("all_reduce", 256)] -> "2 × all_reduce 256 B"."""
    return ", ".join(f"{ops.count(op)} × {op[0]} {op[1]} B" for op in sorted(set(ops)))


def summarize(p: Params, results: list[dict], frames) -> Summary:
    tp, sp = p.tp, p.sequence_parallel
    ref, exact = reference(p), reference(p, torch.float64)
    # fp32 round-off: the run adds t partial sums where the dense layer runs one matmul. The longest sums are
    # a weight gradient's, over the s·b tokens, and fc2's dot products of 4h terms; bound: 4× the fp32
    # reference's own distance from float64, at least terms·ε·max|x| (models.fp32_tolerance).
    terms = max(p.seq_len * p.batch, 4 * p.hidden)
    tol = {key: fp32_tolerance(torch.as_tensor(ref[key], dtype=torch.float64),
                               torch.as_tensor(exact[key], dtype=torch.float64), terms=terms)
           for key in ("out", "x_grad", "loss")}
    tol["grads"] = fp32_tolerance(torch.cat([g.reshape(-1) for g in ref["grads"].values()]),
                                  torch.cat([g.reshape(-1) for g in exact["grads"].values()]), terms=terms)
    bound = (f"bound: 4× the fp32 reference's distance from float64, at least {terms}·ε·max|x| (ε = 2⁻²⁴; the "
             f"longest sums: s·b = {counted(p.seq_len * p.batch, 'token')}, 4h = {4 * p.hidden} products)")

    cat = (lambda key: torch.cat([r[key] for r in results])) if sp else (lambda key: results[0][key])
    out_diff = max_abs_diff(cat("out"), ref["out"])
    x_grad_diff = max_abs_diff(cat("x_grad"), ref["x_grad"])
    loss = sum(r["loss"] for r in results) if sp else results[0]["loss"]
    if not sp:  # replicated output: every rank must hold the same one
        out_diff = max(out_diff, *(max_abs_diff(r["out"], ref["out"]) for r in results))
    grad_diff = 0.0
    for name, shape in ref["shapes"].items():
        if name in REPLICATED:
            assembled = [r["grads"][name] for r in results]  # every rank must hold the full gradient
        else:
            assembled = [sum(place_shard(r["grads"][name], name, shape, k, tp, p.heads) for k, r in enumerate(results))]
        grad_diff = max(grad_diff, *(max_abs_diff(g, ref["grads"][name]) for g in assembled))

    # Bytes of every activation collective, read back from the frames the tracer recorded.
    element = 4
    sbh = p.seq_len * p.batch * p.hidden * element
    ops = [(f.phase, t.op, t.bytes, t.src) for f in frames if f.phase in ACTIVATION_PHASES
           for t in f.transfers if t.group == "tp"]
    per_rank = [[(ph, op, b) for ph, op, b, src in ops if src == r] for r in range(tp)]
    wire_per_rank = [sum(WIRE[op](b, tp) for _, op, b in mine) for mine in per_rank]
    formula_wire = 4 * 2 * (tp - 1) / tp * sbh  # 2 all-reduces forward + 2 backward of s·b·h elements
    if sp:
        expected_ops = sorted([("all_gather", sbh // tp)] * 4 + [("reduce_scatter", sbh)] * 4)
        expected_text = f"4 all-gathers of a {sbh // tp} B shard + 4 reduce-scatters of {sbh} B"
    else:
        expected_ops = [("all_reduce", sbh)] * 4
        expected_text = f"4 all-reduces of s·b·h·4 = {sbh} B (2 forward, 2 backward)"
    measured_ops = [sorted((op, b) for _, op, b in mine) for mine in per_rank]
    sp_param_bytes = sum(t.bytes for f in frames if f.phase == "sp_param_grads" for t in f.transfers if t.src == 0)

    checks = [
        Check(name="output equals the dense layer", passed=out_diff <= tol["out"], measured=out_diff,
              expected=f"≤ {tol['out']:.1e}",
              detail="max |TP output − dense output|" + (" (shards concatenated)" if sp else " on every rank")
              + f"; fp32, partial sums added by the collectives in another order than one matmul: {bound}; a "
              "wrong scale or activation errs by > 1e-3"),
        Check(name="loss equals the dense layer", passed=abs(loss - ref["loss"]) <= tol["loss"],
              measured=abs(loss - ref["loss"]), expected=f"≤ {tol['loss']:.1e}",
              detail=f"TP {loss:.8f}, dense {ref['loss']:.8f}; {bound}"),
        Check(name="input gradient equals the dense layer", passed=x_grad_diff <= tol["x_grad"], measured=x_grad_diff,
              expected=f"≤ {tol['x_grad']:.1e}", detail=f"max |dL/dx TP − dense|; {bound}"),
        Check(name="parameter gradients equal the dense layer", passed=grad_diff <= tol["grads"], measured=grad_diff,
              expected=f"≤ {tol['grads']:.1e}", detail="weight slices placed back into the dense matrices; replicated "
              f"LayerNorm/bias gradients checked on every rank; {bound}"),
        Check(name="collectives per rank: " + ("all-gather + reduce-scatter" if sp else "2 all-reduces forward, 2 backward"),
              passed=all(m == expected_ops for m in measured_ops), measured=_count(measured_ops[0]),
              expected=_count(expected_ops), detail=expected_text),
        Check(name="wire bytes per rank = 4 × 2(t−1)/t × s·b·h·4", passed=all(
              math.isclose(w, formula_wire, abs_tol=1e-9) for w in wire_per_rank),
              measured=wire_per_rank, expected=formula_wire,
              detail="ring all-reduce 2(t−1)/t·M; all-gather and reduce-scatter (t−1)/t·M each, M = s·b·h·4: SP moves the same volume"),
    ]
    return Summary(checks=checks, figures={
        "tp": tp, "sequence_parallel": sp, "activation_bytes_sbh": sbh,
        "collectives_per_rank": len(per_rank[0]),
        "collective_buffer_bytes_per_rank": sum(b for _, _, b in per_rank[0]),
        "wire_bytes_per_rank": wire_per_rank, "formula_wire_bytes_per_rank": formula_wire,
        "sp_param_grad_all_reduce_bytes": sp_param_bytes,
        "param_bytes_per_rank": [r["param_bytes"] for r in results],
        "dense_param_bytes": sum(math.prod(s) for s in ref["shapes"].values()) * element,
        "loss": loss, "reference_loss": ref["loss"], "frames": len(frames),
    })


SCENARIO = Scenario(
    name="tensor_parallel",
    title="Tensor parallelism (Megatron-LM)",
    description="A transformer layer split across ranks: column- then row-parallel Linears joined by the f/g "
                "collectives, optionally with sequence parallelism.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["mesh", "ranks", "timeline"],
    world_size=lambda p: p.tp,
    controls=["tp", "sequence_parallel", "seq_len", "hidden"],
)
