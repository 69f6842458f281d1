"""Runs on the pool, as the server sees them: one Run per distinct (scenario, params).

Identical requests share one Run, finished runs stay in a bounded LRU cache, and
distinct runs wait in a bounded queue; past it, `submit` raises Overloaded.
A Run is followed by any number of clients, each from any frame (SSE resume).
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable

from pydantic import BaseModel

from simulations import scenarios
from simulations.frames import Frame, Meta, RunFile, Summary
from simulations.runtime.pool import RankPool, RunFailed
from simulations.trace import merge_fragments

log = logging.getLogger("distdeck.runs")


class Overloaded(RuntimeError):
    """Too many distinct runs are waiting; try again shortly."""


def run_key(name: str, params: BaseModel) -> str:
    return name + "?" + json.dumps(params.model_dump(mode="json"), sort_keys=True)


class Run:
    """One run's events, appended by the producer thread, read by any number of async followers."""

    def __init__(self, meta: Meta):
        self.meta = meta
        self.frames: list[Frame] = []
        self.summary: Summary | None = None
        self.error: str | None = None
        self.done = False
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._pending: dict[int, list[dict]] = {}  # frame index -> fragments received so far
        self.first_frame_at: float | None = None
        self.submitted_at = time.perf_counter()

    @classmethod
    def from_file(cls, run_file: RunFile, source: str) -> Run:
        run = cls(run_file.meta.model_copy(update={"source": source}))
        run.frames = list(run_file.frames)
        run.summary = run_file.summary
        run.done = True
        return run

    def to_file(self) -> RunFile:
        assert self.summary is not None, "only a finished, successful run can be saved"
        return RunFile(meta=self.meta, frames=self.frames, summary=self.summary)

    # -- producer side (the pool's thread) ---------------------------------------------------------

    def add_fragment(self, fragment: dict) -> None:
        parts = self._pending.setdefault(fragment["index"], [])
        parts.append(fragment)
        # Frames complete in order because every rank marks the same points in the same order.
        while len(self._pending.get(len(self.frames), ())) == self.meta.world_size:
            frame = merge_fragments(self._pending.pop(len(self.frames)))
            with self._lock:
                if self.first_frame_at is None:
                    self.first_frame_at = time.perf_counter()
                self.frames.append(frame)
            self._wake()

    def finish(self, summary: Summary | None = None, error: str | None = None) -> None:
        with self._lock:
            self.summary, self.error, self.done = summary, error, True
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    # -- consumer side (SSE handlers) --------------------------------------------------------------

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[str, int | None, BaseModel | dict]]:
        """Yield ("meta", None, meta), ("frame", i, frame)... then ("summary", ...) and ("done", ...), or ("error", ...)."""
        loop = asyncio.get_running_loop()
        yield "meta", None, self.meta
        next_index = after + 1
        while True:
            event = asyncio.Event()
            with self._lock:
                fresh = self.frames[next_index:]
                finished = self.done
                if not fresh and not finished:
                    self._waiters.append((loop, event))
            for frame in fresh:
                yield "frame", frame.index, frame
            next_index += len(fresh)
            if fresh:
                continue
            if finished:
                break
            await event.wait()
        if self.error is not None:
            yield "error", None, {"message": self.error}
        else:
            yield "summary", None, self.summary
            yield "done", None, {"frames": len(self.frames)}

    async def wait(self) -> None:
        async for _ in self.follow(len(self.frames) - 1):
            pass


class Simulator:
    """The server's one door to the pool."""

    def __init__(self, pool: RankPool, cache_size: int = 64, max_queued: int = 8):
        self.pool = pool
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Run] = OrderedDict()
        self._active: dict[str, Run] = {}
        self._queue: queue.Queue[tuple[str, BaseModel, Run] | None] = queue.Queue(maxsize=max_queued)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, daemon=True, name="simulator")
        self._thread.start()

    def submit(self, name: str, params: BaseModel) -> Run:
        """The Run for these params: cached, already running, or newly queued."""
        key = run_key(name, params)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            if key in self._active:
                return self._active[key]
            run = new_run(name, params, self.pool.backend)
            try:
                self._queue.put_nowait((key, params, run))
            except queue.Full:
                raise Overloaded(f"{self._queue.maxsize} runs are already waiting") from None
            self._active[key] = run
            return run

    def close(self) -> None:
        self._queue.put(None)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            key, params, run = item
            execute(self.pool, run, params)
            with self._lock:
                self._active.pop(key, None)
                if run.error is None:
                    self._cache[key] = run
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)



def new_run(name: str, params: BaseModel, backend: str) -> Run:
    scenario = scenarios.get(name)
    return Run(Meta(scenario=name, title=scenario.title, params=params.model_dump(mode="json"),
                    world_size=scenario.world_size(params), backend=backend, views=scenario.views))


def execute(pool: RankPool, run: Run, params: BaseModel, traced: bool = True,
            on_fragment: Callable[[Run], None] | None = None) -> Run:
    """Run on the pool, streaming frames into `run`; finish it with the summary or a one-line error.
    `on_fragment(run)`, if given, is called after each fragment lands (a progress bar follows it)."""
    scenario = scenarios.get(run.meta.scenario)

    def add_fragment(fragment: dict) -> None:
        run.add_fragment(fragment)
        if on_fragment is not None:
            on_fragment(run)

    try:
        results = pool.run(run.meta.scenario, params.model_dump(mode="json"), run.meta.world_size,
                           add_fragment, traced=traced)
        summary = scenario.summarize(params, results, run.frames)
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
