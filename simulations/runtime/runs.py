"""Runs on the pool, as the server sees them: one Run per distinct (scenario, params).

Identical requests share one Run; finished runs stay in an LRU cache bounded by bytes;
distinct runs wait in a bounded queue (past it, `submit` raises Overloaded) and each
client may have only a few of its own waiting or running (past that, TooManyRuns).
A run whose last viewer left is cancelled: dropped from the queue, or stopped at its
next frame boundary, unless it is one worth keeping (the deck's own runs).

A Run keeps each event encoded once, as the Server-Sent Event bytes every viewer is sent:
followers, any number of them and from any frame (SSE resume), write the same bytes. A finished run
also keeps what is derived from those bytes for its viewers (a compressed copy per encoding), made
once and counted in its size, so that the cache bounds it with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel

from simulations import scenarios
from simulations.frames import Frame, Meta, RunFile, Summary
from simulations.runtime.execute import provenance
from simulations.runtime.pool import TOO_LARGE, RankPool, RunFailed, StopRequest
from simulations.trace import encode_frame

log = logging.getLogger("distdeck.runs")

CANCELLED = "the run was cancelled: no one was watching it"

TOO_LARGE_TTL_S = 600.0  # a run stopped as too large answers retries at once, for this long


class Overloaded(RuntimeError):
    """Too many distinct runs are waiting; try again shortly."""


class TooManyRuns(Overloaded):
    """This client already has as many runs of its own waiting or running as it may."""


def run_key(name: str, params: BaseModel) -> str:
    return name + "?" + json.dumps(params.model_dump(mode="json"), sort_keys=True)


def sse(event: str, data: str | bytes, event_id: int | None = None) -> bytes:
    """One Server-Sent Event, encoded. `data` is one line of JSON (pydantic and json.dumps never break lines)."""
    head = f"id: {event_id}\r\n" if event_id is not None else ""
    data = data if isinstance(data, bytes) else data.encode()
    return f"{head}event: {event}\r\ndata: ".encode() + data + b"\r\n\r\n"


def _sse_data(event: bytes) -> bytes:
    start = event.index(b"\r\ndata: ") + len(b"\r\ndata: ")
    return event[start:-4]


CHUNK_BYTES = 256 << 10  # events ready at once go out in writes of about this size


def _joined(events: list[bytes]) -> list[bytes]:
    """Consecutive events joined into writes of about CHUNK_BYTES: few writes, no copy of a whole large run."""
    parts, start, size = [], 0, 0
    for i, event in enumerate(events):
        size += len(event)
        if size >= CHUNK_BYTES:
            parts.append(b"".join(events[start:i + 1]))
            start, size = i + 1, 0
    if start < len(events):
        parts.append(b"".join(events[start:]))
    return parts


class _DecodedFrames(Sequence[Frame]):
    def __init__(self, events: list[bytes]):
        self._events = events

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [Frame.model_validate_json(_sse_data(e)) for e in self._events[i]]
        return Frame.model_validate_json(_sse_data(self._events[i]))


class Run:
    """One run's events, appended by the producer thread, read by any number of async followers."""

    def __init__(self, meta: Meta):
        self.meta = meta
        self.summary: Summary | None = None
        self.error: str | None = None
        self.done = False
        self._events: list[bytes] = [sse("meta", meta.model_dump_json())]  # meta, then one per frame
        self._tail = b""  # summary + done, or error
        self.nbytes = len(self._events[0])
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._pending: dict[int, list[dict]] = {}  # frame index -> fragments received so far
        self.first_frame_at: float | None = None
        self.submitted_at = time.perf_counter()
        self.stop = StopRequest()  # set to stop the run at its next frame boundary
        self.viewers = 0
        self.on_abandoned: Callable[[Run], None] | None = None  # called when the last viewer leaves early
        self._derived: dict[str, Any] = {}  # name -> a form of the finished run made once (see derived())
        self._deriving = threading.Lock()
        self.on_resized: Callable[[Run], None] | None = None  # called when nbytes grows after the run finished

    @classmethod
    def from_file(cls, run_file: RunFile, source: str) -> Run:
        run = cls(run_file.meta.model_copy(update={"source": source}))
        for frame in run_file.frames:
            run._append(frame.index, frame.model_dump_json().encode())
        run.finish(summary=run_file.summary)
        return run

    def to_file(self) -> RunFile:
        assert self.summary is not None, "only a finished, successful run can be saved"
        return RunFile(meta=self.meta, frames=list(self.frames), summary=self.summary)

    @property
    def frames(self) -> Sequence[Frame]:
        """The frames so far, as objects decoded from their bytes one at a time when read: a run keeps only
        its encoded events. (DDP at world_size 8, 10 steps, width 256, depth 8: 2,597 frames, 49.8 MB of
        events; kept as frame objects, it grew the server by about 476 MB, as measured in issue 14.)"""
        with self._lock:
            return _DecodedFrames(self._events[1:])

    @property
    def frame_count(self) -> int:
        return len(self._events) - 1

    # -- producer side (the pool's thread) ---------------------------------------------------------

    def add_fragment(self, fragment: dict) -> None:
        """One rank's part of a frame. Frames complete in order because every rank marks the same points in
        the same order."""
        self._pending.setdefault(fragment["index"], []).append(fragment)
        while len(self._pending.get(self.frame_count, ())) == self.meta.world_size:
            index = self.frame_count
            self._append(index, encode_frame(self._pending.pop(index)))

    def _append(self, index: int, frame_json: bytes) -> None:
        event = sse("frame", frame_json, index)
        with self._lock:
            if self.first_frame_at is None:
                self.first_frame_at = time.perf_counter()
            self._events.append(event)
            self.nbytes += len(event)
        self._wake()

    def finish(self, summary: Summary | None = None, error: str | None = None) -> None:
        if error is not None:
            tail = sse("error", json.dumps({"message": error}))
        else:
            tail = sse("summary", summary.model_dump_json()) + sse("done", json.dumps({"frames": self.frame_count}))
        with self._lock:
            self.summary, self.error, self._tail, self.done = summary, error, tail, True
            self.nbytes += len(tail)
            self._pending.clear()
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # a viewer's loop that has closed since
                loop.call_soon_threadsafe(event.set)

    # -- consumer side (SSE handlers) --------------------------------------------------------------

    def encoded(self, after: int = -1) -> list[bytes]:
        """A finished run's events after frame `after`, in writes of about CHUNK_BYTES."""
        assert self.done, "only a finished run is complete"
        return _joined([self._events[0], *self._events[after + 2:], self._tail])

    def encoded_events(self) -> tuple[bytes, list[bytes], bytes]:
        """A finished run's events as sent: (meta, one event per frame, summary + done or the error)."""
        assert self.done, "only a finished run is complete"
        return self._events[0], self._events[1:], self._tail

    def derived(self, name: str, make: Callable[[Run], tuple[Any, int]]) -> Any:
        """The form `name` of this finished run, made by `make(run) -> (form, its bytes)` for the first
        viewer who asks (the others wait for it) and kept with the run: every later viewer gets the same
        object. Its bytes count in `nbytes`, so a cache that keeps the run bounds its forms too."""
        assert self.done, "only a finished run has its final bytes"
        with self._deriving:
            if name not in self._derived:
                form, size = make(self)
                with self._lock:
                    self._derived[name] = form
                    self.nbytes += size
                if self.on_resized is not None:
                    self.on_resized(self)
            return self._derived[name]

    def derived_if_made(self, name: str) -> Any | None:
        """The form `name` if it is made already (no waiting, no making), else None."""
        return self._derived.get(name)

    async def stream(self, after: int = -1, until: Awaitable | None = None,
                     farewell: bytes = b"") -> AsyncIterator[bytes]:
        """The run as SSE bytes: meta, the frames after index `after`, then summary and done, or error.

        Whatever is ready goes out as one chunk (a cached run is one write). If `until` completes first
        (the server is shutting down), `farewell` is sent and the stream ends."""
        loop = asyncio.get_running_loop()
        until_task = asyncio.ensure_future(until) if until is not None else None
        self.viewers += 1
        try:
            next_event = after + 2  # events[0] is meta; frame i is events[i + 1]
            chunk = [self._events[0]]
            while True:
                with self._lock:
                    fresh = self._events[next_event:]
                    finished = self.done
                chunk.extend(fresh)
                next_event += len(fresh)
                if finished:
                    chunk.append(self._tail)
                for part in _joined(chunk):
                    yield part
                chunk = []
                if finished:
                    return
                if fresh:
                    continue
                event = asyncio.Event()
                with self._lock:
                    if len(self._events) > next_event or self.done:
                        continue
                    self._waiters.append((loop, event))
                if until_task is None:
                    await event.wait()
                    continue
                waiting = asyncio.ensure_future(event.wait())
                await asyncio.wait({waiting, until_task}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if until_task.done() and not event.is_set():
                    yield farewell
                    return
        finally:
            if until_task is not None:
                until_task.cancel()
            self.viewers -= 1
            if self.viewers == 0 and not self.done and self.on_abandoned is not None:
                self.on_abandoned(self)

    async def wait(self) -> None:
        async for _ in self.stream(self.frame_count - 1):
            pass


class Simulator:
    """The server's one door to the pool.

    `cache_bytes`: finished runs kept, least recently used first out, up to this many bytes of events.
    `max_run_bytes`: a run whose events grow past this is stopped (too large to show or to keep).
    `max_run_s`: a run still going after this long is stopped the same way.
    `per_client`: distinct runs one client may have waiting or running (runs worth keeping are free).
    `abandon_grace_s`: how long a run whose last viewer left waits for one to come back (a reconnect).
    `keep(key)`: True for runs worth finishing with no one watching (the deck's own).
    """

    def __init__(self, pool: RankPool, cache_bytes: int = 512 << 20, max_queued: int = 8,
                 per_client: int = 3, max_run_bytes: int | None = None, max_run_s: float | None = 300.0,
                 abandon_grace_s: float = 0.5, keep: Callable[[str], bool] = lambda key: False):
        self.pool = pool
        self.cache_bytes = cache_bytes
        self.max_queued = max_queued
        self.per_client = per_client
        self.max_run_bytes = max_run_bytes if max_run_bytes is not None else cache_bytes // 4
        self.max_run_s = max_run_s
        self.abandon_grace_s = abandon_grace_s
        self.keep = keep
        self._cache: OrderedDict[str, Run] = OrderedDict()
        self._counted: dict[str, int] = {}  # cached key -> the bytes of its run counted in cached_bytes
        self.cached_bytes = 0
        self._too_large: dict[str, tuple[Run, float]] = {}  # key -> (the stopped run, until when it answers)
        self._active: dict[str, Run] = {}  # waiting or running
        self._owner: dict[str, str | None] = {}  # active key -> the client that asked first
        self._queue: deque[tuple[str, BaseModel, Run]] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self.running: Run | None = None
        self._thread = threading.Thread(target=self._work, daemon=True, name="simulator")
        self._thread.start()

    def submit(self, name: str, params: BaseModel, client: str | None = None) -> Run:
        """The Run for these params: cached, already running, or newly queued."""
        key = run_key(name, params)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            if key in self._active:
                return self._active[key]
            stopped, until = self._too_large.get(key, (None, 0.0))
            if stopped is not None and time.monotonic() < until:
                return stopped
            keep = self.keep(key)
            if not keep and client is not None and self.per_client:
                own = sum(1 for k, owner in self._owner.items() if owner == client)
                if own >= self.per_client:
                    raise TooManyRuns(f"you already have {own} runs waiting or running; "
                                      f"close one (or wait for it) first")
            if len(self._queue) >= self.max_queued:
                raise Overloaded(f"{self.max_queued} runs are already waiting")
            run = new_run(name, params, self.pool.backend)
            if not keep:
                run.on_abandoned = self._abandoned
            self._queue.append((key, params, run))
            self._active[key] = run
            self._owner[key] = None if keep else client
            self._changed.notify()
            return run

    def peek(self, name: str, params: BaseModel) -> Run | None:
        """The cached or running Run for these params, if there is one; starts nothing (a page that shows a
        run's first frame at once asks this, so that loading the page costs no run)."""
        key = run_key(name, params)
        with self._lock:
            return self._cache.get(key) or self._active.get(key)

    def cancel(self, run: Run, reason: str = CANCELLED) -> None:
        """Drop the run if it waits; stop it at its next frame boundary if it runs."""
        with self._lock:
            for item in self._queue:
                if item[2] is run:
                    self._queue.remove(item)
                    self._forget(item[0])
                    run.finish(error=reason)
                    return
        run.stop.set(reason)

    def _abandoned(self, run: Run) -> None:
        def check() -> None:
            if run.viewers == 0 and not run.done:
                log.info("cancelling %s: no one is watching", run.meta.scenario)
                self.cancel(run)

        timer = threading.Timer(self.abandon_grace_s, check)
        timer.daemon = True
        timer.start()

    def _forget(self, key: str) -> None:
        self._active.pop(key, None)
        self._owner.pop(key, None)

    def cached(self) -> list[Run]:
        with self._lock:
            return list(self._cache.values())

    def close(self, reason: str = "the server is shutting down") -> None:
        with self._lock:
            self._closed = True
            waiting, self._queue = list(self._queue), deque()
            running = self.running
            self._changed.notify()
        for _key, _params, run in waiting:
            run.finish(error=reason)
        if running is not None:
            running.stop.set(reason)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                key, params, run = self._queue.popleft()
                self.running = run
            execute(self.pool, run, params, max_run_s=self.max_run_s, max_run_bytes=self.max_run_bytes)
            with self._lock:
                self.running = None
                self._forget(key)
                if run.error is not None and run.error.startswith(TOO_LARGE):
                    self._too_large = {k: v for k, v in self._too_large.items() if v[1] > time.monotonic()}
                    self._too_large[key] = (_error_only(run), time.monotonic() + TOO_LARGE_TTL_S)
                if run.error is None and run.nbytes <= self.cache_bytes:
                    # Told of growth before its size is read: a form made meanwhile is counted once.
                    run.on_resized = lambda grown, key=key: self._resized(key, grown)
                    self._cache[key] = run
                    self._counted[key] = run.nbytes
                    self.cached_bytes += run.nbytes
                    self._evict()

    def _resized(self, key: str, run: Run) -> None:
        """A cached run grew (a compressed form was kept with it): count it, and let old runs go if need be."""
        with self._lock:
            if self._cache.get(key) is not run:
                return
            self.cached_bytes += run.nbytes - self._counted[key]
            self._counted[key] = run.nbytes
            self._evict()

    def _evict(self) -> None:
        """Least recently used runs out until the cache is within its bound (call with the lock held)."""
        while self.cached_bytes > self.cache_bytes and self._cache:
            key, old = self._cache.popitem(last=False)
            self.cached_bytes -= self._counted.pop(key)
            old.on_resized = None


def _error_only(run: Run) -> Run:
    """A finished copy of a failed run without its frames: what a retry is answered with."""
    copy = Run(run.meta)
    copy.finish(error=run.error)
    return copy


def new_run(name: str, params: BaseModel, backend: str) -> Run:
    scenario = scenarios.get(name)
    return Run(Meta(scenario=name, title=scenario.title, params=params.model_dump(mode="json"),
                    world_size=scenario.world_size(params), backend=backend, views=scenario.views,
                    cores=len(os.sched_getaffinity(0)) if backend == "gloo" else None))


def execute(pool: RankPool, run: Run, params: BaseModel, traced: bool = True,
            on_fragment: Callable[[Run], None] | None = None, max_run_s: float | None = None,
            max_run_bytes: int | None = None) -> Run:
    """Run on the pool, streaming frames into `run`; finish it with the summary or a one-line error.
    `on_fragment(run)`, if given, is called after each fragment lands (a progress bar follows it).
    Past `max_run_s` seconds or `max_run_bytes` bytes of events, the run is stopped as too large."""
    scenario = scenarios.get(run.meta.scenario)

    def add_fragment(fragment: dict) -> None:
        run.add_fragment(fragment)
        if max_run_bytes is not None and run.nbytes > max_run_bytes:
            run.stop.set(f"{TOO_LARGE}: more than {max_run_bytes / 2**20:.0f} MiB of frames "
                         f"(fewer steps, a smaller model or fewer ranks will do)")
        if on_fragment is not None:
            on_fragment(run)

    if run.stop.is_set():
        run.finish(error=run.stop.reason)
        return run
    try:
        results = pool.run(run.meta.scenario, params.model_dump(mode="json"), run.meta.world_size,
                           add_fragment, traced=traced, stop=run.stop, max_run_s=max_run_s)
        summary = scenario.summarize(params, results, run.frames)
        run.meta.provenance = provenance(pool.backend, results)  # for its run file (`simulate --out`, export)
        summary.timings.setdefault("run_s", max(r["_run_s"] for r in results))
        summary.timings["first_frame_s"] = (run.first_frame_at or time.perf_counter()) - run.submitted_at
        run.finish(summary=summary)
    except RunFailed as exc:
        run.finish(error=str(exc))
    except Exception as exc:  # noqa: BLE001 - the client gets a sentence, the log gets the traceback
        log.exception("run %s failed", run.meta.scenario)
        run.finish(error=f"{type(exc).__name__}: {exc}")
    return run


def simulate(pool: RankPool, name: str, params: BaseModel | dict, traced: bool = True) -> Run:
    """One run, start to finish, in this thread: for the CLI, the export, tests and benchmarks."""
    scenario = scenarios.get(name)
    params = params if isinstance(params, BaseModel) else scenario.params.model_validate(params)
    return execute(pool, new_run(name, params, pool.backend), params, traced)
