"""A presenter's own talk file, in the browser: served by the app (on the session's rank pool) and exported as a
static site replayed from a plain static file server in a sub-folder. Each is walked with → from the title
slide to the last step: every slide in order, the title slide from the front matter, the own slide's notes in
reveal.js's notes, the deck's included slide as it is, and the talk's own live block played to its last step
with its checks passed. Only the talk is exported (default runs only), to keep the module short."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from app.content.talk import load_talk
from app.export import export_site
from app.settings import Settings
from tests.browser.sites import SUBFOLDER, _serve_static, serve_app, stop_all

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# Every feature of the format: front matter, a `#` section, a list, inline and display math, a table, notes,
# Jinja and HTML that must stay text, a deck slide included whole, and a live block of the talk's own.
TALK = """---
title: A talk of my own
speaker: Test Speaker
event: Test Event 2026
date: 2026-11-28
minutes: 5
---
# Part one
## A list, a formula and a table

- memory $M = 16\\Psi$ {{ 7 * 7 }} <em>raw</em>
- over $N$ ranks

$$
\\frac{16\\Psi}{N}
$$

| ranks | bytes each |
|---|--:|
| 2 | 8 |

Note: Notes of my own, for the speaker.
---
@slide ring-all-reduce
---
# Part two
## Two ranks, live

```live
ddp world_size=2 steps=1
```

Note: The run of my own.
"""
IDS = ["title", "a-list-a-formula-and-a-table", "ring-all-reduce", "two-ranks-live"]
STEP_TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def talk_sites(pool):
    root = Path(tempfile.mkdtemp(prefix="distdeck-talk-"))
    talk_file = root / "talk.md"
    talk_file.write_text(TALK, encoding="utf-8")
    export_dir = root / SUBFOLDER
    report = export_site(export_dir, settings=Settings(start_pool_on_startup=False, talk_file=talk_file), pool=pool,
                         variants="default")
    server_url = serve_app(pool, talk_file=talk_file)
    yield {"server": server_url + "/", "export": _serve_static(root) + f"/{SUBFOLDER}/", "report": report,
           "export_dir": export_dir, "talk_file": talk_file}
    stop_all()
    shutil.rmtree(root, ignore_errors=True)


def test_the_export_is_the_talk_with_its_runs_recorded(talk_sites):
    report, out = talk_sites["report"], talk_sites["export_dir"]
    # The talk's own block (2 ranks) and the ddp widget's defaults: the deck's other live slides are not there.
    assert report.live_sims == 1 and report.runs == 2, report
    html = (out / "index.html").read_text()
    assert [line.split('"')[1] for line in html.split("<section id=")[1:]] == IDS
    assert not list(out.glob("track-*.html")), "a talk file has no tracks"
    talk = load_talk(ROOT / "slides", talk_sites["talk_file"])
    assert [s.id for s in talk.slides] == IDS


def walk(page, url: str) -> dict[str, set[int]]:
    """Press → from the first slide to the last step of the last; the steps seen per slide."""
    page.goto(url)
    page.wait_for_selector("html.deck-ready")
    page.locator("#deck").focus()
    seen: dict[str, set[int]] = {}
    for _ in range(200):
        here = page.wait_for_function("""() => { const p = window.distdeck.position();
            if (p.pending && p.step >= p.stepCount - 1) return null;
            return {id: p.id, step: p.step, stepCount: p.stepCount, index: p.slideIndex}; }""",
                                      timeout=STEP_TIMEOUT_MS).json_value()
        seen.setdefault(here["id"], set()).add(here["step"])
        if here["index"] == len(IDS) - 1 and here["step"] == here["stepCount"] - 1:
            return seen
        page.keyboard.press("ArrowRight")
    pytest.fail(f"the walk did not reach the end of the talk: {seen}")


def check_the_talk(page, seen: dict[str, set[int]]) -> None:
    assert list(seen) == IDS and page.locator(".reveal .slides > section").count() == len(IDS)
    assert page.title() == "A talk of my own · distdeck"
    title = page.locator("#title")
    assert title.locator("h1").inner_text() == "A talk of my own"
    assert "Test Speaker" in title.inner_text() and "TEST EVENT 2026" in title.inner_text().upper()
    own = page.locator("#a-list-a-formula-and-a-table")
    assert own.locator("li").count() == 2 and own.locator("table td").count() == 2
    assert own.locator(".katex").count() >= 3, "inline and display math typeset by KaTeX"
    assert "{{ 7 * 7 }} <em>raw</em>" in own.locator("li").first.inner_text()  # text, not a template or HTML
    notes = page.evaluate("""() => { const r = window.distdeck.reveal;
        return r.getSlideNotes(document.getElementById('a-list-a-formula-and-a-table')); }""")
    assert "Notes of my own, for the speaker." in notes
    players = page.evaluate("""() => window.distdeck.players.map(p => ({slide: p.slide.id, status: p.status,
        frames: p.frames.length, steps: p.steps.length, passed: Boolean(p.summary) && p.summary.checks.length > 0
        && p.summary.checks.every(c => c.passed)}))""")
    assert len(players) == 1, players
    run = players[0]
    assert run["slide"] == "two-ranks-live" and run["status"] == "done" and run["frames"] > 0 and run["passed"], run
    assert seen["two-ranks-live"] == set(range(run["steps"])), "→ stepped through every step of the run"
    assert "checks passed" in page.locator("#two-ranks-live .sim-summary").inner_text()
    assert page.locator(".sim-failed").count() == 0


def test_the_talk_served_walks_with_its_live_block_passing(page, talk_sites):
    page.emulate_media(reduced_motion="reduce")
    check_the_talk(page, walk(page, talk_sites["server"]))


def test_the_exported_talk_replays_from_a_plain_static_host(page, talk_sites):
    assert talk_sites["export"].endswith(f"/{SUBFOLDER}/")
    page.emulate_media(reduced_motion="reduce")
    check_the_talk(page, walk(page, talk_sites["export"]))
    assert "recorded" in page.locator("#two-ranks-live .sim-timing").first.text_content()
