"""The live views as the back row sees them, in real headless Chromium at 1280×720.

Every live slide, at its first, middle and last step: every text in the simulation renders at
16 px or more (axis ticks 14), no two labels overlap, nothing leaves the viewport, and the slide
tells its story in at most 20 presses, and its views keep their size from step to step (a resized
pane is redrawn at once, not animated). Frame changes animate, picture by picture on the page's
own paused clock (and do not under reduced motion), a
key during a transition finishes it, and → twice quickly lands two steps on. pp-side-by-side steps
both schedules together. A refused re-run clears the old run and says which constraint failed.

The recorded runs of the static export are replayed (the same player, the same frames as the
server streams), so the test measures the views, not the machine's load."""

from __future__ import annotations

import mimetypes
from pathlib import Path

import pytest

from tests.browser.viewcheck import cut_off, measure

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MAX_PRESSES = 20
SETTLED = "(id) => Array.from(document.querySelectorAll(`#${id} .live-sim`)).every(e => e.dataset.status === 'done')"


def open_page(browser, *, reduced: bool, size=(1280, 720)):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]},
                                  reduced_motion="reduce" if reduced else "no-preference")
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.console_errors = errors
    return context, page


def go(page, url: str, slide: str, step: int = 0) -> None:
    # Not waiting for the load event: the deck being ready (its own flag) is what the tests need, and
    # on a loaded 2-core machine a slow stylesheet or font must not fail a test about the player.
    page.goto(f"{url}#/{slide}/{step}", wait_until="commit", timeout=90_000)
    page.wait_for_selector("html.deck-ready", timeout=90_000)
    page.wait_for_function(SETTLED, arg=slide, timeout=90_000)
    page.wait_for_function("([id, k]) => window.distdeck.position().id === id && window.distdeck.position().step === k",
                           arg=[slide, step])


def asked(page, slide: str) -> int:
    """1 when a "predict, then run" question comes first (step 0 asks it, the run starts at step 1), else 0."""
    return int(page.evaluate("(id) => Boolean(document.querySelector(`#${id} .predict`))", slide))


def live_slides(page) -> list[str]:
    return page.evaluate("() => Array.from(document.querySelectorAll('.reveal .slides > section'))"
                         ".filter(s => s.querySelector('.live-sim')).map(s => s.id)")


# Every step of a live slide, the size of each of its views (their viewBox is their pane's size).
PANES_PER_STEP = """(id) => {
  const slide = document.getElementById(id);
  const stepper = window.distdeck.stepperOf(slide);
  const panes = [];
  for (let k = 0; k < stepper.count; k += 1) {
    stepper.go(k);
    panes.push(Array.from(slide.querySelectorAll('svg.sim-view')).map((v) => v.getAttribute('viewBox')).join(' | '));
  }
  stepper.go(0);
  return panes;
}"""


def test_every_live_slide_reads_from_the_back_row_at_1280x720(browser, site):
    context, page = open_page(browser, reduced=True)
    try:
        page.goto(site.export_url)
        page.wait_for_selector("html.deck-ready")
        slides = live_slides(page)
        assert len(slides) >= 20
        problems: list[str] = []
        smallest: dict[str, float] = {}  # per view (text, ticks apart), for the closing note
        presses: dict[str, int] = {}
        for slide in slides:
            page.evaluate("(id) => { location.hash = `#/${id}/0`; }", slide)
            page.wait_for_function(SETTLED, arg=slide, timeout=90_000)
            page.wait_for_function("(id) => window.distdeck.position().id === id", arg=slide)
            # The question, when there is one, is a press of its own: the story fits 20 presses in all.
            count = page.evaluate("() => window.distdeck.position().stepCount")
            presses[slide] = count
            assert count <= MAX_PRESSES, f"{slide}: {count} steps at its defaults"
            first = asked(page, slide)  # the question hides the run: its first step is the run's first
            # Through every step (in the page, at once: reduced motion draws each end state), the views
            # keep their size: a pane that changes size between two frames is redrawn, not animated.
            panes = page.evaluate(PANES_PER_STEP, slide)
            if len(set(panes)) > 1:
                problems.append(f"{slide}: the views change size from step to step: {sorted(set(panes))}")
            for step in sorted({first, (first + count - 1) // 2, count - 1}):
                page.evaluate("([id, k]) => { location.hash = `#/${id}/${k}`; }", [slide, step])
                page.wait_for_function("(k) => window.distdeck.position().step === k", arg=step)
                page.wait_for_timeout(150)  # the ResizeObserver's redraw, if the pane changed
                # Past a question the run's pane appears at once and its views draw when their size is
                # known: give a loaded machine a moment (a view that never draws is still reported).
                try:
                    page.wait_for_function("(id) => Array.from(document.querySelectorAll(`#${id} svg.sim-view`))"
                                           ".every(v => v.querySelector('.frame-layer text'))", arg=slide, timeout=5_000)
                except Exception:  # noqa: BLE001 (measure() names the view that drew nothing)
                    pass
                report = measure(page, slide, step)
                assert report.texts, f"{slide} step {step}: no text measured"
                for t in report.texts:
                    key = f"{t['view'].split(' ')[0]}{' ticks' if t['tick'] else ''}"
                    smallest[key] = min(smallest.get(key, 99.0), round(t["px"], 1))
                problems += [f"{slide} step {step}: {p}" for p in report.problems()]
        assert problems == [], "\n".join(problems)
        assert page.console_errors == []
        print("smallest rendered text per view (px):", dict(sorted(smallest.items())))  # noqa: T201
        print("presses per live slide:", presses)  # noqa: T201
    finally:
        context.close()


SIZES = [(1280, 720), (1920, 1080), (1024, 768)]
TWO_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
RUN_OVER = "(id) => Array.from(document.querySelectorAll(`#${id} .live-sim`))" \
           ".every(e => ['done', 'error', 'unavailable'].includes(e.dataset.status))"


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_nothing_on_any_slide_is_cut_off(browser, site, size):
    """Every slide at its last step (the most on screen), and the open "checks passed" detail of every
    live slide (the measured figures): nothing outside the slide or the viewport, nothing clipped."""
    context, page = open_page(browser, reduced=True, size=size)
    try:
        page.goto(site.export_url)
        page.wait_for_selector("html.deck-ready")
        ids = page.evaluate("() => Array.from(document.querySelectorAll('.reveal .slides > section')).map(s => s.id)")
        problems: list[str] = []
        for slide in ids:
            page.evaluate("(id) => { location.hash = `#/${id}/0`; }", slide)
            page.wait_for_function("(id) => window.distdeck.position().id === id", arg=slide)
            page.wait_for_function(RUN_OVER, arg=slide, timeout=90_000)
            last = page.evaluate("() => window.distdeck.position().stepCount") - 1
            page.evaluate("([id, k]) => { location.hash = `#/${id}/${k}`; }", [slide, last])
            page.wait_for_function("(k) => window.distdeck.position().step === k", arg=last)
            # A slide's own script may fill it in on a timer (conclusion-measured, each second); any other slide
            # is drawn once two frames have been painted (its ResizeObserver's redraw runs before the first).
            scripted = page.evaluate("(id) => Boolean(document.querySelector(`#${id} script`))", slide)
            if scripted:
                page.wait_for_timeout(1_200)
            else:
                page.evaluate(TWO_FRAMES)
            problems += [f"{slide} step {last}: {p}" for p in cut_off(page, slide)]
            if page.evaluate("(id) => { const d = document.querySelectorAll(`#${id} details.sim-checks-line`);"
                             " d.forEach((x) => { x.open = true; }); return d.length; }", slide):
                problems += [f"{slide} checks detail open: {p}" for p in cut_off(page, slide)]
                page.evaluate("(id) => document.querySelectorAll(`#${id} details.sim-checks-line`)"
                              ".forEach((x) => { x.open = false; })", slide)
        assert problems == [], "\n".join(problems)
        assert page.console_errors == []
    finally:
        context.close()


def view_picture(page, slide: str) -> bytes:
    return page.locator(f"#{slide} .sim-views").screenshot(animations="allow")


# The views' drawing, as markup: a transition changes it at every tick; a jump only once.
VIEWS_MARKUP = "(id) => Array.from(document.querySelectorAll(`#${id} svg.sim-view`))" \
               ".map(v => v.getAttribute('viewBox') + v.innerHTML).join('|')"
# The steps where the issue saw a jump (tp-live: its first press, the caption going from three lines
# to two; ddp-live: its third and fourth presses), and ring-live's first.
SAMPLED = [("tp-live", 0), ("tp-live", 1), ("ring-live", 0), ("ddp-live", 2), ("ddp-live", 3)]


@pytest.mark.parametrize("slide,press", SAMPLED, ids=[f"{s}-{k}" for s, k in SAMPLED])
def test_a_step_passes_through_in_between_pictures(browser, site, slide, press):
    """The picture of the views, sampled on the page's own clock (paused, so a loaded machine samples
    the same moments as an idle one): before the press, right after it, 150 and 300 ms in, and
    settled. A transition shows pictures in between; a jump only the before and the after. A caption
    wrapping to another line count used to resize the views, and a resized pane is redrawn at once."""
    context, page = open_page(browser, reduced=False)
    try:
        page.clock.install()  # timers, requestAnimationFrame, performance.now: what d3 transitions run on
        go(page, site.export_url, slide)
        go(page, site.export_url, slide, asked(page, slide) + press)
        page.clock.pause_at(page.evaluate("Date.now()") / 1000 + 1)
        page.clock.run_for(1_000)  # drawn for its pane, nothing in motion
        page.locator("#deck").focus()
        markup = [page.evaluate(VIEWS_MARKUP, slide)]
        pictures = [view_picture(page, slide)]
        page.keyboard.press("ArrowRight")
        for ms in (0, 150, 150, 3_000):  # a step of several frames plays within 2.4 s
            page.clock.run_for(ms)
            markup.append(page.evaluate(VIEWS_MARKUP, slide))
            pictures.append(view_picture(page, slide))
        assert markup[0] != markup[-1], "the step changed nothing"
        assert len(set(pictures)) >= 3 and len(set(markup)) >= 3, \
            f"{len(set(pictures))} distinct pictures, {len(set(markup))} distinct drawings: a jump"
        assert page.console_errors == []
    finally:
        context.close()


def test_a_frame_change_animates_and_a_key_during_it_finishes_it(browser, site):
    slide = "pp-gpipe"
    context, page = open_page(browser, reduced=False)
    try:
        go(page, site.export_url, slide)
        first = asked(page, slide)
        go(page, site.export_url, slide, first)
        page.locator("#deck").focus()
        before = view_picture(page, slide)
        page.keyboard.press("ArrowRight")
        # Between the press and the settled frame the views are in motion: an in-between picture.
        page.wait_for_function("(id) => document.querySelector(`#${id} .sim-view`).dataset.animating === 'true'",
                               arg=slide, timeout=2_000)
        during = view_picture(page, slide)
        page.wait_for_function("(id) => !document.querySelector(`#${id} .sim-view`).dataset.animating"
                               " && !window.distdeck.players.find(p => p.slide.id === id).playing", arg=slide)
        after = view_picture(page, slide)
        assert during != before and during != after and before != after
        player = "window.distdeck.players.find(p => p.slide.id === '%s')" % slide
        # → twice quickly: two steps on, each step's last frame shown, nothing left in motion.
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        state = page.evaluate(f"() => {{ const p = {player}; return [window.distdeck.position().step,"
                              " p.index, p.steps[p.stepIndex][1]]; }")
        assert state[0] == first + 3
        page.wait_for_function(f"() => {{ const p = {player}; return !p.playing && p.index === p.steps[3][1]; }}")
        # ← goes back at once, without playing the step backwards.
        page.keyboard.press("ArrowLeft")
        assert page.evaluate(f"() => {{ const p = {player}; return [p.stepIndex, p.index === p.steps[2][1],"
                             " Boolean(p.playing)]; }") == [2, True, False]
        assert page.console_errors == []
    finally:
        context.close()


def test_reduced_motion_shows_the_end_state_at_once(browser, site):
    slide = "pp-gpipe"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide)
        go(page, site.export_url, slide, asked(page, slide))
        page.locator("#deck").focus()
        page.keyboard.press("ArrowRight")
        # Handled synchronously: the new frame is on screen and nothing is in motion.
        animating = page.evaluate("(id) => [document.querySelector(`#${id} .sim-view`).dataset.animating ?? null,"
                                  " document.querySelectorAll(`#${id} .sim-view .frame-layer`).length,"
                                  " Boolean(window.distdeck.players.find(p => p.slide.id === id).playing)]", slide)
        assert animating == [None, 1, False]
        first = view_picture(page, slide)
        page.wait_for_timeout(700)
        assert view_picture(page, slide) == first
    finally:
        context.close()


def test_pp_side_by_side_steps_both_schedules_together(browser, site):
    slide = "pp-side-by-side"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide)
        page.locator("#deck").focus()
        cells = f"() => Array.from(document.querySelectorAll('#{slide} .sim-view-pipeline'))" \
                ".map(svg => Number(svg.dataset.slots))"
        assert page.evaluate(cells) == [0, 0]
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        slots = page.evaluate(cells)
        assert slots[0] == slots[1] > 0, slots
        steps = page.evaluate(f"() => window.distdeck.players.filter(p => p.slide.id === '{slide}').map(p => p.stepIndex)")
        assert steps == [3, 3]
    finally:
        context.close()


def test_the_self_checks_are_one_line_that_opens_the_detail(browser, site):
    slide = "ddp-live"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide)
        go(page, site.export_url, slide, asked(page, slide))  # past the question, if any: the run shows
        line = page.locator(f"#{slide} .sim-checks-line > summary")
        checks = page.evaluate(f"() => window.distdeck.players.find(p => p.slide.id === '{slide}').summary.checks.length")
        assert line.text_content() == f"✓ {checks} checks passed against a single-process run"
        detail = page.locator(f"#{slide} .live-sim .sim-checks")
        assert not detail.is_visible()
        line.click()
        assert detail.locator("li.pass").count() == checks
        assert detail.is_visible()
        # The timing is for the presenter: in the detail and in the speaker notes, not on the slide.
        assert "recorded" in page.locator(f"#{slide} aside.notes .sim-timing").text_content()
    finally:
        context.close()


def serve_vendor_files_if_missing(page, url: str) -> None:
    """A worktree whose static/vendor is a symlink out of static/ (the server will not follow it):
    the page gets the vendor files from disk, so the test is about the player, not about that."""
    if page.request.get(f"{url}/static/vendor/d3/d3.min.js").ok:
        return
    vendor = Path(__file__).resolve().parents[2] / "static" / "vendor"

    def fulfil(route) -> None:
        path = vendor / route.request.url.split("/static/vendor/", 1)[1].split("?")[0]
        route.fulfill(body=path.read_bytes(), content_type=mimetypes.guess_type(str(path))[0] or "text/plain")

    page.route("**/static/vendor/**", fulfil)


def test_a_refused_rerun_clears_the_old_run_and_says_why(browser, site):
    slide = "p3d-live"
    context, page = open_page(browser, reduced=True)
    try:
        serve_vendor_files_if_missing(page, site.server_url)
        go(page, site.server_url + "/", slide)
        sim = page.locator(f"#{slide} .live-sim")
        assert sim.locator(".frame-layer").count() >= 1
        # dp · pp · tp = 4 · 2 · 2 = 16 ranks: more than the 8 the server runs.
        sim.locator("[name=dp]").evaluate(
            "(el) => { if (el.tagName === 'SELECT' && ![...el.options].some(o => o.value === '4')) {"
            " const o = document.createElement('option'); o.value = '4'; o.textContent = '4'; el.append(o); }"
            " el.value = '4'; el.dispatchEvent(new Event('change')); }")
        page.wait_for_function("(id) => document.querySelector(`#${id} .live-sim`).dataset.status === 'error'",
                               arg=slide, timeout=30_000)
        status = sim.locator(".sim-status").text_content()
        assert "dp·pp·tp" in status and "16 must be at most 8" in status, status
        assert "Value error" not in status and "query" not in status
        assert sim.locator(".frame-layer").count() == 0
        assert sim.locator(".sim-caption").text_content() == ""
        assert sim.locator(".sim-summary").text_content() == ""
    finally:
        context.close()


def test_a_deep_link_lands_on_a_step_of_a_live_slide(browser, site):
    slide = "zero3-live"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide, 5)
        run_step = 5 - asked(page, slide)  # step 0 of a slide with a question asks it
        assert page.evaluate(f"() => {{ const p = window.distdeck.players.find(p => p.slide.id === '{slide}');"
                             f" return [p.stepIndex, p.index === p.steps[{run_step}][1]]; }}") == [run_step, True]
    finally:
        context.close()


def test_every_frame_stays_reachable_through_the_toggle(browser, site):
    slide = "pp-interleaved"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide)
        player = f"window.distdeck.players.find(p => p.slide.id === '{slide}')"
        frames = page.evaluate(f"() => {player}.frames.length")
        assert page.evaluate("() => window.distdeck.position().stepCount") <= MAX_PRESSES < frames
        page.locator(f"#{slide} .sim-frames-toggle input").check()
        assert page.evaluate("() => window.distdeck.position().stepCount") == frames
        page.locator("#deck").focus()
        page.keyboard.press("ArrowRight")
        assert page.evaluate(f"() => [{player}.stepIndex, {player}.index]") == [1, 1]
    finally:
        context.close()


def test_communication_inside_a_compute_span_stays_visible_above_it(browser, site):
    """HSDP's all-gathers run inside forward and backward, whose spans end later and come in later frames: at the
    last step every comm bar is drawn after (so above) the compute bars, not covered by the backward that encloses
    it (it was: the last step's timeline showed no communication at all)."""
    slide = "hsdp-live"
    context, page = open_page(browser, reduced=True)
    try:
        go(page, site.export_url, slide)
        last = page.evaluate("() => window.distdeck.position().stepCount") - 1
        go(page, site.export_url, slide, last)
        kinds = page.evaluate(f"() => Array.from(document.querySelectorAll('#{slide} .sim-view-timeline g.span:not(.legend)'))"
                              ".map(g => g.classList.contains('span-comm') ? 'comm' : 'compute')")
        assert "comm" in kinds and "compute" in kinds
        assert kinds == sorted(kinds, key=lambda kind: kind == "comm"), kinds
    finally:
        context.close()
