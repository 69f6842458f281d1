"""The deck in real headless Chromium: keys, steps, deep links, embedding, print, accessibility."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.content.manifest import load_deck

pytestmark = pytest.mark.browser

DECK = load_deck(Path(__file__).resolve().parents[2] / "slides")
IDS = [slide.id for slide in DECK.slides]
STEPPED = "one-gpu-7b"  # the static stepped slide of the "why distributed" section
STEPS = DECK.find(STEPPED).steps


def open_deck(page, url: str):
    response = page.goto(url)
    page.wait_for_selector("html.deck-ready")
    return response


def current(page) -> dict:
    return page.evaluate(
        "() => { const p = window.distdeck.position();"
        " return {id: p.id, step: p.step, stepCount: p.stepCount, hash: location.hash}; }"
    )


def press(page, key: str, times: int = 1) -> None:
    for _ in range(times):
        page.keyboard.press(key)


def test_arrows_play_steps_before_leaving_a_slide_and_step_back(page, deck_url):
    index = IDS.index(STEPPED)
    # From the static slide before it: the live slides earlier in the deck hold → while they stream.
    open_deck(page, f"{deck_url}/#/{IDS[index - 1]}/0")
    assert current(page)["id"] == IDS[index - 1]

    press(page, "ArrowRight")
    assert current(page) == {"id": STEPPED, "step": 0, "stepCount": STEPS, "hash": f"#/{STEPPED}/0"}
    assert page.locator(f"#{STEPPED} [data-step].step-shown").count() == 0

    press(page, "ArrowRight", STEPS - 1)
    assert current(page)["id"] == STEPPED and current(page)["step"] == STEPS - 1
    assert page.locator(f"#{STEPPED} [data-step='{STEPS - 1}']").first.is_visible()
    # "Slide n/N · Step k/K", or "n/N · Step k/K" when the bar is compact (the whole deck's 14 section names
    # and the talk menu do not fit 1280 px).
    position = page.text_content("#deck-position")
    assert position.removeprefix("Slide ") == f"{index + 1}/{len(IDS)} · Step {STEPS}/{STEPS}", position

    press(page, "ArrowRight")  # past the last step: the next slide, at its first step
    assert current(page)["id"] == IDS[index + 1]

    press(page, "ArrowLeft")  # entering backwards lands on the last step
    assert current(page) == {"id": STEPPED, "step": STEPS - 1, "stepCount": STEPS, "hash": f"#/{STEPPED}/{STEPS - 1}"}

    press(page, "ArrowLeft")
    assert current(page)["step"] == STEPS - 2
    page.wait_for_timeout(400)  # the fade-out
    assert not page.locator(f"#{STEPPED} [data-step='{STEPS - 1}']").first.is_visible()

    press(page, "ArrowLeft", STEPS - 2)
    assert current(page)["step"] == 0
    press(page, "ArrowLeft")
    assert current(page)["id"] == IDS[index - 1]


def test_space_page_down_and_page_up_step_too(page, deck_url):
    open_deck(page, f"{deck_url}/#/{STEPPED}/0")
    press(page, "Space")
    assert current(page)["step"] == 1
    press(page, "PageDown")
    assert current(page)["step"] == 2
    press(page, "PageUp")
    assert current(page)["step"] == 1


def test_on_screen_arrows_step_as_well(page, deck_url):
    open_deck(page, f"{deck_url}/#/{STEPPED}/0")
    page.click(".reveal .controls .navigate-right")
    assert current(page) == {"id": STEPPED, "step": 1, "stepCount": STEPS, "hash": f"#/{STEPPED}/1"}


def test_deep_link_lands_on_slide_and_step_and_follows_hash_changes(page, deck_url):
    open_deck(page, f"{deck_url}/#/{STEPPED}/3")
    assert current(page)["id"] == STEPPED and current(page)["step"] == 3
    assert page.locator(f"#{STEPPED} [data-step='3']").first.is_visible()
    assert not page.locator(f"#{STEPPED} [data-step='4']").first.is_visible()

    page.evaluate("() => { location.hash = '#/memory-wall/0'; }")
    page.wait_for_function("() => window.distdeck.position().id === 'memory-wall'")

    page.evaluate("() => { location.hash = '#/no-such-slide/2'; }")
    page.wait_for_function("() => document.getElementById('deck-announcer').textContent.includes('no slide')")
    assert current(page)["id"] == "memory-wall"


def test_a_step_beyond_the_last_is_clamped(page, deck_url):
    open_deck(page, f"{deck_url}/#/{STEPPED}/99")
    assert current(page)["step"] == STEPS - 1


def test_pending_stepper_waits_for_steps_instead_of_skipping_the_slide(page, deck_url):
    """The contract the live player relies on, driven with a stand-in stepper."""
    slide = "activations"
    open_deck(page, f"{deck_url}/#/{slide}/0")
    page.evaluate("""(id) => {
        const el = document.getElementById(id);
        window.fake = { count: 1, index: 0, pending: true, go(k) { this.index = k; } };
        window.distdeck.registerStepper(el, window.fake);
    }""", slide)
    press(page, "ArrowRight", 2)
    assert current(page)["id"] == slide, "→ must wait for pending steps, not leave the slide"
    assert "waiting" in page.text_content("#deck-position")

    # A step streams in: the waiting → takes it.
    page.evaluate("(id) => { window.fake.count = 2; window.distdeck.stepsChanged(document.getElementById(id)); }", slide)
    assert current(page) == {"id": slide, "step": 1, "stepCount": 2, "hash": f"#/{slide}/1"}

    # The stream ends: → leaves.
    page.evaluate("(id) => { window.fake.pending = false; window.distdeck.stepsChanged(document.getElementById(id)); }", slide)
    press(page, "ArrowRight")
    assert current(page)["id"] == IDS[IDS.index(slide) + 1]


def as_live_slide(page, deck_url: str, slide: str) -> None:
    """Serve the deck with a .live-sim placeholder on `slide`, and no live player: the test
    plays the player's part with a stand-in stepper."""

    def add_placeholder(route):
        html = route.fetch().text()
        html = html.replace(f'<section id="{slide}"', f'<section id="{slide}"', 1).replace(
            f'data-title="{DECK.find(slide).title}">', f'data-title="{DECK.find(slide).title}"><div class="live-sim"></div>', 1
        )
        route.fulfill(body=html, content_type="text/html")

    page.route(deck_url + "/", add_placeholder)
    page.route("**/static/js/player/**", lambda route: route.fulfill(body="", content_type="text/javascript"))


def test_deep_link_to_a_step_not_streamed_yet_is_applied_when_it_arrives(page, deck_url):
    slide = "activations"
    as_live_slide(page, deck_url, slide)
    open_deck(page, f"{deck_url}/#/{slide}/3")
    assert page.locator(f"#{slide} .live-sim").count() == 1
    assert current(page)["hash"] == f"#/{slide}/3"
    page.evaluate("""(id) => {
        window.fake = { count: 1, index: 0, pending: true, go(k) { this.index = k; } };
        window.distdeck.registerStepper(document.getElementById(id), window.fake);
    }""", slide)
    assert page.evaluate("() => window.fake.index") == 0
    assert current(page)["hash"] == f"#/{slide}/3", "the wanted step stays in the URL while it streams in"
    page.evaluate("(id) => { window.fake.count = 5; window.distdeck.stepsChanged(document.getElementById(id)); }", slide)
    assert page.evaluate("() => window.fake.index") == 3


def test_top_bar_jumps_to_sections_by_mouse_and_keyboard(page, deck_url):
    open_deck(page, deck_url + "/")
    second = DECK.sections[1]
    page.click(f".topbar button[data-section='{second.slug}']")
    assert current(page)["id"] == second.slides[0].id
    assert page.get_attribute(f".topbar button[data-section='{second.slug}']", "aria-current") == "true"

    # Keyboard only: Tab to the first section's button, Enter.
    page.focus(f".topbar button[data-section='{second.slug}']")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    assert current(page)["id"] == DECK.sections[0].slides[0].id
    # The keyboard is back on the slides: Space steps forward instead of re-pressing the button.
    page.keyboard.press("Space")
    assert current(page)["id"] == DECK.slides[1].id


def test_top_bar_never_covers_the_slides(page, deck_url, tmp_path):
    open_deck(page, deck_url + "/")
    bar = page.locator(".topbar").bounding_box()
    slides = page.locator(".reveal").bounding_box()
    assert slides["y"] >= bar["y"] + bar["height"] - 0.5
    page.screenshot(path=str(tmp_path / "deck.png"))  # kept by pytest under its basetemp, to look at


def test_slide_changes_are_announced(page, deck_url):
    open_deck(page, deck_url + "/")
    press(page, "ArrowRight")
    page.wait_for_function(
        "(t) => document.getElementById('deck-announcer').textContent === t",
        arg=f"Slide 2 of {len(IDS)}: {DECK.slides[1].title}",
    )
    assert page.get_attribute("#deck-announcer", "aria-live") == "polite"


def test_reduced_motion_turns_transitions_off(page, deck_url):
    page.emulate_media(reduced_motion="reduce")
    open_deck(page, deck_url + "/")
    assert page.evaluate("() => window.distdeck.reveal.getConfig().transition") == "none"


def test_formulas_are_typeset_as_their_slides_come_near(page, deck_url):
    open_deck(page, f"{deck_url}/#/bytes-per-parameter/0")
    assert page.locator("#bytes-per-parameter .katex-display").count() == 1
    # Slides far from this one are not typeset yet (a typeset formula is a hundred elements or so).
    formulas = "() => [document.querySelectorAll('.tex[data-tex]').length, document.querySelectorAll('.tex .katex').length]"
    total, typeset = page.evaluate(formulas)
    assert 0 < typeset < total / 2, (typeset, total)
    page.keyboard.press("Escape")  # the overview shows every slide: every formula typeset
    page.wait_for_function(f"() => ({formulas})().every((n, _, all) => n === all[0])")
    assert page.locator(".katex-error").count() == 0


def test_deck_response_headers_allow_embedding(page, deck_url):
    response = open_deck(page, deck_url + "/")
    headers = response.all_headers()
    assert headers["content-security-policy"] == "frame-ancestors *"
    assert "x-frame-options" not in headers


def test_speaker_view_opens_with_notes(page, deck_url):
    open_deck(page, f"{deck_url}/#/memory-wall/0")
    with page.context.expect_page() as popup_info:
        page.keyboard.press("s")
    popup = popup_info.value
    popup.wait_for_selector(".speaker-controls-notes .value", state="attached")
    popup.wait_for_function(
        "() => document.querySelector('.speaker-controls-notes .value').textContent.includes('80 GB')"
    )
    assert popup.locator(".speaker-controls-time").count() == 1


LIVE_STEPS = """() => Object.fromEntries(window.distdeck.players.map(
  (p) => [p.slide.id, window.distdeck.stepperOf(p.slide).count]))"""


@pytest.mark.slow
@pytest.mark.timeout(1500)  # every live slide runs on the live server, a few at a time
def test_print_pdf_has_one_page_per_slide_and_step(page, live_url):
    """The server's ?print-pdf, once every live slide's pages are in (`print-ready`): a page per step of
    each static slide (its manifest) and per step of each live slide's run (its player)."""
    page.set_default_timeout(1_200_000)
    open_deck(page, live_url + "/?print-pdf")
    page.wait_for_selector("html.print-ready", state="attached")
    live = page.evaluate(LIVE_STEPS)
    assert len(live) >= 30 and all(count >= 1 for count in live.values()), live
    assert sum(count > 1 for count in live.values()) >= 20, live  # the runs' stories, not one page each
    pdf = page.pdf(prefer_css_page_size=True, print_background=True)
    pages = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))
    static = sum(slide.steps for slide in DECK.slides if slide.id not in live)
    assert pages == static + sum(live.values()), (pages, static, live)
    assert STEPPED not in live and static >= len(IDS) - len(live) + STEPS - 1  # every step of the 7B slide


def test_embed_in_cross_origin_iframe_takes_keys_after_a_click(page, servers):
    page.goto(servers.allowed_site.origin + "/")
    frame = page.frame_locator("#deck")
    deck = page.frame(url=re.compile(r"embed=1"))
    deck.wait_for_selector("html.deck-ready")
    assert frame.locator(".topbar").count() == 0
    assert frame.locator("#embed-fullscreen").is_visible() and frame.locator("#embed-open").is_visible()

    page.keyboard.press("ArrowRight")  # the parent page has the keyboard: the deck must not move
    assert deck.evaluate("() => window.distdeck.position().id") == IDS[0]
    assert not deck.evaluate("() => document.documentElement.classList.contains('deck-focused')")

    frame.locator(".reveal").click(position={"x": 300, "y": 300})
    deck.wait_for_function("() => document.documentElement.classList.contains('deck-focused')")
    ring = deck.evaluate("() => getComputedStyle(document.documentElement, '::after').borderTopColor")
    assert ring not in ("rgba(0, 0, 0, 0)", "transparent")
    page.keyboard.press("ArrowRight")
    deck.wait_for_function("(id) => window.distdeck.position().id === id", arg=IDS[1])
    assert frame.locator("#embed-open").get_attribute("href").endswith(f"/#/{IDS[1]}/0")


def test_embed_postmessage_answers_allowed_origins_only(page, browser, servers):
    page.goto(servers.allowed_site.origin + "/")
    deck = page.frame(url=re.compile(r"embed=1"))
    deck.wait_for_selector("html.deck-ready")
    page.evaluate("() => window.sendToDeck({type: 'distdeck:subscribe'})")
    page.wait_for_function("() => window.received.length > 0")
    first = page.evaluate("() => window.received[0]")
    assert first["data"] == {**first["data"], "type": "distdeck:position", "slide": IDS[0], "step": 0}
    page.evaluate("() => window.sendToDeck({type: 'distdeck:go', slide: 'one-gpu-7b', step: 2})")
    deck.wait_for_function("() => window.distdeck.position().step === 2")
    page.wait_for_function("() => window.received.some(m => m.data.slide === 'one-gpu-7b' && m.data.step === 2)")

    other = browser.new_page()
    try:
        other.goto(servers.other_site.origin + "/")
        other_deck = other.frame(url=re.compile(r"embed=1"))
        other_deck.wait_for_selector("html.deck-ready")
        other.evaluate("() => window.sendToDeck({type: 'distdeck:subscribe'})")
        other.evaluate("() => window.sendToDeck({type: 'distdeck:next'})")
        # reveal.js's own (string) API must be closed to other origins too.
        other.evaluate("() => document.getElementById('deck').contentWindow.postMessage("
                       "JSON.stringify({method: 'slide', args: [3]}), '*')")
        other.wait_for_timeout(500)
        assert other.evaluate("() => window.received") == []
        assert other_deck.evaluate("() => window.distdeck.position().id") == IDS[0]
    finally:
        other.close()


SHOWN_SLIDES = "() => [...document.querySelectorAll('.reveal .slides > section')].filter((s) => s.checkVisibility()).map((s) => s.id)"


@pytest.mark.parametrize("size", [(1280, 720), (390, 844)])
def test_the_first_slide_paints_before_the_scripts_run_where_reveal_puts_it(browser, deck_url, size):
    width, height = size
    early = browser.new_page(viewport={"width": width, "height": height})
    try:
        early.route(re.compile(r"\.m?js(\?|$)"), lambda route: route.abort())  # the page's inline script only
        early.goto(deck_url + "/")
        before = early.locator("#title h1").bounding_box()
        assert early.evaluate(SHOWN_SLIDES) == ["title"], "the first slide alone, live slides included"
    finally:
        early.close()
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        open_deck(page, deck_url + "/")
        after = page.locator("#title h1").bounding_box()
        assert all(abs(before[k] - after[k]) < 1 for k in ("x", "y", "width", "height")), (before, after)
        # Live slides reveal.js hides (beyond its viewDistance) stay out of the layout.
        assert "zero3-live" not in page.evaluate(SHOWN_SLIDES)
    finally:
        page.close()


@pytest.mark.parametrize("link, shown", [(f"#/{STEPPED}/2", STEPPED), ("#/memory-wall", "memory-wall"),
                                         ("#/no-such-slide/0", "title")])
def test_a_deep_links_slide_paints_before_the_scripts_run_where_reveal_puts_it(browser, deck_url, link, shown):
    """Issue 24: the slide a deep link names is painted by the page's inline script, as the first slide is, at the
    place reveal.js puts it once it starts (it opens at that slide); a link to no slide paints the first."""
    early = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        early.route(re.compile(r"\.m?js(\?|$)"), lambda route: route.abort())  # the page's inline script only
        early.goto(f"{deck_url}/{link}")
        assert early.evaluate(SHOWN_SLIDES) == [shown]
        before = early.locator(f"#{shown} h2, #{shown} h1").first.bounding_box()
    finally:
        early.close()
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        open_deck(page, f"{deck_url}/{link}")
        assert page.evaluate("() => window.distdeck.position().id") == shown
        after = page.locator(f"#{shown} h2, #{shown} h1").first.bounding_box()
        assert all(abs(before[k] - after[k]) < 1 for k in ("x", "y", "width", "height")), (before, after)
    finally:
        page.close()
