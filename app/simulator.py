"""The simulator's life inside the server: started with the app, closed with it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from app.settings import Settings
from simulations.frames import RunFile
from simulations.runtime import RankPool, Run, Simulator

log = logging.getLogger("distdeck")


def load_recorded_runs(directory: Path | None) -> dict[str, Run]:
    """Recorded run files (torchrun or export), by id = file stem. Unreadable files are skipped with a warning."""
    runs: dict[str, Run] = {}
    if directory is None:
        return runs
    for path in sorted(Path(directory).glob("*.json")):
        try:
            runs[path.stem] = Run.from_file(RunFile.model_validate_json(path.read_text()), f"recorded:{path.name}")
        except ValueError as exc:
            log.warning("skipping %s: not a distdeck run file (%s)", path, exc.__class__.__name__)
    return runs


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    owned = app.state.pool is None
    pool = app.state.pool or RankPool(size=settings.pool_size, backend=settings.backend,
                                      job_timeout_s=settings.job_timeout_s)
    if owned and settings.start_pool_on_startup:
        pool.start(background=True)  # serve the deck at once; the ranks join in the background
    app.state.simulator = Simulator(pool, cache_size=settings.cached_runs, max_queued=settings.max_queued_runs)
    app.state.recorded_runs = load_recorded_runs(settings.runs_dir)
    try:
        yield
    finally:
        app.state.simulator.close()
        if owned:
            pool.close()
