"""Browser fixtures: one headless Chromium for the whole session, a fresh page per test, and the servers the
tests share (tests/browser/sites.py: the deck server on the session's rank pool, the static export, pages on
other origins that embed the deck), made once and stopped when the browser tests end."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.sites import deck_server, sites, stop_shared

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@pytest.fixture(scope="session")
def shared_servers(pool):
    """Owns the shared servers' end: before the session's pool closes, if the browser tests end the session."""
    yield
    stop_shared()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last browser test (its fixtures torn down, its pages closed), the shared servers stop, so the
    tests after it get the pool to themselves: nothing the deck's pages queued runs on beside them."""
    result = yield
    if nextitem is not None and HERE not in Path(nextitem.path).parents:
        stop_shared()
    return result


# Per test, each a look-up of what is already running (started again where tests of another folder ran in
# between, after which the hook above stopped it).
@pytest.fixture
def servers(pool, shared_servers):
    """The deck server (`deck_url`) and the two embedding pages, allowed and other."""
    return deck_server(pool)


@pytest.fixture
def deck_url(servers):
    return servers.deck_url


@pytest.fixture
def live_url(site):
    """The deck server: the app in this process on the session's rank pool, so its live slides run (no second
    set of ranks), with the deck's default runs in its cache already (the export made them through it)."""
    return site.server_url


@pytest.fixture
def site(pool, shared_servers):
    """The deck server and the static export of the deck (tests/browser/sites.py)."""
    return sites(pool)


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
