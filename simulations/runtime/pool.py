"""A warm pool of rank processes that runs one job at a time.

Processes come from a forkserver that has already imported torch, so a (re)build
costs the gloo handshake, not N cold Python starts. A job whose rank dies, hangs
past its timeout or fails alone leaves the pool suspect: it is torn down and
rebuilt in the background while the caller gets a RunFailed naming what happened.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from simulations.runtime.execute import pick_backend
from simulations.runtime.worker import worker_main

log = logging.getLogger("distdeck.pool")


class RunFailed(RuntimeError):
    """A job ended without every rank's result; the message says why, in a sentence."""


class PoolBroken(RuntimeError):
    """The pool could not be started."""


@dataclass
class _Ranks:
    processes: list
    jobs: list
    events: object
    store_file: str


class RankPool:
    def __init__(self, size: int = 8, backend: str = "auto", job_timeout_s: float = 60.0,
                 start_timeout_s: float = 120.0):
        self.size = size
        self.backend = pick_backend(backend, size)
        self.job_timeout_s = job_timeout_s
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(["simulations.runtime.preload", "simulations.runtime.worker"])
        self._ranks: _Ranks | None = None
        self._ready = threading.Event()
        self._start_error: str | None = None
        self._job_lock = threading.Lock()  # one job at a time on the ranks
        self._build_lock = threading.Lock()
        self._job_ids = itertools.count(1)
        self._closed = False
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, background: bool = True) -> None:
        """Spawn the ranks (in a background thread by default) and let them join the world."""
        self._started = True
        self._ready.clear()
        if background:
            threading.Thread(target=self._build, daemon=True, name="pool-build").start()
        else:
            self._build()

    def _build(self) -> None:
        with self._build_lock:
            self._teardown()
            if self._closed:
                return
            try:
                self._ranks = self._spawn()
                self._start_error = None
            except Exception as exc:  # noqa: BLE001 - reported to every caller that waits
                self._start_error = f"the rank pool failed to start: {exc}"
                log.error(self._start_error)
            finally:
                self._ready.set()

    def _spawn(self) -> _Ranks:
        fd, store_file = tempfile.mkstemp(prefix="distdeck-store-")
        os.close(fd)
        os.unlink(store_file)  # the FileStore creates it; a stale file would confuse a rebuilt world
        events = self._ctx.Queue()
        jobs = [self._ctx.Queue() for _ in range(self.size)]
        processes = []
        for rank in range(self.size):
            proc = self._ctx.Process(
                target=worker_main, name=f"distdeck-rank-{rank}", daemon=True,
                args=(rank, self.size, f"file://{store_file}", self.backend, self.job_timeout_s,
                      jobs[rank], events, os.getpid()))
            proc.start()
            processes.append(proc)
        ranks = _Ranks(processes, jobs, events, store_file)
        ready, deadline = 0, time.monotonic() + self.start_timeout_s
        while ready < self.size:
            dead = [p for p in processes if not p.is_alive()]
            if dead or time.monotonic() > deadline:
                self._kill(ranks)
                why = f"{dead[0].name} exited with code {dead[0].exitcode}" if dead else "timed out"
                raise PoolBroken(why)
            try:
                kind, *_ = events.get(timeout=0.1)
            except queue.Empty:
                continue
            ready += kind == "ready"
        log.info("rank pool ready: %d ranks, %s", self.size, self.backend)
        return ranks

    def wait_ready(self, timeout: float | None = None) -> None:
        if not self._ready.wait(timeout if timeout is not None else self.start_timeout_s):
            raise PoolBroken("the rank pool is still starting")
        if self._ranks is None:
            raise PoolBroken(self._start_error or "the rank pool is closed")

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self._ranks is not None

    def pids(self) -> list[int]:
        return [p.pid for p in self._ranks.processes] if self._ranks else []

    def close(self) -> None:
        self._closed = True
        with self._build_lock:
            self._teardown(graceful=True)
        self._ready.set()

    def _teardown(self, graceful: bool = False) -> None:
        ranks, self._ranks = self._ranks, None
        if ranks is None:
            return
        if graceful:
            for q in ranks.jobs:
                q.put(None)
            deadline = time.monotonic() + 2.0
            for p in ranks.processes:
                p.join(max(0.0, deadline - time.monotonic()))
        self._kill(ranks)

    @staticmethod
    def _kill(ranks: _Ranks) -> None:
        for p in ranks.processes:
            if p.is_alive():
                p.kill()
        for p in ranks.processes:
            p.join(5)
        for q in [*ranks.jobs, ranks.events]:
            q.cancel_join_thread()
            q.close()
        try:
            os.unlink(ranks.store_file)
        except OSError:
            pass

    # -- jobs --------------------------------------------------------------------------------------

    def run(self, name: str, params: dict, world_size: int, on_fragment: Callable[[dict], None],
            traced: bool = True, timeout_s: float | None = None) -> list[dict]:
        """Run a scenario on ranks 0..world_size-1; stream fragments; return every rank's result."""
        if not 1 <= world_size <= self.size:
            raise ValueError(f"world_size must be between 1 and {self.size}")
        with self._job_lock:
            if not self._started:  # not started with the server: start on first use
                self.start(background=False)
            self.wait_ready()
            ranks = self._ranks
            job_id = next(self._job_ids)
            t0 = time.time()
            for rank in range(world_size):
                ranks.jobs[rank].put((job_id, name, params, world_size, t0, traced))
            try:
                return self._collect(ranks, job_id, world_size, on_fragment, timeout_s or self.job_timeout_s)
            except _CleanFailure:
                raise
            except RunFailed:
                self.start(background=True)  # ranks may be stuck in a collective: rebuild
                raise

    def _collect(self, ranks: _Ranks, job_id: int, world_size: int, on_fragment, timeout_s: float) -> list[dict]:
        results: dict[int, dict] = {}
        errors: dict[int, str] = {}
        deadline = time.monotonic() + timeout_s
        grace_until = None  # after a first error, how long the others get to report theirs
        while len(results) + len(errors) < world_size:
            now = time.monotonic()
            if grace_until is not None and now > grace_until:
                break
            if now > deadline:
                silent = sorted(set(range(world_size)) - results.keys() - errors.keys())
                raise RunFailed(f"the run timed out after {timeout_s:g} s; rank(s) {silent} never finished")
            try:
                kind, ev_job, rank, payload = ranks.events.get(timeout=0.05)
            except queue.Empty:
                # Quiet for 50 ms: is everyone still alive? (Checked when quiet, not per event: it costs.)
                for rank, proc in enumerate(ranks.processes):
                    if not proc.is_alive():
                        raise RunFailed(f"rank {rank} died (exit code {proc.exitcode})")
                continue
            if ev_job != job_id:
                continue  # a straggler of an earlier job
            if kind == "frames":
                for fragment in payload:
                    on_fragment(fragment)
            elif kind == "result":
                results[rank] = payload
            elif kind == "error":
                errors[rank] = payload
                grace_until = grace_until or time.monotonic() + 2.0
        if errors:
            rank = min(errors)
            message = f"rank {rank} failed: {errors[rank]}"
            if len(errors) == world_size:  # every rank failed alike (bad input): the pool is fine
                raise _CleanFailure(message)
            raise RunFailed(message)
        return [results[r] for r in range(world_size)]


class _CleanFailure(RunFailed):
    """Every rank raised: no rank is stuck, so the pool needs no rebuild."""

