"""A warm pool of rank processes that runs one job at a time.

Processes come from a forkserver that has already imported torch, so a (re)build
costs the gloo handshake, not N cold Python starts. A job whose rank dies, hangs
(no progress for `job_timeout_s`) or fails alone leaves the pool suspect: it is torn
down and rebuilt in the background while the caller gets a RunFailed naming what
happened. A job can also be stopped on purpose (its viewers left, it ran too long):
every rank stops at the same frame boundary, and the pool is reused as it is.
A watcher notices a rank that dies while the pool is idle and rebuilds before the next job.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import queue
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from simulations.runtime.execute import pick_backend
from simulations.runtime.worker import HEARTBEAT_S, Control, worker_main

log = logging.getLogger("distdeck.pool")

STORE_PREFIX = "distdeck-store-"
TOO_LARGE = "the run is too large to show"
STOP_GRACE_S = 5.0  # after a stop request, how long the ranks get to reach the boundary
WATCH_S = 0.5  # how often an idle pool checks that its ranks are alive


class RunFailed(RuntimeError):
    """A job ended without every rank's result; the message says why, in a sentence."""


class PoolBroken(RuntimeError):
    """The pool could not be started."""


class StopRequest:
    """Set by the caller to stop a running job at the next frame boundary, with a sentence saying why."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


def clean_stale_store_files(directory: str | None = None) -> list[str]:
    """Remove rendezvous files that a crashed server left behind: those of processes that are gone.
    A live server's files (another pool on the same machine) are left alone."""
    removed = []
    directory = directory or tempfile.gettempdir()
    for name in os.listdir(directory):
        match = re.fullmatch(rf"{STORE_PREFIX}(\d+)-.*", name)
        if not name.startswith(STORE_PREFIX):
            continue
        path = os.path.join(directory, name)
        try:
            if match:
                try:
                    os.kill(int(match.group(1)), 0)
                    continue  # its owner is alive
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue
            elif time.time() - os.path.getmtime(path) < 3600:
                continue  # an older name without an owner: only once it is clearly stale
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


@dataclass
class _Ranks:
    processes: list
    jobs: list
    events: object
    store_file: str
    control: Control


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
        self.rebuilds = 0  # pool rebuilds after a failure, for /healthz
        self.last_problem: str | None = None
        self._watcher: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, background: bool = True) -> None:
        """Spawn the ranks (in a background thread by default) and let them join the world."""
        self._started = True
        self._ready.clear()
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="pool-watch")
            self._watcher.start()
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
        clean_stale_store_files()
        fd, store_file = tempfile.mkstemp(prefix=f"{STORE_PREFIX}{os.getpid()}-")
        os.close(fd)
        os.unlink(store_file)  # the FileStore creates it; a stale file would confuse a rebuilt world
        events = self._ctx.Queue()
        control = Control(self._ctx, self.size)
        jobs = [self._ctx.Queue() for _ in range(self.size)]
        processes = []
        for rank in range(self.size):
            proc = self._ctx.Process(
                target=worker_main, name=f"distdeck-rank-{rank}", daemon=True,
                args=(rank, self.size, f"file://{store_file}", self.backend, self.job_timeout_s,
                      jobs[rank], events, os.getpid(), control))
            proc.start()
            processes.append(proc)
        ranks = _Ranks(processes, jobs, events, store_file, control)
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
        ranks = self._ranks
        return [p.pid for p in ranks.processes] if ranks else []

    def _dead_rank(self, ranks: _Ranks) -> str | None:
        for rank, proc in enumerate(ranks.processes):
            if not proc.is_alive():
                return f"rank {rank} died (exit code {proc.exitcode})"
        return None

    def _watch(self) -> None:
        """While idle, check the ranks are alive; rebuild at once when one is not (not at the next job)."""
        while not self._closed:
            time.sleep(WATCH_S)
            if not self._ready.is_set() or self._ranks is None or not self._job_lock.acquire(blocking=False):
                continue
            try:
                ranks = self._ranks
                dead = ranks and self._dead_rank(ranks)
                if dead and not self._closed:
                    self._note(f"{dead} while idle; rebuilding the pool")
                    self.start(background=True)
            finally:
                self._job_lock.release()

    def _note(self, problem: str) -> None:
        log.warning(problem)
        self.last_problem = problem
        self.rebuilds += 1

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
            traced: bool = True, timeout_s: float | None = None, stop: StopRequest | None = None,
            max_run_s: float | None = None) -> list[dict]:
        """Run a scenario on ranks 0..world_size-1; stream fragments; return every rank's result.

        `timeout_s` (default job_timeout_s): a job with no progress from any rank for that long is hung.
        `stop`: set it to stop the job at the next frame boundary (RunStopped, the pool is kept).
        `max_run_s`: past it, the job is stopped the same way: a run that long is too large to show."""
        if not 1 <= world_size <= self.size:
            raise ValueError(f"world_size must be between 1 and {self.size}")
        with self._job_lock:
            if not self._started:  # not started with the server: start on first use
                self.start(background=False)
            self.wait_ready()
            dead = self._dead_rank(self._ranks)
            if dead:  # died since the watcher last looked: rebuild now, not after failing this job
                self._note(f"{dead} while idle; rebuilding the pool")
                self.start(background=False)
                self.wait_ready()
            ranks = self._ranks
            job_id = next(self._job_ids)
            ranks.control.reset(world_size)
            for rank in range(world_size):
                ranks.jobs[rank].put((job_id, name, params, world_size, traced))
            try:
                return self._collect(ranks, job_id, world_size, on_fragment, timeout_s or self.job_timeout_s,
                                     stop, max_run_s)
            except _CleanFailure:
                raise
            except RunFailed as exc:
                self._note(f"{exc}; rebuilding the pool")
                self.start(background=True)  # ranks may be stuck in a collective: rebuild
                raise

    def _collect(self, ranks: _Ranks, job_id: int, world_size: int, on_fragment, timeout_s: float,
                 stop: StopRequest | None, max_run_s: float | None) -> list[dict]:
        results: dict[int, dict] = {}
        errors: dict[int, str] = {}
        stopped: dict[int, bool] = {}  # rank -> stopped with no message in flight
        start = time.monotonic()
        stalled_at = start + timeout_s  # pushed back by every message of this job
        grace_until = None  # after a first error, how long the others get to report theirs
        stop_reason, stop_sent_at, stop_at, escalate_at = None, None, None, 0.0
        while len(results) + len(errors) + len(stopped) < world_size:
            now = time.monotonic()
            if grace_until is not None and now > grace_until:
                break
            if stop_sent_at is None:
                if stop is not None and stop.is_set():
                    stop_reason = stop.reason
                elif max_run_s is not None and now - start > max_run_s:
                    stop_reason = (f"{TOO_LARGE}: it ran for more than {max_run_s:g} s "
                                   f"(fewer steps, a smaller model or fewer ranks will do)")
                elif now > stalled_at:
                    stop_reason = f"the run timed out: no progress for {timeout_s:g} s"
                if stop_reason is not None:
                    stop_at, stop_sent_at = ranks.control.request_stop(job_id, world_size), now
                    # A deliberate stop waits for the boundary as long as the ranks make progress; a stalled
                    # run gets a short grace (a rank slow between frames still reaches it).
                    escalate_at = stalled_at if now <= stalled_at else now + min(STOP_GRACE_S, max(timeout_s, 0.5))
            elif now > max(escalate_at, stalled_at):
                raise RunFailed(f"{stop_reason}; {self._hung(ranks, world_size, results, errors, stopped)}")
            try:
                kind, ev_job, rank, payload = ranks.events.get(timeout=0.05)
            except queue.Empty:
                # Quiet for 50 ms: is everyone still alive? (Checked when quiet, not per event: it costs.)
                dead = self._dead_rank(ranks)
                if dead:
                    raise RunFailed(dead)
                continue
            if ev_job != job_id:
                continue  # a straggler of an earlier job
            stalled_at = time.monotonic() + timeout_s
            if kind == "frames":
                for fragment in payload:
                    on_fragment(fragment)
            elif kind == "result":
                results[rank] = payload
            elif kind == "stopped":
                stopped[rank] = payload
            elif kind == "error":
                errors[rank] = payload
                grace_until = grace_until or time.monotonic() + 2.0
        if stopped and not errors:
            if len(stopped) == world_size and all(stopped.values()):
                raise RunStopped(f"{stop_reason} (stopped at frame {stop_at})")
            raise RunFailed(f"{stop_reason}; a message was still in flight when it stopped")
        if errors:
            rank = min(errors)
            message = f"rank {rank} failed: {errors[rank]}"
            if len(errors) == world_size:  # every rank failed alike (bad input): the pool is fine
                raise _CleanFailure(message)
            raise RunFailed(message)
        return [results[r] for r in range(world_size)]


    @staticmethod
    def _hung(ranks: _Ranks, world_size: int, *done: dict) -> str:
        """Which rank hung: one that stopped beating (frozen), else the ones behind the others' frames."""
        control, now = ranks.control, time.time()
        waiting = [r for r in range(world_size) if not any(r in d for d in done)]
        frozen = [r for r in waiting if now - control.heartbeat[r] > 4 * HEARTBEAT_S]
        progress = {r: control.progress[r] for r in waiting}
        behind = [r for r in waiting if progress[r] == min(progress.values(), default=0)]
        hung = frozen or (behind if len(behind) < len(waiting) else waiting)
        where = ", ".join(f"rank {r} (after frame {progress[r]})" for r in hung)
        return f"{where} hung" if len(hung) == 1 else f"ranks hung: {where}"


class _CleanFailure(RunFailed):
    """Every rank raised, or every rank stopped where asked: no rank is stuck, so the pool needs no rebuild."""


class RunStopped(_CleanFailure):
    """The job was stopped on request (no one watching, too large) at a frame boundary; the pool is fine."""

