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


def frame_on_screen(page, slide: str) -> int:
    return int(page.evaluate("(id) => Number(document.querySelector(`#${id} .live-sim`).dataset.frame)", slide))


def test_answer_a_prediction_and_the_run_answers_it_when_it_shows_it(page, deck_url):
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

    page.keyboard.press("b")  # the room votes B, recorded from the keyboard (a clicker's key)
    assert box.locator(".predict-choice").nth(1).get_attribute("aria-pressed") == "true"
    assert box.get_attribute("data-picked") == "B"
    assert not page.evaluate("() => window.distdeck.reveal.isPaused()"), "B voted; it did not black the screen"
    page.keyboard.press("ArrowRight")

    # The next press reveals the run at its first frame: not the answer, which the run has not shown yet.
    assert position(page)["step"] == 1
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictState === 'revealed'", arg=SLIDE)
    assert page.locator(f"#{SLIDE} .live-sim").is_visible()
    page.wait_for_function("(id) => document.querySelector(`#${id} .live-sim`).dataset.status === 'done'",
                           arg=SLIDE, timeout=RUN_TIMEOUT_MS)
    summary = page.evaluate("(id) => window.distdeck.players.find(p => p.slide.id === id).summary", SLIDE)
    measured = summary["figures"]["peak_in_flight"][0]  # read from the run, here, independently of predict.js
    # The frame that shows it: the first at which rank 0 holds that many micro-batches.
    held = page.evaluate("(id) => window.distdeck.players.find(p => p.slide.id === id).frames"
                         ".map(f => f.ranks[0].extra.in_flight ?? 0)", SLIDE)
    shows = held.index(measured)
    assert 0 < shows < len(held) - 1, "the run shows the answer mid-run"

    def answered() -> bool:
        return page.evaluate("(id) => document.getElementById(id).dataset.predictAnswer === 'shown'", SLIDE)

    while frame_on_screen(page, SLIDE) < shows:
        assert not answered() and box.get_attribute("data-answer") is None, f"answered at frame {frame_on_screen(page, SLIDE)}"
        assert not page.locator(f"#{SLIDE} .predict-why").is_visible()
        assert "predicted B" in box.locator(".predict-answer").text_content()
        page.keyboard.press("ArrowRight")
    page.wait_for_function("(id) => document.querySelector(`#${id} .predict`).dataset.answer !== undefined", arg=SLIDE)
    assert answered() and page.locator(f"#{SLIDE} .predict-why").is_visible()
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
    # ← back before that frame hides the answer again; back to the question, and A–D vote again.
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictAnswer === 'pending'", arg=SLIDE)
    while position(page)["step"] > 0:
        page.keyboard.press("ArrowLeft")
    page.wait_for_function("(id) => document.getElementById(id).dataset.predictState === 'asking'", arg=SLIDE)
    page.keyboard.press("c")
    assert box.get_attribute("data-picked") == "C"


def overlaps(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


def test_the_answer_never_covers_the_runs_controls_or_views_and_one_counter_is_shown(page, deck_url):
    """pp-1f1b: its answer (a reason that wraps) once covered "time on" and "every frame"; and the top bar's step,
    the player's frame and the pipeline view's slot counted the same thing three ways."""
    slide = "pp-1f1b"
    if slide not in IDS:
        pytest.skip(f"no {slide} slide")
    page.set_viewport_size({"width": 1280, "height": 720})
    open_before(page, deck_url, slide)
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(id) => document.querySelector(`#${id} .live-sim`).dataset.status === 'done'",
                           arg=slide, timeout=RUN_TIMEOUT_MS)
    count = position(page)["stepCount"]
    box = page.locator(f"#{slide} .predict")
    for step in (1, count // 2, count - 1):
        while position(page)["step"] < step:
            page.keyboard.press("ArrowRight")
        answer = box.bounding_box()
        assert answer and answer["height"] > 0
        for part in (".sim-header", ".sim-controls label", ".sim-header-right > *:not([hidden])", ".sim-views", ".sim-caption"):
            for element in page.locator(f"#{slide} {part}").all():
                other = element.bounding_box()
                if other and other["width"] and other["height"]:
                    assert not overlaps(answer, other), f"step {step}: the answer box covers {part}"
        # The answer's own line is one line (its reason may wrap beside or under it as a sentence).
        line = box.locator(".predict-answer").bounding_box()
        assert line["height"] < 2 * 20, f"step {step}: the answer wraps"
        counters = page.evaluate(r"""() => {
            const seen = [];
            const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            for (let n = walker.nextNode(); n; n = walker.nextNode()) {
              const el = n.parentElement;
              const r = el.getBoundingClientRect();
              if (!r.width || !r.height || getComputedStyle(el).visibility === 'hidden' || !el.checkVisibility()) continue;
              if (r.bottom < 0 || r.top > innerHeight || r.right < 0 || r.left > innerWidth) continue;
              for (const m of n.textContent.matchAll(/\b(step|frame|slot)\s+\d+\s*\/\s*\d+/gi)) seen.push(m[0]);
            }
            return seen; }""")
        assert counters == [f"Step {step + 1}/{count}"], counters
    assert box.get_attribute("data-answer") is not None, "the last step has shown the answer"


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


FRAMES = [
    {"phase": "shard", "ranks": [{"extra": {}}]},
    {"phase": "slot", "ranks": [{"extra": {"in_flight": 1}}]},
    {"phase": "slot", "ranks": [{"extra": {"in_flight": 2}}]},
    {"phase": "backward_done", "ranks": [{"extra": {"in_flight": 2}}]},
    {"phase": "done", "ranks": [{"extra": {}}]},
]


@pytest.mark.parametrize("at, source, expected", [
    ({"phase": "backward_done"}, "summary", 3),  # the first frame of a phase
    ({"frame": "ranks.0.extra.in_flight", "reaches": "figures.peak.0"}, "summary", 2),  # a value reaching the summary's
    (None, "summary", 4),  # no predicate: the run's last frame
    (None, "projection", 0),  # the modelled cluster is drawn whole from the first frame
    ({"phase": "not_in_this_run"}, "summary", 4),  # other parameters, no such frame: the last
])
def test_the_frame_that_shows_the_answer_is_read_off_the_frames(page, deck_url, at, source, expected):
    page.goto(f"{deck_url}/#/{SLIDE}/0")
    page.wait_for_selector("html.deck-ready")
    got = page.evaluate("""async ([at, frames, source]) => {
        const { answerFrame } = await import('/static/js/deck/predict.js');
        return answerFrame(at, frames, { figures: { peak: [2] } }, source); }""", [at, FRAMES, source])
    assert got == expected


def test_the_speaker_view_shows_the_question_the_vote_and_starts_on_time_after_a_deep_link(page, deck_url):
    """At 1280×720: the question and its choices in the notes (not the run's first caption), the vote A–D records,
    the notes above the fold, the "Upcoming" label off the preview, and a clock that starts on plan at a deep link."""
    if SLIDE not in IDS or IDS.index(SLIDE) < 10:
        pytest.skip(f"no {SLIDE} slide far enough into the deck")
    page.set_viewport_size({"width": 1280, "height": 720})
    page.emulate_media(reduced_motion="reduce")
    page.goto(f"{deck_url}/#/{SLIDE}/0")  # a deep link, many minutes of plan into the talk
    page.wait_for_selector("html.deck-ready")
    page.locator("#deck").focus()
    with page.context.expect_page() as opened:
        page.keyboard.press("s")
    speaker = opened.value
    speaker.set_viewport_size({"width": 1280, "height": 720})
    speaker.wait_for_function("() => document.querySelectorAll('#current-slide iframe, #upcoming-slide iframe').length === 2")
    question = page.locator(f"#{SLIDE} .predict-question").text_content().strip()
    notes = ".speaker-controls-notes .value"
    speaker.wait_for_function("([sel, q]) => document.querySelector(sel)?.innerText.includes(q)", arg=[notes, question])
    text = speaker.locator(notes).inner_text()
    assert "No vote yet" in text
    for label in json.loads(page.locator(f"#{SLIDE} .predict").get_attribute("data-predict"))["choices"]:
        assert label["label"] in text

    page.bring_to_front()
    page.locator("#deck").focus()
    page.keyboard.press("c")  # the room's vote, from the presenter's keyboard
    speaker.wait_for_function("(sel) => document.querySelector(sel).innerText.includes(\"Room's vote: C\")", arg=notes)

    # Layout at 1280×720: the notes' text starts above the fold, the labels sit off the previews.
    speaker.wait_for_selector("#distdeck-pacing")
    top = speaker.locator(notes).bounding_box()["y"]
    assert top < 720 - 4 * 24, f"the notes start at {top} px"
    label = speaker.locator("#upcoming-slide .label").bounding_box()
    frame = speaker.locator("#upcoming-slide iframe").bounding_box()
    assert label["y"] + label["height"] <= frame["y"] + 1, "the Upcoming label covers its preview's title"

    page.keyboard.press("ArrowRight")  # the first move starts the clock, on plan where the talk was opened
    speaker.wait_for_function("() => document.querySelector('#distdeck-pacing').dataset.kind !== 'waiting'")
    headline = speaker.locator("#distdeck-pacing .pacing-headline").text_content()
    assert headline == "On time", headline
    speaker.close()


@pytest.mark.parametrize("op, buffer, ranks", [("reduce_scatter", 5136, 4), ("all_gather", 1284, 4), ("all_reduce", 416, 4),
                                               ("all_to_all", 960, 3), ("reduce_scatter", 640, 2)])
def test_a_collective_is_labelled_with_the_bytes_a_rank_sends(page, deck_url, op, buffer, ranks):
    """The ranks view's label of a collective: what a rank sends in a ring, from the buffer the trace recorded
    (zero1-live's reduce-scatter once read as its whole buffer), the same as simulations.formulas."""
    from simulations import formulas

    page.goto(f"{deck_url}/#/{SLIDE}/0")
    page.wait_for_selector("html.deck-ready")
    sent = page.evaluate("""async ([op, buffer, ranks]) => {
        const { sentPerRank } = await import('/static/js/player/views/ranks.js');
        return sentPerRank(op, buffer, ranks).sent; }""", [op, buffer, ranks])
    assert sent == pytest.approx(formulas.collective_sent_bytes(op, buffer, ranks), rel=1e-12)


def test_rank_boxes_are_as_tall_as_what_the_ranks_hold(page, deck_url):
    """ddp-live's ranks held one line each in boxes 60 % of the slide tall: a box is as tall as its frame's
    fullest rank needs, and no taller than the pane."""
    page.goto(f"{deck_url}/#/{SLIDE}/0")
    page.wait_for_selector("html.deck-ready")
    heights = page.evaluate("""async () => {
        if (!window.d3) await new Promise((ok) => { const s = document.createElement('script');
          s.src = '/static/vendor/d3/d3.min.js'; s.onload = ok; document.head.append(s); });
        const { render } = await import('/static/js/player/views/ranks.js');
        const tensor = (i) => ({ name: `bucket${i}`, role: 'gradients', shape: [104], bytes: 416, values: null });
        const frame = (rows) => ({ index: 0, caption: '', transfers: [],
          ranks: [0, 1, 2, 3].map((rank) => ({ rank, tensors: Array.from({ length: rows }, (_, i) => tensor(i)) })) });
        const height = (rows) => {
          const svg = window.d3.select(document.body).append('svg');
          render(svg, { frame: frame(rows), meta: null, size: { width: 1000, height: 500 } });
          const h = Number(svg.select('rect.rank-box').attr('height'));
          svg.remove();
          return h;
        };
        return [height(1), height(3), height(40)]; }""")
    one, three, many = heights
    assert one < 0.25 * 500 and one < three < many <= 500, heights
