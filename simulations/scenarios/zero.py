"""ZeRO stages 0–3 and FSDP: shard the optimizer states, then the gradients, then the parameters.

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models" (SC 2020, arXiv:1910.02054); Zhao et al., "PyTorch FSDP:
Experiences on Scaling Fully Sharded Data Parallel" (VLDB 2023, arXiv:2304.11277);
Ren et al., "ZeRO-Offload" (USENIX ATC 2021, arXiv:2101.06840).

Data parallelism keeps 16 bytes per parameter on every rank (REFERENCE.md). Each
Linear layer here is one *unit* (FSDP's wrapping): its weight and bias are
flattened into one vector, padded to a multiple of N and cut into N equal shards;
rank r owns shard r.

- stage 0 (DDP): everything replicated; gradients all-reduced.
- stage 1: rank r keeps Adam's states only for shard r. Gradients are reduce-scattered
  (the full gradient buffer stays), r updates its shard, and the updated
  parameters are all-gathered.
- stage 2: also the gradients: each unit's gradient is reduce-scattered as soon as
  backward produces it and the full gradient is freed.
- stage 3 (FSDP): also the parameters: a unit all-gathers its parameters just
  before its forward, frees them after, gathers them again just before its
  backward, and frees them after reduce-scattering its gradient.
- cpu_offload: the fp32 master shard and Adam's states live in host memory, and the
  step runs there.
- precision bf16: bf16 parameters and gradients, fp32 master parameters (k = 12).
- activation_checkpointing: each unit keeps only its input and recomputes the rest in
  backward (torch.utils.checkpoint).
- grad_accumulation: m micro-batches per step, one optimizer step.

The stage-3 free is FSDP's trick: the gathered buffer's storage is resized to 0
(autograd still holds views of it) and re-allocated when it is gathered again.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from torch.utils.checkpoint import checkpoint

from simulations import comm, formulas, trace
from simulations.frames import Check, Summary
from simulations.models import flat, fp32_tolerance, max_abs_diff, regression_batch
from simulations.models import mlp as relu_mlp
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import ActivationMeter, tensor_bytes, tensor_view
from simulations import words

IN_FEATURES, OUT_FEATURES = 4, 2
LR, BETAS, EPS = 1e-2, (0.9, 0.999), 1e-8
HOST = torch.device("cpu")  # where cpu_offload puts the optimizer (on a CPU-only run: the same RAM)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: int = Field(3, ge=0, le=3, description="ZeRO stage (0 = plain DDP, 3 = FSDP)")
    world_size: int = Field(4, ge=2, le=8, description="Ranks (GPUs)")
    width: int = Field(32, ge=2, le=256, description="Hidden width of the MLP")
    depth: int = Field(2, ge=1, le=6, description="Hidden layers of the MLP")
    precision: Literal["fp32", "bf16"] = Field("fp32", description="fp32, or bf16 with fp32 master weights")
    cpu_offload: bool = Field(False, description="Optimizer states and step in host memory")
    activation_checkpointing: bool = Field(False, description="Recompute each unit's activations in backward")
    grad_accumulation: int = Field(1, ge=1, le=4, description="Micro-batches per optimizer step")
    micro_batch: int = Field(4, ge=1, le=64, description="Samples per micro-batch on each rank")
    steps: int = Field(1, ge=1, le=5, description="Optimizer steps")
    seed: int = Field(0, ge=0, le=2**31 - 1)


def mlp(p: Params) -> nn.Sequential:
    """The model: Linear layers with GELU between them (GELU keeps its input for backward, as in a
    transformer's MLP, so checkpointing has something to save). Same weights as models.mlp."""
    model = relu_mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed)
    return nn.Sequential(*(nn.GELU() if isinstance(layer, nn.ReLU) else layer for layer in model))


def linears(model: nn.Sequential) -> list[nn.Linear]:
    """The FSDP units of this model: every Linear layer."""
    return [layer for layer in model if isinstance(layer, nn.Linear)]


# -- a unit: one layer's parameters as one flat, padded, sharded vector ---------------------------

@dataclass
class Unit:
    index: int
    shapes: list[torch.Size]  # weight, bias
    numel: int  # real elements; the flat vectors are padded to a multiple of N
    full: torch.Tensor  # the whole flat parameter vector, compute dtype, requires grad
    lo: int  # this rank's slice [lo, hi) of the flat vector: the part it updates
    hi: int
    shard: torch.Tensor | None  # stage 3: the compute-dtype shard this rank keeps between uses
    master: torch.Tensor  # fp32 parameters the optimizer updates (a view of `full` when they coincide)
    m: torch.Tensor  # Adam's momentum and variance, for [lo, hi) only
    v: torch.Tensor
    grad: torch.Tensor | None = None  # stages 2–3: this rank's reduced gradient shard
    host_grad: torch.Tensor | None = None  # cpu_offload: fp32 copy of the gradient shard for the host step
    sent: torch.Tensor | None = None  # stages 1–2: the updated shard on its way to the all-gather
    extras: dict = field(default_factory=dict)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Weight and bias as views of the flat vector (their gradients land in full.grad)."""
        (w_shape, b_shape) = self.shapes
        w = self.full[: w_shape.numel()].view(w_shape)
        b = self.full[w_shape.numel(): w_shape.numel() + b_shape.numel()]
        return w, b

    def gathered(self) -> bool:
        return self.full.untyped_storage().nbytes() > 0


def make_unit(index: int, layer: nn.Linear, p: Params, rank: int, n: int, device: torch.device) -> Unit:
    dtype = torch.bfloat16 if p.precision == "bf16" else torch.float32
    values = torch.cat([layer.weight.detach().reshape(-1), layer.bias.detach()])
    padded = -(-values.numel() // n) * n
    values = F.pad(values, (0, padded - values.numel()))  # zeros: zero gradient, zero update
    lo, hi = (0, padded) if p.stage == 0 else (rank * padded // n, (rank + 1) * padded // n)

    full = values.to(device, dtype, copy=True).requires_grad_(True)
    shard = full.detach()[lo:hi].clone() if p.stage == 3 else None
    # fp32 without offload: the parameters are their own master copy; otherwise a separate fp32 shard.
    where = HOST if p.cpu_offload else device
    if p.precision == "bf16" or p.cpu_offload:
        master = values[lo:hi].to(where, torch.float32, copy=True)
    else:
        master = shard if shard is not None else full.detach()[lo:hi]
    if p.stage == 3:
        free(full)  # stage 3 keeps only the shard; the full buffer is gathered when a unit runs
    return Unit(index=index, shapes=[layer.weight.shape, layer.bias.shape],
                numel=layer.weight.numel() + layer.bias.numel(),
                full=full, lo=lo, hi=hi, shard=shard, master=master,
                m=torch.zeros(hi - lo, device=where), v=torch.zeros(hi - lo, device=where))


def free(t: torch.Tensor) -> None:
    """Release a buffer's memory while autograd may still hold views of it (FSDP's resize-to-zero)."""
    t.untyped_storage().resize_(0)


def all_gather_params(unit: Unit, group) -> None:
    """Stage 3: re-allocate the unit's full buffer and fill it from every rank's shard."""
    unit.full.untyped_storage().resize_(unit.full.numel() * unit.full.element_size())
    comm.all_gather_into_tensor(unit.full.data, unit.shard, group)


# -- the optimizer: Adam on this rank's slice only -------------------------------------------------

def adam_step(master: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, t: int) -> None:
    """torch.optim.Adam's update, elementwise: so it can run on any slice of the parameters."""
    (b1, b2) = BETAS
    m.mul_(b1).add_(grad, alpha=1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    denom = (v.sqrt() / (1 - b2**t) ** 0.5).add_(EPS)
    master.addcdiv_(m, denom, value=-LR / (1 - b1**t))


def optimizer_step(unit: Unit, p: Params, n: int, t: int, group) -> None:
    """Update slice [lo, hi) from its averaged gradient, then bring the compute copy up to date."""
    if p.stage <= 1:
        grad = unit.full.grad[unit.lo: unit.hi]  # stage 0: all of it; stage 1: the reduce-scattered slice
    else:
        grad = unit.grad
    if p.cpu_offload:  # the step runs on the host: the gradient shard travels there in fp32
        unit.host_grad = grad.to(HOST, torch.float32, copy=True)
        grad = unit.host_grad
    adam_step(unit.master, grad.float(), unit.m, unit.v, t)

    with torch.no_grad():
        if p.stage == 0:
            if unit.master.data_ptr() != unit.full.data_ptr():
                unit.full.copy_(unit.master)
        elif p.stage in (1, 2):  # every rank updated one slice: gather the slices into every replica
            unit.sent = unit.master.to(unit.full.device, unit.full.dtype, copy=True)
            comm.all_gather_into_tensor(unit.full.data, unit.sent, group)
        elif unit.master is not unit.shard:
            unit.shard.copy_(unit.master)


# -- forward and backward, unit by unit ------------------------------------------------------------

class Engine:
    """Runs the units' forward and backward with the gathers, scatters and frees of the stage."""

    def __init__(self, ctx: RankContext, p: Params, units: list[Unit]):
        self.ctx, self.p, self.units = ctx, p, units
        self.acts: ActivationMeter | None = None
        self.kept_inputs: list[torch.Tensor] = []  # what checkpointing keeps: each unit's input
        self.ran_forward: set[int] = set()  # checkpointed units whose forward ran once this micro-batch
        self.recompute_s = 0.0
        self.peak_gathered = 0
        for unit in units:
            unit.full.register_post_accumulate_grad_hook(lambda _t, u=unit: self.after_backward(u))

    def unit_forward(self, unit: Unit, x: torch.Tensor) -> torch.Tensor:
        # With checkpointing, torch calls this twice per micro-batch: in forward, then again in backward.
        recomputing = unit.index in self.ran_forward
        self.ran_forward ^= {unit.index} if self.p.activation_checkpointing else set()
        start = time.perf_counter()
        try:
            with trace.span("recompute", unit=unit.index) if recomputing else nullcontext():
                w, b = unit.weights()
                y = F.linear(x, w, b)
                return y if unit.index == len(self.units) - 1 else F.gelu(y)
        finally:  # (torch stops a recompute early, by an exception, once it has what backward needs)
            if recomputing:
                self.recompute_s += time.perf_counter() - start

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor, micro: int) -> torch.Tensor:
        """One micro-batch's forward and loss, with autograd's saved tensors measured as they are saved."""
        self.acts = ActivationMeter()
        with self.acts:
            out = self.forward(x.to(self.units[0].full.dtype), micro)
            return F.mse_loss(out.float(), y) / self.p.grad_accumulation

    def forward(self, x: torch.Tensor, micro: int) -> torch.Tensor:
        for unit in self.units:
            if self.p.stage == 3:
                all_gather_params(unit, self.ctx.group)
                self.show("all_gather", f"Unit {unit.index}: each rank contributes its shard and all "
                          f"{self.ctx.world_size} "
                          f"receive the whole layer just before its forward", unit)
            if self.p.activation_checkpointing:
                self.kept_inputs.append(x)
                x = checkpoint(self.unit_forward, unit, x, use_reentrant=False)
            else:
                x = self.unit_forward(unit, x)
            x.register_hook(lambda grad, u=unit: self.before_backward(u))
            if self.p.stage == 3:
                free(unit.full)
                self.show("free", f"Unit {unit.index} forward done (micro-batch {micro + 1}): its gathered "
                          f"parameters are freed at once; only the shard stays", unit)
            else:
                self.show("forward", f"Unit {unit.index} forward, micro-batch {micro + 1} of "
                          f"{self.p.grad_accumulation}: " + ("only its input is kept, the rest is dropped "
                          "to be recomputed in backward" if self.p.activation_checkpointing
                          else "its activations stay until its backward"), unit)
        return x

    def before_backward(self, unit: Unit) -> None:
        """Fires when the gradient reaches the unit's output, before the unit's own backward."""
        if self.p.stage == 3:
            all_gather_params(unit, self.ctx.group)
            self.show("all_gather", f"Unit {unit.index}: gathered again, just before its backward", unit)

    def after_backward(self, unit: Unit) -> None:
        """Fires when the unit's gradient is complete (the flat vector's grad accumulated)."""
        if self.p.stage < 2:  # the full gradient stays until the end of the step
            self.show("backward", f"Unit {unit.index} backward: " + ("its forward recomputed from the kept "
                      "input, then its gradient" if self.p.activation_checkpointing else "its gradient")
                      + (" adds up in .grad, no all-reduce yet" if self.p.stage == 0 and self.p.grad_accumulation > 1
                         else " stays whole on every rank"), unit)
            return
        # Stages 2–3: reduce-scatter now, keep only this rank's averaged shard, free the rest.
        shard = torch.empty(unit.hi - unit.lo, dtype=unit.full.dtype, device=unit.full.device)
        comm.reduce_scatter_tensor(shard, unit.full.grad, self.ctx.group)
        shard.div_(self.ctx.world_size)
        unit.grad = shard if unit.grad is None else unit.grad.add_(shard)
        self.show("reduce_scatter", f"Unit {unit.index}: gradients reduce-scattered; rank r keeps the sum of "
                  f"shard r over all ranks", unit)
        unit.full.grad = None
        if self.p.stage == 3:
            free(unit.full)
        self.show("free", f"Unit {unit.index}: the full gradient" + (" and the gathered parameters are"
                  if self.p.stage == 3 else " is") + " freed", unit)

    # -- instrumentation ---------------------------------------------------------------------------
    def memory(self) -> dict:
        """Device memory by role, from the live tensors (host-resident states are in `host_memory`)."""
        p, units = self.p, self.units
        on_device = not p.cpu_offload
        persistent = [u.shard if p.stage == 3 else u.full for u in units]
        grads = [u.full.grad for u in units if u.full.grad is not None] + [u.grad for u in units if u.grad is not None]
        optimizer = [t for u in units for t in (u.m, u.v)] if on_device else []
        if on_device and p.precision == "bf16":
            optimizer += [u.master for u in units]
        gathered = ([u.full for u in units if p.stage == 3 and u.gathered()]
                    + [u.sent for u in units if u.sent is not None])
        self.peak_gathered = max(self.peak_gathered, tensor_bytes(gathered))
        return {"parameters": persistent, "gradients": grads, "optimizer": optimizer,
                "activations": self.activation_bytes(), "gathered": gathered}

    def activation_bytes(self) -> int:
        """What autograd saved for backward (not the weights it saved too), plus checkpointed inputs."""
        weights = {u.full.untyped_storage().data_ptr() for u in self.units}
        saved = [t for t in (self.acts.saved if self.acts else []) if t.untyped_storage().data_ptr() not in weights]
        return tensor_bytes(saved + self.kept_inputs)

    def host_memory(self) -> dict:
        if not self.p.cpu_offload:
            return {}
        units = self.units
        return {"optimizer": tensor_bytes([t for u in units for t in (u.master, u.m, u.v)]),
                "gradients": tensor_bytes([u.host_grad for u in units if u.host_grad is not None])}

    def shards(self, only: Unit | None = None) -> list:
        """The blocks each rank holds: a unit's parameters (whole or shard r), gradient and Adam slice."""
        n, rank, views = self.ctx.world_size, self.ctx.rank, []
        for u in ([only] if only else self.units):
            piece = None if self.p.stage == 0 else (rank, n)
            if self.p.stage == 3:
                views.append(tensor_view(f"unit{u.index}.param", "parameters", u.shard, shard=piece))
                if u.gathered():
                    views.append(tensor_view(f"unit{u.index}.gathered", "gathered", u.full.detach()))
            else:
                views.append(tensor_view(f"unit{u.index}.param", "parameters", u.full.detach()))
            if u.full.grad is not None:
                views.append(tensor_view(f"unit{u.index}.grad", "gradients", u.full.grad))
            if u.grad is not None:
                views.append(tensor_view(f"unit{u.index}.grad", "gradients", u.grad, shard=piece))
            views.append(tensor_view(f"unit{u.index}.adam", "optimizer", self.optimizer_states(u), shard=piece,
                                     note="host" if self.p.cpu_offload else None))
        return views

    def optimizer_states(self, u: Unit) -> torch.Tensor:
        """What the memory bar counts as the unit's optimizer states, as one block: Adam's m and v, and the fp32
        master copy where it is a tensor of its own (bf16, or offloaded); a copy, for the picture only."""
        own_master = self.p.precision == "bf16" or self.p.cpu_offload
        return torch.stack([u.m, u.v] + ([u.master] if own_master else [])).detach()

    def show(self, phase: str, caption: str, unit: Unit | None = None, **extra) -> None:
        trace.frame(phase, caption, tensors=self.shards(unit), memory=self.memory(),
                    extra={"stage": self.p.stage, "unit": None if unit is None else unit.index, **extra},
                    rank_extra={"host_memory": self.host_memory()})


# -- one rank's training run -----------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    n, rank, g = ctx.world_size, ctx.rank, p.grad_accumulation
    model = mlp(p)
    units = [make_unit(i, layer, p, rank, n, ctx.device) for i, layer in enumerate(linears(model))]
    engine = Engine(ctx, p, units)
    x, y = regression_batch(p.micro_batch * g * n, IN_FEATURES, OUT_FEATURES, p.seed)
    micro_x = [c.to(ctx.device, copy=True) for c in x.chunk(n)[rank].chunk(g)]
    micro_y = [c.to(ctx.device, copy=True) for c in y.chunk(n)[rank].chunk(g)]
    dtype = units[0].full.dtype
    engine.show("setup", _setup_caption(p, n), stage_name=STAGE_NAMES[p.stage])
    measured: dict = {"model_states": None, "activations": 0, "host": {}, "forward_s": 0.0}

    for step in range(p.steps):
        for micro in range(g):
            start = time.perf_counter()
            with trace.span("forward", step=step):
                loss = engine.forward_loss(micro_x[micro], micro_y[micro], micro)
            measured["forward_s"] += time.perf_counter() - start
            measured["activations"] = max(measured["activations"], engine.activation_bytes())
            with trace.span("backward", step=step):
                loss.backward()  # the units' hooks gather, reduce-scatter and free inside
            engine.acts, engine.kept_inputs = None, []

        # Gradients of the whole step are in: stages 0–1 communicate them now.
        for unit in units:
            if p.stage == 0:
                comm.all_reduce(unit.full.grad, ctx.group).div_(n)
            elif p.stage == 1:
                reduced = torch.empty(unit.hi - unit.lo, dtype=dtype, device=ctx.device)
                comm.reduce_scatter_tensor(reduced, unit.full.grad, ctx.group)
                unit.full.grad[unit.lo: unit.hi] = reduced / n
        engine.show("gradients", _gradients_caption(p, n))
        # This rank's averaged gradient slice at every step, for the check against the reference's gradients.
        measured.setdefault("grads", []).append([(u.full.grad[u.lo: u.hi] if p.stage <= 1 else u.grad).float().cpu().clone()
                                                 for u in units])
        measured["model_states"] = {k: tensor_bytes(v) if not isinstance(v, int) else v
                                    for k, v in engine.memory().items()}

        with trace.span("optimizer", step=step):
            for unit in units:
                optimizer_step(unit, p, n, step + 1, ctx.group)
        measured["host"] = engine.host_memory()
        engine.show("optimizer", _optimizer_caption(p, n))
        for unit in units:  # the step is over: gradients and send buffers go
            unit.full.grad, unit.grad, unit.sent, unit.host_grad = None, None, None, None
        engine.show("step_done", f"Step {step + 1} done: gradients freed; "
                    + ("each rank keeps its parameter shard" if p.stage == 3 else "every replica is up to date"))

    result = {
        "master": [u.master.detach().cpu().clone() for u in units],
        "ranges": [(u.lo, u.hi) for u in units],
        "numels": [u.numel for u in units],
        "replica": flat(u.full for u in units).cpu() if p.stage < 3 else None,
        "measured": measured, "recompute_s": engine.recompute_s, "peak_gathered": engine.peak_gathered,
        "elem_size": units[0].full.element_size(),
        "padded": sum(u.full.numel() for u in units),
    }
    if p.stage == 3 and p.precision == "fp32":
        result["fsdp2"] = train_with_fully_shard(ctx, p, micro_x, micro_y)
    trace.frame("done", f"After {p.steps} step{'s' if p.steps > 1 else ''}: "
                + (f"{STAGE_NAMES[p.stage]} trained the same model as plain DDP" if p.stage
                   else "the same model as one process trained on the whole batch"), extra={"stage": p.stage})
    return result


STAGE_NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 / FSDP"}


def _setup_caption(p: Params, n: int) -> str:
    held = {0: "the whole model, its gradients and all of Adam's states",
            1: "the whole model and gradients, but Adam's states for one shard of each unit only",
            2: "the whole model, but gradients and Adam's states for one shard only",
            3: "one shard of every unit's parameters, gradients and Adam's states"}[p.stage]
    return f"{STAGE_NAMES[p.stage]} on {n} ranks: each rank holds {held}"


def _gradients_caption(p: Params, n: int) -> str:
    return {0: (f"One all-reduce for the whole step, after all {p.grad_accumulation} micro-batches: "
                if p.grad_accumulation > 1 else "Gradients all-reduced: ") + "every rank holds the full averaged gradient",
            1: "Gradients reduce-scattered: rank r's shard of the full gradient buffer is the average; "
               "the rest of the buffer is still allocated",
            2: "Backward done: each rank holds only its averaged gradient shard",
            3: "Backward done: each rank holds only its parameter and gradient shards"}[p.stage]


def _optimizer_caption(p: Params, n: int) -> str:
    where = " on the host (CPU offload)" if p.cpu_offload else ""
    if p.stage == 0:
        return f"Every rank runs the same Adam step on all parameters{where}"
    tail = " and all-gathers the updated shards into every replica" if p.stage in (1, 2) else ""
    return f"Each rank runs Adam only on its 1/{n} of the parameters{where}{tail}"


# -- the cross-check with torch's FSDP2 ------------------------------------------------------------

def train_with_fully_shard(ctx: RankContext, p: Params, micro_x, micro_y) -> torch.Tensor:
    """The same training with torch.distributed.fsdp.fully_shard, one unit per Linear. Untraced."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    model = mlp(p).to(ctx.device)
    mesh = DeviceMesh.from_group(ctx.group, ctx.device.type)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS, foreach=False)
    for _ in range(p.steps):
        for xb, yb in zip(micro_x, micro_y):
            (F.mse_loss(model(xb), yb) / p.grad_accumulation).backward()
        optimizer.step()
        optimizer.zero_grad()
    return flat(q.full_tensor() for q in model.parameters()).cpu()


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """Plain single-process Adam on the whole global batch, with gradient accumulation. bf16: the same mixed precision, in
    one process (bf16 model and gradients, torch.optim.Adam on fp32 master copies). Returns the trained
    parameters and every step's gradient, flat. fp32 with `dtype` float64: the same training from the same
    weights and data in float64, the nearly exact values fp32 round-off is measured from."""
    model = mlp(p).to(dtype)
    x, y = (t.to(dtype) for t in regression_batch(p.micro_batch * p.grad_accumulation * p.world_size, IN_FEATURES,
                                                  OUT_FEATURES, p.seed))
    master = [q.detach().clone().requires_grad_(True) for q in model.parameters()]
    if p.precision == "bf16":
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
    optimizer = torch.optim.Adam(master, lr=LR, betas=BETAS, eps=EPS, foreach=False)
    # The same micro-batches as the ranks (N shards × g accumulation steps), accumulated in one process:
    # the mean over the global batch, with fp32 sums grouped as a single GPU accumulating would group them.
    micro = p.world_size * p.grad_accumulation
    grads = []
    for _ in range(p.steps):
        model.zero_grad()
        for xb, yb in zip(x.chunk(micro), y.chunk(micro)):
            (F.mse_loss(model(xb).to(yb.dtype), yb) / micro).backward()
        for q, m in zip(model.parameters(), master):
            m.grad = q.grad.to(m.dtype)
        grads.append(flat(m.grad for m in master))
        optimizer.step()
        with torch.no_grad():
            for q, m in zip(model.parameters(), master):
                q.copy_(m)
    return {"params": flat(master), "grads": grads}


def activation_profile(p: Params) -> dict:
    """Activation bytes autograd keeps for one micro-batch of a plain torch model of the same shape (nn.Linear and
    nn.GELU, no code of the run's Engine), with and without torch.utils.checkpoint on each Linear (+ GELU)
    unit (the reentrant form, which saves each unit's input with save_for_backward, where the meter sees it)."""
    dtype = torch.bfloat16 if p.precision == "bf16" else torch.float32
    model = mlp(p).to(dtype)
    x, y = regression_batch(p.micro_batch, IN_FEATURES, OUT_FEATURES, p.seed)
    x = x.to(dtype).requires_grad_()  # so that the first unit's checkpoint is recorded, as the run's is
    layers = list(model)
    units = [nn.Sequential(*layers[i:i + 2]) for i in range(0, len(layers), 2)]  # Linear + GELU, the last alone
    out = {}
    for checkpointing in (False, True):
        with ActivationMeter(model.parameters()) as meter:
            h = x
            for unit in units:
                h = checkpoint(unit, h, use_reentrant=True) if checkpointing else unit(h)
            loss = F.mse_loss(h.float(), y) / p.grad_accumulation
        out["checkpointed" if checkpointing else "plain"] = meter.bytes
        del loss
    return out


def activation_formula(p: Params) -> dict:
    """What a unit keeps for backward, counted by hand: each Linear its input, each GELU its input, the MSE loss
    its fp32 prediction and target; checkpointing keeps each unit's input only (plus the loss's two).
    b = micro-batch, d0 = inputs, w = width, L = hidden layers, d_o = outputs, e = bytes per element."""
    b, d0, w, L, d_o = p.micro_batch, IN_FEATURES, p.width, p.depth, OUT_FEATURES
    e = 2 if p.precision == "bf16" else 4
    loss = 4 * b * 2 * d_o
    return {"plain": e * b * (d0 + 2 * w * L) + loss, "checkpointed": e * b * (d0 + w * L) + loss}


def unit_numels(p: Params) -> list[int]:
    """Parameters of each unit (Linear: weight and bias), from the configuration."""
    sizes = [IN_FEATURES] + [p.width] * p.depth + [OUT_FEATURES]
    return [a * b + b for a, b in zip(sizes, sizes[1:])]


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n = p.world_size
    numels = unit_numels(p)
    psi = sum(numels)
    padded_units = [-(-k // n) * n for k in numels]  # each unit padded to a multiple of N
    padded = sum(padded_units)
    element = 2 if p.precision == "bf16" else 4

    # Equivalence: stitch each unit's master slices together, in rank order, and compare.
    def stitch(key: str) -> torch.Tensor:
        if p.stage == 0:
            return torch.cat([results[0][key][i].float()[: numels[i]] for i in range(len(numels))])
        return torch.cat([torch.cat([r[key][i] for r in results]).float()[: numels[i]] for i in range(len(numels))])

    trained = stitch("master")
    ref = reference(p)
    diffs = (trained.double() - ref["params"].double()).abs()
    diff = float(diffs.max())
    # Gradients at every step in fp32; in bf16 at the first step only, the one both runs take from the same
    # weights (later, weights whose tiny gradients flipped sign have moved apart by up to 2·lr).
    owners = results[:1] if p.stage == 0 else results
    compared = p.steps if p.precision == "fp32" else 1
    grad_diff = max(max_abs_diff(torch.cat([torch.cat([r["measured"]["grads"][t][i] for r in owners])[: numels[i]]
                                            for i in range(len(numels))]), ref["grads"][t]) for t in range(compared))
    if p.precision == "fp32":
        # fp32: the run and the reference add the same terms in another order. Bound: fp32 round-off, 4× the
        # fp32 reference's own distance from its float64 twin, at least samples·ε·max|x| (models.fp32_tolerance):
        # the measured distance carries Adam's amplification (an update divides by √v + ε, so where a
        # gradient is near 0 a round-off difference moves the update by up to ~lr).
        exact = reference(p, torch.float64)
        samples = p.micro_batch * p.grad_accumulation * n
        tolerance = fp32_tolerance(ref["params"], exact["params"], terms=samples)
        grad_tolerance = fp32_tolerance(torch.cat(ref["grads"]), torch.cat(exact["grads"]), terms=samples)
        params_ok = diff <= tolerance
        measured_params: float | dict = diff
        expected = f"≤ {tolerance:.1e}"
        why = (f"fp32: summation order only; bound: 4× the fp32 reference's distance from float64, at least "
               f"{samples}·ε·max|w|, ε = 2⁻²⁴")
    else:
        # bf16 (8 significant bits, unit round-off 2^-8): a gradient rounded a few more times in another
        # order differs by a few 2^-8 of the largest one. Adam divides by √v, so a weight moves by ~lr
        # whatever its gradient's size: where a tiny gradient's sign flips, the two runs part by up to 2·lr
        # per step (the hard bound on the largest difference), but where the signs agree an update differs
        # by a few 2^-8 of lr, so the typical (median) weight parts by less than steps·lr/64. Measured on
        # correct runs (stages 0–3, 2–8 ranks, 1–5 steps): median ≤ 0.013·lr; a wrong update (stale
        # parameters, a wrong step count) moves most weights by lr/4 or more.
        tolerance = 2 * LR * p.steps
        grad_tolerance = 2**-6 * float(ref["grads"][0].abs().max())
        median, typical = float(diffs.median()), p.steps * LR / 64
        params_ok = diff <= tolerance and median <= typical
        measured_params = {"max": diff, "median": median}  # both parts, so a failure shows which one
        expected = f"max ≤ {tolerance:g}, median ≤ {typical:.3g}"
        why = (f"bf16 against the same mixed precision in one process; median difference {median:.2g}, "
               f"{int((diffs > LR / 8).sum())} of {psi} weights part by more than lr/8 (tiny gradients whose sign flipped)")
    checks = [Check(name="parameters equal plain single-process training", passed=params_ok,
                    measured=measured_params, expected=expected,
                    detail=f"max |w_ZeRO-{p.stage} − w_reference| after {p.steps} Adam step(s); {why}"),
              Check(name="averaged gradients equal the single-process gradient", passed=grad_diff <= grad_tolerance,
                    measured=grad_diff, expected=f"≤ {grad_tolerance:.3g}",
                    detail=f"{compared} of {p.steps} step(s), every rank's averaged slice stitched together, against the "
                           "mean-loss gradient of the whole global batch at the reference's parameters" + ("; bound as for the parameters" if p.precision == "fp32" else
                           "; bf16: 4 roundings of 2^-8 relative to the largest gradient") +
                           ". Adam barely notices a gradient scaled by a constant, so this check is what sees it")]
    if p.stage < 3:
        spread = max(max_abs_diff(r["replica"], results[0]["replica"]) for r in results)
        checks.append(Check(name="replicas identical on every rank", passed=spread == 0.0, measured=spread,
                            expected=0.0))
    if "fsdp2" in results[0]:
        fsdp_diff = max(max_abs_diff(r["fsdp2"], trained.double()) for r in results)
        checks.append(Check(name="stage 3 equals torch FSDP2 (fully_shard)", passed=fsdp_diff <= tolerance,
                            measured=fsdp_diff, expected=f"≤ {tolerance:.1e}",
                            detail="fully_shard on each Linear and the root, on a CPU DeviceMesh of the same group; "
                                   "another fp32 order of the same sums: bound as for the parameters"))

    # Model states: measured bytes per rank by role against REFERENCE.md's table.
    # The padded Ψ: every unit is padded to a multiple of N so that it splits into equal shards.
    formula = formulas.model_state_bytes(padded, p.precision, p.stage, n, p.cpu_offload)
    measured_states = [{k: r["measured"]["model_states"][k] for k in formulas.MODEL_STATE_ROLES} for r in results]
    worst = 0.0
    for states in measured_states:
        for role, expected in formula.items():
            got = states[role]
            worst = max(worst, abs(got - expected) / expected if expected else float(got != 0))
    by_role = ", ".join(f"{role} {measured_states[0][role]:,} vs {formula[role]:,.0f}" for role in formula)
    checks.append(Check(name="model-state bytes per rank match REFERENCE.md", passed=worst == 0,
                        measured=sum(measured_states[0].values()), expected=sum(formula.values()),
                        detail=f"rank 0, measured vs formula: {by_role}; exact on every role and rank (worst "
                               f"relative error {worst:.2%}), with Ψ = {psi} padded to {padded} so every unit splits "
                               f"into {n} equal shards"))
    if p.cpu_offload:
        host = results[0]["measured"]["host"]["optimizer"]
        host_formula = formulas.host_bytes(padded, p.stage, n, True)
        checks.append(Check(name="offloaded optimizer bytes on the host match 12Ψ (/N from stage 1)",
                            passed=host == host_formula, measured=host,
                            expected=host_formula))

    # Communication: elements per step, counted from the traced collectives.
    elem = element
    counted = []
    for r in results:
        sent = r["_sent"]
        counted.append((2 * sent.get("all_reduce", 0) + n * sent.get("all_gather", 0)
                        + sent.get("reduce_scatter", 0)) / elem / p.steps)
    comm_formula = formulas.zero_comm_elements(padded, p.stage, p.grad_accumulation)
    checks.append(Check(name="elements communicated per step = ZeRO paper's volume",
                        passed=all(c == comm_formula for c in counted), measured=counted[0], expected=comm_formula,
                        detail=f"{'2Ψ' if p.stage < 3 else '3Ψ'} at m = 1 (m = {p.grad_accumulation}); Ψ = {padded} "
                               f"padded elements; an all_reduce counts twice its buffer, an all_gather or reduce_scatter once"))

    # Activations: the run's measurement, a plain torch model's, and the count by hand must agree.
    profile, by_hand = activation_profile(p), activation_formula(p)
    kept = max(r["measured"]["activations"] for r in results)
    mode = "checkpointed" if p.activation_checkpointing else "plain"
    checks.append(Check(name="activations kept per micro-batch equal a plain torch model's and the formula",
                        passed=kept == profile[mode] == by_hand[mode], measured=kept, expected=by_hand[mode],
                        detail=f"{mode}; plain nn.Linear/nn.GELU model measured {profile[mode]} B; formula "
                               + ("e·b·(d0 + h·L) + 8·b·d_o" if p.activation_checkpointing else "e·b·(d0 + 2h·L) + 8·b·d_o")
                               + f"; micro-batch of {words.counted(p.micro_batch, 'sample')}: gradient accumulation keeps "
                               f"one micro-batch's activations, not "
                               f"{words.counted(p.grad_accumulation * p.micro_batch, 'sample')}'"))

    # Gathered buffers, sampled at every frame on every rank: stage 3 holds one unit's full parameters from
    # its all-gather until its free, and nothing between units; stages 1–2 hold the updated shards only
    # while they are all-gathered after the optimizer step.
    def gathered_expected(frame) -> int:
        if p.stage == 3 and frame.phase in ("all_gather", "reduce_scatter"):
            return padded_units[frame.extra["unit"]] * element
        if p.stage in (1, 2) and frame.phase == "optimizer":
            return padded // n * element
        return 0

    wrong = [(f.index, f.phase, r.rank, r.memory.get("gathered"), gathered_expected(f))
             for f in frames if "gathered" in f.ranks[0].memory for r in f.ranks
             if r.memory.get("gathered") != gathered_expected(f)]
    sampled = sum(1 for f in frames if "gathered" in f.ranks[0].memory)

    # The other roles at every frame: parameters and optimizer states never change size; gradients never
    # exceed what the stage keeps (stages 0–1: every unit's full gradient; 2–3: one unit's full gradient,
    # between its backward and its reduce-scatter, plus this rank's averaged shards).
    shard = padded // n
    expected_params = (shard if p.stage == 3 else padded) * element
    slice_ = shard if p.stage >= 1 else padded
    expected_optimizer = 0 if p.cpu_offload else slice_ * (8 + (4 if p.precision == "bf16" else 0))
    gradient_bound = (padded if p.stage <= 1 else max(padded_units) + shard) * element
    off_role = [(f.index, f.phase, r.rank, {k: r.memory.get(k) for k in ("parameters", "optimizer", "gradients")})
                for f in frames if "parameters" in f.ranks[0].memory for r in f.ranks
                if r.memory["parameters"] != expected_params or r.memory.get("optimizer", 0) != expected_optimizer
                or r.memory.get("gradients", 0) > gradient_bound]
    checks.append(Check(name="memory by role at every frame within the stage's bounds", passed=not off_role,
                        measured=f"{len(off_role)} rank-frame(s) off" if off_role else f"{sampled} frames × {n} ranks",
                        expected=f"parameters {expected_params} B, optimizer {expected_optimizer} B, gradients "
                                 f"≤ {gradient_bound} B",
                        detail=(f"first off (frame, phase, rank, bytes): {off_role[:2]}" if off_role else
                                "every rank, every frame, from the unit sizes and the stage")))
    checks.append(Check(name="gathered parameters held only while a unit runs", passed=not wrong and sampled > 0,
                        measured=f"{len(wrong)} frame(s) off" if wrong else f"{sampled} frames × {n} ranks as expected",
                        expected="stage 3: one unit's padded parameters from all-gather to free, else 0"
                                 if p.stage == 3 else "0 but the updated shards at the optimizer step",
                        detail=(f"first off (frame, phase, rank, measured, expected): {wrong[:3]}" if wrong else
                                "the 'gathered' memory role of every rank at every frame, against the unit sizes")))

    run_s = [r["_run_s"] for r in results]
    return Summary(checks=checks, figures={
        "psi": psi, "psi_padded": padded, "stage": p.stage, "ranks": n,
        "model_states_measured": measured_states[0], "model_states_formula": formula,
        "model_states_ddp_formula": formulas.model_state_bytes(psi, p.precision, 0, n),
        "host_bytes": results[0]["measured"]["host"],
        "comm_elements_per_step": counted[0], "comm_elements_formula": comm_formula,
        "comm_elements_formula_unpadded": formulas.zero_comm_elements(psi, p.stage, p.grad_accumulation),
        "comm_elements_without_accumulation": formulas.zero_comm_elements(padded, p.stage, 1),
        "samples_per_step_per_rank": p.micro_batch * p.grad_accumulation,
        "bytes_sent_per_rank": [r["_sent"] for r in results],
        "activations_measured": kept, "activations_plain": profile["plain"],
        "activations_checkpointed": profile["checkpointed"], "activations_formula": by_hand,
        "activation_bytes_saved": profile["plain"] - profile["checkpointed"],
        "peak_gathered_bytes": max(r["peak_gathered"] for r in results),
        "frames": len(frames),
    }, timings={"run_s": max(run_s), "recompute_s": max(r["recompute_s"] for r in results),
              "forward_s": max(r["measured"]["forward_s"] for r in results)})


SCENARIO = Scenario(
    name="zero",
    title="ZeRO-1/2/3 and FSDP",
    description="Optimizer states, gradients and parameters sharded over the ranks; every gather, "
                "scatter and free traced, memory measured by role.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["ranks", "memory", "timeline"],
    controls=["stage", "world_size", "activation_checkpointing", "grad_accumulation"],
)
