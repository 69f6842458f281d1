"""Tracks in the browser: the track is the deck's state (top bar, overview, deep links, the title
slide's and the menu's choice, the conclusion), the speaker window paces the talk, and the static
export answers index.html?track=20."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.content.manifest import load_deck

pytestmark = pytest.mark.browser

DECK = load_deck(Path(__file__).resolve().parents[2] / "slides")
TWENTY = DECK.for_track("20")
SLIDES = "() => Array.from(document.querySelectorAll('.reveal .slides > section')).map((s) => s.id)"


def open_deck(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("html.deck-ready")


def test_the_track_is_the_decks_state(page, deck_url):
    open_deck(page, f"{deck_url}/?track=20#/zero-stages/2")
    assert page.evaluate(SLIDES) == [s.id for s in TWENTY.slides]
    index = [s.id for s in TWENTY.slides].index("zero-stages") + 1
    assert page.text_content("#deck-position") == f"Slide {index}/{len(TWENTY.slides)} · Step 3/4"
    shown = page.eval_on_selector_all(".topbar-sections button", "els => els.map((e) => e.textContent)")
    assert shown == [s.short or s.title for s in TWENTY.sections]
    assert page.text_content("#track-menu-button") == "20-min talk"
    page.locator("#deck").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.hash === '#/zero-stages/3'")
    assert page.evaluate("() => location.search") == "?track=20"  # the deep link keeps the track
    page.keyboard.press("Escape")  # the overview: the track's slides only
    page.wait_for_selector(".reveal.overview")
    assert page.locator(".reveal.overview .slides > section").count() == len(TWENTY.slides)


def test_the_title_slide_and_the_menu_choose_the_talk(page, deck_url):
    open_deck(page, f"{deck_url}/?track=20")
    page.locator("#title .track-choice a", has_text="45 min").click()
    page.wait_for_function("() => location.search === '?track=45' && document.documentElement.classList.contains('deck-ready')")
    assert page.evaluate(SLIDES) == DECK.find_track("45").slides
    assert page.locator("#title .track-choice a[aria-current]").text_content() == "45 min"
    page.click("#track-menu-button")
    page.locator("#track-list a", has_text="Full deck").click()
    page.wait_for_function("() => location.search === '' && document.documentElement.classList.contains('deck-ready')")
    assert len(page.evaluate(SLIDES)) == len(DECK.slides)
    assert page.text_content("#track-menu-button") == "Full deck"


def test_a_tracks_conclusion_lists_only_the_runs_it_showed(page, deck_url):
    open_deck(page, f"{deck_url}/?track=20#/conclusion-measured/0")
    rows = page.eval_on_selector_all("#measured-table tr[data-scenario]", "els => els.map((e) => e.dataset.scenario)")
    played = page.eval_on_selector_all(".live-sim", "els => [...new Set(els.map((e) => e.dataset.scenario))]")
    assert rows and set(rows) == set(played) and {"ddp", "zero", "pipeline"} <= set(rows)


def test_the_backup_table_counts_only_the_runs_on_slides_the_audience_saw(page, deck_url):
    """Slides next to the one shown start their runs early; the backup table counts a run once its slide was shown."""
    session = "(s) => document.querySelector(`#measured-table tr[data-scenario='${s}'] .session`).textContent"
    open_deck(page, f"{deck_url}/?track=20#/tp-intro/0")
    page.wait_for_function("() => (window.distdeck.players || []).some((p) => p.scenario === 'tensor_parallel'"
                           " && p.status === 'done')", timeout=120_000)  # tp-live's run, started early
    page.evaluate("() => { location.hash = '#/conclusion-measured/0'; }")  # skip tp-live
    page.wait_for_function("() => window.distdeck.position().id === 'conclusion-measured'")
    page.wait_for_timeout(1500)  # the table updates every second
    assert page.evaluate(session, "tensor_parallel") == "not shown"
    page.evaluate("() => { location.hash = '#/tp-live/0'; }")
    page.wait_for_function("() => window.distdeck.position().id === 'tp-live'")
    page.wait_for_timeout(1500)
    page.evaluate("() => { location.hash = '#/conclusion-measured/0'; }")
    page.wait_for_function(f"() => ({session})('tensor_parallel').startsWith('1 run: ')", timeout=10_000)
    assert page.evaluate(session, "ddp") == "not shown"


PACING = """() => { const p = document.getElementById('distdeck-pacing');
  return p && { kind: p.dataset.kind, headline: p.querySelector('.pacing-headline').textContent,
                colour: getComputedStyle(p.querySelector('.pacing-headline')).color,
                left: p.querySelector('.pacing-left').textContent, slide: p.querySelector('.pacing-slide').textContent }; }"""


def test_the_speaker_window_says_ahead_or_behind_in_words_and_colour(page, deck_url):
    page.clock.install()
    open_deck(page, f"{deck_url}/?track=20")
    page.locator("#deck").focus()
    with page.context.expect_page() as opened:
        page.keyboard.press("s")
    speaker = opened.value
    speaker.wait_for_function(f"({PACING})() !== null", timeout=30_000)
    waiting = speaker.evaluate(PACING)
    assert waiting["kind"] == "waiting" and "first →" in waiting["headline"] and "20:00" in waiting["left"]
    # the speaker window's previews are the same talk: the track's slides, the track's next slide
    speaker.wait_for_selector("#current-slide iframe")
    sources = speaker.eval_on_selector_all("#current-slide iframe, #upcoming-slide iframe", "els => els.map(e => e.src)")
    assert len(sources) == 2 and all("track=20" in src and "receiver" in src for src in sources), sources
    upcoming = speaker.frame_locator("#upcoming-slide iframe")
    upcoming.locator("html.deck-ready").wait_for(state="attached", timeout=30_000)
    assert upcoming.locator(".reveal .slides > section").count() == len(TWENTY.slides)

    def pacing_after(check: str) -> dict:
        speaker.wait_for_function(f"(({PACING})() || {{}}).kind === '{check}'", timeout=30_000)
        return speaker.evaluate(PACING)

    page.bring_to_front()
    page.locator("#deck").focus()
    page.keyboard.press("ArrowRight")  # the talk starts: slide 2 at 0:00, on plan
    on_time = pacing_after("on time")
    assert on_time["headline"] == "On time" and on_time["colour"] == "rgb(23, 121, 44)"
    assert re.fullmatch(r"(19:5\d|20:00) left of 20:00", on_time["left"]), on_time
    budget = TWENTY.slides[1]
    assert on_time["slide"].endswith(f"of {budget_clock(budget.id)}"), on_time

    page.clock.fast_forward(5 * 60_000)  # five minutes on the second slide
    behind = pacing_after("behind")
    assert behind["headline"].startswith("Behind by 4:") and behind["colour"] == "rgb(198, 40, 40)", behind
    speaker.locator("#distdeck-pacing").click()  # restart the clock on plan here
    assert pacing_after("on time")["headline"] == "On time"
    for _ in range(4):
        page.keyboard.press("Alt+ArrowRight")  # skip four slides at once: the plan runs ahead of the clock
    ahead = pacing_after("ahead")
    assert ahead["headline"].startswith("Ahead by") and ahead["colour"] == "rgb(11, 92, 173)", ahead
    speaker.close()


def test_the_embed_and_print_show_the_track(page, deck_url):
    """?embed=1&track=20 (an iframe on a blog) and ?print-pdf&track=20 (one page per slide and step) keep the talk."""
    open_deck(page, f"{deck_url}/?embed=1&track=20#/zero-stages/0")
    assert page.evaluate(SLIDES) == [s.id for s in TWENTY.slides]
    assert page.evaluate("() => [window.distdeck.position().id, window.distdeck.position().slideCount]") == \
        ["zero-stages", len(TWENTY.slides)]
    assert page.get_attribute("#embed-open", "href").endswith("/?track=20#/zero-stages/0")  # a new tab: the same talk
    open_deck(page, f"{deck_url}/?print-pdf&track=20")
    printed = page.eval_on_selector_all("section[data-slide-id]", "els => [...new Set(els.map((e) => e.dataset.slideId))]")
    assert printed == [s.id for s in TWENTY.slides]


def budget_clock(slide_id: str) -> str:
    from app.content import pacing
    from app.content.markup import jinja_env, render_slides

    slides_dir = Path(__file__).resolve().parents[2] / "slides"
    html = dict(zip([s.id for s in TWENTY.slides], render_slides(TWENTY, jinja_env(slides_dir.resolve()))))
    seconds = round(pacing.budgets(TWENTY, list(html.values()))[slide_id].seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


@pytest.mark.slow
def test_the_static_export_answers_index_html_with_a_track(page, site):
    open_deck(page, f"{site.export_url}index.html?track=20#/ddp-live/0")
    assert page.evaluate("() => [location.pathname.split('/').pop(), location.search, location.hash]") == \
        ["track-20.html", "?track=20", "#/ddp-live/0"]
    assert page.evaluate(SLIDES) == [s.id for s in TWENTY.slides]
    assert page.evaluate("() => window.distdeck.position().id") == "ddp-live"
    page.click("#track-menu-button")  # the whole deck again: back to index.html
    page.locator("#track-list a", has_text="Full deck").click()
    page.wait_for_function("() => location.pathname.endsWith('/index.html') && location.search === ''")
    page.wait_for_selector("html.deck-ready")
    assert len(page.evaluate(SLIDES)) == len(DECK.slides)
    # A static host cannot answer 422: the whole deck, and a notice that names the tracks.
    open_deck(page, f"{site.export_url}index.html?track=7")
    assert len(page.evaluate(SLIDES)) == len(DECK.slides)
    assert page.text_content(".track-notice") == 'There is no track "7" (the tracks are 20, 45, 90): showing the whole deck.'


def test_the_players_grouping_of_frames_is_the_budgets(page, deck_url):
    """app/content/steps.py's group_frames is the player's groupFrames (player.js, authoritative) on every recorded run,
    at the player's budget with and without a question; and on a live slide, the presses the player gives its
    run are the presses the slide's time budget counts."""
    from app.content import pacing, steps
    from app.content.markup import jinja_env, render_slides

    cases = [[steps.expand(run["phases"]), budget] for run in pacing.recorded_phases().values()
             for budget in (steps.MAX_STEPS, steps.MAX_STEPS - 1)]
    cases += [[["setup"] + ["slot"] * n + ["done"], steps.MAX_STEPS] for n in (19, 21, 30, 47)]  # split rounding
    open_deck(page, f"{deck_url}/#/ddp-memory/0")
    grouped = page.evaluate("""async (cases) => {
        const { groupFrames } = await import('/static/js/player/player.js');
        return cases.map(([phases, budget]) => groupFrames(phases.map((phase) => ({ phase })), budget)); }""", cases)
    assert grouped == [[list(g) for g in steps.group_frames(phases, budget)] for phases, budget in cases]

    slides_dir = Path(__file__).resolve().parents[2] / "slides"
    html = render_slides(DECK, jinja_env(slides_dir.resolve()))
    budget = pacing.budgets(DECK, html)["ddp-memory"]
    page.wait_for_function("() => { const p = window.distdeck.position();"
                           " return p.id === 'ddp-memory' && !p.pending && p.stepCount > 1; }", timeout=120_000)
    assert page.evaluate("() => window.distdeck.position().stepCount") == budget.steps
