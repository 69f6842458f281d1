"""A rank process of the warm pool: joins the world once, then runs jobs until told to stop.

Every process creates the groups of ranks 0..n-1 for each n up front, so a job of
any world size from 1 to the pool's size runs without re-spawning anything.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
import traceback
from datetime import timedelta

import torch.distributed as dist

from simulations.runtime.execute import run_on_rank


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


class FragmentBatcher:
    """Sends a rank's frame fragments to the parent in batches: the first at once (first-frame latency),
    then at most one message per `interval_s`. Streaming every frame as it happens made the ranks, which
    share the cores with each other and with the parent's merging, up to 1.4x slower; a quarter-second
    batch keeps that near 1.1x, and a presenter stepping through frames never waits on it."""

    def __init__(self, send, interval_s: float = 0.25):
        self.send = send
        self.interval_s = interval_s
        self.batch: list[dict] = []
        self.sent_at = float("-inf")

    def __call__(self, fragment: dict) -> None:
        self.batch.append(fragment)
        if time.monotonic() - self.sent_at >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.send(self.batch)
            self.batch = []
            self.sent_at = time.monotonic()


def worker_main(rank: int, size: int, init_method: str, backend: str, timeout_s: float,
                jobs, events, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the pool is one machine: stay on loopback
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            timeout=timedelta(seconds=timeout_s))
    groups = {n: dist.new_group(list(range(n))) for n in range(1, size)}
    groups[size] = dist.group.WORLD
    events.put(("ready", None, rank, None))

    while (job := jobs.get()) is not None:
        job_id, name, params, world_size, t0, traced = job

        sink = FragmentBatcher(lambda batch, job_id=job_id: events.put(("frames", job_id, rank, batch)))
        try:
            result = run_on_rank(name, params, rank=rank, world_size=world_size, group=groups[world_size],
                                 backend=backend, t0=t0, sink=sink, traced=traced)
            sink.flush()
            events.put(("result", job_id, rank, result))
        except Exception as exc:  # report, keep serving: the parent decides whether the pool survived
            sink.flush()
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            events.put(("error", job_id, rank, detail))
            traceback.print_exc()
    dist.destroy_process_group()
