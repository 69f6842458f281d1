"""Failures at scale: a rank dies mid-run, and the job restarts from its last distributed checkpoint.

At scale, failure is the normal case: Meta's 54-day Llama 3 405B pre-training run on up to 16,384
H100s saw 466 job interruptions, 419 of them unexpected (Dubey et al., "The Llama 3 Herd of Models",
arXiv:2407.21783, section 3.3.4 and Table 5). A job survives by saving its state every so often and,
when a rank dies, restarting every rank from the last complete save.

Here, on real ranks:
- a small MLP trains with FSDP2 (`fully_shard`): each rank holds 1/N of the weights and of Adam's state;
- every `checkpoint_every` steps the job saves the model and the optimizer with torch.distributed.checkpoint
  (DCP, whose docs say it "produces multiple files per checkpoint, with at least one per rank"): each rank
  writes its own shards, and the coordinator writes `.metadata` once every rank has reported its writes
  (FileSystemWriter.finish), so a checkpoint without `.metadata` is incomplete and is never loaded;
- at `fail_at_step` the last rank dies: it stops answering, as a node that lost power does. The other ranks'
  next collective waits for it and fails at the job's peer timeout (NCCL's watchdog does this on GPUs);
- the job restarts as torchrun's elastic agent restarts it: every worker of the old attempt is stopped, the
  `restart_world_size` ranks of the new attempt meet again (a new rendezvous, a new process group), load the
  last complete checkpoint and go on (torchrun docs: "worker failures are handled gracefully by restarting
  all workers"; a lost node is a "scale down" within --nnodes=MIN_SIZE:MAX_SIZE). The checkpoint was written
  by N ranks and is read by N': DCP "handles load-time resharding which enables saving in one cluster
  topology and loading into another" (torch.distributed.checkpoint docs).
The steps since that checkpoint are lost and replayed. How often to save is a trade: Young's first-order
optimum is τ = √(2·δ·M) for a checkpoint that takes δ and a mean time between failures M (J. W. Young,
"A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974), refined by J. T. Daly,
"A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006
(simulations.formulas.young_interval, daly_interval).

Checked against a plain single-process run that never failed: the weights right after the restart equal its
weights at the checkpoint's step, and the final weights equal its final weights; the steps lost are exactly
those since the last save; every checkpoint the run wrote is complete.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from simulations import trace
from simulations.frames import Check, Summary
from simulations.models import flat, fp32_tolerance, max_abs_diff, mlp, regression_batch
from simulations.scenarios.base import RankContext, Scenario
from simulations.words import counted, once_every

IN_FEATURES, OUT_FEATURES, WIDTH, DEPTH = 4, 2, 128, 2
GLOBAL_BATCH = 24  # samples per step, split over however many ranks the attempt has
LR = 0.01
# A collective waiting on a dead peer gives up after this long: the dead rank here stops answering, as a node
# that lost power or a GPU that fell off the bus does, so its peers learn of it only by waiting (NCCL's
# watchdog plays this part on GPUs, with torch.distributed's default timeout of 10 minutes). Short, so the
# run never waits long; far above the few milliseconds any collective of this small model takes.
PEER_TIMEOUT_S = 2.0
# How long the ranks of an attempt wait for each other to meet: the survivors of a failure arrive only once
# their collective has timed out, the others at once.
RENDEZVOUS_TIMEOUT_S = 60.0


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=2, le=8, description="Ranks before the failure")
    restart_world_size: int = Field(3, ge=1, le=8, description="Ranks after the restart")
    steps: int = Field(9, ge=2, le=20, description="Training steps")
    checkpoint_every: int = Field(3, ge=1, le=19, description="Steps between checkpoints")
    fail_at_step: int = Field(8, ge=2, le=20, description="Step during which the last rank dies")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _failure_inside_the_run(self) -> Params:
        if self.fail_at_step > self.steps:
            raise ValueError(f"fail_at_step must be at most steps ({self.steps})")
        if self.fail_at_step <= self.checkpoint_every:
            raise ValueError(f"fail_at_step must be more than checkpoint_every ({self.checkpoint_every}): "
                             f"a checkpoint first, then the failure")
        return self


def batch(p: Params, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s global batch: the same samples whichever attempt, and however many ranks, run it."""
    return regression_batch(GLOBAL_BATCH, IN_FEATURES, OUT_FEATURES, p.seed * 1000 + step)


def last_checkpoint(p: Params, failed_step: int) -> int:
    """The step of the last checkpoint saved before `failed_step`: the schedule saves after every k-th step."""
    return (failed_step - 1) // p.checkpoint_every * p.checkpoint_every


# -- one attempt of the job ------------------------------------------------------------------------

class WorkerCrash(Exception):
    """This rank's worker process dies (here: it leaves the job and never answers its peers again)."""


def rendezvous(members: list[int], name: str, backend: str, opened: list):
    """The ranks of one attempt meet and form a fresh process group (torchrun: a new rendezvous round).

    Every attempt needs a group of its own: the old one has a dead member. `dist.new_group` names a group
    after its ranks and the groups a process already has, so a group made again after the old one is
    destroyed would take the old one's name and find the old one's addresses in the store. This names it
    after the run and the attempt instead; only the members take part (like new_group's
    use_local_synchronization)."""
    from torch.distributed import distributed_c10d as c10d

    if dist.get_rank() not in members:
        return None
    group, _ = c10d._new_process_group_helper(
        len(members), members.index(dist.get_rank()), members, c10d.Backend(backend), c10d._get_default_store(),
        c10d.GroupName(name), timeout=timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
    c10d._world.pg_group_ranks[group] = {rank: i for i, rank in enumerate(members)}
    c10d._set_pg_timeout(timedelta(seconds=PEER_TIMEOUT_S), group)  # met: from now on, a silent peer is dead
    opened.append(group)
    return group


def leave(group, opened: list) -> None:
    """This rank is done with an attempt's group: destroy it."""
    opened.remove(group)
    dist.destroy_process_group(group)


def build(group, device, seed: int):
    """The model, sharded by FSDP2 over `group` (one unit per Linear, then the root), and its Adam."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    model = mlp(IN_FEATURES, WIDTH, DEPTH, OUT_FEATURES, seed).to(device)
    # Named after the group: DTensor caches its plans by mesh, and meshes of the same ranks are equal unless
    # their names differ, so a cached plan would otherwise send this attempt's collectives to a dead group.
    mesh = DeviceMesh.from_group(group, device.type, mesh_dim_names=(group.group_name,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=LR)


def train_step(p: Params, model, optimizer, group, step: int, device) -> None:
    """One step on this rank's share of the global batch; FSDP's reduce-scatter averages the N ranks' gradients."""
    x, y = batch(p, step)
    n, me = group.size(), group.rank()
    x, y = x.tensor_split(n)[me].to(device), y.tensor_split(n)[me].to(device)
    # This rank's squared errors over the whole batch's count, times N: averaged over the N ranks, the gradient
    # of the batch's mean loss, however unevenly the batch splits.
    loss = n * F.mse_loss(model(x), y, reduction="sum") / (GLOBAL_BATCH * OUT_FEATURES)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def save(model, optimizer, step: int, root: str, group) -> dict:
    """A DCP checkpoint of the model and Adam's state: each rank writes its shards; returns what it wrote."""
    model_state, optim_state = get_state_dict(model, optimizer)
    path = os.path.join(root, f"step-{step:04d}")
    start = time.perf_counter()
    dcp.save({"model": model_state, "optimizer": optim_state, "step": step}, checkpoint_id=path, process_group=group)
    seconds = time.perf_counter() - start
    mine = [f for f in os.listdir(path) if f.startswith(f"__{group.rank()}_") and f.endswith(".distcp")]
    return {"bytes": sum(os.path.getsize(os.path.join(path, f)) for f in mine), "files": len(mine), "s": seconds,
            "tensor_bytes": local_bytes(model, optimizer)}


def complete_checkpoints(root: str) -> list[int]:
    """Steps of the checkpoints under `root` that are complete: DCP writes `.metadata` after every shard."""
    return sorted(int(d.split("-")[1]) for d in os.listdir(root)
                  if d.startswith("step-") and os.path.exists(os.path.join(root, d, ".metadata")))


def load(model, optimizer, step: int, root: str, group) -> int:
    """Load checkpoint `step` into this attempt's (freshly sharded) model and optimizer; DCP reads, from
    whichever files hold them, the slices of every tensor that this rank's new shards cover."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optim_state, "step": -1}
    dcp.load(state, checkpoint_id=os.path.join(root, f"step-{step:04d}"), process_group=group)  # in place
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
    return state["step"]


def local_bytes(model, optimizer) -> int:
    """Bytes of the shards this rank holds: its slices of the weights and of Adam's two moments."""
    tensors = [q.to_local() for q in model.parameters()]
    tensors += [t.to_local() if hasattr(t, "to_local") else t
                for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def full_weights(model) -> torch.Tensor:
    return flat(q.full_tensor() for q in model.parameters()).cpu()


# -- the run: an attempt, a failure, a restart --------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    rank = ctx.rank
    # Where the checkpoints go and what this run's groups are called: one temporary folder per run, named
    # by rank 0 (on several nodes under torchrun, a shared filesystem would take its place).
    shared = [tempfile.mkdtemp(prefix="distdeck-ckpt-") if rank == 0 else None, uuid.uuid4().hex]
    dist.broadcast_object_list(shared, src=0, group=ctx.group)
    root, run_id = shared
    opened: list = []  # this rank's job groups still open: a run stopped midway leaves none behind
    try:
        return train_fail_restart(ctx, p, root, run_id, opened)
    finally:
        for group in opened:
            dist.destroy_process_group(group)
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)


def train_fail_restart(ctx: RankContext, p: Params, root: str, run_id: str, opened: list) -> dict:
    """Attempt 1 until the failure, the restart, attempt 2 to the end: this rank's part, SPMD."""
    rank, victim = ctx.rank, p.world_size - 1
    first, second = list(range(p.world_size)), list(range(p.restart_world_size))
    result: dict = {"saved": {}}

    # Attempt 1 -------------------------------------------------------------------------------------
    group = rendezvous(first, f"failures-{run_id}-1", ctx.backend, opened)
    model = optimizer = None
    if group is not None:
        model, optimizer = build(group, ctx.device, p.seed)
    frame(p, "start", 1, 0, f"Attempt 1: {p.world_size} ranks train with FSDP, each holding 1/{p.world_size} of the "
          f"weights and of Adam's state; a checkpoint {once_every(p.checkpoint_every, 'step')}",
          member=group is not None, status="training" if group else "spare", held=model and local_bytes(model, optimizer))

    for step in range(1, p.fail_at_step):
        if group is not None:
            train_step(p, model, optimizer, group, step, ctx.device)
        frame(p, "train", 1, step, f"Step {step}: every rank trains on its share of the batch",
              member=group is not None, status=f"step {step}" if group else "spare")
        if step % p.checkpoint_every == 0:
            wrote = save(model, optimizer, step, root, group) if group is not None else None
            if wrote:
                result["saved"][step] = wrote
                result.setdefault("saved_weights", {})[step] = full_weights(model)
            frame(p, "checkpoint", 1, step, f"Checkpoint after step {step}: each rank writes its own shards "
                  f"(torch.distributed.checkpoint), rank 0 the metadata last",
                  member=group is not None, status="saving" if group else "spare", wrote=wrote, checkpoint=step)

    # The failure: the last rank dies during step fail_at_step; the others' collectives fail.
    crash_s, error = None, ""
    if group is not None:
        start = time.perf_counter()
        try:
            if rank == victim:
                raise WorkerCrash(f"rank {rank} died at step {p.fail_at_step}")
            train_step(p, model, optimizer, group, p.fail_at_step, ctx.device)
        except WorkerCrash as exc:
            error = str(exc)
        except RuntimeError as exc:  # gloo: a peer closed the connection, or the timeout ran out
            error = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).strip().splitlines()[0])[:160]  # less gloo's source line
        else:
            raise RuntimeError(f"rank {rank} finished step {p.fail_at_step} although rank {victim} had died")
        crash_s = time.perf_counter() - start
        leave(group, opened)  # torchrun's agent stops every worker of the failed attempt
        group = model = optimizer = None
    result["detected_s"] = crash_s
    frame(p, "failure", 1, p.fail_at_step,
          f"Rank {victim} dies during step {p.fail_at_step}: the others' collective waits for it until the "
          f"{PEER_TIMEOUT_S:g} s timeout, fails, and the job stops", member=rank in first,
          status=("died" if rank == victim else "collective failed") if rank in first else "spare",
          failed=rank == victim, detected_s=crash_s if rank != victim else None, error=error)

    # Attempt 2: a new rendezvous, the last complete checkpoint loaded, resharded onto the new ranks.
    start = time.perf_counter()
    group = rendezvous(second, f"failures-{run_id}-2", ctx.backend, opened)
    restart_s = time.perf_counter() - start
    if group is not None:
        model, optimizer = build(group, ctx.device, p.seed)
    gone = "the failed rank's node removed" if p.restart_world_size < p.world_size else "the failed rank restarted"
    again = (f"{p.restart_world_size} ranks meet again ({gone}) and shard a fresh model over {p.restart_world_size}"
             if p.restart_world_size > 1 else f"1 rank starts again ({gone}) and holds a fresh model whole")
    frame(p, "restart", 2, None, f"Restart: {again}", member=group is not None,
          status="restarted" if group else "out", restart_s=restart_s)

    resume = None
    if group is not None:
        resume = complete_checkpoints(root)[-1]
        start = time.perf_counter()
        resumed_step = load(model, optimizer, resume, root, group)
        result["load_s"] = time.perf_counter() - start
        result["resumed_step"] = resumed_step
        result["resumed_weights"] = full_weights(model)
        resume = resumed_step
    resharded = p.restart_world_size != p.world_size
    frame(p, "load", 2, resume, f"Load the last complete checkpoint (step {resume}) into the new shards"
          + (f": written by {p.world_size} ranks, read by {p.restart_world_size}, so DCP reshards it" if resharded
             else ""), member=group is not None, status=f"loaded step {resume}" if group else "out",
          held=model and local_bytes(model, optimizer), checkpoint=resume)

    # Every rank takes the resume step from rank 0, so ranks outside the new attempt emit the same frames.
    resume_from = [resume]
    dist.broadcast_object_list(resume_from, src=0, group=ctx.group)
    replayed = []
    for step in range(resume_from[0] + 1, p.steps + 1):
        if group is not None:
            train_step(p, model, optimizer, group, step, ctx.device)
        again = step <= p.fail_at_step
        replayed += [step] if again else []
        frame(p, "replay" if again else "train", 2, step,
              f"Step {step} again: its work was lost in the failure" if again else f"Step {step}: new work",
              member=group is not None, status=f"step {step}" if group else "out")
        if step % p.checkpoint_every == 0:
            wrote = save(model, optimizer, step, root, group) if group is not None else None
            if wrote:
                result["saved"][step] = wrote
            frame(p, "checkpoint", 2, step, f"Checkpoint after step {step}", member=group is not None,
                  status="saving" if group else "out", wrote=wrote, checkpoint=step)

    if group is not None:
        result["weights"] = full_weights(model)
        leave(group, opened)
    result["replayed"] = replayed
    dist.barrier(group=ctx.group)  # every rank done with the files: rank 0 checks them (run() removes them)
    if rank == 0:
        result["checkpoints"] = inspect_checkpoints(root)
    return result


def frame(p: Params, phase: str, attempt: int, step: int | None, caption: str, *, member: bool, status: str,
          **facts) -> None:
    """One point of the story, the same on every rank: frame-wide where the run stands, per rank what it did."""
    trace.frame(phase, caption, status=status,
                extra={"attempt": attempt, "step": step, "steps": p.steps, "checkpoint_every": p.checkpoint_every,
                       "fail_at_step": p.fail_at_step, "world_size": p.world_size,
                       "restart_world_size": p.restart_world_size, "failed_rank": p.world_size - 1,
                       **{k: v for k, v in facts.items() if k == "checkpoint"}},
                rank_extra={"member": member, **{k: v for k, v in facts.items() if k != "checkpoint"}})


# -- the checks: a run that never failed, the schedule, the files ---------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict[int, torch.Tensor]:
    """Plain Adam in one process on each step's whole batch, never failing: the weights after every step."""
    model = mlp(IN_FEATURES, WIDTH, DEPTH, OUT_FEATURES, p.seed).to(dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    weights = {0: flat(model.parameters())}
    for step in range(1, p.steps + 1):
        x, y = (t.to(dtype) for t in batch(p, step))
        F.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        weights[step] = flat(model.parameters())
    return weights


def inspect_checkpoints(root: str) -> dict:
    """Every checkpoint folder, read back from disk with DCP's own reader (none of the run's code): its
    metadata, whether every tensor's chunks tile the whole tensor, and whether every byte range the metadata
    points at lies inside a file that exists."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    found = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        info = {"metadata": os.path.exists(os.path.join(path, ".metadata")), "missing": []}
        if info["metadata"]:
            metadata = FileSystemReader(path).read_metadata()
            for fqn, item in metadata.state_dict_metadata.items():
                if isinstance(item, TensorStorageMetadata):
                    whole = int(torch.Size(item.size).numel())
                    covered = sum(int(torch.Size(c.sizes).numel()) for c in item.chunks)
                    if covered != whole:
                        info["missing"].append(f"{fqn}: chunks cover {covered} of {whole} elements")
            for index, where in (metadata.storage_data or {}).items():
                file = os.path.join(path, where.relative_path)
                if not os.path.exists(file) or os.path.getsize(file) < where.offset + where.length:
                    info["missing"].append(f"{index.fqn}: {where.relative_path} lacks bytes {where.offset}+{where.length}")
            info["files"] = sorted(f for f in os.listdir(path) if f.endswith(".distcp"))
        found[name] = info
    return found


def summarize(p: Params, results: list[dict], frames) -> Summary:
    ref, exact = reference(p), reference(p, torch.float64)
    lead = results[0]
    expected_resume = last_checkpoint(p, p.fail_at_step)
    expected_lost = p.fail_at_step - expected_resume
    resume = lead.get("resumed_step")
    # Adam on the mean over the batch: each gradient a sum of GLOBAL_BATCH terms, added in another order.
    at_resume_tol = fp32_tolerance(ref[expected_resume], exact[expected_resume], terms=GLOBAL_BATCH)
    final_tol = fp32_tolerance(ref[p.steps], exact[p.steps], terms=GLOBAL_BATCH)
    resumed_diff = max_abs_diff(lead["resumed_weights"], ref[expected_resume])
    saved_then = lead.get("saved_weights", {}).get(resume)
    resumed_exact = max_abs_diff(lead["resumed_weights"], saved_then) if saved_then is not None else float("inf")
    final_diff = max_abs_diff(lead["weights"], ref[p.steps])
    replayed = lead["replayed"]
    scheduled = [s for s in range(p.checkpoint_every, p.steps + 1, p.checkpoint_every)]
    saved = sorted(lead["saved"])
    on_disk = lead["checkpoints"]
    incomplete = {name: info for name, info in on_disk.items() if not info["metadata"] or info["missing"]}
    ranks_of = {s: (p.world_size if s < p.fail_at_step else p.restart_world_size) for s in scheduled}
    # Each rank of the attempt that saved wrote at least one file of its own (`__<rank>_0.distcp`).
    files_ok = all(all(f"__{r}_0.distcp" in on_disk.get(f"step-{s:04d}", {}).get("files", [])
                       for r in range(ranks_of[s])) for s in scheduled)
    detected = [r["detected_s"] for r in results[:p.world_size - 1]]

    checks = [
        Check(name="weights right after the restart equal a run that never failed, at the checkpoint's step",
              passed=resumed_diff <= at_resume_tol, measured=resumed_diff, expected=f"≤ {at_resume_tol:.1e}",
              detail=f"max |resumed − reference| at step {expected_resume}, the last checkpoint before the failure "
                     f"at step {p.fail_at_step}; reference: plain torch.optim.Adam in one process on each step's whole "
                     f"batch. fp32 bound: 4× the reference's distance from float64, at least {GLOBAL_BATCH}·ε·max|w|"),
        Check(name="final weights equal a run that never failed", passed=final_diff <= final_tol,
              measured=final_diff, expected=f"≤ {final_tol:.1e}",
              detail=f"after step {p.steps}; a restart that lost Adam's moments, replayed a step twice or skipped "
                     f"one, or trained on the wrong batches lands elsewhere. Bound as above"),
        Check(name="steps lost = steps since the last checkpoint, at most the interval",
              passed=resume == expected_resume and len(replayed) == expected_lost <= p.checkpoint_every
              and replayed == list(range(expected_resume + 1, p.fail_at_step + 1)),
              measured={"resumed_from": resume, "replayed": replayed},
              expected={"resumed_from": expected_resume,
                        "replayed": list(range(expected_resume + 1, p.fail_at_step + 1))},
              detail=f"checkpoints after {once_every(p.checkpoint_every, 'step')}, failure during step "
                     f"{p.fail_at_step}: "
                     f"the last save is step {expected_resume}, so steps {expected_resume + 1}–{p.fail_at_step} "
                     f"({expected_lost}) run again, ≤ {p.checkpoint_every}"),
        Check(name="every checkpoint on the schedule was written, complete",
              passed=saved == scheduled and not incomplete and files_ok and
              sorted(on_disk) == [f"step-{s:04d}" for s in scheduled],
              measured={"saved": saved, "on_disk": sorted(on_disk), "incomplete": incomplete},
              expected={"saved": scheduled},
              detail="read back with DCP's FileSystemReader: .metadata present, every tensor's chunks add up to "
                     "the whole tensor, every byte range it names lies in a file that exists, and each rank of "
                     "the attempt that saved wrote its own file"),
        Check(name="the restart resumed the checkpoint's weights bit for bit",
              passed=resumed_exact == 0.0, measured=resumed_exact, expected=0.0,
              detail=f"max |resumed − weights when step {resume} was saved|: DCP copies bytes, even when it reshards "
                     f"from {p.world_size} to {counted(p.restart_world_size, 'rank')}"),
        Check(name="every surviving rank saw the failure", passed=all(d is not None for d in detected),
              measured=detected, expected=f"an error on each of the {p.world_size - 1} other ranks",
              detail=f"seconds from the start of step {p.fail_at_step} until the rank's collective raised "
                     f"(the peer timeout is {PEER_TIMEOUT_S:g} s)"),
    ]
    bytes_per_checkpoint = {s: sum(r["saved"].get(s, {}).get("bytes", 0) for r in results) for s in scheduled}
    return Summary(checks=checks, figures={
        "resumed_from_step": resume, "steps_lost": len(replayed), "replayed": replayed,
        "checkpoint_bytes": bytes_per_checkpoint,
        "checkpoint_bytes_per_rank": {s: [r["saved"].get(s, {}).get("bytes", 0) for r in results] for s in scheduled},
        "save_s": {s: max(r["saved"].get(s, {}).get("s", 0.0) for r in results) for s in scheduled},
        "detected_s": detected, "load_s": lead.get("load_s"), "frames": len(frames),
    })


SCENARIO = Scenario(
    name="failures",
    title="A failure, a restart from a checkpoint",
    description="FSDP training with torch.distributed.checkpoint saves; one rank dies mid-run, the job restarts "
                "from the last checkpoint, resharded onto a new world size, and replays the lost steps.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["failures"],
    world_size=lambda p: max(p.world_size, p.restart_world_size),
    controls=["restart_world_size", "checkpoint_every", "fail_at_step"],
)
