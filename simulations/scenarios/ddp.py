"""Distributed data parallel: every rank holds the whole model and 1/N of the batch.

PyTorch's DistributedDataParallel (Li et al., "PyTorch Distributed: Experiences
on Accelerating Data Parallel Training", VLDB 2020, arXiv:2006.15704) groups
gradients into buckets and all-reduces each bucket as soon as backward has
filled it, overlapping communication with the rest of backward.

Here the bucket all-reduce is a communication hook that runs the ring
all-reduce by hand (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms
for clusters of workstations", JPDC 2009): N-1 reduce-scatter steps, then N-1
all-gather steps, each rank sending one chunk to its right neighbour per step.
No rank is special: there is no "gather to GPU 0, then broadcast".
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from pydantic import BaseModel, ConfigDict, Field
from torch.nn.parallel import DistributedDataParallel

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import flat, fp32_reorder_bound, fp32_tolerance, max_abs_diff, mlp, regression_batch
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import ActivationMeter, shard_views, tensor_view
from simulations.words import counted, each_of, every

IN_FEATURES, OUT_FEATURES = 4, 2
LEARNING_RATE, MOMENTUM = 0.1, 0.9


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=1, le=8, description="Ranks (GPUs)")
    bucket_kb: float = Field(0.25, ge=0.0625, le=1024, description="Gradient bucket size, KiB")
    width: int = Field(8, ge=2, le=256, description="Hidden width of the MLP")
    depth: int = Field(2, ge=1, le=8, description="Hidden layers of the MLP")
    batch_per_rank: int = Field(2, ge=1, le=64, description="Samples each rank trains on per step")
    steps: int = Field(1, ge=1, le=10, description="Training steps")
    seed: int = Field(0, ge=0, le=2**31 - 1)


# -- the ring all-reduce ---------------------------------------------------------------------------

def ring_all_reduce(flat_grads: torch.Tensor, rank: int, n: int, group, bucket: int) -> None:
    """Sum `flat_grads` over the ring in place: reduce-scatter, then all-gather, 2(N-1) chunk steps."""
    chunks = list(flat_grads.tensor_split(n))  # views: updating a chunk updates the bucket
    right, left = (rank + 1) % n, (rank - 1) % n

    # Reduce-scatter: after step s, chunk (rank - s - 1) holds the sum of s + 2 ranks' parts.
    for step in range(n - 1):
        send, receive = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[receive])
        comm.sendrecv(chunks[send].clone(), right, incoming, left, group, chunk=send, name=f"bucket{bucket}")
        chunks[receive] += incoming
        _show_ring(flat_grads, rank, n, bucket, "reduce_scatter", step,
                   f"Bucket {bucket}, reduce-scatter step {step + 1}/{n - 1}: each rank sends one chunk right "
                   f"and adds the chunk arriving from the left")

    # All-gather: rank r now owns the full sum of chunk r + 1; pass the finished chunks round.
    for step in range(n - 1):
        send, receive = (rank + 1 - step) % n, (rank - step) % n
        comm.sendrecv(chunks[send].clone(), right, chunks[receive], left, group, chunk=send, name=f"bucket{bucket}")
        _show_ring(flat_grads, rank, n, bucket, "all_gather", step,
                   f"Bucket {bucket}, all-gather step {step + 1}/{n - 1}: finished sums travel round the ring")


def ring_hook(state, bucket):  # unannotated: DDP rejects the string annotations of `from __future__`
    """DDP communication hook: average this bucket (a dist.GradBucket) with the hand-made ring,
    and check the ring against dist.all_reduce."""
    ctx: RankContext = state["ctx"]
    grads = bucket.buffer()
    index = bucket.index()
    trace.frame("bucket_ready", f"Backward has filled bucket {index}: DDP all-reduces it now, before backward "
                f"reaches the earlier layers (NCCL would run it on its own stream, beside backward; "
                f"this CPU ring runs inline, inside backward)",
                tensors=[tensor_view(f"bucket{index}", "gradients", grads)],
                extra={"bucket": index, "bucket_bytes": grads.numel() * grads.element_size()})
    reference = grads.clone()
    magnitude = grads.abs()  # Σ_ranks |g|: the scale of the sum's round-off (for the check)
    ring_all_reduce(grads, ctx.rank, ctx.world_size, ctx.group, index)
    dist.all_reduce(reference, group=ctx.group)  # the check, not the algorithm: untraced on purpose
    dist.all_reduce(magnitude, group=ctx.group)
    state["ring_vs_all_reduce"] = max(state["ring_vs_all_reduce"], max_abs_diff(grads, reference))
    # Both sum the same N values in their own order: each within (N−1)·ε·Σ|g| of the exact sum, per element.
    excess = (grads - reference).abs() - fp32_reorder_bound(magnitude, ctx.world_size)
    state["ring_excess"] = max(state["ring_excess"], float(excess.max()) if excess.numel() else float("-inf"))
    state["ring_bound"] = max(state["ring_bound"], float(fp32_reorder_bound(magnitude, ctx.world_size).max()))
    state["buckets"].append(grads.numel() * grads.element_size())
    grads.div_(ctx.world_size)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(grads)
    return future


# -- one rank's training run -----------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    n, rank = ctx.world_size, ctx.rank
    x, y = regression_batch(p.batch_per_rank * n, IN_FEATURES, OUT_FEATURES, p.seed)
    x_local, y_local = x.chunk(n)[rank].to(ctx.device), y.chunk(n)[rank].to(ctx.device)
    trace.frame("shard", f"The global batch of {len(x)} samples is split: {each_of(n, 'rank')} takes "
                f"{len(x_local)} of them. Every rank holds the whole model.",
                tensors=[tensor_view("x", "batch", x_local, shard=(rank, n)), tensor_view("y", "batch", y_local)])

    model = mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed).to(ctx.device)
    # A cap per bucket (not just bucket_cap_mb) so the first step is already bucketed: with one cap,
    # DDP puts everything in one bucket until it rebuilds the buckets after the first iteration.
    caps = [p.bucket_kb / 1024] * len(list(model.parameters()))
    ddp = DistributedDataParallel(model, process_group=ctx.group, bucket_cap_mb_list=caps)
    state = {"ctx": ctx, "ring_vs_all_reduce": 0.0, "ring_excess": float("-inf"), "ring_bound": 0.0, "buckets": []}
    bucket_history: list[list[int]] = []
    ddp.register_comm_hook(state, ring_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    params = list(model.parameters())
    first_grads = None

    for step in range(p.steps):
        optimizer.zero_grad(set_to_none=False)
        with trace.span("forward", step=step), ActivationMeter(params) as activations:
            loss = torch.nn.functional.mse_loss(ddp(x_local), y_local)
        trace.frame("forward", f"Step {step + 1}: each rank runs forward on its own shard; the losses differ",
                    memory=_memory(params, optimizer, activations.saved), status=f"loss {loss.item():.4f}",
                    rank_extra={"loss": loss.item()})

        state["buckets"] = []
        bucket_history.append(state["buckets"])  # DDP may rebuild its buckets after the first step
        with trace.span("backward", step=step):
            loss.backward()  # ring_hook fires inside, bucket by bucket
        activations.release()
        held = (f"{every(n, 'rank')} hold the same averaged gradients" if n > 1 else
                "the 1 rank holds its own gradients (an all-reduce over 1 rank leaves them as they are)")
        trace.frame("backward_done", f"Backward is done and every bucket was all-reduced: {held}",
                    tensors=[tensor_view("grad", "gradients", flat(p.grad for p in params).float())],
                    memory=_memory(params, optimizer, 0))
        if first_grads is None:
            first_grads = flat(p.grad for p in params)

        with trace.span("optimizer", step=step):
            optimizer.step()
        trace.frame("optimizer", f"Step {step + 1}: each rank applies the same update to its own copy of the weights",
                    tensors=[tensor_view("weights", "parameters", flat(params).float())],
                    memory=_memory(params, optimizer, 0))

    weights = flat(params)
    after = f"After {counted(p.steps, 'step')}"
    trace.frame("identical", f"{after} the {n} replicas are identical, without anyone broadcasting weights" if n > 1
                else f"{after} the 1 replica holds the trained weights", status=f"checksum {float(weights.sum()):.6f}",
                rank_extra={"checksum": float(weights.sum())})
    return {"grads": first_grads.cpu(), "weights": weights.cpu(), "buckets": state["buckets"], "bucket_history": bucket_history,
            "ring_vs_all_reduce": state["ring_vs_all_reduce"], "ring_excess": state["ring_excess"],
            "ring_bound": state["ring_bound"], "grad_bytes": sum(t.numel() * t.element_size() for t in params)}


def _memory(params, optimizer, activations: int | list) -> dict:
    """Memory by role for trace.frame: live tensors (measured by the frame, only when traced) or bytes."""
    grads = [p.grad for p in params if p.grad is not None]
    states = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return {"parameters": params, "gradients": grads, "optimizer": states, "activations": activations}


def _show_ring(flat_grads, rank: int, n: int, bucket: int, phase: str, step: int, caption: str) -> None:
    """One ring step as a frame: every chunk of the bucket with its values and how many ranks' gradients it sums."""
    parts = [1] * n
    for k in range(step + 1 if phase == "reduce_scatter" else n - 1):
        parts[(rank - k - 1) % n] = k + 2
    if phase == "all_gather":
        for k in range(step + 1):
            parts[(rank - k) % n] = n
    trace.frame(phase, caption, extra={"bucket": bucket, "ring_step": step, "ring_steps": n - 1},
                tensors=shard_views(f"bucket{bucket}", "gradients", flat_grads, n,
                                    notes=[f"sum of {p}/{n} ranks" for p in parts]),
                rank_extra={"parts": parts})


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The same model trained on the whole batch in one process (float64: from the same fp32 weights and data,
    the nearly exact values fp32 round-off is measured from)."""
    x, y = (t.to(dtype) for t in regression_batch(p.batch_per_rank * p.world_size, IN_FEATURES, OUT_FEATURES, p.seed))
    model = mlp(IN_FEATURES, p.width, p.depth, OUT_FEATURES, p.seed).to(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    first_grads = None
    for _ in range(p.steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if first_grads is None:
            first_grads = flat(q.grad for q in model.parameters())
        optimizer.step()
    return {"grads": first_grads, "weights": flat(model.parameters())}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n = p.world_size
    ref, exact = reference(p), reference(p, torch.float64)
    grad_diff = max(max_abs_diff(r["grads"], ref["grads"]) for r in results)
    weight_spread = max(max_abs_diff(r["weights"], results[0]["weights"]) for r in results)
    weight_diff = max(max_abs_diff(r["weights"], ref["weights"]) for r in results)
    ring_diff = max(r["ring_vs_all_reduce"] for r in results)
    ring_ok = all(r["ring_excess"] <= 0 for r in results)
    ring_bound = max(r["ring_bound"] for r in results)
    # A gradient element is a mean over the global batch: a sum of batch_per_rank·N terms, reordered by the ring.
    samples = p.batch_per_rank * n
    grad_tol = fp32_tolerance(ref["grads"], exact["grads"], terms=samples)
    weight_tol = fp32_tolerance(ref["weights"], exact["weights"], terms=samples)

    # Ring traffic, exact per rank. A bucket of E elements is cut by tensor_split into N chunks (the first
    # E mod N one element longer); rank r sends every chunk but (r + 1) mod N in the reduce-scatter and every
    # chunk but (r + 2) mod N in the all-gather: 2E − |chunk r+1| − |chunk r+2| elements, 2(N−1)/N·E when N
    # divides E. The bucket sizes are DDP's choice (its caps); their sum must be Ψ from the model's shape.
    bucket_bytes = results[0]["buckets"]
    sent = [r["_sent"].get("send", 0) for r in results]
    w = p.width
    psi = IN_FEATURES * w + w + (p.depth - 1) * (w * w + w) + w * OUT_FEATURES + OUT_FEATURES
    grad_bytes = psi * 4

    def chunk(elements: int, i: int) -> int:
        return elements // n + (i < elements % n)

    history = results[0]["bucket_history"]
    expected_sent = [4 * sum(2 * (b // 4) - chunk(b // 4, (r + 1) % n) - chunk(b // 4, (r + 2) % n)
                             for step in history for b in step) if n > 1 else 0 for r in range(n)]
    formula = 2 * (n - 1) / n * grad_bytes * p.steps
    checks = [
        Check(name="gradients equal the single-process full-batch gradients", passed=grad_diff <= grad_tol,
              measured=grad_diff, expected=f"≤ {grad_tol:.1e}", detail="max |DDP grad − reference grad|, fp32: the ring "
              "adds N partial gradients in another order than one backward over the whole batch. Bound: fp32 "
              f"round-off, 4× the fp32 reference's distance from float64, at least {samples}·ε·max|g|, ε = 2⁻²⁴; a "
              "missing average or a dropped chunk errs by > 1e-2"),
        Check(name="weights after training equal the single-process run's", passed=weight_diff <= weight_tol,
              measured=weight_diff, expected=f"≤ {weight_tol:.1e}",
              detail=f"after {p.steps} step(s) of SGD with momentum (torch.optim.SGD in one process on the whole "
                     f"batch); fp32, the gradients' round-off carried through the steps: bound as for the gradients"),
        Check(name="weights identical on every rank", passed=weight_spread == 0.0, measured=weight_spread,
              expected=0.0, detail=f"max |w_rank − w_0| over {counted(n, 'rank')} after {counted(p.steps, 'step')}"),
        Check(name="ring all-reduce equals dist.all_reduce", passed=ring_ok, measured=ring_diff,
              expected=f"≤ {ring_bound:.1e}",
              detail=f"max |ring sum − dist.all_reduce sum| over every bucket and rank; per element the bound is "
                     f"2(N−1)·ε·Σ_ranks|g| (two orders of the same {n} fp32 terms, Higham §4.2), the largest shown"),
        Check(name="bytes sent per rank = 2(N−1)/N × gradient bytes", passed=sent == expected_sent,
              measured=sent, expected=expected_sent,
              detail=f"per rank, exact: 2(N−1)/N · {grad_bytes} B = {formula:g} B when N divides every bucket; "
                     f"here buckets of {[[b // 4 for b in step] for step in history]} elements per step, so ranks differ by a chunk"),
        Check(name="buckets of every step sum to the gradient bytes", passed=len(history) == p.steps
              and all(sum(step) == grad_bytes for step in history),
              measured=[sum(step) for step in history], expected=[grad_bytes] * p.steps,
              detail=f"exact: Ψ × 4 = {grad_bytes} B from the model's shape, at each of the {p.steps} step(s)"),
    ]
    return Summary(checks=checks, figures={
        "gradient_bytes": grad_bytes, "buckets": len(bucket_bytes), "bucket_bytes": bucket_bytes,
        "bytes_sent_per_rank": sent, "formula_bytes_per_rank": formula,
        "ring_steps_per_bucket": 2 * (n - 1), "frames": len(frames),
    })


SCENARIO = Scenario(
    name="ddp",
    title="Distributed data parallel",
    description="Real DistributedDataParallel on a small MLP; each gradient bucket all-reduced by a hand-made ring.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["ranks", "timeline", "memory"],
    controls=["world_size", "bucket_kb"],
)
