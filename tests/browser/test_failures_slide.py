"""The failure-and-restart slide in real headless Chromium at 1280×720, on a live run: it plays through in at
most 20 presses, its view reads from the back row (text ≥ 16 px, nothing overlapping or cut off) at the
first, middle and last step, and the last step shows what the run measured: the lost steps, the
checkpoints, the dead rank and the replayed steps."""

from __future__ import annotations

import pytest

from tests.browser.viewcheck import measure

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SLIDE = "failures-live"
SETTLED = "(id) => Array.from(document.querySelectorAll(`#${id} .live-sim`)).every(e => e.dataset.status === 'done')"


def test_the_failure_slide_plays_through_and_reads_from_the_back_row(browser, live_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, reduced_motion="reduce")
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{live_url}/#/{SLIDE}/0", wait_until="commit", timeout=90_000)
        page.wait_for_selector("html.deck-ready", timeout=90_000)
        page.wait_for_function(SETTLED, arg=SLIDE, timeout=180_000)
        count = page.evaluate("() => window.distdeck.position().stepCount")
        assert count <= 20  # the question's press included
        problems = []
        for step in (1, count // 2, count - 1):  # step 0 is the question
            page.evaluate("([id, k]) => { location.hash = `#/${id}/${k}`; }", [SLIDE, step])
            page.wait_for_function("(k) => window.distdeck.position().step === k", arg=step)
            page.wait_for_function("(id) => document.querySelector(`#${id} svg.sim-view .frame-layer text`)",
                                   arg=SLIDE, timeout=10_000)
            problems += [f"step {step}: {p}" for p in measure(page, SLIDE, step).problems()]
        assert problems == []
        view = page.locator(f"#{SLIDE} svg.sim-view")
        # Saves after steps 3, 6 and 9; rank 3 died in step 8: steps 7 and 8 lost, then replayed on 3 ranks.
        assert view.get_attribute("data-lost") == "2" and view.get_attribute("data-checkpoints") == "3"
        layer = f"#{SLIDE} svg.sim-view .frame-layer"
        assert page.locator(f"{layer} [data-key='step-1-8']").get_attribute("fill") == "var(--danger)"
        replayed = [page.locator(f"{layer} [data-key='step-2-{k}']").get_attribute("fill") for k in (7, 8, 9)]
        assert replayed == ["var(--accent-strong)", "var(--accent-strong)", "var(--accent)"]
        assert page.locator(f"{layer} [data-key='resume-label']").text_content() == "load step 6"
        assert page.locator(f"{layer} [data-key^='rank-']").count() == 4
        # the question's answer, in the run's own words: two steps, choice B
        answer = page.locator(f"#{SLIDE} .predict-answer").text_content()
        assert answer.startswith("The run: 2 steps → B, 2"), answer
        assert errors == []
    finally:
        context.close()


def test_a_press_animates_the_failure(browser, live_url):
    """From the last checkpoint before the failure to the failure: the step cells and the rank boxes move
    through pictures in between (d3 transitions keyed on step and rank), sampled on the page's paused clock."""
    context = browser.new_context(viewport={"width": 1280, "height": 720}, reduced_motion="no-preference")
    page = context.new_page()
    markup = "(id) => document.querySelector(`#${id} svg.sim-view`).innerHTML"
    try:
        page.clock.install()
        page.goto(f"{live_url}/#/{SLIDE}/0", wait_until="commit", timeout=90_000)
        page.wait_for_selector("html.deck-ready", timeout=90_000)
        page.wait_for_function(SETTLED, arg=SLIDE, timeout=180_000)
        frames = page.evaluate("(id) => window.distdeck.players.find(p => p.slide.id === id).frames.map(f => f.phase)", SLIDE)
        before = frames.index("failure")  # its step: the question is step 0, frame k is step k + 1
        page.evaluate("([id, k]) => { location.hash = `#/${id}/${k}`; }", [SLIDE, before])
        page.wait_for_function("(k) => window.distdeck.position().step === k", arg=before)
        page.clock.pause_at(page.evaluate("Date.now()") / 1000 + 1)
        page.clock.run_for(1_000)
        page.locator("#deck").focus()
        pictures = [page.evaluate(markup, SLIDE)]
        page.keyboard.press("ArrowRight")
        for ms in (0, 150, 150, 3_000):
            page.clock.run_for(ms)
            pictures.append(page.evaluate(markup, SLIDE))
        assert pictures[0] != pictures[-1], "the step changed nothing"
        assert len(set(pictures)) >= 3, "the failure appeared at once: no picture in between"
    finally:
        context.close()
