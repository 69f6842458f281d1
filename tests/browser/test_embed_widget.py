"""One simulation as a widget in a blog post's cross-origin iframe: on the server (/embed/ddp?...)
and in the static export (embed/ddp/ under /blog/deck/), the deck's embed behaviour: keys only
after a click, a visible focus ring, → and ← step frames, full-screen and open-in-a-new-tab."""

from __future__ import annotations

import re

import pytest

from tests.browser.sites import BlogPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def widget_frame(page, pattern: str):
    for _ in range(300):  # loading="lazy": the iframe navigates once laid out
        frame = page.frame(url=re.compile(pattern))
        if frame is not None:
            break
        page.wait_for_timeout(100)
    assert frame is not None, [f.url for f in page.frames]
    frame.wait_for_selector("html.deck-ready")
    frame.wait_for_function("() => document.querySelector('.live-sim').dataset.status === 'done'", timeout=90_000)
    return frame


def check_widget_keys_focus_and_buttons(page, frame, open_prefix: str) -> None:
    sim = frame.locator(".live-sim")
    frames = frame.evaluate("() => window.distdeck.players[0].frames.length")
    assert frames >= 3
    assert sim.get_attribute("data-frame") == "0"

    page.keyboard.press("ArrowRight")  # the blog has the keyboard: the widget must not move
    assert sim.get_attribute("data-frame") == "0"
    assert not frame.evaluate("() => document.documentElement.classList.contains('deck-focused')")

    frame.locator(".reveal").click(position={"x": 40, "y": 40})
    frame.wait_for_function("() => document.documentElement.classList.contains('deck-focused')")
    ring = frame.evaluate("() => getComputedStyle(document.documentElement, '::after').borderTopColor")
    assert ring not in ("rgba(0, 0, 0, 0)", "transparent"), "a visible focus ring once it has the keyboard"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    frame.wait_for_function("() => document.querySelector('.live-sim').dataset.frame === '2'")
    page.keyboard.press("ArrowLeft")
    frame.wait_for_function("() => document.querySelector('.live-sim').dataset.frame === '1'")
    assert frame.text_content("#deck-position") == f"Slide 1/1 · Step 2/{frames}"

    assert frame.locator("#embed-fullscreen").is_visible()
    link = frame.locator("#embed-open")
    assert link.is_visible() and link.get_attribute("target") == "_blank"
    href = frame.evaluate("() => document.getElementById('embed-open').href")
    assert href.startswith(open_prefix) and href.endswith("#/widget/1"), href


def test_widget_on_the_server_in_a_cross_origin_iframe(page, site):
    src = f"{site.server_url}/embed/ddp?world_size=2&steps=2&controls=world_size&views=ranks,timeline"
    blog = BlogPage(src)
    try:
        response = page.request.get(src)
        assert response.headers["content-security-policy"] == "frame-ancestors *"
        page.goto(blog.url)
        frame = widget_frame(page, r"/embed/ddp\?")
        assert frame.evaluate("() => window.distdeck.players[0].meta.params.world_size") == 2
        assert frame.locator(".sim-view").count() == 2  # the views asked for, no more
        assert frame.locator(".sim-controls select, .sim-controls input").count() == 1
        assert frame.locator(".sim-checks li.fail").count() == 0
        check_widget_keys_focus_and_buttons(page, frame, f"{site.server_url}/embed/ddp?world_size=2")
    finally:
        blog.close()


def test_widget_from_the_static_export_in_a_cross_origin_iframe(page, site):
    blog = BlogPage(f"{site.export_url}embed/ddp/")
    try:
        page.goto(blog.url)
        frame = widget_frame(page, r"/blog/deck/embed/ddp/")
        assert "recorded" in frame.text_content(".sim-timing")
        # The recorded run's first frame came with the page (drawn before the replay started), kept on screen.
        assert frame.locator(".live-sim").get_attribute("data-first-frame") == "page"
        check_widget_keys_focus_and_buttons(page, frame, f"{site.export_url}embed/ddp/")
    finally:
        blog.close()


def test_widget_errors_are_pages_naming_the_problem(page, site):
    # Requests, not navigations: a 404 or 422 document would be a console error in the page fixture.
    missing = page.request.get(f"{site.server_url}/embed/no-such-scenario")
    assert missing.status == 404 and "text/html" in missing.headers["content-type"]
    assert "There is no page at" in missing.text()
    bad = page.request.get(f"{site.server_url}/embed/ddp?world_size=99")
    assert bad.status == 422 and "text/html" in bad.headers["content-type"]
    assert re.search(r"world_size: Input should be less than or equal to 8", bad.text())
    bad_control = page.request.get(f"{site.server_url}/embed/ddp?controls=nope")
    assert bad_control.status == 422 and "controls: &#39;nope&#39; is not a parameter of ddp" in bad_control.text()
