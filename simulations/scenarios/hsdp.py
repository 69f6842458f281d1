"""Hybrid sharded data parallel (HSDP): shard inside a group of ranks, replicate across groups.

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel" (VLDB 2023,
arXiv:2304.11277), section 3.2.2, "hybrid sharding" (ZeRO++'s hierarchical partitioning, Wang et
al., arXiv:2306.10209, applies the same topology idea to the parameter gathers only). Full
sharding over every rank (ZeRO-3) makes every all-gather and reduce-scatter span the whole
cluster, crossing the slow links between nodes three times per step. HSDP puts the ranks on a 2-D mesh, replicas × shards: the model is sharded, as
FSDP does, only over the `shards` ranks of one group (one node: fast links), and each group is a
whole replica of the model. Per step:

- inside the shard group: all-gather each unit's parameters before its forward, again before its
  backward, and reduce-scatter its gradient, as ZeRO-3 does (3Ψ);
- across replica groups: all-reduce the gradient shard the reduce-scatter left on this rank, with
  the ranks that hold the same shard in every other replica: 2(R−1)/R · Ψ/S bytes, about S times
  less than the 2(W−1)/W · Ψ a data-parallel all-reduce over all W ranks would send.

Rank = replica · shards + shard: a shard group is consecutive ranks (one node); a replicate group
takes one rank from each node. Each Linear layer is one unit, flattened, padded to a multiple of
`shards` and cut into equal shards, as in `zero.py`. torch's own HSDP, `fully_shard` on a 2-D
DeviceMesh (Replicate, Shard), trains the same model alongside as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from simulations import comm, formulas, trace
from simulations.frames import Check, Summary
from simulations.models import flat, fp32_tolerance, max_abs_diff, regression_batch
from simulations.scenarios.base import RankContext, Scenario
from simulations.scenarios.zero import IN_FEATURES, OUT_FEATURES, all_gather_params, free, linears, mlp
from simulations.trace import tensor_view
from simulations.words import counted, every

LR = 0.1  # plain SGD: the equivalence is the communication's, not an optimizer's
DIMS = ("replicate", "shard")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replicas: int = Field(2, ge=1, le=8, description="Replica groups (nodes), each holding a whole copy")
    shards: int = Field(2, ge=1, le=8, description="Ranks per group the model is sharded over")
    width: int = Field(16, ge=2, le=128, description="Hidden width of the MLP")
    depth: int = Field(2, ge=1, le=4, description="Hidden layers of the MLP")
    micro_batch: int = Field(2, ge=1, le=32, description="Samples per rank per step")
    steps: int = Field(1, ge=1, le=3, description="SGD steps")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _fits(self) -> Params:
        ranks = self.replicas * self.shards
        if not 2 <= ranks <= 8:
            raise ValueError(f"replicas·shards = {self.replicas}·{self.shards} = {ranks} must be between 2 and 8 "
                             f"(one rank per GPU)")
        return self


@dataclass
class Unit:
    """One Linear layer as FSDP keeps it: a flat, padded vector, of which this rank owns [lo, hi)."""

    index: int
    shapes: list[torch.Size]  # weight, bias
    full: torch.Tensor  # the gathered flat vector (storage freed between uses); requires grad
    shard: torch.Tensor  # this rank's shard of the parameters, kept between uses
    lo: int
    hi: int
    grad: torch.Tensor | None = None  # this rank's gradient shard, reduced over the whole mesh

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        w_shape, b_shape = self.shapes
        return self.full[: w_shape.numel()].view(w_shape), self.full[w_shape.numel(): w_shape.numel() + b_shape.numel()]


def make_unit(index: int, layer: nn.Linear, shard: int, shards: int, device: torch.device) -> Unit:
    values = torch.cat([layer.weight.detach().reshape(-1), layer.bias.detach()])
    padded = -(-values.numel() // shards) * shards
    values = F.pad(values, (0, padded - values.numel()))  # zeros: zero gradient, zero update
    lo, hi = shard * padded // shards, (shard + 1) * padded // shards
    full = values.to(device, copy=True).requires_grad_(True)
    unit = Unit(index, [layer.weight.shape, layer.bias.shape], full, full.detach()[lo:hi].clone(), lo, hi)
    free(unit.full)  # only the shard stays; the full vector is gathered when the unit runs
    return unit


def build_mesh(ctx: RankContext, p: Params) -> tuple[DeviceMesh, int, int]:
    """The replicas × shards mesh over ctx.group's ranks: rank = replica·shards + shard."""
    layout = torch.arange(p.replicas * p.shards).reshape(p.replicas, p.shards)
    replica, shard = divmod(ctx.rank, p.shards)
    groups = [comm.subgroup(layout[:, shard].tolist(), ctx.group, tag="replicate"),
              comm.subgroup(layout[replica].tolist(), ctx.group, tag="shard")]
    for dim, group in zip(DIMS, groups):
        comm.name_group(group, dim)  # every transfer says which mesh dimension it ran on
    return DeviceMesh.from_group(groups, ctx.device.type, mesh=layout, mesh_dim_names=DIMS), replica, shard


# -- one rank's training -----------------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    mesh, replica, shard = build_mesh(ctx, p)
    shard_group, replicate_group = mesh.get_group("shard"), mesh.get_group("replicate")
    world = p.replicas * p.shards
    units = [make_unit(i, layer, shard, p.shards, ctx.device) for i, layer in enumerate(linears(mlp(p)))]
    story = _Story(p, replica, shard, units)
    x, y = regression_batch(p.micro_batch * world, IN_FEATURES, OUT_FEATURES, p.seed)
    x, y = x.chunk(world)[ctx.rank].to(ctx.device), y.chunk(world)[ctx.rank].to(ctx.device)  # this rank's data

    def before_backward(unit: Unit) -> None:  # the gradient reached the unit's output: gather it again
        all_gather_params(unit, shard_group)
        story.frame("all_gather", f"Unit {unit.index}: gathered again inside the shard group, just before its "
                    f"backward", unit)

    def after_backward(unit: Unit) -> None:  # the unit's gradient is complete
        grad = torch.empty_like(unit.shard)
        comm.reduce_scatter_tensor(grad, unit.full.grad, shard_group)
        story.frame("reduce_scatter", f"Unit {unit.index}: reduce-scatter inside the shard group; rank s keeps "
                    f"the sum of shard s over its {counted(p.shards, 'rank')}", unit, grad=grad)
        comm.all_reduce(grad, replicate_group)
        unit.grad = grad.div_(world)
        story.frame("all_reduce", f"Unit {unit.index}: all-reduce of that shard across "
                    f"{counted(p.replicas, 'replica')}, only {grad.numel() * grad.element_size()} B per rank between nodes; divided by "
                    f"{counted(world, 'rank')}: the mean gradient", unit, grad=grad)
        unit.full.grad = None
        free(unit.full)

    for unit in units:
        unit.full.register_post_accumulate_grad_hook(lambda _t, u=unit: after_backward(u))
    story.frame("mesh", f"{counted(p.replicas, 'replica group')} × {counted(p.shards, 'shard')}: this rank is shard {shard} of "
                f"replica {replica}; it keeps 1/{p.shards} of each unit's parameters and its own "
                f"{counted(p.micro_batch, 'sample')}")

    for step in range(p.steps):
        h = x
        with trace.span("forward", step=step):
            for unit in units:
                all_gather_params(unit, shard_group)
                story.frame("all_gather", f"Step {step + 1}, unit {unit.index}: all-gather inside the shard group; "
                            f"{every(p.shards, 'rank')} of the group now {'holds' if p.shards == 1 else 'hold'} the whole layer", unit)
                w, b = unit.weights()
                h = F.linear(h, w, b)
                h = h if unit.index == len(units) - 1 else F.gelu(h)
                h.register_hook(lambda grad, u=unit: before_backward(u))
                free(unit.full)
            loss = F.mse_loss(h, y)
        with trace.span("backward", step=step):
            loss.backward()  # the hooks gather, reduce-scatter, all-reduce and free, unit by unit
        grads = [u.grad.clone() for u in units]
        with torch.no_grad(), trace.span("optimizer", step=step):
            for unit in units:
                unit.shard -= LR * unit.grad
        story.frame("optimizer", f"SGD step on this rank's shard only; the replicas' shards s are equal, so "
                    f"every replica holds the same model")
        for unit in units:
            unit.grad = None

    result = {"coord": (replica, shard), "loss": loss.item(), "shards": [u.shard.cpu() for u in units],
              "grads": [g.cpu() for g in grads], "ranges": [(u.lo, u.hi) for u in units]}
    story.frame("done", f"After {p.steps} SGD step{'s' if p.steps > 1 else ''}: the same model as plain "
                f"single-process training, and as torch's own HSDP (see the checks)")
    result["fsdp2"] = train_with_fully_shard(ctx, p, mesh, x, y)  # untraced, after the last frame
    return result


class _Story:
    """The frames: the mesh coordinates (for the mesh view) and the shards this rank holds."""

    def __init__(self, p: Params, replica: int, shard: int, units: list[Unit]):
        self.p, self.shard, self.units = p, shard, units
        # Mesh coordinates as parallel_3d's (dp × pp × tp): replicas are the nodes, shards the ranks inside one.
        self.extra = {"mesh": {"dp": p.replicas, "pp": 1, "tp": p.shards}, "dims": {"replicate": p.replicas,
                                                                                    "shard": p.shards}}
        self.rank_extra = {"coord": {"dp": replica, "pp": 0, "tp": shard}, "replica": replica, "shard": shard}
        self.where = f"replica {replica} · shard {shard}"

    def frame(self, phase: str, caption: str, unit: Unit | None = None, grad: torch.Tensor | None = None) -> None:
        tensors = [tensor_view(f"unit{u.index}.param", "parameters", u.shard, shard=(self.shard, self.p.shards))
                   for u in self.units]
        if unit is not None and unit.full.untyped_storage().nbytes():
            tensors.append(tensor_view(f"unit{unit.index}.gathered", "gathered", unit.full.detach()))
        if grad is not None:
            tensors.append(tensor_view(f"unit{unit.index}.grad", "gradients", grad, shard=(self.shard, self.p.shards)))
        trace.frame(phase, caption, tensors=tensors, status=self.where,
                    extra={**self.extra, "unit": None if unit is None else unit.index}, rank_extra=self.rank_extra,
                    memory={"parameters": [u.shard for u in self.units],
                            "gathered": [u.full for u in self.units if u.full.untyped_storage().nbytes()]})


# -- the cross-check with torch's HSDP ---------------------------------------------------------------

def train_with_fully_shard(ctx: RankContext, p: Params, mesh: DeviceMesh, x, y) -> torch.Tensor:
    """The same training with torch.distributed.fsdp.fully_shard on the 2-D mesh, one unit per Linear.
    Untraced: its collectives do not go through simulations.comm."""
    from torch.distributed.fsdp import fully_shard

    model = mlp(p).to(ctx.device)
    for layer in linears(model):
        fully_shard(layer, mesh=mesh)  # 2-D mesh: replicate on dim 0, shard on dim 1 (HSDP)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(p.steps):
        F.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    return flat(q.full_tensor() for q in model.parameters()).cpu()


# -- the single-process reference and the checks -----------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """Plain SGD in one process on the whole global batch: the model, the loss, backward, step."""
    model = mlp(p).to(dtype)
    x, y = (t.to(dtype) for t in regression_batch(p.micro_batch * p.replicas * p.shards, IN_FEATURES,
                                                  OUT_FEATURES, p.seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(p.steps):
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        grads = flat(q.grad for q in model.parameters())
        optimizer.step()
    return {"params": flat(model.parameters()), "grads": grads}


def _assemble(results: list[dict], key: str, replica: int, numels: list[int]) -> torch.Tensor:
    """One replica's flat model from its shard group's shards, padding dropped, in parameter order."""
    group = sorted((r for r in results if r["coord"][0] == replica), key=lambda r: r["coord"][1])
    return torch.cat([torch.cat([r[key][i] for r in group])[:numel] for i, numel in enumerate(numels)])


def summarize(p: Params, results: list[dict], frames) -> Summary:
    world = p.replicas * p.shards
    numels = [layer.weight.numel() + layer.bias.numel() for layer in linears(mlp(p))]
    psi = sum(numels)
    padded = sum(-(-n // p.shards) * p.shards for n in numels)  # each unit padded to a multiple of shards
    ref, exact = reference(p), reference(p, torch.float64)
    trained = [_assemble(results, "shards", d, numels) for d in range(p.replicas)]
    grads = [_assemble(results, "grads", d, numels) for d in range(p.replicas)]
    # Each gradient element is a mean over the global batch: a sum of micro_batch·ranks terms.
    grad_tol = fp32_tolerance(ref["grads"], exact["grads"], terms=p.micro_batch * world)
    param_tol = fp32_tolerance(ref["params"], exact["params"], terms=p.micro_batch * world)
    grad_diff = max(max_abs_diff(g, ref["grads"]) for g in grads)
    param_diff = max(max_abs_diff(t, ref["params"]) for t in trained)
    spread = max(max_abs_diff(t, trained[0]) for t in trained)
    fsdp2 = max(max_abs_diff(r["fsdp2"], t) for r in results for t in trained)

    # Bytes per mesh dimension: every traced collective is labelled with its group; the buffer it was
    # handed, turned into bytes sent by the op's definition (REFERENCE.md), per rank and step.
    size = {"replicate": p.replicas, "shard": p.shards}
    sent = {dim: [0.0] * world for dim in DIMS}
    ops = {dim: set() for dim in DIMS}
    for f in frames:
        for tr in f.transfers:
            sent[tr.group][tr.src] += formulas.collective_sent_bytes(tr.op, tr.bytes, size[tr.group]) / p.steps
            ops[tr.group].add(tr.op)
    formula = formulas.hsdp_bytes(padded * 4, p.shards, p.replicas)
    ddp = formulas.ring_all_reduce_bytes(padded * 4, world)  # plain DDP over every rank, for comparison

    checks = [
        Check(name="gradients equal plain single-process training", passed=grad_diff <= grad_tol,
              measured=grad_diff, expected=f"≤ {grad_tol:.1e}",
              detail=f"max |g_HSDP − g_reference| over every replica, last step; the bound is fp32 round-off: 4× the "
                     f"fp32 reference's own distance from fp64, at least {p.micro_batch * world}·ε·max|g|"),
        Check(name="parameters after the step(s) equal plain single-process training", passed=param_diff <= param_tol,
              measured=param_diff, expected=f"≤ {param_tol:.1e}",
              detail=f"max |w_HSDP − w_reference| after {p.steps} SGD step(s), every replica; bound as for the gradients"),
        Check(name="replicas identical", passed=spread == 0.0, measured=spread, expected=0.0,
              detail="the same shard on every replica group, bit for bit"),
        Check(name="equals torch HSDP (fully_shard on the 2-D mesh)", passed=fsdp2 <= param_tol, measured=fsdp2,
              expected=f"≤ {param_tol:.1e}", detail="fully_shard on each Linear and the root, mesh (replicate, shard)"),
        *[Check(name=f"{dim} bytes sent per rank per step = formula",
                passed=all(abs(s - formula[dim]) <= 1e-9 * max(1.0, formula[dim]) for s in sent[dim]),
                measured=sent[dim], expected=formula[dim], detail=detail)
          for dim, detail in (
              ("shard", f"two all-gathers and a reduce-scatter of the {padded * 4} B model (padded), 3·(S−1)/S·Ψ"),
              ("replicate", f"an all-reduce of this rank's {padded * 4 // p.shards} B gradient shard, 2(R−1)/R·Ψ/S"))],
    ]
    return Summary(checks=checks, figures={
        "mesh": size, "psi": psi, "psi_padded": padded, "model_bytes": padded * 4,
        "bytes_per_rank_per_step": sent, "formula_bytes_per_rank_per_step": formula,
        "ops_per_dim": {dim: sorted(o) for dim, o in ops.items()},
        "ddp_all_reduce_bytes_per_rank": ddp,
        "cross_node_bytes_hsdp": formula["replicate"], "cross_node_bytes_ddp_formula": ddp,
        "loss": [r["loss"] for r in sorted(results, key=lambda r: r["coord"])],
        "max_abs_diff": {"grads": grad_diff, "params": param_diff, "fsdp2": fsdp2},
        "frames": len(frames),
    })


SCENARIO = Scenario(
    name="hsdp",
    title="HSDP: shard inside a group, replicate across groups",
    description="Hybrid sharded data parallel on a replicas × shards mesh: all-gather and reduce-scatter inside "
                "the shard group, all-reduce of the gradient shard across replicas; checked against one "
                "process and torch's fully_shard on a 2-D mesh.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["ranks", "timeline"],
    world_size=lambda p: p.replicas * p.shards,
    controls=["replicas", "shards", "width"],
)
