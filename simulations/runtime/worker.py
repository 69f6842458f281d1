"""A rank process of the warm pool: joins the world once, then runs jobs until told to stop.

Every process creates the groups of ranks 0..n-1 for each n up front, so a job of
any world size from 1 to the pool's size runs without re-spawning anything.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import threading
import time
import traceback
from datetime import timedelta

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from simulations.runtime.execute import run_on_rank
from simulations.trace import seal

HEARTBEAT_S = 0.5


def _die_with_parent(parent_pid: int) -> None:
    """Never outlive the server: the kernel kills us when our parent goes, and a watcher double-checks."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass

    def watch() -> None:
        while True:
            time.sleep(0.5)
            try:
                os.kill(parent_pid, 0)
            except OSError:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


class StopAtFrame(Exception):
    """Raised at a frame boundary when the server asked this job to stop there (every rank stops at the same one)."""


class Control:
    """What the server and the ranks share, in shared memory: each rank's progress (the last frame boundary it
    reached in the current job), a stop request (job id, frame index), and each rank's heartbeat.

    A stop is consistent across ranks: under the lock the server reads the furthest rank's boundary M and asks
    every rank to stop at M + 1; a rank records its boundary and reads the request under the same lock, so every
    rank reaches M + 1 (they mark the same boundaries in the same order) and none is past it. No rank is left
    waiting in a collective for a peer that stopped, so a stopped job needs no pool rebuild."""

    def __init__(self, ctx, size: int):
        self.lock = ctx.Lock()
        self.progress = ctx.Array("q", size, lock=False)
        self.stop_job = ctx.Value("q", 0, lock=False)
        self.stop_at = ctx.Value("q", 0, lock=False)
        self.heartbeat = ctx.Array("d", size, lock=False)

    def reset(self, world_size: int) -> None:
        with self.lock:
            for rank in range(world_size):
                self.progress[rank] = -1

    def request_stop(self, job_id: int, world_size: int) -> int:
        """Ask every rank of the job to stop at the next boundary none has passed; returns that frame index."""
        with self.lock:
            at = max(self.progress[r] for r in range(world_size)) + 1
            self.stop_job.value, self.stop_at.value = job_id, at
            return at

    def reached(self, rank: int, job_id: int, index: int) -> bool:
        """Rank `rank` is at boundary `index`: record it; True if the job must stop here."""
        with self.lock:
            self.progress[rank] = index
            return self.stop_job.value == job_id and index >= self.stop_at.value


class P2PLedger:
    """Point-to-point works posted in this process during the current job (dist.isend / dist.irecv).

    A job stopped between a posted isend and its matching receive would leave a message in flight that
    the next job's receive could take. After a stop, the rank reports whether all of them completed;
    if not, the server rebuilds the pool instead of reusing it."""

    def __init__(self) -> None:
        self.works: list = []
        for name in ("isend", "irecv"):
            original = getattr(c10d, name)

            def tracked(*args, _original=original, **kwargs):
                work = _original(*args, **kwargs)
                if work is not None:
                    self.works.append(work)
                return work

            # Both names: P2POp (batch_isend_irecv) checks its op against c10d's own.
            setattr(c10d, name, tracked)
            setattr(dist, name, tracked)

    def clean(self, wait_s: float = 0.5) -> bool:
        deadline = time.monotonic() + wait_s
        while not all(work.is_completed() for work in self.works):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


class FragmentBatcher:
    """Sends a rank's frame fragments to the parent in batches: the first at once (first-frame latency),
    then at most one message per `interval_s`. Streaming every frame as it happens made the ranks, which
    share the cores with each other and with the parent's merging, up to 1.4x slower; a quarter-second
    batch keeps that near 1.1x, and a presenter stepping through frames never waits on it."""

    def __init__(self, send, interval_s: float = 0.25, stop_here=None):
        self.send = send
        self.interval_s = interval_s
        self.stop_here = stop_here  # index -> True when the job must stop at this frame boundary
        self.stopped = False
        self.batch: list[dict] = []
        self.sent_at = float("-inf")

    def __call__(self, fragment: dict) -> None:
        if self.stop_here is not None and self.stop_here(fragment["index"]):
            self.stopped = True
            raise StopAtFrame(fragment["index"])
        self.batch.append(fragment)
        if time.monotonic() - self.sent_at >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.send(self.batch)
            self.batch = []
            self.sent_at = time.monotonic()


def _beat(control: Control, rank: int) -> None:
    """Heartbeat: a frozen process (stopped, or stuck holding the GIL) stops beating; one waiting in a
    collective does not."""
    while True:
        control.heartbeat[rank] = time.time()
        time.sleep(HEARTBEAT_S)


def worker_main(rank: int, size: int, init_method: str, backend: str, timeout_s: float,
                jobs, events, parent_pid: int, control: Control | None = None) -> None:
    _die_with_parent(parent_pid)
    ledger = P2PLedger()
    if control is not None:
        threading.Thread(target=_beat, args=(control, rank), daemon=True, name="heartbeat").start()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the pool is one machine: stay on loopback
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=timedelta(seconds=timeout_s))
    groups = {n: dist.new_group(list(range(n))) for n in range(1, size)}
    groups[size] = dist.group.WORLD
    events.put(("ready", None, rank, None))
    # What was made so far (torch, the groups) lives as long as the process: the cyclic collector need not walk
    # it again at every full collection, which a traced run's many small dicts and lists set off.
    gc.freeze()

    while (job := jobs.get()) is not None:
        job_id, name, params, world_size, traced = job

        ledger.works.clear()
        stop_here = None if control is None else (lambda index, job_id=job_id: control.reached(rank, job_id, index))
        # A batch leaves as its fragments' JSON parts (trace.seal), which the parent splices into frames.
        sink = FragmentBatcher(lambda batch, job_id=job_id: events.put(("frames", job_id, rank, seal(batch))),
                               stop_here=stop_here)
        try:
            result = run_on_rank(name, params, rank=rank, world_size=world_size, group=groups[world_size],
                                 backend=backend, sink=sink, traced=traced)
            sink.flush()
            events.put(("result", job_id, rank, result))
        except Exception as exc:  # report, keep serving: the parent decides whether the pool survived
            if sink.stopped:  # asked to stop (maybe re-raised by autograd as another type): not a failure
                sink.flush()
                events.put(("stopped", job_id, rank, ledger.clean()))
                continue
            sink.flush()
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            events.put(("error", job_id, rank, detail))
            traceback.print_exc()
    dist.destroy_process_group()
