"""Browser fixtures: the deck served by uvicorn on a free loopback port, a page from a second
origin that embeds it, and one headless Chromium for the whole session."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.sites import OnePageSite, serve_app, server_log, stop_all, wait_until_up
from tests.served import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def embedding_site(host: str, deck_url: str) -> OnePageSite:
    """A blog-like page on another origin that iframes the deck and logs what it posts back."""
    return OnePageSite(EMBEDDING_PAGE.replace("DECK_URL", deck_url), host)


EMBEDDING_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A blog post</title>
<link rel="icon" href="data:,"></head>
<body style="margin:0;background:#fff">
<p id="before">Some text of the post before the deck.</p>
<iframe id="deck" src="DECK_URL/?embed=1" title="distdeck" width="960" height="540"
        allow="fullscreen" style="border:0"></iframe>
<script>
  window.received = [];
  window.addEventListener('message', (event) => {
    if (event.data && event.data.type) window.received.push({origin: event.origin, data: event.data});
  });
  window.sendToDeck = (message) => document.getElementById('deck').contentWindow.postMessage(message, 'DECK_URL');
</script>
</body></html>"""


@dataclass
class Servers:
    deck_url: str
    allowed_site: OnePageSite  # may drive the deck by postMessage (DISTDECK_POSTMESSAGE_ORIGINS)
    other_site: OnePageSite  # may embed it (frame-ancestors *) but not drive it


@pytest.fixture(scope="session")
def servers():
    port = free_port()
    deck_url = f"http://127.0.0.1:{port}"
    # 127.0.0.2 is loopback too, and a different origin from 127.0.0.1.
    allowed, other = embedding_site("127.0.0.1", deck_url), embedding_site("127.0.0.2", deck_url)
    env = dict(
        os.environ,
        DISTDECK_START_POOL_ON_STARTUP="false",
        DISTDECK_POSTMESSAGE_ORIGINS=f'["{allowed.origin}"]',
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=(log := server_log()), stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_until_up(f"{deck_url}/healthz", process, log=log)
        yield Servers(deck_url, allowed, other)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        allowed.close()
        other.close()


@pytest.fixture(scope="session")
def deck_url(servers):
    return servers.deck_url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page; the test fails if the page logged any console error or threw."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.console_errors = errors
    yield page
    context.close()
    assert errors == [], f"console errors: {errors}"


@pytest.fixture(scope="module")
def live_url(pool):
    """The app in this process on the session's rank pool, so its live slides run (no second set of ranks);
    stopped after the module, once the simulator has finished what its pages queued."""
    yield serve_app(pool)
    stop_all()
