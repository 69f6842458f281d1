"""Pacing: a time budget for every slide, from what the presenter says and what the audience waits for.

    budget = notes' words at WORDS_PER_MINUTE
           + SECONDS_PER_STEP for every press that stays on the slide (a static slide's steps, a live run's)
           + PREDICTION_PAUSE_S for each "predict, then run" question

A track's talk slides (all but its backup slides) are budgeted at about 90 % of its slot, room for a question
and one live tweak (tests/unit/test_tracks.py holds each between 80 % and 95 %); the speaker window compares the
clock with them (static/js/deck/speaker.js). A track with short notes is budgeted on the notes its page shows.

A live slide's steps are the presses its default run takes in the player: the run's frames grouped
by `group_frames`, the player's own rule (groupFrames in static/js/player/player.js, which is
authoritative; tests/browser/test_tracks_in_the_browser.py checks that the two agree). The frames'
phases come from real runs, recorded in slides/live_steps.json with each scenario's source hash;
after changing a live slide or a scenario, record them again (a few minutes, on the warm pool); it then
prints each track's total against its slot:

    .venv/bin/python -m app.content.pacing

Owns: the budget model and its constants, and recording the live slides' phases. Imports app.content's
manifest, markup, live and steps modules (and, to record, app.settings and simulations.runtime).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from app.content.live import default_runs, run_id, source_hash
from app.content.manifest import Deck, load_deck
from app.content.markup import jinja_env, render_slides
from app.content.steps import MAX_STEPS, compress, expand, group_frames
from simulations import scenarios

# Tauroza & Allison, "Speech rates in British English", Applied Linguistics 11(1):90-105 (1990):
# 125-160 words per minute is an average rate across lectures, interviews and radio; a talk read
# from notes sits in the middle of it.
WORDS_PER_MINUTE = 140
# A press that stays on the slide: the step's animation plays for up to 2.4 s (STEP_PLAY_MS in
# static/js/player/player.js), then the audience reads what changed. An assumption, stated here.
SECONDS_PER_STEP = 5
# The recorded phases of every live slide's default run (module docstring: how to record them again).
LIVE_STEPS_FILE = Path(__file__).resolve().parents[2] / "slides" / "live_steps.json"
# A "predict, then run" question: read it, let the room pick, then run.
PREDICTION_PAUSE_S = 30

NOTES = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
TAG = re.compile(r"<[^>]+>")


@lru_cache(maxsize=1)
def recorded_phases() -> dict[str, dict[str, Any]]:
    """slides/live_steps.json's runs by run id (app.content.live.run_id): scenario, params, source hash, phases."""
    try:
        return json.loads(LIVE_STEPS_FILE.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return {}


def run_key(scenario: str, params: dict[str, Any]) -> str:
    return run_id(scenario, scenarios.get(scenario).params.model_validate(params))


def live_steps(slide_html: str) -> int | None:
    """Presses the slide's live run takes in the player at its default parameters (the most of its players,
    which step together), from the recorded phases; None if the slide has no live run. A run not recorded
    counts MAX_STEPS, the most the player allows (tests/unit/test_tracks.py requires every one recorded)."""
    runs = default_runs(slide_html)
    if not runs:
        return None
    budget = MAX_STEPS - (1 if 'class="predict"' in slide_html else 0)
    recorded = recorded_phases()
    counts = []
    for scenario, params in runs:
        entry = recorded.get(run_key(scenario, params))
        counts.append(len(group_frames(expand(entry["phases"]), budget)) if entry else budget)
    return max(counts)


@dataclass(frozen=True)
class Budget:
    words: int  # in the slide's speaker notes
    steps: int  # presses that stay on the slide, plus the one that lands on it
    questions: int  # "predict, then run" questions
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def notes_words(slide_html: str) -> int:
    return sum(len(TAG.sub(" ", notes).split()) for notes in NOTES.findall(slide_html))


@lru_cache(maxsize=512)
def slide_budget(static_steps: int, slide_html: str) -> Budget:
    live = live_steps(slide_html)
    # A predict question is a press of its own before the run (the slide's static steps count it).
    steps = max(static_steps, (live or 0) + (1 if live and 'class="predict"' in slide_html else 0), 1)
    questions = slide_html.count('class="predict"')
    words = notes_words(slide_html)
    seconds = words * 60 / WORDS_PER_MINUTE + (steps - 1) * SECONDS_PER_STEP + questions * PREDICTION_PAUSE_S
    return Budget(words, steps, questions, round(seconds, 1))


def budgets(deck: Deck, slides_html: list[str]) -> dict[str, Budget]:
    """Each slide's budget, by id, from its rendered markup (deck order, as render_slides gives it)."""
    return {slide.id: slide_budget(slide.steps, html) for slide, html in zip(deck.slides, slides_html, strict=True)}


def record(out: Path = LIVE_STEPS_FILE, log=print) -> dict[str, dict[str, Any]]:
    """Run every live slide's default run on a warm pool and write its frames' phases to `out`; a run whose
    scenario's source is unchanged since it was recorded is kept. Raises RuntimeError if a run fails."""
    from app.settings import Settings
    from simulations.runtime import RankPool, simulate

    settings = Settings()
    slides_dir = Path(settings.slides_dir).resolve()
    deck = load_deck(slides_dir)
    wanted: dict[str, tuple[str, dict[str, Any], list[str]]] = {}
    for slide, html in zip(deck.slides, render_slides(deck, jinja_env(slides_dir)), strict=True):
        for scenario, params in default_runs(html):
            wanted.setdefault(run_key(scenario, params), (scenario, params, []))[2].append(slide.id)
    previous = recorded_phases() if out == LIVE_STEPS_FILE else {}
    hashes = {scenario: source_hash(scenario) for scenario, _, _ in wanted.values()}
    runs: dict[str, dict[str, Any]] = {}
    pool = None
    try:
        for key, (scenario, params, slides) in sorted(wanted.items(), key=lambda kv: kv[1][2]):
            old = previous.get(key)
            if old and old["source_hash"] == hashes[scenario]:
                runs[key] = {**old, "slides": slides}
                continue
            if pool is None:
                pool = RankPool(size=settings.pool_size, backend=settings.backend,
                                job_timeout_s=settings.job_timeout_s)
                pool.start(background=False)
            run = simulate(pool, scenario, params)
            if run.error is not None or not run.summary.passed:
                raise RuntimeError(f"{scenario} on {', '.join(slides)}: the run "
                                   f"{'failed: ' + str(run.error) if run.error else 'failed its checks'}")
            phases = [frame.phase for frame in run.frames]
            runs[key] = {"scenario": scenario, "params": params, "slides": slides, "source_hash": hashes[scenario],
                         "frames": len(phases), "phases": compress(phases)}
            log(f"{scenario} ({', '.join(slides)}): {len(phases)} frames, {len(group_frames(phases))} steps")
    finally:
        if pool is not None:
            pool.close()
    about = ("Each live slide's default run: its frames' phases, recorded by `python -m app.content.pacing` "
             "(app/content/pacing.py) for the slides' time budgets.")
    lines = [f"  {json.dumps(key)}: {json.dumps(runs[key], ensure_ascii=False)}" for key in sorted(runs)]
    out.write_text(f'{{\n "about": {json.dumps(about)},\n "runs": {{\n' + ",\n".join(lines) + "\n }\n}\n")
    recorded_phases.cache_clear()
    slide_budget.cache_clear()
    return runs


def track_minutes(slides_dir: Path) -> dict[str, tuple[float, int]]:
    """Each track's talk (its backup slides left out) in budgeted minutes, with its slot's minutes."""
    deck = load_deck(slides_dir)
    totals = {}
    for track in deck.tracks:
        track_deck = deck.for_track(track.name)
        track_budgets = budgets(track_deck, render_slides(track_deck, jinja_env(slides_dir)))
        totals[track.name] = (sum(track_budgets[i].seconds for i in track.talk_slides) / 60, track.minutes)
    return totals


if __name__ == "__main__":
    from app.settings import Settings

    record()
    for name, (minutes, slot) in track_minutes(Path(Settings().slides_dir).resolve()).items():
        print(f"track {name}: {minutes:.1f} min budgeted for a {slot}-minute slot ({100 * minutes / slot:.0f} %)")
