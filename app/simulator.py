"""The simulator's life inside the server: started with the app, closed with it.

Owns: the app's lifespan (pool, Simulator, recorded runs), DeckRuns (the talk's own runs, kept running when
no one watches). Imports app.content (the runs the talk asks for), app.settings and simulations.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from app.content.runs import plan_runs
from app.content.talk import load_talk
from app.settings import Settings
from simulations import scenarios
from simulations.frames import RunFile
from simulations.runtime import RankPool, Run, Simulator
from simulations.runtime.runs import run_key

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


class DeckRuns:
    """The runs worth finishing when no one watches: every run the deck's slides and widgets start by
    default (what the export records), and each scenario's defaults. Read from the slides on first use."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._keys = {run_key(name, s.params()) for name, s in scenarios.all_scenarios().items()}

    def load(self) -> None:
        """Add the slides' runs (renders the deck: call it off the event loop)."""
        self._keys = self._keys | self._read()

    def __call__(self, key: str) -> bool:
        return key in self._keys  # never blocks: until load() is done, the scenario defaults only

    def _read(self) -> set[str]:
        keys: set[str] = set()
        try:
            talk = load_talk(self.settings.slides_dir, self.settings.talk_file)
            wanted, _, _ = plan_runs(talk, "default", pool_size=8)  # (a run too large for the pool never starts)
            keys |= {run_key(w.scenario, w.params) for w in wanted}
        except Exception as exc:  # noqa: BLE001 - a deck that does not load still serves its runs
            log.warning("could not read the deck's runs (%s); keeping only scenario defaults", exc)
        return keys


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    owned = app.state.pool is None
    pool = app.state.pool or RankPool(size=settings.pool_size, backend=settings.backend,
                                      job_timeout_s=settings.job_timeout_s)
    if owned and settings.start_pool_on_startup:
        pool.start(background=True)  # serve the deck at once; the ranks join in the background
    deck_runs = DeckRuns(settings)
    threading.Thread(target=deck_runs.load, daemon=True, name="deck-runs").start()  # renders the slides once
    app.state.simulator = Simulator(
        pool, cache_bytes=settings.cache_mb << 20, max_queued=settings.max_queued_runs,
        per_client=settings.runs_per_client, max_run_bytes=settings.max_run_mb << 20, max_run_s=settings.max_run_s,
        abandon_grace_s=settings.abandoned_run_grace_s, keep=deck_runs)
    app.state.recorded_runs = load_recorded_runs(settings.runs_dir)
    try:
        yield
    finally:
        app.state.simulator.close()
        if owned:
            pool.close()
