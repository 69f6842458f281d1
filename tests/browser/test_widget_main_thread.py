"""Issue 24, fast where readers are: a widget page keeps its main thread for what one widget needs. It
loads its own entry (no speaker view, print or formula code), builds no Intl formatter (the first one
loads the locale's data), and a run that arrives in a burst is drawn once per view for the burst, at the
pane's final size, not once per frame or once more for each thing that settles around it. Structure
only: the time these take is for `make bench` (Lighthouse), not for a test."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDGET = "/embed/ddp?world_size=2&views=ranks,timeline&controls=world_size"
# The deck's own concerns, which a widget does without: the speaker view (and reveal.js's notes plugin
# under it, with its pacing panel), print, formulas, and the deck's entry that loads them.
DECK_ONLY = ("js/deck/boot.js", "js/deck/speaker.js", "js/deck/pacing.js", "js/deck/print.js", "js/deck/math.js",
             "plugin/notes.mjs", "vendor/katex/")

# Before any script of the page: every draw of a view (a new frame layer), with its pane's size and how many
# frames the player had; every Intl formatter built, and every number formatted by toLocaleString.
WATCH = """
window.__draws = [];
window.__intl = 0;
const NumberFormat = Intl.NumberFormat;
Intl.NumberFormat = new Proxy(NumberFormat, { construct(target, args) { window.__intl += 1; return new target(...args); },
                                              apply(target, self, args) { window.__intl += 1; return target(...args); } });
const toLocaleString = Number.prototype.toLocaleString;
Number.prototype.toLocaleString = function (...args) { window.__intl += 1; return toLocaleString.apply(this, args); };
new MutationObserver((records) => {
  for (const record of records) for (const node of record.addedNodes) {
    if (node.nodeType !== 1 || !node.matches('g.frame-layer')) continue;
    const svg = node.ownerSVGElement;
    window.__draws.push({ view: svg.getAttribute('class'), viewBox: svg.getAttribute('viewBox'),
                          frames: window.distdeck?.players?.[0]?.frames.length ?? 0 });
  }
}).observe(document, { subtree: true, childList: true });
"""


def _prime(live_url: str) -> None:
    """Run the widget's params to the end, so that the server has it cached: the page then carries its first
    frame and the stream sends every frame, the summary and the end at once (a burst)."""
    with urllib.request.urlopen(f"{live_url}/api/simulations/ddp/frames?world_size=2", timeout=120) as stream:
        assert b"event: done" in stream.read()


def _open_widget(page, live_url: str, slow_controls: bool = False) -> None:
    page.set_viewport_size({"width": 412, "height": 823})  # a phone held upright (Lighthouse's mobile preset): two views stacked
    page.add_init_script(WATCH)
    if slow_controls:
        # The scenario's description (what the controls row is built from) answered late, as on a slow
        # network: the views' modules, preloaded, are in before it.
        def late(route):
            time.sleep(1.0)
            route.continue_()
        page.route(re.compile(r"/api/simulations/ddp$"), late)
    page.goto(live_url + WIDGET)
    page.wait_for_function("() => document.querySelector('.live-sim')?.dataset.status === 'done'", timeout=90_000)
    page.evaluate("() => window.distdeck.players[0].drawn()")  # the redraws the run's end asked for, done


def test_a_widget_loads_only_what_one_widget_needs(page, live_url):
    _prime(live_url)
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    _open_widget(page, live_url)
    page.wait_for_selector("html.deck-ready")
    assert any("js/deck/widget.js" in url for url in requested), requested
    assert not [url for url in requested if any(part in url for part in DECK_ONLY)]
    # and no Intl formatter, anywhere in its loading and drawing
    assert page.evaluate("() => window.__intl") == 0


def test_the_deck_still_loads_its_speaker_view(page, live_url):
    """The other side of the split: the deck's entry keeps the speaker view (so the list above names real modules)."""
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(live_url + "/")
    page.wait_for_selector("html.deck-ready")
    page.wait_for_function("() => window.distdeck.reveal.getPlugin('notes') !== undefined")
    for module in ("js/deck/boot.js", "js/deck/speaker.js", "plugin/notes.mjs"):
        assert any(module in url for url in requested), module


def test_a_burst_of_frames_is_drawn_once_a_view_at_the_panes_final_size(page, live_url):
    _prime(live_url)
    _open_widget(page, live_url, slow_controls=True)
    frames = page.evaluate("() => window.distdeck.players[0].frames.length")
    assert frames >= 3
    draws = page.evaluate("() => window.__draws")
    final = page.evaluate("() => Object.fromEntries(Array.from(document.querySelectorAll('svg.sim-view'),"
                          " (svg) => [svg.getAttribute('class'), svg.getAttribute('viewBox')]))")
    assert set(final) == {"sim-view sim-view-ranks", "sim-view sim-view-timeline"}
    for view, box in final.items():
        own = [d for d in draws if d["view"] == view]
        # The page's first frame, then (if it came first) the run complete: never a draw per frame, and never
        # one for a pane that the controls row was about to shrink.
        assert 1 <= len(own) <= 2, (view, own)
        assert all(d["viewBox"] == box for d in own), (view, box, own)
    # the frames stepped through are drawn as the reader asks for them: → draws each view once more
    page.locator(".reveal").click(position={"x": 40, "y": 40})
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.live-sim').dataset.frame === '1'")
    assert len(page.evaluate("() => window.__draws")) == len(draws) + 2


def test_numbers_read_as_before(page, live_url):
    """The views' integer format (1,024) is Intl's en-US one, without building Intl's formatter."""
    page.goto(live_url + WIDGET)
    same = page.evaluate("""async () => {
      const { value } = await import('/static/js/player/format.js');
      const format = new Intl.NumberFormat('en-US');
      const numbers = [1, 12, 999, 1000, 1024, 65536, 999999, 1000000, 123456789, 999999999999, -1, -1024, -1234567];
      return numbers.filter((n) => value(n) !== format.format(n));
    }""")
    assert same == []
