"""Delivery (issue 24): compressed responses where the client accepts them, with `Vary`; SSE runs still
arrive event by event; fingerprinted static URLs cached for a year, the rest revalidated; pages that
describe themselves (meta description)."""

from __future__ import annotations

import json
import re
import time
import zlib

import brotli
import httpx
import pytest
from fastapi.testclient import TestClient

from app.delivery import Compression, accepted_encodings
from app.main import create_app
from app.settings import Settings
from simulations.runtime import RankPool
from tests.api.test_serving import live_server
from tests.sse import read_events
from tests.finished_runs import finished_run, gunzip_one_member, run_async

PAGES = ["/", "/?embed=1", "/embed/ddp?world_size=4"]
TEXT = [*PAGES, "/static/js/player/player.js", "/static/css/deck.css", "/api/simulations"]


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings(), pool=RankPool(size=8))) as client:  # the pool is never started
        yield client


@pytest.mark.parametrize("encoding, accept", [("br", "br, gzip, deflate"), ("gzip", "gzip, deflate"),
                                              ("gzip", "br;q=0, gzip"), (None, "identity")])
@pytest.mark.parametrize("path", TEXT)
def test_text_is_compressed_as_the_client_accepts(client, path, encoding, accept):
    response = client.get(path, headers={"Accept-Encoding": accept})
    assert response.status_code == 200
    assert response.headers.get("content-encoding") == encoding, path
    assert "accept-encoding" in response.headers.get("vary", "").lower(), path
    if encoding:  # the bytes on the wire: smaller, and what Content-Length says
        with client.stream("GET", path, headers={"Accept-Encoding": accept}) as raw:
            wire = b"".join(raw.iter_raw())
        assert len(wire) < len(response.content) and int(raw.headers["content-length"]) == len(wire)
        plain = brotli.decompress(wire) if encoding == "br" else zlib.decompress(wire, 16 + zlib.MAX_WBITS)
        assert plain == response.content


def test_accept_encoding_is_read_with_its_q_values():
    assert accepted_encodings("gzip;q=1.0, br;q=0, *;q=0.1") == {"gzip", "*"}
    assert accepted_encodings("") == set()
    assert accepted_encodings("BR , gzip;q=bad") == {"br"}


async def _events(scope_headers: list[tuple[bytes, bytes]], events: list[bytes]) -> list[dict]:
    """What Compression sends for an app that streams `events` as SSE messages."""

    async def sse_app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": scope_headers}
    await Compression(sse_app)(scope, None, send)
    return sent


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_an_sse_stream_is_compressed_and_each_event_decodes_as_soon_as_it_is_sent(encoding):
    events = [f"event: frame\nid: {i}\ndata: {{\"i\": {i}, \"pad\": \"{'x' * 40}\"}}\n\n".encode() for i in range(5)]
    sent = run_async(_events, [(b"accept-encoding", encoding.encode())], events)
    start, bodies = sent[0], [m["body"] for m in sent[1:]]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    assert headers["content-encoding"] == encoding and "content-length" not in headers
    decoder = brotli.Decompressor() if encoding == "br" else zlib.decompressobj(16 + zlib.MAX_WBITS)
    step = decoder.process if encoding == "br" else decoder.decompress
    # Each message the server sends decodes, on its own, to exactly the event it carries: nothing is held
    # back in the compressor until a later event (or the end) pushes it out.
    for event, body in zip(events, bodies):
        assert step(body) == event


@pytest.mark.slow
def test_a_live_run_streams_compressed_frames_before_it_ends(pool):
    """Through a real server: the first frames decode from what has arrived while the run still goes on."""
    with live_server(create_app(Settings(), pool=pool)) as url:
        with httpx.Client(base_url=url, timeout=60) as http:
            with http.stream("GET", "/api/simulations/ddp/frames?world_size=2&steps=4&seed=24",
                             headers={"Accept-Encoding": "gzip"}) as response:
                assert response.headers["content-encoding"] == "gzip"
                decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
                text, pieces_before_done = "", 0
                for chunk in response.iter_raw():
                    text += decoder.decompress(chunk).decode()
                    if "event: done" not in text:
                        pieces_before_done += "event: frame" in text
    assert "event: done" in text and text.count("event: frame") > 1
    assert pieces_before_done >= 1, "frames arrived only together with the end of the run"


# Every static URL a page links, but a plain `preload`: it must be the URL that CSS (a font's url()) or a
# script (d3's <script>, added by the player) will ask for, which has no fingerprint (and is revalidated).
STATIC_REF = re.compile(r"""<(?!link rel="preload")[^>]*?(?:src|href)="(/static/[^"]+)\"""")


@pytest.mark.parametrize("path", PAGES)
def test_every_static_url_of_a_page_is_fingerprinted_and_cached_for_a_year(client, path):
    html = client.get(path).text
    urls = set(STATIC_REF.findall(html))
    assert urls
    for url in urls:
        assert re.search(r"\?v=[0-9a-f]{12}$", url), url
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable", url


def test_the_import_map_fingerprints_every_module_import(client):
    html = client.get("/embed/ddp").text
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', html).group(1))["imports"]
    for module in ("/static/js/deck/steps.js", "/static/js/player/views/ranks.js", "/static/vendor/reveal.js/reveal.mjs"):
        assert re.fullmatch(re.escape(module) + r"\?v=[0-9a-f]{12}", imports[module]), module
        assert client.get(imports[module]).headers["cache-control"].endswith("immutable")


@pytest.mark.parametrize("query", ["", "?v=000000000000"])
def test_a_static_url_without_its_current_fingerprint_is_revalidated(client, query):
    url = "/static/js/deck/boot.js" + query
    first = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert first.headers["cache-control"] == "no-cache"
    assert first.headers["etag"].startswith('W/"'), "a compressed body is not the file's bytes: a weak ETag"
    again = client.get(url, headers={"Accept-Encoding": "gzip", "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert "accept-encoding" in again.headers.get("vary", "").lower()


@pytest.mark.parametrize("path, words", [("/", "slide deck"), ("/embed/ddp", "Distributed data parallel")])
def test_pages_have_a_meta_description(client, path, words):
    match = re.search(r'<meta name="description" content="([^"]{50,300})">', client.get(path).text)
    assert match and words in match.group(1)


def _after_paint(html: str) -> dict:
    """What a deck page fetches once its first view has painted (deck.html.j2's deck-scripts)."""
    return json.loads(re.search(r'<script type="application/json" id="deck-scripts">(.*?)</script>', html, re.S).group(1))


def test_a_widget_loads_its_own_views_and_no_formulas(client):
    """A widget page preloads the modules its scripts import and its own views, not another scenario's views,
    and links neither KaTeX nor the theme's embedded fonts; the deck still has its formulas."""
    widget = client.get("/embed/ddp?views=ranks,timeline").text
    later = _after_paint(widget)
    preloads = [re.fullmatch(r"/static/([^?]+)\?v=[0-9a-f]{12}", href).group(1) for href in later["modulepreload"]]
    assert {"js/player/views/ranks.js", "js/player/views/timeline.js", "js/deck/steps.js",
            "vendor/reveal.js/reveal.mjs"} <= set(preloads)
    assert not {"js/player/views/pipeline.js", "js/player/views/memory.js"} & set(preloads)
    # Its own entry (widget.js), not the deck's: no speaker view, print or formulas to fetch and run.
    assert later["scripts"][0].startswith("/static/js/deck/widget.js?v=")
    assert not {"js/deck/boot.js", "js/deck/speaker.js", "js/deck/pacing.js", "js/deck/print.js", "js/deck/math.js"} & set(preloads)
    assert "css/tracks.css" not in widget  # no choice of talk on a widget
    assert "katex.min.css" not in widget and "vendor/katex/katex.mjs" not in preloads and "theme/black.css" not in widget
    deck = client.get("/").text
    assert any("katex.min.css" in href for href in _after_paint(deck)["stylesheets"]) and "theme/black.css" not in deck


@pytest.mark.parametrize("path, entry", [("/", "deck/boot.js"), ("/embed/ddp?world_size=4", "deck/widget.js"),
                                         ("/?embed=1", "deck/boot.js")])
def test_the_first_view_waits_for_the_html_alone(client, path, entry):
    """Issue 24: no stylesheet, script or module is fetched before the first paint: the CSS is in the page,
    and the scripts and their modules are started from it once the first view has painted."""
    html = client.get(path).text
    assert not re.search(r'<link rel="(?:stylesheet|modulepreload)"', html)
    assert not re.search(r'<link rel="preload"[^>]*as="script"', html)
    # a slide's own module scripts are inert (app/pages/assets.py after_paint) until then
    assert not re.search(r'<script(?![^>]*type="distdeck/after-paint")[^>]*\bsrc=', html), "fetched while parsed"
    assert "<script type=\"module\"" not in html
    style = re.search(r"<head>.*?<style>(.*?)</style>", html, re.S).group(1)
    assert ".reveal" in style and "@font-face" in style and ".widget-slide" in style
    # fonts.css's url()s, relative to it, now relative to the page: the URLs the font preloads name
    fonts = set(re.findall(r'url\("(/static/vendor/fonts/[^"]+)"\)', style))
    preloaded = set(re.findall(r'<link rel="preload" href="([^"]+)" as="font"', html))
    assert preloaded and preloaded <= fonts
    for url in fonts:
        assert client.get(url).status_code == 200, url
    assert _after_paint(html)["scripts"][0].startswith(f"/static/js/{entry}?v=")


# -- a finished run's stream, compressed once for all its viewers (issue 32) --------------------------------


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A server with one recorded run of 200 frames (about 300 KB of events: more than one gzip block), and
    the run's events as sent uncompressed."""
    folder = tmp_path_factory.mktemp("runs")
    (folder / "talk.json").write_text(finished_run(frames=200).to_file().model_dump_json())
    with TestClient(create_app(Settings(runs_dir=folder), pool=RankPool(size=2))) as client:
        yield client, "/api/runs/talk/frames"


def _wire(client, path: str, headers: dict) -> tuple[bytes, httpx.Headers]:
    with client.stream("GET", path, headers=headers) as response:
        return b"".join(response.iter_raw()), response.headers


def _decoded(wire: bytes, encoding: str | None) -> bytes:
    if encoding == "br":
        return brotli.decompress(wire)
    return gunzip_one_member(wire) if encoding == "gzip" else wire


@pytest.mark.parametrize("accept, encoding, resumed_encoding", [("gzip, deflate, br", "br", "gzip"),
                                                                ("gzip, deflate", "gzip", "gzip"),
                                                                ("identity", None, None)])
def test_a_finished_run_decodes_to_the_same_events_in_every_encoding_and_from_every_resume_point(
        recorded_run, accept, encoding, resumed_encoding):
    client, path = recorded_run
    for last_event_id in [None, "0", "1", "77", "130", "198", "199", "250"]:
        headers = {"Accept-Encoding": accept} | ({"Last-Event-ID": last_event_id} if last_event_id else {})
        plain, _ = _wire(client, path, headers | {"Accept-Encoding": "identity"})
        wire, response_headers = _wire(client, path, headers)
        expected = resumed_encoding if last_event_id else encoding
        assert response_headers.get("content-encoding") == expected, last_event_id
        assert int(response_headers["content-length"]) == len(wire)
        assert "accept-encoding" in response_headers.get("vary", "").lower()
        assert _decoded(wire, expected) == plain, last_event_id
        frames = [e for e in read_events(plain.decode().splitlines()) if e[0] == "frame"]
        first = int(last_event_id) + 1 if last_event_id else 0
        assert [int(f[1]) for f in frames] == list(range(first, 200)), last_event_id


@pytest.mark.parametrize("accept", ["gzip, deflate, br", "gzip, deflate"])
def test_viewers_of_a_finished_run_after_the_first_cost_no_compression(recorded_run, monkeypatch, accept):
    """Today's cost of a crowd: every viewer's stream compressed on its own. A finished run's is compressed
    once per encoding and kept with the run: the next viewers get the same bytes, compressing nothing."""
    client, path = recorded_run
    compressors = []
    monkeypatch.setattr(zlib, "compressobj", lambda *a, real=zlib.compressobj: compressors.append(a) or real(*a))
    monkeypatch.setattr(brotli, "compress", lambda *a, real=brotli.compress, **kw: compressors.append(a) or real(*a, **kw))
    monkeypatch.setattr(brotli, "Compressor", lambda *a, real=brotli.Compressor, **kw: compressors.append(a) or real(*a, **kw))
    first, _ = _wire(client, path, {"Accept-Encoding": accept})
    compressors.clear()
    viewers = [_wire(client, path, {"Accept-Encoding": accept})[0] for _ in range(5)]
    assert compressors == []
    assert all(wire == first for wire in viewers)


@pytest.mark.slow
def test_a_cached_runs_compressed_forms_count_in_the_cache_bound(pool):
    app = create_app(Settings(), pool=pool)
    with TestClient(app) as client:
        simulator = app.state.simulator
        path = "/api/simulations/ddp/frames?world_size=2&seed=3232"
        plain = client.get(path, headers={"Accept-Encoding": "identity"}).content
        deadline = time.monotonic() + 10
        while not simulator.cached() and time.monotonic() < deadline:  # filed in the cache just after it ends
            time.sleep(0.01)
        (run,) = simulator.cached()
        alone = simulator.cached_bytes
        assert alone == run.nbytes
        wire, headers = _wire(client, path, {"Accept-Encoding": "gzip"})
        assert headers["content-encoding"] == "gzip" and _decoded(wire, "gzip") == plain
        assert simulator.cached_bytes == run.nbytes >= alone + len(wire)
        assert client.get("/healthz").json()["cached_bytes"] == simulator.cached_bytes
        # A bound that the run and its gzip form fit, and not its brotli form as well: kept for the viewer
        # who asked, the run then leaves the cache, and nothing of it is counted any more.
        simulator.cache_bytes = simulator.cached_bytes
        wire, headers = _wire(client, path, {"Accept-Encoding": "br"})
        assert headers["content-encoding"] == "br" and _decoded(wire, "br") == plain
        assert simulator.cached() == [] and simulator.cached_bytes == 0
