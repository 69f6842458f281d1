"""3D parallelism: data, pipeline and tensor parallelism at once, on a dp × pp × tp device mesh.

Megatron-LM's "PTD-P" (Narayanan et al., "Efficient Large-Scale Language Model Training
on GPU Clusters Using Megatron-LM", arXiv:2104.04473) combines the three:

- tensor parallelism (tp) splits every layer's matrices inside a stage; its two
  all-reduces per layer are the most frequent and sit on the fastest links, inside a node;
- pipeline parallelism (pp) gives each stage a contiguous run of layers and passes
  activations forward and gradients backward, point to point, between nodes;
- data parallelism (dp) replicates the whole pipeline and all-reduces gradients once per step.

Ranks are laid out tp fastest: rank = (d·pp + s)·tp + t, so the tp ranks of a stage are
neighbours (one node) and the dp and pp groups stride across nodes. The groups come from a
torch DeviceMesh with dims ("dp", "pp", "tp"); the tensor-parallel layers reuse the f/g
operators of `tensor_parallel.py`, and the pipeline is GPipe (Huang et al., arXiv:1811.06965):
all micro-batches forward, then all backward, then one optimizer step.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_tolerance, max_abs_diff
from simulations.scenarios.base import RankContext, Scenario
from simulations.scenarios.tensor_parallel import WIRE, enter_tp, leave_tp, place_shard, take_shard
from simulations.trace import ActivationMeter, tensor_view
from simulations.words import counted, every

MICRO_BATCH = 2  # rows per micro-batch
LEARNING_RATE = 0.1
DIMS = ("dp", "pp", "tp")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dp: int = Field(2, ge=1, le=8, description="Data-parallel replicas")
    pp: int = Field(2, ge=1, le=8, description="Pipeline stages")
    tp: int = Field(2, ge=1, le=8, description="Tensor-parallel ranks per stage")
    layers: int = Field(4, ge=1, le=16, description="MLP blocks in the model")
    hidden: int = Field(8, ge=2, le=64, description="Hidden size h (the MLP is 4h wide)")
    microbatches: int = Field(2, ge=1, le=8, description="Micro-batches per replica (GPipe)")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _fits(self) -> Params:
        if self.dp * self.pp * self.tp > 8:
            raise ValueError(f"dp·pp·tp = {self.dp}·{self.pp}·{self.tp} = {self.dp * self.pp * self.tp} "
                             f"must be at most 8 (one rank per GPU)")
        if self.layers % self.pp:
            raise ValueError(f"layers ({self.layers}) must be a multiple of pp ({self.pp}): equal stages")
        if (4 * self.hidden) % self.tp:
            raise ValueError(f"4·hidden ({4 * self.hidden}) must be a multiple of tp ({self.tp})")
        return self


# -- the model -------------------------------------------------------------------------------------

def dense_model(p: Params) -> list[dict[str, torch.Tensor]]:
    """`layers` residual MLP blocks x + fc2(gelu(fc1(x))), fc1: h -> 4h, fc2: 4h -> h."""
    state = torch.random.get_rng_state()
    torch.manual_seed(p.seed)
    model = [{f"{name}.{kind}": t.detach().clone() for name, layer in
              (("fc1", nn.Linear(p.hidden, 4 * p.hidden)), ("fc2", nn.Linear(4 * p.hidden, p.hidden)))
              for kind, t in layer.named_parameters()} for _ in range(p.layers)]
    torch.random.set_rng_state(state)
    return model


def block(w: dict[str, torch.Tensor], x: torch.Tensor, enter=lambda a: a, leave=lambda a: a) -> torch.Tensor:
    """One MLP block; Megatron-split when enter/leave are the f/g operators."""
    partial = F.linear(F.gelu(F.linear(enter(x), w["fc1.weight"], w["fc1.bias"])), w["fc2.weight"])
    return x + leave(partial) + w["fc2.bias"]


def data(p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(p.seed + 1)
    rows = p.dp * p.microbatches * MICRO_BATCH
    return torch.randn(rows, p.hidden, generator=g), torch.randn(rows, p.hidden, generator=g)


# -- the mesh --------------------------------------------------------------------------------------

def build_mesh(ctx: RankContext, p: Params) -> DeviceMesh:
    """A dp × pp × tp DeviceMesh over ctx.group's ranks, its per-dimension groups made by their members."""
    layout = torch.arange(p.dp * p.pp * p.tp).reshape(p.dp, p.pp, p.tp)
    d, s, t = (int(i) for i in (layout == ctx.rank).nonzero()[0])
    mine = {"dp": layout[:, s, t], "pp": layout[d, :, t], "tp": layout[d, s, :]}
    groups = [comm.subgroup(mine[dim].tolist(), ctx.group, tag=dim) for dim in DIMS]
    for dim, group in zip(DIMS, groups):
        comm.name_group(group, dim)  # every transfer on it says which mesh dimension it ran on
    return DeviceMesh.from_group(groups, ctx.device.type, mesh=layout, mesh_dim_names=DIMS)


# -- one rank's training step ----------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    mesh = build_mesh(ctx, p)
    d, s, t = mesh.get_coordinate()
    tp_group, pp_group, dp_group = mesh.get_group("tp"), mesh.get_group("pp"), mesh.get_group("dp")
    per_stage, m, last = p.layers // p.pp, p.microbatches, p.pp - 1
    my_layers = range(s * per_stage, (s + 1) * per_stage)

    dense = dense_model(p)
    stage = [{name: nn.Parameter(take_shard(w, name, t, p.tp, heads=1).to(ctx.device)) for name, w in dense[layer].items()}
             for layer in my_layers]
    params = [w for layer in stage for w in layer.values()]
    show = _Story(p, d, s, t)
    show.frame("mesh", f"A {p.dp}×{p.pp}×{p.tp} mesh (dp×pp×tp): {counted(p.dp, 'replica')} of a {p.pp}-stage "
               f"pipeline, each stage's {counted(per_stage, 'layer')} split over "
               f"{counted(p.tp, 'tensor-parallel rank')}. "
               f"This rank: replica {d}, stage {s}, slice {t}.",
               tensors=[tensor_view(f"L{layer}.fc1.weight", "parameters", w["fc1.weight"], shard=(t, p.tp))
                        for layer, w in zip(my_layers, stage)],
               memory={"parameters": params})

    x, y = data(p)
    x_mine, y_mine = x.chunk(p.dp)[d].chunk(m), y.chunk(p.dp)[d].chunk(m)  # this replica's micro-batches
    enter = lambda a: enter_tp(a, tp_group, p.tp, False)  # noqa: E731
    leave = lambda a: leave_tp(a, tp_group, p.tp, False)  # noqa: E731
    inputs, outputs, losses, meters = {}, {}, {}, {}

    # GPipe forward: in slot k, stage s runs micro-batch k - s.
    for slot in range(m + p.pp - 1):
        k = slot - s
        if 0 <= k < m:
            with trace.span(f"F{k}", step=k):
                if s == 0:
                    inp = x_mine[k].to(ctx.device)
                else:
                    inp = comm.recv(torch.empty(MICRO_BATCH, p.hidden, device=ctx.device), s - 1, pp_group)
                    inp.requires_grad_()
                with ActivationMeter(params) as meters[k]:
                    out = inp
                    for w in stage:
                        out = block(w, out, enter, leave)
                    if s == last:  # the mean squared error over the global batch, summed piece by piece
                        losses[k] = ((out - y_mine[k].to(ctx.device)) ** 2).sum() / y.numel()
                inputs[k], outputs[k] = inp, out
                if s != last:
                    comm.send(out.detach(), s + 1, pp_group, name=f"act{k}")
        show.slot("forward", slot, k if 0 <= k < m else None, params, meters)

    # GPipe backward: the last stage starts; in slot k, stage s runs micro-batch k - (pp - 1 - s).
    for slot in range(m + p.pp - 1):
        k = slot - (last - s)
        if 0 <= k < m:
            with trace.span(f"B{k}", step=k):
                if s == last:
                    losses[k].backward()
                else:
                    grad = comm.recv(torch.empty_like(outputs[k]), s + 1, pp_group)
                    torch.autograd.backward(outputs[k], grad)
                if s != 0:
                    comm.send(inputs[k].grad, s - 1, pp_group, name=f"grad{k}")
                meters.pop(k).release()
                del outputs[k]
        show.slot("backward", slot, k if 0 <= k < m else None, params, meters)

    # Data parallel: sum the gradients of this slice over the replicas (each loss is already a share of the mean).
    with trace.span("dp all-reduce", kind="comm"):
        flat = comm.all_reduce(torch.cat([w.grad.reshape(-1) for w in params]), group=dp_group)
        for w, g in zip(params, flat.split([w.numel() for w in params])):
            w.grad.copy_(g.view_as(w))
    show.frame("dp_all_reduce", f"Data parallel: each rank all-reduces its {flat.numel() * 4} B of gradients with "
               f"{every(p.dp, 'rank')} holding the same slice of the same stage",
               tensors=[tensor_view("grads", "gradients", flat)],
               memory={"parameters": params, "gradients": [w.grad for w in params]})

    grads = {f"{layer}.{name}": w.grad.detach().cpu().clone() for layer, ws in zip(my_layers, stage) for name, w in ws.items()}
    with torch.no_grad(), trace.span("optimizer"):
        for w in params:
            w -= LEARNING_RATE * w.grad
    show.frame("optimizer", "SGD step: every rank updates its own slice; the replicas stay identical",
               tensors=[tensor_view(f"L{layer}.fc1.weight", "parameters", w["fc1.weight"], shard=(t, p.tp))
                        for layer, w in zip(my_layers, stage)],
               memory={"parameters": params, "gradients": [w.grad for w in params]})

    return {"coord": (d, s, t), "groups": {dim: dist.get_process_group_ranks(mesh.get_group(dim)) for dim in DIMS},
            "loss": float(sum(v.item() for v in losses.values())),
            "grads": grads, "weights": {f"{layer}.{name}": w.detach().cpu().clone()
                                        for layer, ws in zip(my_layers, stage) for name, w in ws.items()},
            "param_bytes": sum(w.numel() * w.element_size() for w in params)}


class _Story:
    """The frames: the same points on every rank; idle stages say so."""

    def __init__(self, p: Params, d: int, s: int, t: int):
        self.p = p
        self.extra = {"mesh": {"dp": p.dp, "pp": p.pp, "tp": p.tp}, "layers_per_stage": p.layers // p.pp,
                      "microbatches": p.microbatches}
        self.coord = {"coord": {"dp": d, "pp": s, "tp": t}}

    def frame(self, phase: str, caption: str, status: str | None = None, extra: dict | None = None, **kw) -> None:
        trace.frame(phase, caption, status=status, extra={**self.extra, **(extra or {})},
                    rank_extra=self.coord, **kw)

    def slot(self, phase: str, slot: int, k: int | None, params, meters) -> None:
        letter = "F" if phase == "forward" else "B"
        caption = (f"{phase.capitalize()} slot {slot + 1}: stage i runs micro-batch {slot} − "
                   + ("i" if phase == "forward" else "(pp − 1 − i)")
                   + "; tp ranks all-reduce inside the stage, stages pass "
                   + ("activations" if phase == "forward" else "gradients") + " on to the next")
        grads = [w.grad for w in params if w.grad is not None]
        self.frame(phase, caption, status=f"{letter}{k}" if k is not None else "idle",
                   extra={"slot": slot}, memory={"parameters": params, "gradients": grads,
                                                 "activations": sum(mt.bytes for mt in meters.values())})


# -- the single-process reference and the checks ---------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The same model, unsplit, in one process: nn.Linear layers and F.gelu written out plainly (no code of
    the run's `block`), one step of torch.optim.SGD on the whole batch. `dtype` float64: the same fp32 weights
    and data in float64, the nearly exact values fp32 round-off is measured from."""
    layers = []
    for w in dense_model(p):
        fc1 = nn.Linear(p.hidden, 4 * p.hidden, dtype=dtype)
        fc2 = nn.Linear(4 * p.hidden, p.hidden, dtype=dtype)
        with torch.no_grad():
            for name, layer in (("fc1", fc1), ("fc2", fc2)):
                layer.weight.copy_(w[f"{name}.weight"])
                layer.bias.copy_(w[f"{name}.bias"])
        layers.append({"fc1": fc1, "fc2": fc2})
    x, y = (t.to(dtype) for t in data(p))
    out = x
    for layer in layers:  # a residual MLP block: x + fc2(gelu(fc1(x)))
        out = out + layer["fc2"](F.gelu(layer["fc1"](out)))
    loss = F.mse_loss(out, y)
    loss.backward()
    named = {f"{i}.{name}.{kind}": t for i, layer in enumerate(layers) for name in ("fc1", "fc2")
             for kind, t in layer[name].named_parameters()}
    grads = {n: t.grad.clone() for n, t in named.items()}
    torch.optim.SGD(list(named.values()), lr=LEARNING_RATE).step()
    return {"loss": loss.item(), "grads": grads, "weights": {n: t.detach().clone() for n, t in named.items()}}


def mesh_coordinate(rank: int, p: Params) -> tuple[int, int, int]:
    """Where Megatron's layout puts a rank, tp fastest: rank = (d·pp + s)·tp + t."""
    return rank // (p.pp * p.tp), rank // p.tp % p.pp, rank % p.tp


def _assemble(results: list[dict], key: str, name: str, d: int, p: Params, shape) -> torch.Tensor:
    """Dense tensor `name` of replica d from its tp slices (replicated ones: every slice must agree)."""
    layer, param = name.split(".", 1)
    s = int(layer) // (p.layers // p.pp)
    parts = [r[key][name] for r in results if r["coord"][:2] == (d, s)]
    if param == "fc2.bias":  # replicated over tp
        return parts[0] if all(torch.equal(x, parts[0]) for x in parts) else torch.full(shape, math.nan)
    return sum(place_shard(part, param, shape, t, p.tp, heads=1) for t, part in enumerate(parts))


def summarize(p: Params, results: list[dict], frames) -> Summary:
    # Placement: results come in rank order; each rank's coordinate and its groups' members must follow
    # Megatron's layout, so the tp peers of a stage are neighbouring ranks (one node).
    misplaced = []
    for rank, r in enumerate(results):
        d, s, t = mesh_coordinate(rank, p)
        expected_groups = {"tp": [(d * p.pp + s) * p.tp + k for k in range(p.tp)],
                           "pp": [(d * p.pp + k) * p.tp + t for k in range(p.pp)],
                           "dp": [(k * p.pp + s) * p.tp + t for k in range(p.dp)]}
        if tuple(r["coord"]) != (d, s, t) or {k: sorted(v) for k, v in r["groups"].items()} != expected_groups:
            misplaced.append(rank)
    results = sorted(results, key=lambda r: r["coord"])
    ref, exact = reference(p), reference(p, torch.float64)
    # fp32 round-off: tp partial sums and micro-batch accumulation add in another order than one dense step.
    # The longest sums: a weight gradient's over the batch's rows, fc2's dot products of 4h terms. Bound: 4× the
    # fp32 reference's own distance from float64, at least terms·ε·max|x| (models.fp32_tolerance).
    terms = max(p.dp * p.microbatches * MICRO_BATCH, 4 * p.hidden)

    def stacked(run: dict, key: str) -> torch.Tensor:
        return torch.cat([t.reshape(-1) for t in run[key].values()])

    grad_tol = fp32_tolerance(stacked(ref, "grads"), stacked(exact, "grads"), terms=terms)
    weight_tol = fp32_tolerance(stacked(ref, "weights"), stacked(exact, "weights"), terms=terms)
    loss_tol = fp32_tolerance(torch.tensor(ref["loss"], dtype=torch.float64),
                              torch.tensor(exact["loss"], dtype=torch.float64), terms=terms * p.hidden)
    bound = f"bound: 4× the fp32 reference's distance from float64, at least {terms}·ε·max|x|, ε = 2⁻²⁴"
    loss = sum(r["loss"] for r in results if r["coord"][1] == p.pp - 1 and r["coord"][2] == 0)
    grad_diff = max(max_abs_diff(_assemble(results, "grads", n, d, p, g.shape), g)
                    for n, g in ref["grads"].items() for d in range(p.dp))
    weight_diff = max(max_abs_diff(_assemble(results, "weights", n, d, p, w.shape), w)
                      for n, w in ref["weights"].items() for d in range(p.dp))

    # Bytes per mesh dimension, read from the transfers the tracer recorded (each labelled with its group).
    size = {"dp": p.dp, "pp": p.pp, "tp": p.tp}
    buffer = {dim: 0 for dim in DIMS}
    wire = {dim: 0.0 for dim in DIMS}
    for f in frames:
        for tr in f.transfers:
            buffer[tr.group] += tr.bytes
            wire[tr.group] += tr.bytes if tr.op == "send" else WIRE[tr.op](tr.bytes, size[tr.group])
    ranks, m, per_stage, element = p.dp * p.pp * p.tp, p.microbatches, p.layers // p.pp, 4
    act = MICRO_BATCH * p.hidden * element  # one micro-batch's activation (or its gradient)
    local_params = [r["param_bytes"] for r in results]
    h = p.hidden
    # One rank's slice of a layer: fc1's 4h/t rows (weight and bias), fc2's 4h/t columns, fc2's bias whole.
    slice_bytes = per_stage * (4 * h * h // p.tp + 4 * h // p.tp + h * 4 * h // p.tp + h) * element
    formula_buffer = {
        # per layer and micro-batch: g forward + f backward, b·h each; but the very first f has no backward
        # all-reduce: its input is the data, which needs no gradient
        "tp": ranks * per_stage * m * 2 * act - p.dp * p.tp * m * act,
        "pp": p.dp * p.tp * (p.pp - 1) * m * 2 * act,  # each stage boundary: activation forward, gradient back
        "dp": ranks * slice_bytes,  # every rank all-reduces the gradients of its own slice once
    }
    formula_wire = {
        "tp": formula_buffer["tp"] * 2 * (p.tp - 1) / p.tp,
        "pp": formula_buffer["pp"],
        "dp": formula_buffer["dp"] * 2 * (p.dp - 1) / p.dp,
    }

    checks = [
        Check(name="mesh placement: tp peers are neighbouring ranks", passed=not misplaced,
              measured=misplaced or "all ranks placed", expected="rank = (i_dp·pp + i_pp)·tp + i_tp",
              detail="each rank's (dp, pp, tp) coordinate and the members of its tp, pp and dp groups, "
                     "against Megatron's tp-fastest layout"),
        Check(name="loss equals the single-process step", passed=abs(loss - ref["loss"]) <= loss_tol,
              measured=abs(loss - ref["loss"]), expected=f"≤ {loss_tol:.1e}",
              detail=f"3D {loss:.8f}, single process {ref['loss']:.8f}; a mean of rows·h squared errors summed per "
                     f"micro-batch; {bound.replace(str(terms), str(terms * p.hidden))}"),
        Check(name="gradients equal the single-process step", passed=grad_diff <= grad_tol, measured=grad_diff,
              expected=f"≤ {grad_tol:.1e}", detail=f"slices placed back into the dense layers, every one of {p.dp} "
              f"replica(s); fp32, tp partial sums and micro-batch accumulation add in another order: {bound}"),
        Check(name="parameters after the step equal the single-process step", passed=weight_diff <= weight_tol,
              measured=weight_diff, expected=f"≤ {weight_tol:.1e}", detail=f"one SGD step of lr {LEARNING_RATE}; {bound}"),
    ] + [
        check
        for dim, detail in (
            ("tp", "2 all-reduces of b·h per layer per micro-batch (1 forward, 1 backward; none backward at the "
                   "first layer, whose input needs no gradient); ring 2(t−1)/t"),
            ("pp", "per stage boundary and micro-batch: one activation forward, one gradient backward"),
            ("dp", "each rank's gradient slice all-reduced once; ring 2(d−1)/d"))
        for check in (
            Check(name=f"{dim} bytes per step match the formula", passed=buffer[dim] == formula_buffer[dim],
                  measured=buffer[dim], expected=formula_buffer[dim], detail=f"buffers handed over, exact: {detail}"),
            Check(name=f"{dim} bytes on the wire per step match the formula",
                  passed=math.isclose(wire[dim], formula_wire[dim], rel_tol=1e-12, abs_tol=1e-6),
                  measured=wire[dim], expected=formula_wire[dim],
                  detail="the buffers turned into bytes sent by each op's definition; equal up to float division"))
    ]
    return Summary(checks=checks, figures={
        "mesh": size, "ranks": ranks, "loss": loss, "reference_loss": ref["loss"],
        "buffer_bytes_per_dim": buffer, "wire_bytes_per_dim": wire,
        "formula_buffer_bytes_per_dim": formula_buffer, "formula_wire_bytes_per_dim": formula_wire,
        "param_bytes_per_rank": local_params,
        "dense_param_bytes": sum(w.numel() for w in ref["weights"].values()) * element,
        "bubble_fraction_formula": (p.pp - 1) / (m + p.pp - 1), "frames": len(frames),
    })


SCENARIO = Scenario(
    name="parallel_3d",
    title="3D parallelism on a device mesh",
    description="One training step with data, pipeline (GPipe) and tensor parallelism at once on a dp×pp×tp "
                "DeviceMesh, every collective labelled with its mesh dimension.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["mesh", "timeline", "memory"],
    world_size=lambda p: p.dp * p.pp * p.tp,
    controls=["dp", "pp", "tp", "microbatches"],
)
