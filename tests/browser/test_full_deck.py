"""The whole talk, start to end, pressing → through every slide and every step (every frame of
every live run): on the server, and on the static export served by a plain static file server
from a sub-folder. Neither may log a console error or fail a request. The PDF has a page per slide."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.content.manifest import load_deck

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DECK = load_deck(Path(__file__).resolve().parents[2] / "slides")
IDS = [slide.id for slide in DECK.slides]
# Generous: a live slide's run may queue behind the next slide's on a loaded 2-core machine.
STEP_TIMEOUT_MS = 90_000


@pytest.fixture
def watched(page):
    """The conftest's page (it fails on console errors), also failing on any failed request."""
    failed: list[str] = []

    def on_failed(request) -> None:
        # An EventSource the player closed after the run's `done` event is ours, not a failure.
        if request.resource_type == "eventsource" and "ERR_ABORTED" in (request.failure or ""):
            return
        failed.append(f"{request.url}: {request.failure}")

    page.on("requestfailed", on_failed)
    page.on("response", lambda r: failed.append(f"{r.url}: HTTP {r.status}") if r.status >= 400 else None)
    page.failed_requests = failed
    page.emulate_media(reduced_motion="reduce")  # no transitions: the walk is about content, not animation
    yield page
    assert failed == [], f"failed requests: {failed}"


def walk(page, url: str) -> dict[str, set[int]]:
    """Press → from the first slide to the last step of the last slide; return the steps seen per slide."""
    page.goto(url)
    page.wait_for_selector("html.deck-ready")
    page.locator("#deck").focus()
    seen: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    before = None
    for _ in range(20_000):
        # At the last step of a slide whose run still streams, wait for its next frame or its end, so
        # that every press moves (to the next step, or the next slide) as soon as it is handled.
        here = page.wait_for_function("""() => { const p = window.distdeck.position();
            if (p.pending && p.step >= p.stepCount - 1) return null;
            return {id: p.id, step: p.step, stepCount: p.stepCount, pending: p.pending, index: p.slideIndex}; }""",
                                      timeout=STEP_TIMEOUT_MS).json_value()
        if before is not None:
            assert (here["id"], here["step"]) != (before["id"], before["step"]), f"→ did not move from {before}"
        seen.setdefault(here["id"], set()).add(here["step"])
        counts[here["id"]] = here["stepCount"]
        if here["index"] == len(IDS) - 1 and here["step"] == here["stepCount"] - 1:
            break
        page.keyboard.press("ArrowRight")
        before = here
    else:
        pytest.fail("the walk did not reach the end of the deck")
    for slide, count in counts.items():
        assert seen[slide] == set(range(count)), f"{slide}: saw steps {sorted(seen[slide])} of {count}"
    return seen


def assert_whole_deck_and_runs(page, seen: dict[str, set[int]]) -> None:
    assert list(seen) == IDS, "every slide, in order"
    for slide in DECK.slides:
        if slide.steps > 1:
            assert len(seen[slide.id]) == slide.steps, f"{slide.id}: every static step"
    statuses = page.evaluate("() => window.distdeck.players.map(p => [p.slide.id, p.status, p.frames.length,"
                             " p.steps.length, p.steps.length ? p.steps[p.steps.length - 1][1] : -1])")
    live = [s for s in statuses if s[0] in seen]
    assert live, "the deck has live slides"
    # A "predict, then run" question is one more step, before the run's frames.
    questions = set(page.evaluate("() => (window.distdeck.predictions ?? []).map(p => p.slide.id)"))
    for slide, status, frames, steps, last in live:
        assert status == "done" and frames > 0, f"{slide}: the run ended {status} with {frames} frames"
        # Every step was shown; the steps cover every frame (grouped when a run has more than 20), and
        # the story takes at most 20 presses in all, the question included.
        asked = slide in questions
        assert len(seen[slide]) == steps + asked and steps + asked <= 20 and last == frames - 1, \
            f"{slide}: {steps} steps of {frames} frames{' and a question' if asked else ''}"
    assert page.locator(".sim-failed").count() == 0


def test_full_deck_on_the_server(watched, site):
    seen = walk(watched, site.server_url + "/")
    assert_whole_deck_and_runs(watched, seen)


def test_full_deck_on_the_static_export_from_a_sub_folder(watched, site):
    assert site.export_url.endswith("/blog/deck/")
    seen = walk(watched, site.export_url)
    assert_whole_deck_and_runs(watched, seen)
    # Replayed from the recorded files, and labelled so.
    assert "recorded" in watched.locator(".live-sim .sim-timing").first.text_content()


def test_export_answers_a_slide_scripts_api_calls_from_recorded_runs(watched, site):
    """The bubble plot's inline script fetches /api/.../frames itself: static-site.js answers it."""
    if "pp-bubble-plot" not in IDS:
        pytest.skip("no bubble plot slide")
    watched.goto(f"{site.export_url}#/pp-bubble-plot/0")
    watched.wait_for_function("() => /runs measured/.test(document.querySelector('#pp-bubble-plot .pp-status')"
                              ".textContent)", timeout=60_000)
    status = watched.text_content("#pp-bubble-plot .pp-status")
    runs = int(status.split()[0])
    assert runs >= 4 and watched.locator("#pp-bubble-plot .pp-points circle").count() == runs


def test_export_controls_switch_among_recorded_variants_and_say_when_the_server_is_needed(watched, site):
    slide = next((s.id for s in DECK.slides if s.id == "pp-gpipe"), None)
    if slide is None:
        pytest.skip("no pp-gpipe slide")
    watched.goto(f"{site.export_url}#/{slide}/1")  # step 0 is the slide's prediction question
    sim = watched.locator(f"#{slide} .live-sim")
    watched.wait_for_function("(id) => document.querySelector(`#${id} .live-sim`).dataset.status === 'done'",
                              arg=slide)
    if watched.locator(f"#{slide} .predict").count():  # a question first: its answer shows the run and controls
        watched.evaluate("(id) => { location.hash = `#/${id}/1`; }", slide)
        watched.wait_for_function("() => window.distdeck.position().step === 1")
    select = sim.locator("select[name=microbatches]")
    recorded = select.locator("option").all_text_contents()
    assert "8" in recorded and len(recorded) >= 2, recorded  # other slides recorded m = 1 with the same stages
    other = next(v for v in recorded if v != "8")
    select.select_option(other)
    watched.wait_for_function("(id) => { const el = document.querySelector(`#${id} .live-sim`);"
                              " return el.dataset.status === 'done' && el.dataset.frame === '0'; }", arg=slide)
    assert watched.evaluate(f"() => window.distdeck.players.find(p => p.slide.id === '{slide}').meta.params"
                            ".microbatches") == int(other)
    # A variant no slide recorded: a plain sentence, not a failure.
    sim.locator("select[name=stages]").evaluate(
        "(el) => { const o = document.createElement('option'); o.value = '3'; el.append(o); el.value = '3';"
        " el.dispatchEvent(new Event('change')); }")
    watched.wait_for_function("(id) => document.querySelector(`#${id} .live-sim`).dataset.status === 'unavailable'",
                              arg=slide)
    assert "needs the live server: run `make run`" in sim.locator(".sim-status").text_content()
    assert sim.locator(".sim-failed").count() == 0


def test_print_pdf_has_a_page_per_slide(watched, site):
    watched.goto(site.server_url + "/?print-pdf")
    watched.wait_for_selector(".pdf-page")
    pdf = watched.pdf(prefer_css_page_size=True, print_background=True)
    pages = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))
    assert pages >= len(IDS)
