"""The deck mounts a live slide's player, and opens its stream, only when the slide comes near (the slide
shown and one either side), so a far slide costs the page nothing until the talk gets there."""

from __future__ import annotations

import pytest


pytestmark = [pytest.mark.browser, pytest.mark.slow]

LIVE = "() => Array.from(document.querySelectorAll('.reveal .slides > section')).map((s, i) => [s.id, i, Boolean(s.querySelector('.live-sim'))])"
MOUNTED = "() => window.distdeck.players.map((p) => p.slide.id)"
STREAMS = "() => performance.getEntriesByType('resource').filter((r) => r.name.includes('/frames')).length"


def test_players_mount_and_stream_only_near_the_slide_shown(browser, live_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(live_url + "/", wait_until="commit", timeout=90_000)
        page.wait_for_selector("html.deck-ready", timeout=90_000)
        slides = page.evaluate(LIVE)
        index = {sid: i for sid, i, _ in slides}
        live = [sid for sid, _, has in slides if has]
        assert len(live) >= 3
        # Open at a live slide in the middle of the deck (a deep link): only it and its neighbours mount.
        target = live[len(live) // 2]
        page.goto(f"{live_url}/#/{target}/0", wait_until="commit", timeout=90_000)
        page.wait_for_selector("html.deck-ready", timeout=90_000)
        page.wait_for_function("(id) => window.distdeck?.players?.some((p) => p.slide.id === id && p.frames.length > 0)",
                               arg=target, timeout=90_000)
        mounted = set(page.evaluate(MOUNTED))
        assert target in mounted
        assert all(abs(index[sid] - index[target]) <= 1 for sid in mounted), mounted
        near_players = page.evaluate("() => window.distdeck.players.length")
        assert page.evaluate(STREAMS) <= near_players
        assert page.locator(".live-sim.sim").count() == near_players  # the far placeholders were not built
        # A far live slide: reached, its player mounts, streams and plays.
        far = next(sid for sid in live if abs(index[sid] - index[target]) > 2)
        assert far not in mounted
        page.evaluate("(id) => window.distdeck.reveal.slide(window.distdeck.reveal.getIndices(document.getElementById(id)).h)", far)
        page.wait_for_function("(id) => window.distdeck.players.some((p) => p.slide.id === id && p.status === 'done' && p.frames.length > 0)",
                               arg=far, timeout=90_000)
        assert page.locator(f"#{far} svg.sim-view").count() >= 1
        page.keyboard.press("ArrowRight")
        page.wait_for_function("(id) => window.distdeck.position().id === id && window.distdeck.position().step >= 1",
                               arg=far, timeout=30_000)
    finally:
        context.close()
