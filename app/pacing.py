"""Pacing: a time budget for every slide, from what the presenter says and what the audience waits for.

    budget = notes' words at WORDS_PER_MINUTE
           + SECONDS_PER_STEP for every press that stays on the slide (a static slide's steps, a live run's)
           + PREDICTION_PAUSE_S for each "predict, then run" question

A track's budgets add up to its slot (tests/unit/test_tracks.py holds each within 15 %); the
speaker window compares the clock with them (static/js/deck/speaker.js).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from app.slides import Deck

# Tauroza & Allison, "Speech rates in British English", Applied Linguistics 11(1):90-105 (1990):
# 125-160 words per minute is an average rate across lectures, interviews and radio; a talk read
# from notes sits in the middle of it.
WORDS_PER_MINUTE = 140
# A press that stays on the slide: the step's animation plays for up to 2.4 s (STEP_PLAY_MS in
# static/js/player/player.js), then the audience reads what changed. An assumption, stated here.
SECONDS_PER_STEP = 5
# A live run is cut into 16 to 20 steps (SPLIT_TARGET and MAX_STEPS in static/js/player/player.js;
# a run of few frames has fewer): budgeted at 16 presses, the first of them landing on the slide.
LIVE_RUN_STEPS = 16
# A "predict, then run" question: read it, let the room pick, then run.
PREDICTION_PAUSE_S = 30

NOTES = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
TAG = re.compile(r"<[^>]+>")


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


def slide_budget(static_steps: int, slide_html: str) -> Budget:
    live = 'class="live-sim"' in slide_html
    steps = max(static_steps, LIVE_RUN_STEPS if live else 1)
    questions = slide_html.count('class="predict"')
    words = notes_words(slide_html)
    seconds = words * 60 / WORDS_PER_MINUTE + (steps - 1) * SECONDS_PER_STEP + questions * PREDICTION_PAUSE_S
    return Budget(words, steps, questions, round(seconds, 1))


def budgets(deck: Deck, slides_html: list[str]) -> dict[str, Budget]:
    """Each slide's budget, by id, from its rendered markup (deck order, as render_slides gives it)."""
    return {slide.id: slide_budget(slide.steps, html) for slide, html in zip(deck.slides, slides_html, strict=True)}
