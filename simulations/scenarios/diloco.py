"""Training across datacenters: DiLoCo, many local steps, then one outer sync.

Douillard et al., "DiLoCo: Distributed Low-Communication Training of Language Models"
(arXiv:2311.08105), Algorithm 1. Workers sit in different datacenters, linked by a
slow wide-area network, each with its own shard of the data. Instead of averaging
gradients every step (DDP), every worker:

1. starts from the global parameters θ and takes H inner steps on its own data with
   its own inner optimizer (AdamW in the paper; its state never leaves the worker);
2. computes its pseudo-gradient Δ_i = θ − θ_i (how far its local steps moved it);
3. all-reduces Δ_i to the mean Δ, the only communication, once per H steps;
4. applies the outer optimizer, SGD with Nesterov momentum, to the kept copy of θ,
   treating Δ as a gradient; then every worker restarts from the new θ.

The same run also trains the plain data-parallel baseline on the same batches, with
the same inner optimizer and the same number of steps, all-reducing the gradients
every step, so the bytes and the losses of the two can be compared side by side.
"""

from __future__ import annotations

import copy
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_tolerance, max_abs_diff, mlp
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import tensor_view
from simulations.words import counted, each_of, once_every

IN_FEATURES, OUT_FEATURES, TEACHER_WIDTH = 4, 2, 16
WEIGHT_DECAY = 0.01  # AdamW's default
EVAL_SAMPLES = 64  # the held-out batch


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=2, le=8, description="Workers (datacenters)")
    inner_steps: int = Field(5, ge=1, le=50, description="Local steps H between syncs")
    outer_steps: int = Field(6, ge=1, le=10, description="Outer syncs")
    inner_optimizer: Literal["adamw", "sgd"] = Field("adamw", description="Inner optimizer")
    inner_lr: float = Field(0.01, gt=0.0, le=1.0, description="Inner learning rate")
    outer_lr: float = Field(0.7, gt=0.0, le=2.0, description="Outer learning rate")
    outer_momentum: float = Field(0.9, ge=0.0, le=0.99, description="Outer Nesterov momentum")
    width: int = Field(16, ge=2, le=64, description="Hidden width of the MLP")
    depth: int = Field(2, ge=1, le=4, description="Hidden layers of the MLP")
    batch_per_worker: int = Field(8, ge=1, le=32, description="Samples per worker per step")
    seed: int = Field(0, ge=0, le=2**31 - 1)


# -- data: one shard per worker, a fixed teacher to learn -------------------------------------------

def teacher(p: Params) -> torch.nn.Module:
    return mlp(IN_FEATURES, TEACHER_WIDTH, 1, OUT_FEATURES, p.seed + 1)


@torch.no_grad()
def batch(p: Params, step: int, worker: int, model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Worker `worker`'s batch at inner step `step` (worker −1: the held-out evaluation batch)."""
    g = torch.Generator().manual_seed(p.seed * 1_000_003 + (step + 1) * 97 + worker + 1)
    x = torch.randn(p.batch_per_worker if worker >= 0 else EVAL_SAMPLES, IN_FEATURES, generator=g)
    return x, model(x)


def inner_optimizer(p: Params, params) -> torch.optim.Optimizer:
    if p.inner_optimizer == "adamw":
        return torch.optim.AdamW(params, lr=p.inner_lr, weight_decay=WEIGHT_DECAY)
    return torch.optim.SGD(params, lr=p.inner_lr)


def outer_optimizer(p: Params, params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=p.outer_lr, momentum=p.outer_momentum, nesterov=p.outer_momentum > 0)


def train_step(model, optimizer, x, y) -> float:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


# -- one worker's run ------------------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    n, rank = ctx.world_size, ctx.rank
    wan = comm.subgroup(range(n), ctx.group, tag="diloco")  # the slow link between datacenters
    comm.name_group(wan, "outer")
    ddp_group = comm.subgroup(range(n), ctx.group, tag="ddp")  # the baseline's, labelled apart
    comm.name_group(ddp_group, "ddp")
    data_model = teacher(p)
    x_eval, y_eval = batch(p, -1, -1, data_model)

    global_model = mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed)  # θ: the same on every worker
    worker = copy.deepcopy(global_model)  # θ_i: this worker's local copy
    inner = inner_optimizer(p, worker.parameters())  # local state, never communicated
    outer = outer_optimizer(p, global_model.parameters())
    baseline = copy.deepcopy(global_model)  # the DDP run, for comparison
    baseline_opt = inner_optimizer(p, baseline.parameters())
    show = _Show(p, rank, n, x_eval, y_eval)
    show.setup(global_model, batch(p, 0, rank, data_model))

    for t in range(p.outer_steps):
        for h in range(p.inner_steps):
            step = t * p.inner_steps + h
            x, y = batch(p, step, rank, data_model)
            with trace.span("inner step", step=step):
                loss = train_step(worker, inner, x, y)  # DiLoCo: local only, no communication
            with trace.span("ddp step", step=step):
                ddp_loss = _ddp_step(baseline, baseline_opt, x, y, ddp_group, n, show)
            show.inner(t, h, step, worker, global_model, loss, ddp_loss)

        # The outer step: the pseudo-gradient Δ_i = θ − θ_i, averaged over the workers.
        theta = parameters_to_vector(global_model.parameters()).detach()
        delta = theta - parameters_to_vector(worker.parameters()).detach()
        show.pseudo_gradient(t, delta)
        show.count("diloco", _all_reduce_mean(delta, wan, n))
        show.outer_sync(t, delta)

        # Outer optimizer: SGD with Nesterov momentum on θ, Δ in place of a gradient.
        outer.zero_grad()
        for param, g in zip(global_model.parameters(), _split_like(delta, global_model.parameters())):
            param.grad = g
        with trace.span("outer step", step=t):
            outer.step()
        vector_to_parameters(parameters_to_vector(global_model.parameters()).detach(), worker.parameters())
        show.outer_step(t, global_model, baseline)

    show.done(global_model, baseline)
    return {"globals": show.globals, "losses": show.losses, "ddp_losses": show.ddp_losses,
            "ddp_weights": parameters_to_vector(baseline.parameters()).detach(),
            "bytes": dict(show.bytes), "eval": show.eval,
            "psi": sum(q.numel() for q in global_model.parameters())}


def _ddp_step(model, optimizer, x, y, group, n, show) -> float:
    """The baseline: every step, the gradients are all-reduced (averaged) before the optimizer step."""
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    grads = parameters_to_vector(q.grad for q in model.parameters())
    show.count("ddp", _all_reduce_mean(grads, group, n))
    vector_to_parameters(grads, [q.grad for q in model.parameters()])
    optimizer.step()
    return float(loss.detach())


def _all_reduce_mean(t: torch.Tensor, group, n: int) -> int:
    """Average `t` over the group in place; return the bytes the traced all-reduce recorded."""
    before = trace.current().sent["all_reduce"]
    comm.all_reduce(t, group)
    t.div_(n)
    return trace.current().sent["all_reduce"] - before


def _split_like(vector: torch.Tensor, params) -> list[torch.Tensor]:
    out, offset = [], 0
    for q in params:
        out.append(vector[offset:offset + q.numel()].view_as(q).clone())
        offset += q.numel()
    return out


# -- what the frames show -------------------------------------------------------------------------

class _Show:
    """The frames of the story and what the summary needs, kept out of the algorithm's way."""

    def __init__(self, p: Params, rank: int, n: int, x_eval, y_eval) -> None:
        self.p, self.rank, self.n = p, rank, n
        self.x_eval, self.y_eval = x_eval, y_eval
        self.bytes = {"diloco": 0, "ddp": 0}
        self.losses: list[float] = []
        self.ddp_losses: list[float] = []
        self.globals: list[torch.Tensor] = []
        self.eval: list[dict] = []
        self.layout = {"world_size": n, "inner_steps": p.inner_steps, "outer_steps": p.outer_steps,
                       "total_steps": p.inner_steps * p.outer_steps, "inner_optimizer": p.inner_optimizer}

    def count(self, run: str, nbytes: int) -> None:
        self.bytes[run] += nbytes

    def _extra(self, **more) -> dict:
        return self.layout | {"bytes": dict(self.bytes)} | more

    def setup(self, model, first_batch) -> None:
        theta = parameters_to_vector(model.parameters()).detach()
        self.layout["psi"] = theta.numel()
        self.layout["bytes_per_sync"] = theta.numel() * theta.element_size()
        trace.frame("setup", f"{self.n} workers in {self.n} datacenters, each with its own data shard and the "
                    f"same starting weights θ ({theta.numel()} parameters). They will sync once "
                    f"{once_every(self.p.inner_steps, 'step')}", extra=self._extra(step=0),
                    tensors=[tensor_view("x (shard)", "batch", first_batch[0], shard=(self.rank, self.n)),
                             tensor_view("θ", "parameters", theta, limit=1024)],
                    memory={"parameters": [theta]}, status="ready")

    def inner(self, t, h, step, worker, global_model, loss, ddp_loss) -> None:
        self.losses.append(loss)
        self.ddp_losses.append(ddp_loss)
        drift = (parameters_to_vector(worker.parameters()) - parameters_to_vector(global_model.parameters())).detach()
        trace.frame("inner", f"Outer step {t + 1}, inner step {h + 1}/{self.p.inner_steps}: each worker trains "
                    f"on its own shard with {self.p.inner_optimizer.upper()}, without talking to anyone "
                    f"(the DDP baseline all-reduces its gradients at every one of these steps)",
                    extra=self._extra(outer=t, inner=h, step=step + 1),
                    tensors=[tensor_view("θ_i − θ (local drift)", "parameters", drift, limit=1024)],
                    status=f"loss {loss:.4f}",
                    rank_extra={"loss": loss, "ddp_loss": ddp_loss, "drift": float(drift.norm())})

    def pseudo_gradient(self, t, delta) -> None:
        trace.frame("pseudo_gradient", f"Outer step {t + 1}: after {self.p.inner_steps} local steps the workers "
                    f"have drifted apart; each computes its pseudo-gradient Δ_i = θ − θ_i",
                    extra=self._extra(outer=t, step=(t + 1) * self.p.inner_steps),
                    tensors=[tensor_view("Δ_i", "gradients", delta, limit=1024)],
                    status=f"|Δ_i| {float(delta.norm()):.4f}", rank_extra={"delta_norm": float(delta.norm())})

    def outer_sync(self, t, delta) -> None:
        trace.frame("outer_sync", f"Outer step {t + 1}: the only communication, one all-reduce of Δ "
                    f"({delta.numel() * delta.element_size()} bytes per worker) over the slow link. So far each worker "
                    f"all-reduced {self.bytes['diloco']} bytes; in DDP, {self.bytes['ddp']}",
                    extra=self._extra(outer=t, step=(t + 1) * self.p.inner_steps),
                    tensors=[tensor_view("Δ (mean)", "gradients", delta, limit=1024)],
                    status=f"|Δ| {float(delta.norm()):.4f}")

    def outer_step(self, t, global_model, baseline) -> None:
        theta = parameters_to_vector(global_model.parameters()).detach()
        self.globals.append(theta.clone())
        with torch.no_grad():
            mse = torch.nn.functional.mse_loss
            ev = {"diloco": float(mse(global_model(self.x_eval), self.y_eval)),
                  "ddp": float(mse(baseline(self.x_eval), self.y_eval)), "step": (t + 1) * self.p.inner_steps}
        self.eval.append(ev)
        momentum = f"Nesterov momentum {self.p.outer_momentum:g}" if self.p.outer_momentum else "no momentum"
        trace.frame("outer_step", f"Outer step {t + 1}: θ ← outer SGD(θ, Δ) with lr {self.p.outer_lr:g} and "
                    f"{momentum}; every worker restarts from the same θ. Held-out loss: DiLoCo "
                    f"{ev['diloco']:.4f}, DDP {ev['ddp']:.4f}",
                    extra=self._extra(outer=t, step=ev["step"], eval=list(self.eval)),
                    tensors=[tensor_view("θ", "parameters", theta, limit=1024)],
                    memory={"parameters": [theta]}, status=f"eval {ev['diloco']:.4f}",
                    rank_extra={"checksum": float(theta.sum())})

    def done(self, global_model, baseline) -> None:
        ratio = self.bytes["ddp"] / self.bytes["diloco"]
        trace.frame("done", f"{counted(self.p.outer_steps * self.p.inner_steps, 'step')} each: DiLoCo all-reduced "
                    f"{self.bytes['diloco']} bytes per worker, DDP {self.bytes['ddp']}, {ratio:g}× more. "
                    f"Held-out loss: DiLoCo {self.eval[-1]['diloco']:.4f}, DDP {self.eval[-1]['ddp']:.4f}",
                    extra=self._extra(step=self.layout["total_steps"], eval=list(self.eval)),
                    status=f"{ratio:g}× fewer bytes")


# -- the single-process references and the checks ---------------------------------------------------

# The references build their optimizers from torch's documented classes and hyper-parameters, and write
# the training step out, so none of the run's `inner_optimizer`, `outer_optimizer` or `train_step` is reused.

def _reference_inner(p: Params, params) -> torch.optim.Optimizer:
    if p.inner_optimizer == "adamw":  # the paper's inner optimizer; 0.01 is AdamW's documented default decay
        return torch.optim.AdamW(params, lr=p.inner_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    return torch.optim.SGD(params, lr=p.inner_lr)


def _reference_step(model, optimizer, x, y) -> float:
    for q in model.parameters():
        q.grad = None
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def _data(p: Params, step: int, worker: int, data_model, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A worker's batch as the run draws it (fp32 inputs and teacher), in `dtype`."""
    return tuple(t.to(dtype) for t in batch(p, step, worker, data_model))


def reference_diloco(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The N workers simulated one after another in one process; Δ averaged by a plain sum; the outer
    step is torch.optim.SGD with Nesterov momentum (DiLoCo, Algorithm 1). `dtype` float64: the same
    training from the same fp32 weights and data, nearly exact, to measure fp32 round-off against."""
    data_model = teacher(p)
    x_eval, y_eval = _data(p, -1, -1, data_model, dtype)
    global_model = mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed).to(dtype)
    workers = [copy.deepcopy(global_model) for _ in range(p.world_size)]
    inners = [_reference_inner(p, w.parameters()) for w in workers]
    outer = torch.optim.SGD(global_model.parameters(), lr=p.outer_lr, momentum=p.outer_momentum,
                            nesterov=p.outer_momentum > 0)
    globals_, losses, evals = [], [], []
    for t in range(p.outer_steps):
        for h in range(p.inner_steps):
            step = t * p.inner_steps + h
            losses.append([_reference_step(w, o, *_data(p, step, i, data_model, dtype))
                           for i, (w, o) in enumerate(zip(workers, inners))])
        with torch.no_grad():
            for i, q in enumerate(global_model.parameters()):  # the outer gradient: mean of θ − θ_i
                q.grad = sum(q - list(w.parameters())[i] for w in workers) / p.world_size
        outer.step()
        with torch.no_grad():
            for w in workers:
                for q_w, q in zip(w.parameters(), global_model.parameters()):
                    q_w.copy_(q)
        globals_.append(parameters_to_vector(global_model.parameters()).detach().clone())
        with torch.no_grad():
            evals.append(((global_model(x_eval) - y_eval) ** 2).mean().item())
    return {"globals": globals_, "losses": losses, "eval": evals}


def reference_ddp(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """One process, the whole global batch (every worker's batch) at every step."""
    data_model = teacher(p)
    model = mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed).to(dtype)
    optimizer = _reference_inner(p, model.parameters())
    x_eval, y_eval = _data(p, -1, -1, data_model, dtype)
    losses, evals = [], []
    for step in range(p.outer_steps * p.inner_steps):
        parts = [_data(p, step, i, data_model, dtype) for i in range(p.world_size)]
        x, y = torch.cat([a for a, _ in parts]), torch.cat([b for _, b in parts])
        losses.append(_reference_step(model, optimizer, x, y))
        if (step + 1) % p.inner_steps == 0:  # where the DiLoCo run syncs, the held-out loss is shown
            with torch.no_grad():
                evals.append(((model(x_eval) - y_eval) ** 2).mean().item())
    return {"weights": parameters_to_vector(model.parameters()).detach(), "losses": losses, "eval": evals}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n, H, T = p.world_size, p.inner_steps, p.outer_steps
    ref, ref_ddp = reference_diloco(p), reference_ddp(p)
    exact, exact_ddp = reference_diloco(p, torch.float64), reference_ddp(p, torch.float64)
    outer_diff = max(max_abs_diff(r["globals"][t], ref["globals"][t]) for r in results for t in range(T))
    spread = max(max_abs_diff(r["globals"][t], results[0]["globals"][t]) for r in results for t in range(T))
    local_loss_diff = max(abs(r["losses"][s] - ref["losses"][s][i]) for i, r in enumerate(results) for s in range(T * H))
    ddp_diff = max(max_abs_diff(r["ddp_weights"], ref_ddp["weights"]) for r in results)
    mean_ddp = [sum(r["ddp_losses"][s] for r in results) / n for s in range(T * H)]
    ddp_loss_diff = max(abs(a - b) for a, b in zip(mean_ddp, ref_ddp["losses"]))
    mean_diloco = [sum(r["losses"][s] for r in results) / n for s in range(T * H)]
    eval_diff = {run: max(abs(e[run] - reference["eval"][t]) for r in results for t, e in enumerate(r["eval"]))
                 for run, reference in (("diloco", ref), ("ddp", ref_ddp))}

    # Tolerances: fp32 round-off, measured as 4× the fp32 reference's own distance from its float64 twin
    # (models.fp32_tolerance), at least terms·ε·max|x|, a gradient summing the n·b samples of a step. The
    # measured distance carries what the training does to round-off: AdamW divides each gradient by
    # √v + 1e-8, so on a weight whose gradient is near 0 a round-off difference of ~1e-9 in the gradient
    # moves the update by up to ~lr (seen at n 7, width 55, seed 7131: a gradient of −2.2e-8 at the first
    # step left the fp32 reference 3.1e-6 from float64, and the run, summing its gradient in another order,
    # 3.2e-6 from the fp32 reference); a fixed 1e-6 fails such correct runs.
    samples = n * p.batch_per_worker
    stacked = {key: torch.cat([torch.as_tensor(x, dtype=torch.float64).reshape(-1) for x in values])
               for key, values in (("globals", ref["globals"]), ("globals64", exact["globals"]))}
    outer_tol = fp32_tolerance(stacked["globals"], stacked["globals64"], terms=samples)
    ddp_tol = fp32_tolerance(ref_ddp["weights"], exact_ddp["weights"], terms=samples)
    loss_tol = fp32_tolerance(torch.tensor(ref_ddp["losses"], dtype=torch.float64),
                              torch.tensor(exact_ddp["losses"], dtype=torch.float64),
                              terms=samples * OUT_FEATURES)
    eval_tol = {run: fp32_tolerance(torch.tensor(reference["eval"], dtype=torch.float64),
                                    torch.tensor(twin["eval"], dtype=torch.float64),
                                    terms=EVAL_SAMPLES * OUT_FEATURES)
                for run, reference, twin in (("diloco", ref, exact), ("ddp", ref_ddp, exact_ddp))}

    # Bytes: comm.all_reduce records the buffer it was handed (S = Ψ × 4 bytes) per call and rank;
    # a ring all-reduce puts 2(N−1)/N × S of it on each rank's wire.
    w = p.width  # Ψ of the MLP from its shape: input layer, depth − 1 hidden layers, head (weights + biases)
    psi = IN_FEATURES * w + w + (p.depth - 1) * (w * w + w) + w * OUT_FEATURES + OUT_FEATURES
    buffer = psi * 4
    diloco = [r["bytes"]["diloco"] for r in results]
    ddp = [r["bytes"]["ddp"] for r in results]
    traced = [r["_sent"].get("all_reduce", 0) for r in results]
    ring = 2 * (n - 1) / n
    checks = [
        Check(name="outer updates equal the N workers simulated in one process", passed=outer_diff <= outer_tol,
              measured=outer_diff, expected=f"≤ {outer_tol:.1e}",
              detail=f"max |θ_t − θ_t ref| over {T} outer steps and {n} workers, fp32; local losses max diff "
                     f"{local_loss_diff:.1e}. The two differ only in how Δ is averaged (all-reduce vs a sum in one "
                     f"process); the bound is fp32 round-off carried through the training: 4× the fp32 reference's "
                     f"distance from float64, at least {samples}·ε·max|θ|; a wrong optimizer hyper-parameter moves "
                     f"θ by ~1e-3 or more"),
        *[Check(name=f"held-out losses shown equal the reference's ({label})", passed=eval_diff[run] <= eval_tol[run],
                measured=eval_diff[run], expected=f"≤ {eval_tol[run]:.1e}",
                detail=f"{label}'s held-out loss after {each_of(T, 'sync')}, every worker, against the single-process "
                       f"run's model on the same {EVAL_SAMPLES} samples; bound: 4× the fp32 reference's distance from "
                       f"float64, at least {EVAL_SAMPLES * OUT_FEATURES}·ε·loss; a loss of the wrong model differs by "
                       f"> 1e-2")
          for run, label in (("diloco", "DiLoCo"), ("ddp", "DDP"))],
        Check(name="every worker holds the same θ after each sync", passed=spread == 0.0, measured=spread,
              expected=0.0, detail="bit for bit: every worker applies the same all-reduced Δ to the same θ"),
        Check(name="DDP baseline equals one process on the global batch: weights", passed=ddp_diff <= ddp_tol,
              measured=ddp_diff, expected=f"≤ {ddp_tol:.1e}",
              detail=f"max |w_DDP − w_reference| after {T * H} {p.inner_optimizer} steps; the run averages N "
                     f"per-worker mean gradients, the reference takes one mean over {samples} samples: the same sums "
                     f"in another order. Bound as for the outer updates (fp32 round-off, AdamW's amplification "
                     f"included)"),
        Check(name="DDP baseline equals one process on the global batch: losses", passed=ddp_loss_diff <= loss_tol,
              measured=ddp_loss_diff, expected=f"≤ {loss_tol:.1e}",
              detail=f"mean of the workers' losses at {each_of(T * H, 'step')} against the reference's loss on the "
                     f"global batch; bound: 4× the fp32 reference's distance from float64, at least "
                     f"{samples * OUT_FEATURES}·ε·loss"),
        Check(name="DiLoCo all-reduces outer steps × Ψ × 4 bytes per worker", passed=all(b == T * buffer for b in diloco),
              measured=diloco, expected=T * buffer,
              detail="the bytes handed to each all-reduce (the buffer's M bytes per call), not the wire: a ring sends "
                     "2(N−1)/N of them per worker"),
        Check(name="DDP all-reduces outer steps × H × Ψ × 4 bytes per worker", passed=all(d == T * H * buffer for d in ddp),
              measured=ddp, expected=T * H * buffer,
              detail=f"DDP all-reduces Ψ × 4 bytes at {each_of(T * H, 'step')}, DiLoCo at {counted(T, 'sync')}: "
                     f"H = {H} times "
                     f"more; exact"),
        Check(name="DiLoCo and DDP bytes together = every all-reduce byte traced",
              passed=all(d + b == s for d, b, s in zip(ddp, diloco, traced)),
              measured=traced, expected=[d + b for d, b in zip(ddp, diloco)],
              detail="per worker, exact: no all-reduce left uncounted"),
    ]
    return Summary(checks=checks, figures={
        "psi": psi, "bytes_per_sync": buffer,
        "diloco_bytes_per_worker": diloco[0], "ddp_bytes_per_worker": ddp[0], "ratio": ddp[0] / diloco[0],
        "diloco_ring_wire_bytes_per_worker": ring * diloco[0], "ddp_ring_wire_bytes_per_worker": ring * ddp[0],
        "all_reduces": {"diloco": T, "ddp": T * H},
        "diloco_loss": mean_diloco, "ddp_loss": mean_ddp,
        "eval_loss": results[0]["eval"],
        "frames": len(frames),
    })


SCENARIO = Scenario(
    name="diloco",
    title="DiLoCo: local steps, one outer sync",
    description="Workers in separate datacenters take H local steps, then all-reduce their parameter deltas; "
                "outer SGD with Nesterov momentum; plain DDP on the same data for comparison.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["losses", "ranks", "timeline"],
    controls=["world_size", "inner_steps", "inner_optimizer"],
)
