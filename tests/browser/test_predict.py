""""Predict, then run" in real headless Chromium: a live slide asks first, the next press reveals the
run, and the answer shown is the one the run's own summary gives (static/js/deck/predict.js)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.content.manifest import load_deck

pytestmark = pytest.mark.browser

DECK = load_deck(Path(__file__).resolve().parents[2] / "slides")
IDS = [slide.id for slide in DECK.slides]
SLIDE = "pp-gpipe"  # GPipe, p = 4, m = 8: "how many micro-batches' activations does rank 0 hold?"
RUN_TIMEOUT_MS = 180_000  # a cold pool of 4 ranks on a loaded 2-core machine


def position(page) -> dict:
    return page.evaluate("() => { const p = window.distdeck.position(); return {id: p.id, step: p.step, stepCount: p.stepCount}; }")


def open_before(page, deck_url: str, slide: str) -> None:
    """Open the deck on the slide before `slide` and press → onto it, as a presenter arrives."""
    page.emulate_media(reduced_motion="reduce")
    page.goto(f"{deck_url}/#/{IDS[IDS.index(slide) - 1]}/0")
    page.wait_for_selector("html.deck-ready")
    page.locator("#deck").focus()
    while position(page)["id"] != slide:
        page.keyboard.press("ArrowRight")


def test_answer_a_prediction_and_the_reveal_shows_the_runs_value(page, deck_url):
    if SLIDE not in IDS:
        pytest.skip(f"no {SLIDE} slide")
    open_before(page, deck_url, SLIDE)
    box = page.locator(f"#{SLIDE} .predict")
    # Step 0 is the question: the run is on the slide but hidden, and one step more than its frames.
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictState === 'asking'", arg=SLIDE)
    assert box.is_visible() and not page.locator(f"#{SLIDE} .live-sim").is_visible()
    assert position(page)["step"] == 0
    spec = json.loads(box.get_attribute("data-predict"))
    assert 2 <= len(spec["choices"]) <= 4
    assert box.get_attribute("data-answer") is None, "the correct choice is not in the markup before the run"

    box.locator(".predict-choice").nth(1).click()  # the audience answers B
    assert box.locator(".predict-choice").nth(1).get_attribute("aria-pressed") == "true"
    page.locator("#deck").focus()
    page.keyboard.press("ArrowRight")

    # The next press reveals the run, at its first frame; the answer comes with the run's summary.
    assert position(page)["step"] == 1
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictState === 'revealed'", arg=SLIDE)
    assert page.locator(f"#{SLIDE} .live-sim").is_visible()
    page.wait_for_function("(id) => document.querySelector(`#${id} .predict`).dataset.answer !== undefined",
                           arg=SLIDE, timeout=RUN_TIMEOUT_MS)
    summary = page.evaluate("(id) => window.distdeck.players.find(p => p.slide.id === id).summary", SLIDE)
    measured = summary["figures"]["peak_in_flight"][0]  # read from the run, here, independently of predict.js
    values = [float(c["value"]) for c in spec["choices"]]
    nearest = min(range(len(values)), key=lambda i: abs(values[i] - measured))
    letter = "ABCD"[nearest]
    assert box.get_attribute("data-answer") == letter
    answer = box.locator(".predict-answer").text_content()
    short = spec["choices"][nearest]["label"].split(",")[0]
    assert f"The run: {measured} → {letter}, {short}" in answer
    assert ("as predicted" in answer) == (nearest == 1)
    assert "summary: figures.peak_in_flight.0" in answer  # it says where on the run it read the value
    assert "predict-correct" in box.locator(".predict-choice").nth(nearest).get_attribute("class")
    # → goes on through the run's frames, ← back to the question.
    page.keyboard.press("ArrowRight")
    assert position(page)["step"] == 2
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert position(page)["step"] == 0
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictState === 'asking'", arg=SLIDE)


@pytest.mark.parametrize("spec, summary, expected", [
    # nearest value; read ÷ per
    ({"read": "figures.x", "per": "figures.g", "pick": "nearest", "choices": [{"value": 0.75}, {"value": 1.5}, {"value": 3}]},
     {"figures": {"x": 780, "g": 520}}, 1),
    # argmax of a list, and of an object; a tie across every entry is "all"
    ({"read": "figures.w", "pick": "argmax", "choices": [{"value": 0}, {"value": 7}, {"value": "all"}]},
     {"figures": {"w": [1, 2, 3, 4, 5, 6, 7, 8]}}, 1),
    ({"read": "figures.w", "pick": "argmax", "choices": [{"value": 0}, {"value": 7}, {"value": "all"}]},
     {"figures": {"w": [4, 4, 4, 4]}}, 2),
    ({"read": "figures.d", "pick": "argmax", "choices": [{"value": "tp"}, {"value": "pp"}, {"value": "dp"}]},
     {"figures": {"d": {"dp": 9, "pp": 1, "tp": 3}}}, 2),
    # compare: the sign of read/per − 1
    ({"read": "figures.last", "per": "figures.first", "pick": "compare", "choices": [{"value": -1}, {"value": 0}, {"value": 1}]},
     {"figures": {"first": 0.37, "last": 0.15}}, 0),
    # a value the summary does not have: no answer
    ({"read": "figures.missing", "pick": "nearest", "choices": [{"value": 1}, {"value": 2}]}, {"figures": {}}, None),
])
def test_the_correct_choice_is_the_one_the_run_picks(page, deck_url, spec, summary, expected):
    page.goto(f"{deck_url}/#/{SLIDE}/0")
    page.wait_for_selector("html.deck-ready")
    got = page.evaluate("""async ([spec, summary]) => {
        const { answerOf } = await import('/static/js/deck/predict.js');
        const answer = answerOf(spec, summary);
        return answer ? answer.index : null; }""", [spec, summary])
    assert got == expected


def test_a_question_about_the_cluster_is_answered_from_the_projection(page, deck_url):
    """on-a-cluster asks about the H100 nodes, not the CPU run: its answer is the estimator's bubble for the
    run's replay (GET /api/estimate/replay, fetched here on its own), not the run's timetable slots."""
    slide = "on-a-cluster"
    if slide not in IDS:
        pytest.skip(f"no {slide} slide")
    open_before(page, deck_url, slide)
    box = page.locator(f"#{slide} .predict")
    spec = json.loads(box.get_attribute("data-predict"))
    assert spec["source"] == "projection" and spec["read"] == "bubble_fraction"
    page.locator("#deck").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(id) => document.querySelector(`#${id} .predict`).dataset.answer !== undefined",
                           arg=slide, timeout=RUN_TIMEOUT_MS)
    params = page.evaluate("(id) => { const p = window.distdeck.players.find(p => p.slide.id === id);"
                           " return p.meta?.params ?? p.params; }", slide)
    projected = page.evaluate("""async (params) => {
        const q = new URLSearchParams({ scenario: 'pipeline', model: 'llama3-70b', gpu: 'h100-80gb' });
        for (const [k, v] of Object.entries(params)) if (k !== 'seed' && v != null) q.set(k, String(v));
        return (await (await fetch(`/api/estimate/replay?${q}`)).json()); }""", params)
    bubble = projected["bubble_fraction"]
    values = [float(c["value"]) for c in spec["choices"]]
    nearest = min(range(len(values)), key=lambda i: abs(values[i] - bubble) / max(abs(values[i]), bubble))
    assert box.get_attribute("data-answer") == "ABCD"[nearest]
    answer = box.locator(".predict-answer").text_content()
    assert answer.startswith(f"The modelled cluster: {100 * bubble:.1f}%"), answer
    assert page.locator(f"#{slide} .predict-why").is_visible()
