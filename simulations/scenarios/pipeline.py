"""Pipeline parallelism: the model's layers split into stages, one (or v) per rank.

Micro-batches flow through the stages: rank r computes its layers, sends the activations to rank
r + 1, and later receives the gradient of its output back from r + 1 and sends the gradient of its
input to r − 1. A schedule says in which order each rank runs its forwards (F) and backwards
(B, and W in zero bubble); `pipeline_schedules.py` writes the four out: GPipe (Huang et al.,
arXiv:1811.06965), 1F1B (Narayanan et al., arXiv:2006.09503), interleaved 1F1B (arXiv:2104.04473)
and ZB-H1 (Qi et al., arXiv:2401.10241). The time a rank waits is the pipeline bubble.

Here each rank runs its schedule one logical slot at a time, with real send/recv of real
activations and gradients, then runs torch.distributed.pipelining's schedule of the same kind on
the same weights as a cross-check. The summary checks both against the unsplit model.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import flat, fp32_tolerance, max_abs_diff, mlp, regression_batch
from simulations.scenarios.base import RankContext, Scenario
from simulations.scenarios.pipeline_schedules import (Action, bubble_formula, rank_orders, replay, replay_bounds,
                                                      timetable)
from simulations.trace import ActivationMeter, tensor_bytes

Schedule = Literal["gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"]


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stages: int = Field(4, ge=2, le=8, description="Pipeline stages p (ranks)")
    microbatches: int = Field(8, ge=1, le=32, description="Micro-batches m per batch")
    schedule: Schedule = Field("1f1b", description="Pipeline schedule")
    # 0 = automatic, so that every field has a plain default the deck's controls can send back.
    virtual_stages: int = Field(0, ge=0, le=4, description="Stages per rank v (0: 2 for interleaved_1f1b, else 1)")
    layers: int = Field(0, ge=0, le=32, description="Linear layers of the model (0: one per stage)")
    width: int = Field(8, ge=2, le=64, description="Width of every layer")
    microbatch_size: int = Field(2, ge=1, le=8, description="Samples per micro-batch")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @property
    def v(self) -> int:
        return self.virtual_stages or (2 if self.schedule == "interleaved_1f1b" else 1)

    @property
    def num_layers(self) -> int:
        return self.layers or self.stages * self.v

    @model_validator(mode="after")
    def _schedule_constraints(self) -> Params:
        p, m, v = self.stages, self.microbatches, self.v
        if self.schedule != "gpipe" and m < p:
            raise ValueError(f"{self.schedule} needs microbatches >= stages (got m={m} < p={p}); only gpipe runs with fewer")
        if v > 1 and self.schedule != "interleaved_1f1b":
            raise ValueError(f"virtual_stages > 1 needs schedule interleaved_1f1b (got {self.schedule})")
        if self.num_layers % (p * v):
            raise ValueError(f"virtual_stages must divide the layers: {self.num_layers} layers cannot be split "
                             f"into stages × virtual_stages = {p} × {v} equal stages")
        rounds = max(1, m // p)  # torch.distributed.pipelining's looped schedules (the cross-check) run in rounds
        if self.schedule in ("interleaved_1f1b", "zero_bubble") and m % rounds:
            raise ValueError(f"{self.schedule} needs microbatches to be a multiple of its rounds max(1, m // p) "
                             f"= {rounds} (got m={m})")
        return self


# -- the model, split into stages ------------------------------------------------------------------

def build_stages(p: Params) -> list[nn.Sequential]:
    """The whole model (same seed on every rank), cut into p·v stages of equal numbers of layers."""
    model = mlp(p.width, p.width, p.num_layers - 1, p.width, p.seed)
    layers = [nn.Sequential(*model[i:i + 2]) for i in range(0, len(model), 2)]  # Linear (+ ReLU)
    per_stage = p.num_layers // (p.stages * p.v)
    return [nn.Sequential(*layers[i:i + per_stage]) for i in range(0, len(layers), per_stage)]


def run_layers(stage: nn.Sequential, x: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Forward through one stage, keeping each Linear's input X and output Y (W needs them)."""
    linears = []
    for block in stage:
        for layer in block:
            y = layer(x)
            if isinstance(layer, nn.Linear):
                linears.append((layer, x, y))
            x = y
    return x, linears


# -- one rank's part of the pipeline ---------------------------------------------------------------

class StageRunner:
    """Runs the F, B and W of this rank's stages; holds the micro-batches in flight."""

    def __init__(self, ctx: RankContext, p: Params, stages: dict[int, nn.Sequential], xs, ys):
        self.ctx, self.p = ctx, p
        self.stages, self.xs, self.ys = stages, xs, ys
        self.last = p.stages * p.v - 1
        self.in_flight: dict[tuple[int, int], dict] = {}  # (stage, mb) -> what backward needs
        self.waiting_w: dict[tuple[int, int], list] = {}  # (stage, mb) -> (layer, X, dY) for W
        self.sends: list = []  # posted sends: (work, tensor) kept until they complete
        self.received: list[dict] = []  # this slot's receives, for the frame
        self.loss = 0.0
        self.ran: list[tuple] = []  # the actions this rank really ran, in order (for the check against torch)
        self.cpu_s: dict[tuple, float] = {}  # action -> this rank's CPU time computing it (for the replay)

    def run(self, action: Action) -> None:
        {"F": self.forward, "B": self.backward, "W": self.weight}[action.kind](action.stage, action.mb)
        self.ran.append(tuple(action))

    def forward(self, s: int, i: int) -> None:
        x = self.xs[i] if s == 0 else self.receive(s - 1, i, "act").requires_grad_()
        params = list(self.stages[s].parameters())
        with self.computing("F", s, i), ActivationMeter(params) as saved:
            out, linears = run_layers(self.stages[s], x)
            if s == self.last:  # the loss of one micro-batch; the mean over m is the batch's loss
                out = F.mse_loss(out, self.ys[i]) / self.p.microbatches
        self.in_flight[(s, i)] = {"input": x, "output": out, "linears": linears, "saved": saved.saved}
        if s == self.last:
            self.loss += out.item()
        else:
            self.send(out.detach(), s, s + 1, i, "act")

    def backward(self, s: int, i: int) -> None:
        """Full backward (GPipe, 1F1B, interleaved), or only the input gradient B (zero bubble)."""
        f = self.in_flight.pop((s, i))
        grad = None if s == self.last else self.receive(s + 1, i, "grad")
        with self.computing("B", s, i):
            if self.p.schedule != "zero_bubble":
                torch.autograd.backward(f["output"], grad)  # accumulates the weight gradients too
                grad_input = f["input"].grad if s > 0 else None
            else:  # B: gradients w.r.t. the stage input and each Linear's output, not the weights
                wanted = [y for _, _, y in f["linears"]] + ([f["input"]] if s > 0 else [])
                grads = torch.autograd.grad(f["output"], wanted, grad)
                self.waiting_w[(s, i)] = [(layer, x.detach(), dy) for (layer, x, _), dy in zip(f["linears"], grads)]
                grad_input = grads[-1] if s > 0 else None
        if s > 0:
            self.send(grad_input, s, s - 1, i, "grad")

    def weight(self, s: int, i: int) -> None:
        """W: the weight gradients dW = dYᵀ·X, db = Σ dY, off the critical path."""
        with self.computing("W", s, i):
            for layer, x, dy in self.waiting_w.pop((s, i)):
                layer.weight.grad += dy.t() @ x
                layer.bias.grad += dy.sum(0)

    @contextmanager
    def computing(self, kind: str, s: int, i: int) -> Iterator[None]:
        """A span of the timeline around one F, B or W, and the thread's CPU time in it: what the action cost
        this rank, without the time it waited for a core while other ranks ran (thread_time counts only
        the time this thread was on a CPU)."""
        with trace.span(f"{kind}{i}", stage=s):
            began = time.thread_time()
            try:
                yield
            finally:
                self.cpu_s[(kind, s, i)] = time.thread_time() - began

    # -- point-to-point: sends are posted (never block), receives wait -----------------------------

    def send(self, t: torch.Tensor, s: int, to: int, i: int, kind: str) -> None:
        name = f"{kind} s{s}→s{to} mb{i}"
        work = comm.isend(t, self.rank_of(to), self.ctx.group, tag=_tag(kind, to, i), chunk=i, name=name)
        self.sends.append((work, t))

    def receive(self, s: int, i: int, kind: str) -> torch.Tensor:
        buffer = torch.empty(self.p.microbatch_size, self.p.width, device=self.ctx.device)
        to = s + 1 if kind == "act" else s - 1
        comm.recv(buffer, self.rank_of(s), self.ctx.group, tag=_tag(kind, to, i))
        self.received.append({"name": f"{kind} s{s}→s{to} mb{i}", "src": self.rank_of(s), "bytes": tensor_bytes(buffer)})
        return buffer

    def rank_of(self, stage: int) -> int:
        return stage % self.p.stages  # loop placement: stage k·p + r lives on rank r

    def flush(self) -> None:
        for work, _ in self.sends:
            work.wait()
        self.sends = []

    def activations(self) -> tuple[int, int]:
        """Micro-batches in flight on this rank (forward done, W not yet) and the bytes they hold."""
        held = [t for f in self.in_flight.values() for t in f["saved"]]
        held += [t for w in self.waiting_w.values() for _, x, dy in w for t in (x, dy)]
        return len(set(self.in_flight) | set(self.waiting_w)), tensor_bytes(held)


def _tag(kind: str, to_stage: int, mb: int) -> int:
    """A message's own tag, so two messages between the same ranks are never confused."""
    return (to_stage * 2 + (kind == "grad")) * 64 + mb


# -- one rank's run --------------------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    rank, num_stages = ctx.rank, p.stages * p.v
    all_stages = build_stages(p)
    mine = {s: all_stages[s].to(ctx.device) for s in range(rank, num_stages, p.stages)}
    untouched = {s: copy.deepcopy(m) for s, m in mine.items()}  # for torch's schedule, same weights
    for module in mine.values():
        for q in module.parameters():
            q.grad = torch.zeros_like(q)
    x, y = regression_batch(p.microbatches * p.microbatch_size, p.width, p.width, p.seed)
    # Each micro-batch its own tensor, so its bytes are its own (a chunk view would count the whole batch).
    xs = [c.clone() for c in x.to(ctx.device).chunk(p.microbatches)]
    ys = [c.clone() for c in y.to(ctx.device).chunk(p.microbatches)]
    table = timetable(rank_orders(p.schedule, p.stages, p.microbatches, p.v), num_stages)
    runner = StageRunner(ctx, p, mine, xs, ys)
    _show_split(p, rank, mine, table)

    peak, peak_bytes, busy, start = 0, 0, 0.0, time.time()
    for slot, action in enumerate(table[rank]):
        began = time.perf_counter()
        if action is not None:
            runner.run(action)
        busy += time.perf_counter() - began if action is not None else 0.0
        count, held = runner.activations()
        peak, peak_bytes = max(peak, count), max(peak_bytes, held)
        _show_slot(p, rank, slot, table, runner, count, held)
    end = time.time()
    runner.flush()

    grads = {s: flat(q.grad for q in m.parameters()) for s, m in mine.items()}
    trace.frame("done", f"All {p.microbatches} micro-batches are through: every rank holds its stages' "
                f"gradients, summed over the micro-batches, ready for the optimizer step",
                memory={"parameters": [q for m in mine.values() for q in m.parameters()],
                        "gradients": [q.grad for m in mine.values() for q in m.parameters()], "activations": 0},
                status="done", rank_extra={"peak_in_flight": peak, "peak_in_flight_bytes": peak_bytes})
    return {"grads": grads, "loss": runner.loss if num_stages - 1 in mine else None,
            "order": runner.ran, "cpu_s": [[*action, runner.cpu_s[action]] for action in runner.ran],
            "cores": len(os.sched_getaffinity(0)), "peak_in_flight": peak,
            "peak_in_flight_bytes": peak_bytes, "busy_s": busy, "start": start, "end": end,
            "torch": torch_pipelining(ctx, p, untouched, x.to(ctx.device), y.to(ctx.device))}


def torch_pipelining(ctx: RankContext, p: Params, stages: dict[int, nn.Module], x, y) -> dict:
    """The cross-check: torch.distributed.pipelining's schedule of the same kind, same weights."""
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble)

    num_stages = p.stages * p.v
    pipeline_stages = [PipelineStage(m, s, num_stages, ctx.device, group=ctx.group) for s, m in sorted(stages.items())]
    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B,
            # one stage per rank: torch's ZB1P is ZB-H1
            "zero_bubble": ScheduleInterleavedZeroBubble}[p.schedule]
    single = kind in (ScheduleGPipe, Schedule1F1B)
    schedule = kind(pipeline_stages[0] if single else pipeline_stages, n_microbatches=p.microbatches,
                    loss_fn=F.mse_loss)
    order: list[tuple[str, int, int]] = []  # what torch's runtime really ran, in order
    for stage in pipeline_stages:
        _record(stage, "forward_one_chunk", "F", order)
        _record(stage, "backward_one_chunk", "B", order)
        _record(stage, "backward_weight_one_chunk", "W", order)
    losses: list[torch.Tensor] = []
    args = (x,) if 0 in stages else ()
    kwargs = {"target": y, "losses": losses} if num_stages - 1 in stages else {}
    schedule.step(*args, **kwargs)
    return {"grads": {s: flat(q.grad for q in m.parameters()) for s, m in stages.items()},
            "loss": float(sum(loss.detach() for loss in losses) / p.microbatches) if losses else None,
            "order": order, "name": kind.__name__}


def _record(stage, method: str, kind: str, order: list) -> None:
    """Wrap one of a PipelineStage's compute methods so each call appends (kind, stage, micro-batch)."""
    run_chunk = getattr(stage, method)

    def recorded(chunk_id, *args, **kwargs):
        order.append((kind, stage.stage_index, chunk_id))
        return run_chunk(chunk_id, *args, **kwargs)

    setattr(stage, method, recorded)


# -- frames: the stage × time chart, one slot per frame --------------------------------------------

def _show_split(p: Params, rank: int, mine: dict, table) -> None:
    params = [q for m in mine.values() for q in m.parameters()]
    per_stage = p.num_layers // (p.stages * p.v)
    trace.frame("split", f"{p.num_layers} layers split into {p.stages * p.v} stages of {per_stage}: "
                f"rank r holds stage{'s' if p.v > 1 else ''} {_stage_list(p)}. The batch is cut into "
                f"{p.microbatches} micro-batches of {p.microbatch_size}.",
                memory={"parameters": params}, status=f"stages {sorted(mine)}",
                extra=_chart_info(p, table), rank_extra={"stages": sorted(mine)})


def _show_slot(p: Params, rank: int, slot: int, table, runner: StageRunner, count: int, held: int) -> None:
    action = table[rank][slot]
    busy = [r for r in range(p.stages) if table[r][slot] is not None]
    parts = [f"rank {r} {table[r][slot]}" for r in busy]
    idle = p.stages - len(busy)
    caption = (f"Slot {slot + 1} of {len(table[0])}: " + (", ".join(parts) if parts else "nobody works")
               + (f"; {idle} rank{'s' if idle > 1 else ''} idle (bubble)" if idle else ""))
    trace.frame("slot", caption, status=str(action) if action else "idle",
                memory={"activations": held},
                extra={**_chart_info(p, table), "slot": slot},
                rank_extra={"slot": slot,
                            "action": None if action is None else
                            {"kind": action.kind, "mb": action.mb, "stage": action.stage, "chunk": action.stage // p.stages},
                            "received": runner.received, "in_flight": count, "in_flight_bytes": held})
    runner.received = []


def _chart_info(p: Params, table) -> dict:
    return {"schedule": p.schedule, "stages": p.stages, "microbatches": p.microbatches, "virtual_stages": p.v,
            "slots": len(table[0]), "activation_bytes": p.microbatch_size * p.width * 4}


def _stage_list(p: Params) -> str:
    return " and ".join(f"{k}·p + r" if k else "r" for k in range(p.v)) if p.v > 1 else "r"


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The unsplit model (not cut by `build_stages`), the whole batch, one process: its loss and the gradient
    of every parameter, flat in layer order. `dtype` float64: the same fp32 weights and data in float64, the
    nearly exact values fp32 round-off is measured from."""
    model = mlp(p.width, p.width, p.num_layers - 1, p.width, p.seed).to(dtype)
    x, y = (t.to(dtype) for t in regression_batch(p.microbatches * p.microbatch_size, p.width, p.width, p.seed))
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return {"loss": loss.item(), "grads": flat(q.grad for q in model.parameters())}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    ref, exact = reference(p), reference(p, torch.float64)
    n, m, v = p.stages, p.microbatches, p.v
    ours = {s: g for r in results for s, g in r["grads"].items()}
    theirs = {s: g for r in results for s, g in r["torch"]["grads"].items()}
    loss = next(r["loss"] for r in results if r["loss"] is not None)
    torch_loss = next(r["torch"]["loss"] for r in results if r["torch"]["loss"] is not None)
    # The stages' gradients, in stage order, must be the whole model's: every layer once, in its place.
    stitched = torch.cat([ours[s] for s in sorted(ours)])
    grad_diff = max_abs_diff(stitched, ref["grads"]) if stitched.shape == ref["grads"].shape else math.inf
    torch_diff = max(max_abs_diff(ours[s], theirs[s]) for s in ours)
    # fp32 round-off: the pipeline sums m micro-batch gradients of b samples each where the reference takes one
    # mean over m·b samples; a weight's gradient also sums `width` products per sample. Bound: 4× the fp32
    # reference's own distance from float64, at least terms·ε·max|x| (models.fp32_tolerance).
    samples = p.microbatches * p.microbatch_size
    grad_tol = fp32_tolerance(ref["grads"], exact["grads"], terms=samples)
    loss_tol = fp32_tolerance(torch.tensor(ref["loss"], dtype=torch.float64),
                              torch.tensor(exact["loss"], dtype=torch.float64), terms=samples * p.width)
    name = results[0]["torch"]["name"]
    same_order = all(r["order"] == r["torch"]["order"] for r in results)

    # Bubble in logical slots, counted on the frames: a rank whose slot has no action idled.
    slots = [f for f in frames if f.phase == "slot"]
    idle = sum(rs.extra["action"] is None for f in slots for rs in f.ranks)
    measured = Fraction(idle, n * len(slots))
    num, den = bubble_formula(p.schedule, n, m, v)
    # Bubble in wall time, from the run's spans: the share of the ranks' time (from the first F to the last
    # B or W) spent blocked in a receive, waiting for an activation or a gradient. Honest only with a core per
    # rank: where p ranks share fewer cores, a rank also waits for a core, and the figure measures the
    # machine's crowding (p = 4 on 2 cores: 45–60 % at every m, where the formula falls to 9 %).
    spans = [s for f in frames for s in f.spans]
    compute = [s for s in spans if s.kind == "compute" and s.name[:1] in "FBW" and s.name[1:].isdigit()]
    t0, t1 = min(s.start for s in compute), max(s.end for s in compute)
    waited = sum(min(s.end, t1) - max(s.start, t0) for s in spans if s.name.startswith("recv") and s.end > t0 and s.start < t1)
    wall = waited / (n * (t1 - t0))
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    cores = results[0]["cores"]

    # Bubble replayed: each stage's measured compute, laid out in the order the ranks ran it, one processor per
    # rank (`replay`). An action's cost is its thread's CPU time, which leaves out the turns other ranks took on
    # the cores; each stage's F (B, W) is given the median over its micro-batches, since a stage's first action
    # pays one-off costs (allocations, autograd's set-up: 5–10× the others, measured) and a few are slowed by the
    # other processes sharing the caches.
    costs: dict[tuple[str, int], list[float]] = {}
    for r in results:
        for kind, stage, _mb, cpu in r["cpu_s"]:
            costs.setdefault((kind, stage), []).append(cpu)
    typical = {key: statistics.median(values) for key, values in costs.items()}
    orders = [[Action(*a) for a in r["order"]] for r in results]
    durations = {a: typical[(a.kind, a.stage)] for order in orders for a in order}
    replayed = replay(orders, durations, n * v)
    # Peak micro-batches in flight per rank (forward done, backward or W not yet), measured as the run
    # went, against what each schedule holds by construction.
    peaks = [r["peak_in_flight"] for r in results]
    if p.schedule == "gpipe":  # every forward before any backward
        expected_peaks, why = [m] * n, "GPipe: all m micro-batches on every rank"
    elif p.schedule == "1f1b":  # p − 1 − r warm-up forwards, then one more before the first backward
        expected_peaks, why = [min(n - r, m) for r in range(n)], "1F1B: min(p − r, m) on rank r"
    elif p.schedule == "zero_bubble":  # 1F1B's p − r, plus the r W that rank r defers
        expected_peaks, why = [min(n, m)] * n, "ZB-H1: p − r in flight plus r deferred W = min(p, m) on every rank"
    else:  # counted in chunks of 1/v of a stage: warm-up (v − 1) rounds + 2 per hop from the last rank, + 1
        expected_peaks = [min(v * m, (v - 1) * (m // max(1, m // n)) + 2 * (n - 1 - r) + 1) for r in range(n)]
        why = "interleaved: warm-up + 1 chunks per rank"
    peak_ok = peaks == expected_peaks

    sent = sum(r["_sent"].get("send", 0) for r in results)
    sent_formula = 2 * (n * v - 1) * m * p.microbatch_size * p.width * 4
    checks = [
        Check(name="loss equals the unsplit model's full-batch loss", passed=abs(loss - ref["loss"]) <= loss_tol,
              measured=abs(loss - ref["loss"]), expected=f"≤ {loss_tol:.1e}",
              detail=f"pipeline {loss:.8f}, unsplit {ref['loss']:.8f}; a mean of {samples}·{p.width} squared errors "
                     f"summed per micro-batch: bound 4× the fp32 reference's distance from float64, at least "
                     f"{samples * p.width}·ε·loss, ε = 2⁻²⁴"),
        Check(name="gradients equal the unsplit model's full-batch gradients", passed=grad_diff <= grad_tol,
              measured=grad_diff, expected=f"≤ {grad_tol:.1e}",
              detail=f"max |pipeline grad − reference grad| over all stages, fp32; bound 4× the fp32 reference's "
                     f"distance from float64, at least {samples}·ε·max|g|"),
        Check(name=f"torch.distributed.pipelining {name} gives the same gradients", passed=torch_diff <= grad_tol,
              measured=torch_diff, expected=f"≤ {grad_tol:.1e}",
              detail=f"{name} on the same weights and micro-batches, same process group; two fp32 orders of the "
                     f"same sums: bound as for the reference's gradients"),
        Check(name=f"torch.distributed.pipelining {name} gives the same loss", passed=abs(torch_loss - loss) <= loss_tol,
              measured=abs(torch_loss - loss), expected=f"≤ {loss_tol:.1e}",
              detail=f"torch {torch_loss:.8f}, ours {loss:.8f}; bound as for the reference's loss"),
        Check(name=f"each rank's F/B/W order equals {name}'s", passed=same_order, measured=same_order, expected=True,
              detail="the F/B/W each rank ran vs the F/B/W calls torch's schedule made on each stage"),
        Check(name="the schedule's idle slots equal the bubble formula", passed=measured == Fraction(num, den),
              measured=f"{measured.numerator}/{measured.denominator}",
              expected=f"{Fraction(num, den).numerator}/{Fraction(num, den).denominator}",
              detail=f"{idle} idle of {n} × {len(slots)} slots of the timetable the ranks ran (their F/B/W order "
                     f"is checked against torch's above); formula {_formula_text(p.schedule)}"),
        *_replay_checks(p, replayed, durations),
        Check(name="peak in-flight micro-batches per rank", passed=peak_ok, measured=peaks, expected=expected_peaks,
              detail=why),
        Check(name="bytes sent = 2 × (stages − 1) × m × activation bytes", passed=sent == sent_formula,
              measured=sent, expected=sent_formula, detail="activations forward plus gradients back, all ranks"),
    ]
    return Summary(checks=checks, figures={
        "bubble_fraction_slots": float(measured), "bubble_fraction_formula": num / den,
        "bubble_fraction_wall": wall, "bubble_fraction_replayed": replayed.bubble,
        "replayed_s": replayed.makespan, "compute_s_per_rank": replayed.busy, "cores": cores,
        "wall_clock_honest": cores >= n, "idle_slots": idle, "slots": len(slots),
        "peak_in_flight": peaks, "peak_in_flight_bytes": [r["peak_in_flight_bytes"] for r in results],
        "busy_s_per_rank": [r["busy_s"] for r in results], "elapsed_s": elapsed,
        "loss": loss, "reference_loss": ref["loss"], "torch_schedule": name,
        "bytes_sent": sent, "frames": len(frames),
    })


def _replay_checks(p: Params, replayed, durations: dict[Action, float]) -> list[Check]:
    """GPipe and 1F1B: the replayed bubble against (p−1)/(m+p−1), within the range that the measured spread of
    the forwards' and backwards' durations allows (`replay_bounds`). The other schedules' formulas assume
    t_F = t_B = t_W, which measured durations do not keep: their replayed bubble is a figure only."""
    if p.schedule not in ("gpipe", "1f1b"):
        return []
    forwards = [d for a, d in durations.items() if a.kind == "F"]
    backwards = [d for a, d in durations.items() if a.kind == "B"]
    low, high = replay_bounds(p.schedule, p.stages, p.microbatches, forwards, backwards)
    num, den = bubble_formula(p.schedule, p.stages, p.microbatches)
    spread = (max(forwards) + max(backwards)) / (min(forwards) + min(backwards))
    return [Check(
        name="bubble of the measured compute, replayed in the run's order, matches (p−1)/(m+p−1)",
        passed=low <= replayed.bubble <= high, measured=round(replayed.bubble, 4),
        expected=f"{low:.3f} to {high:.3f} (formula {num / den:.3f})",
        detail=f"each F and B's CPU time on its rank, laid out in the order the ranks ran them, one processor per "
               f"rank, a message arriving as it is sent. Durations vary (slowest F + B / fastest F + B = "
               f"ρ = {spread:.2f}), so the bubble may lie anywhere in [1 − ρ·m/(m+p−1), 1 − m/(ρ·(m+p−1))]; "
               f"a schedule that ran the stages one after another would reach (p−1)/p = {(p.stages - 1) / p.stages:.2f}")]


def _formula_text(schedule: str) -> str:
    return {"gpipe": "(p−1)/(m+p−1)", "1f1b": "(p−1)/(m+p−1)", "interleaved_1f1b": "(p−1)/(v·m+p−1)",
            "zero_bubble": "(p−1)/(3m+p−1) with t_F = t_B = t_W"}[schedule]


SCENARIO = Scenario(
    name="pipeline",
    title="Pipeline parallelism",
    description="A model split into stages across ranks; GPipe, 1F1B, interleaved 1F1B and ZB-H1 run slot "
                "by slot with real send/recv, cross-checked against torch.distributed.pipelining.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["pipeline", "memory"],
    world_size=lambda p: p.stages,
    controls=["stages", "microbatches", "schedule"],
)
