"""What the browser tests share, made once per session by whichever test asks first and stopped when the
browser tests end (tests/browser/conftest.py): one deck server (the app in this process, on the session's rank
pool, so a live run streamed for one test is in its run cache for the next), the deck exported once as a
static site (default runs only, to keep CI short) served by a plain static file server from a sub-folder
(/blog/deck/, as in a Hugo or GitHub Pages site), and two blog-like pages on other origins that iframe the
deck, one of them allowed to drive it by postMessage."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests import checked_runs
from tests.served import free_port

ROOT = Path(__file__).resolve().parents[2]
SUBFOLDER = "blog/deck"


def server_log():
    """Where a test server writes its log: a file, never a pipe nobody reads. A pipe fills after a few
    hundred request lines (64 KB) and then blocks the server mid-suite."""
    return tempfile.TemporaryFile(mode="w+")


def wait_until_up(url: str, process: subprocess.Popen, timeout_s: float = 60, log=None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = ""
            if log is not None:
                log.seek(0)
                output = log.read()
            raise RuntimeError(f"server exited with {process.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up in {timeout_s} s")


@dataclass
class DeckServer:
    deck_url: str  # the FastAPI app, with the session's rank pool behind its live slides
    allowed_site: OnePageSite  # may drive the deck by postMessage (the app's postmessage_origins)
    other_site: OnePageSite  # may embed it (frame-ancestors *) but not drive it
    app: object  # the app itself, for its simulator

    def record(self, name: str, params) -> object:
        """A finished run made by the server's simulator (cached there, as if a page had asked for it)."""
        run = self.app.state.simulator.submit(name, params)
        while not run.done:
            time.sleep(0.05)
        return run


@dataclass
class Sites:
    server_url: str  # the deck server's URL
    export_url: str  # the static export, under SUBFOLDER of a plain static server
    export_dir: Path


_deck: DeckServer | None = None
_sites: Sites | None = None
_lock = threading.RLock()
_root: Path | None = None  # kept for the session: a second export into it reuses the recorded runs


def deck_server(pool) -> DeckServer:
    """The session's deck server, started on first use."""
    global _deck
    with _lock:
        if _deck is None:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            # 127.0.0.2 is loopback too, and a different origin from 127.0.0.1.
            allowed, other = embedding_site("127.0.0.1", url), embedding_site("127.0.0.2", url)
            _shared_stoppers.extend([allowed.close, other.close])
            app = _start_app(pool, _shared_stoppers, port=port, postmessage_origins=[allowed.origin])[1]
            _deck = DeckServer(url, allowed, other, app)
        return _deck


def sites(pool) -> Sites:
    """The deck server and the static export, exported on first use."""
    global _sites
    with _lock:
        if _sites is None:
            _sites = _start(pool)
        return _sites


def _start(pool) -> Sites:
    from app.export import export_site
    from app.settings import Settings

    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="distdeck-site-"))
        atexit.register(shutil.rmtree, _root, True)
    root = _root
    export_dir = root / SUBFOLDER
    # The export's runs are made by the deck server's simulator, so they are in its cache when the tests walk
    # the live slides on the server (each was run twice, once for each, before).
    deck = deck_server(pool)
    export_site(export_dir, settings=Settings(start_pool_on_startup=False), pool=pool, variants="default",
                record=deck.record)
    checked_runs.note_export(export_dir)
    server_url = deck.deck_url
    export_url = _serve_static(root, _shared_stoppers) + f"/{SUBFOLDER}/"
    return Sites(server_url, export_url, export_dir)


def serve_app(pool, **settings) -> str:
    """A server of the test's own: the app in a thread of this process, so it can use the session's pool (no
    second set of ranks); `settings` set more of its Settings (runs_dir=...). Stopped by stop_all()."""
    return _start_app(pool, _stoppers, **settings)[0]


def _start_app(pool, stoppers: list, port: int | None = None, **settings) -> tuple[str, object]:
    """(its URL, the app)"""
    import uvicorn

    from app.main import create_app
    from app.settings import Settings

    port = port or free_port()
    app = create_app(Settings(start_pool_on_startup=False, max_queued_runs=64, **settings), pool=pool)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name="deck-server")
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the deck server did not start") from None
            time.sleep(0.1)

    def stop() -> None:
        # The app's shutdown closes its simulator: what its pages queued is dropped, the run in progress
        # stopped, so later tests get the pool to themselves.
        server.should_exit = True
        thread.join(30)
        simulator = getattr(app.state, "simulator", None)
        if simulator is not None:
            simulator._thread.join(120)

    atexit.register(stop)
    stoppers.append(stop)
    return url, app


def _serve_static(root: Path, stoppers: list | None = None) -> str:
    """`python -m http.server`: a plain static file server, nothing distdeck about it. Stopped by stop_all(),
    unless `stoppers` says otherwise."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                "--directory", str(root)],
                               stdout=(log := server_log()), stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(f"{url}/{SUBFOLDER}/index.html", process, log=log)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()

    atexit.register(stop)
    (_stoppers if stoppers is None else stoppers).append(stop)
    return url


_stoppers: list = []  # the servers tests started themselves
_shared_stoppers: list = []  # the shared servers'


def stop_all() -> None:
    """Shut down the servers tests started themselves (serve_app, _serve_static), not the shared ones."""
    with _lock:
        while _stoppers:
            _stoppers.pop()()


def stop_shared() -> None:
    """Shut every server down, the shared ones too (idempotent): when the browser tests end, before the
    session's pool closes. A later sites() or deck_server() starts them again (the export then reuses its
    recorded runs)."""
    global _sites, _deck
    stop_all()
    with _lock:
        while _shared_stoppers:
            _shared_stoppers.pop()()
        _sites = _deck = None


class OnePageSite:
    """One HTML page on its own loopback origin (127.0.0.2 is loopback too): a blog that embeds the deck."""

    def __init__(self, html: str, host: str = "127.0.0.2") -> None:
        page = html.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.origin = f"http://{host}:{self.server.server_address[1]}"
        self.url = self.origin + "/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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


def BlogPage(src: str, host: str = "127.0.0.2") -> OnePageSite:  # noqa: N802 (reads as the page it makes)
    """The README's widget snippet in a blog post, iframing `src`."""
    return OnePageSite(BLOG_PAGE.replace("SRC", src), host)


# The README's widget snippet, as a blog post would carry it.
BLOG_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A blog post</title><link rel="icon" href="data:,"></head>
<body style="margin:0;background:#fff">
<p>Some text of the post before the widget.</p>
<iframe id="widget" src="SRC" title="A live simulation" width="800" height="450"
        allow="fullscreen" loading="lazy" style="border:0"></iframe>
</body></html>"""
