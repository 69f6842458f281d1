"""Every size, touch included: the deck and two widgets on a phone (390 × 844, touch), run their
simulation and step by swipe without a page error; the top bar fits at 1024 × 768 and on a phone
held sideways; a widget in a blog's 640 × 360 and 800 × 450 iframes picks its views by size and
keeps its text readable; a widget on a phone, upright and sideways, keeps its bar, title, controls
and views inside the screen and apart."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import CHROMIUM  # noqa: F401  (the browser fixture skips without it)
from tests.browser.sites import OnePageSite
from tests.browser.viewcheck import cut_off, measure

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True, "device_scale_factor": 2}
RUN_TIMEOUT_MS = 120_000

# The README's widget snippet in a post: 800 × 450, max-width:100% (390 px wide on this phone).
SNIPPET_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>A blog post</title><link rel="icon" href="data:,"></head>
<body style="margin:0;background:#fff">
<p style="margin:8px">Some text of the post before the widget.</p>
<iframe id="widget" src="SRC" title="A live simulation" width="WIDTH" height="HEIGHT"
        style="border:0; max-width:100%" allow="fullscreen"></iframe>
</body></html>"""


def snippet(src: str, width: int = 800, height: int = 450) -> OnePageSite:
    return OnePageSite(SNIPPET_PAGE.replace("SRC", src).replace("WIDTH", str(width)).replace("HEIGHT", str(height)))


@pytest.fixture
def context_for(browser):
    """A new browser context with these options; fails the test on any page error or console error."""
    made = []

    def make(**options):
        context = browser.new_context(**options)
        context.errors = []
        context.on("page", lambda p: watch(p, context.errors))
        made.append(context)
        return context

    yield make
    for context in made:
        errors = context.errors
        context.close()
        assert errors == [], f"page errors: {errors}"


def watch(page, errors: list) -> None:
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))


def swipe_left(page, box: dict) -> None:
    """A one-finger swipe from right to left across `box` (page coordinates), by CDP touch events."""
    cdp = page.context.new_cdp_session(page)
    y = box["y"] + box["height"] / 2
    x0, x1 = box["x"] + box["width"] * 0.8, box["x"] + box["width"] * 0.2
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x0, "y": y}]})
    for i in range(1, 6):
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x0 + (x1 - x0) * i / 5, "y": y}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    cdp.detach()


def step_of(frame) -> int:
    return frame.evaluate("() => window.distdeck.position().step")


def wait_for_run(frame) -> None:
    frame.wait_for_function("""() => { const p = window.distdeck.position();
        return p.stepCount >= 3 && document.querySelector('.reveal .slides > section.present .sim-view *'); }""",
                            timeout=RUN_TIMEOUT_MS)


def test_the_deck_on_a_phone_runs_a_live_slide_and_steps_by_swipe(context_for, site):
    page = context_for(**PHONE).new_page()
    page.goto(f"{site.server_url}/#/ddp-live/0")
    page.wait_for_selector("html.deck-ready")
    assert page.evaluate("() => window.distdeck.reveal.isScrollView()") is False
    assert page.evaluate("() => window.distdeck.position().id") == "ddp-live"  # the link's slide, not the title
    wait_for_run(page)
    slide = page.locator("#ddp-live").bounding_box()
    assert slide["width"] <= 390 and slide["x"] >= 0
    swipe_left(page, slide)
    page.wait_for_function("() => window.distdeck.position().step === 1")
    swipe_left(page, slide)
    page.wait_for_function("() => window.distdeck.position().step === 2")
    # Tapping the on-screen arrow steps too.
    page.locator(".reveal .controls .navigate-right").tap()
    page.wait_for_function("() => window.distdeck.position().step === 3")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("which", ["server", "export"])
def test_a_widget_in_the_readme_snippet_on_a_phone_runs_and_steps_by_swipe(context_for, site, which):
    src = (f"{site.server_url}/embed/ddp?world_size=4&bucket_kb=0.25&controls=world_size,bucket_kb&views=ranks,timeline"
           if which == "server" else f"{site.export_url}embed/pipeline/")
    blog = snippet(src)
    try:
        page = context_for(**PHONE).new_page()
        page.goto(blog.url)
        iframe = page.locator("#widget")
        box = iframe.bounding_box()
        assert box["width"] <= 390, "max-width:100% keeps the frame inside the phone"
        frame = iframe.element_handle().content_frame()
        frame.wait_for_selector("html.deck-ready")
        wait_for_run(frame)
        assert frame.locator(".sim-view").count() == 1, "a phone-wide frame shows one view"
        assert not frame.locator(".embed-hint").is_visible(), "no keyboard hint on a touch screen"
        if which == "export":  # number controls offer the recorded values and say the others exist
            assert frame.locator(".sim-controls option[disabled]", has_text="live server").count() >= 1
        swipe_left(page, box)
        frame.wait_for_function("() => window.distdeck.position().step === 1")
        swipe_left(page, box)
        frame.wait_for_function("() => window.distdeck.position().step === 2")
    finally:
        blog.close()


TOPBAR_FITS = """() => {
  const vw = document.documentElement.clientWidth;
  const shown = Array.from(document.querySelectorAll('.topbar *')).filter((el) => {
    const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 && el.checkVisibility();
  });
  const out = shown.filter((el) => { const r = el.getBoundingClientRect(); return r.left < -0.5 || r.right > vw + 0.5; });
  const label = document.getElementById('deck-position');
  return { out: out.map((el) => el.outerHTML.slice(0, 80)), label: label.textContent,
           clipped: label.scrollWidth > label.clientWidth + 0.5,
           listScrolls: (() => { const l = document.getElementById('topbar-sections');
             return l.checkVisibility() && l.scrollWidth > l.clientWidth + 1; })() };
}"""


@pytest.mark.parametrize("size", [(1024, 768, False), (844, 390, True), (390, 844, True), (1280, 720, False)])
def test_the_top_bar_fits(context_for, site, size):
    width, height, touch = size
    page = context_for(viewport={"width": width, "height": height}, has_touch=touch, is_mobile=touch).new_page()
    page.goto(f"{site.server_url}/#/zero3-live/0")
    page.wait_for_selector("html.deck-ready")
    fit = page.evaluate(TOPBAR_FITS)
    assert fit["out"] == [] and not fit["clipped"] and not fit["listScrolls"], fit
    assert re.search(r"\d+/\d+ · Step \d+/\d+", fit["label"]), fit
    compact = page.evaluate("() => document.querySelector('.topbar').classList.contains('compact')")
    if compact:  # the menu names the section and opens the list of every section
        menu = page.locator("#topbar-menu")
        assert "ZeRO" in menu.text_content()
        menu.click()
        page.locator("#topbar-sections button", has_text="Pipeline").click()
        page.wait_for_function("() => window.distdeck.position().section === '06-pipeline'")
    bar = page.locator(".topbar").bounding_box()
    slides = page.locator(".reveal").bounding_box()
    assert slides["y"] >= bar["y"] + bar["height"] - 0.5


SMALLEST_TEXT = """() => {
  // The on-screen size of every visible piece of text: computed font size times the scale the
  // element is drawn at (reveal's transform, an SVG's viewBox).
  const sizes = { chrome: [], views: [] };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || !el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) continue;
    if (el.closest('title, style, script, .visually-hidden, aside.notes')) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    const r = range.getBoundingClientRect();
    if (r.width < 1 || r.height < 1 || r.right < 0 || r.bottom < 0 || r.left > innerWidth || r.top > innerHeight) continue;
    const font = parseFloat(getComputedStyle(el).fontSize);
    let scale;
    if (el instanceof SVGElement) scale = Math.hypot(el.getScreenCTM().a, el.getScreenCTM().b);
    else { const box = el.closest('.slides'); scale = box ? box.getBoundingClientRect().width / box.offsetWidth : 1; }
    (el.closest('.sim-view') ? sizes.views : sizes.chrome).push([font * scale, node.textContent.trim().slice(0, 30)]);
  }
  const min = (list) => list.reduce((a, b) => (b[0] < a[0] ? b : a), [Infinity, '']);
  return { chrome: min(sizes.chrome), views: min(sizes.views), texts: sizes.chrome.length + sizes.views.length };
}"""


def open_widget(context_for, blog):
    """The blog page with the widget in it, on a laptop screen, once the widget's run has drawn: (page, frame)."""
    page = context_for(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(blog.url)
    frame = page.locator("#widget").element_handle().content_frame()
    frame.wait_for_selector("html.deck-ready")
    wait_for_run(frame)
    return page, frame


def widget_text(context_for, site, width: int, height: int) -> dict:
    src = f"{site.server_url}/embed/ddp?world_size=4&bucket_kb=0.25&controls=world_size,bucket_kb&views=ranks,timeline"
    blog = snippet(src, width, height)
    try:
        _, frame = open_widget(context_for, blog)
        frame.wait_for_timeout(500)
        return {"view_count": frame.locator(".sim-view").count(), **frame.evaluate(SMALLEST_TEXT)}
    finally:
        blog.close()


@pytest.mark.parametrize("size", [(640, 360, 1), (800, 450, 2)])
def test_a_widget_chooses_its_views_by_size_and_its_own_text_is_readable(context_for, site, size):
    width, height, views = size
    measured = widget_text(context_for, site, width, height)
    assert measured["view_count"] == views, measured
    assert measured["chrome"][0] >= 12, measured  # title, controls, bar, caption, checks


@pytest.mark.parametrize("size", [(640, 360), (800, 450)])
def test_a_widgets_views_keep_text_at_12px(context_for, site, size):
    measured = widget_text(context_for, site, *size)
    assert measured["views"][0] >= 12, measured


def test_open_in_a_new_tab_carries_the_readers_changes_and_position(context_for, site):
    src = f"{site.server_url}/embed/ddp?world_size=4&controls=world_size&views=ranks"
    blog = snippet(src)
    try:
        page, frame = open_widget(context_for, blog)
        # A number box or, where only some values can run, a choice among them.
        frame.locator(".sim-controls [name=world_size]").evaluate(
            "(el) => { el.value = '2'; el.dispatchEvent(new Event('change')); }")
        frame.wait_for_function("() => window.distdeck.players[0].meta?.params.world_size === 2", timeout=RUN_TIMEOUT_MS)
        wait_for_run(frame)
        frame.locator(".reveal").click(position={"x": 40, "y": 40})
        page.keyboard.press("ArrowRight")
        frame.wait_for_function("() => window.distdeck.position().step === 1")
        href = frame.evaluate("() => document.getElementById('embed-open').href")
        assert href.startswith(f"{site.server_url}/embed/ddp?") and "world_size=2" in href and "world_size=4" not in href
        assert href.endswith("#/widget/1"), href
    finally:
        blog.close()


# The embed bar (position, buttons) against the widget's title and the viewport; each rank box against
# what it holds (a box drawn down the whole height of a tall phone is mostly empty).
WIDGET_CHROME_AND_BOXES = """() => {
  const rects = (el) => { const r = document.createRange(); r.selectNodeContents(el); return Array.from(r.getClientRects()); };
  const bar = Array.from(document.querySelectorAll('.embed-chrome > *')).filter((el) => el.checkVisibility())
    .map((el) => ({ what: el.id || el.className, r: el.getBoundingClientRect() }));
  const title = rects(document.querySelector('.widget-slide h2'));
  const meets = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const problems = [];
  for (const { what, r } of bar) {
    if (r.left < -1 || r.top < -1 || r.right > innerWidth + 1 || r.bottom > innerHeight + 1) problems.push(`${what} outside the viewport`);
    if (title.some((t) => meets(t, r))) problems.push(`${what} overlaps the title`);
  }
  const boxes = Array.from(document.querySelectorAll('.sim-view g.rank')).map((rank) => {
    const box = rank.querySelector('rect.rank-box').getBoundingClientRect();
    const inside = Array.from(rank.children).filter((el) => !el.matches('rect.rank-box')).map((el) => el.getBoundingClientRect())
      .filter((r) => r.height > 0);
    return box.height / (Math.max(...inside.map((r) => r.bottom)) - box.top);
  });
  return { problems, boxFill: Math.max(...boxes) };
}"""


@pytest.mark.parametrize("size", [(390, 844), (844, 390)])
def test_a_widget_on_a_phone_keeps_everything_inside_and_apart(context_for, site, size):
    width, height = size
    page = context_for(viewport={"width": width, "height": height}, has_touch=True, is_mobile=True).new_page()
    page.goto(f"{site.server_url}/embed/ddp?world_size=4")
    page.wait_for_selector("html.deck-ready")
    wait_for_run(page)
    page.wait_for_timeout(500)  # the frame's transition
    report = measure(page, "widget", 0)
    problems = cut_off(page, "widget") + page.evaluate(WIDGET_CHROME_AND_BOXES)["problems"]
    problems += [f"{a['text']!r} overlaps {b['text']!r}" for a, b in report.overlaps]
    problems += [f"{t['text']!r} outside the viewport" for t in report.outside]
    assert problems == [], problems
    # A rank box is at most about twice as tall as what it holds (the views share a tall phone's height).
    assert page.evaluate(WIDGET_CHROME_AND_BOXES)["boxFill"] <= 2.0
