"""The deck over HTTP: pages, headers, error pages, traversal, escaping."""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import memory_math
from app.main import create_app
from app.settings import Settings
from app.content.manifest import load_deck
from simulations import formulas

ROOT = Path(__file__).resolve().parents[2]
DECK = load_deck(ROOT / "slides")


def client_for(**settings) -> TestClient:
    # No `with`: the lifespan (rank pool) is not needed to serve pages.
    return TestClient(create_app(Settings(start_pool_on_startup=False, **settings)), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client() -> TestClient:
    return client_for()


def deck_config(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="deck-config">(.*?)</script>', html, re.S)
    assert match, "the deck page carries its config as JSON"
    return json.loads(match.group(1))


def test_deck_renders_every_slide_in_manifest_order(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    ids = re.findall(r'<section id="([a-z0-9-]+)" data-slide-id=', response.text)
    assert ids == [slide.id for slide in DECK.slides]
    assert response.text.count('<aside class="notes">') == len(DECK.slides)
    # the deck's script, started once the first view has painted (deck.html.j2's loader)
    assert re.search(r'"scripts": \["/static/js/deck/boot.js\?v=[0-9a-f]+"', response.text)


def test_deck_carries_the_computed_memory_numbers(client):
    html = client.get("/").text
    seven_b = html[html.index('<section id="one-gpu-7b"'):]
    seven_b = seven_b[: seven_b.index("</section>")]
    # Computed from the formulas (the slide stores no score matrices: FlashAttention).
    model = memory_math.LLAMA_7B
    states = memory_math.model_state_bytes(model.params)
    activations = formulas.activation_bytes(4096, 1, model.hidden, model.heads, model.layers, flash_attention=True)
    for n_bytes in (states["params"], states["optimizer"], activations):
        assert memory_math.gb(n_bytes) in seven_b
    assert memory_math.gb(activations) == "18 GB"  # the "about 18 GB", not the old 104 GB
    assert 'data-steps="5"' in seven_b
    wall = html[html.index('<section id="memory-wall"'):]
    wall = wall[: wall.index("</section>")]
    for label in ("16 GB", "112 GB", "1,120 GB", "6,480 GB"):
        assert label in wall


def test_security_headers_default_allow_any_embedder(client):
    for path in ("/", "/healthz", "/static/css/deck.css", "/no-such-page"):
        response = client.get(path)
        assert response.headers["content-security-policy"] == "frame-ancestors *", path
        assert "x-frame-options" not in response.headers, path
        assert response.headers["x-content-type-options"] == "nosniff"


def test_frame_ancestors_and_postmessage_origins_come_from_settings():
    client = client_for(frame_ancestors=["'self'", "https://blog.example"], postmessage_origins=["https://blog.example"])
    response = client.get("/?embed=1")
    assert response.headers["content-security-policy"] == "frame-ancestors 'self' https://blog.example"
    assert deck_config(response.text)["postMessageOrigins"] == ["https://blog.example"]


def test_settings_refuse_a_source_that_would_inject_policy():
    with pytest.raises(ValueError):
        Settings(frame_ancestors=["https://a.example; script-src *"])


def test_embed_variant_drops_the_top_bar_and_adds_its_buttons(client):
    plain, embed = client.get("/").text, client.get("/?embed=1").text
    assert 'class="topbar"' in plain and 'class="topbar"' not in embed
    assert 'id="embed-fullscreen"' in embed and 'id="embed-open"' in embed
    assert 'target="_blank" rel="noopener"' in embed
    assert deck_config(embed)["embed"] is True and deck_config(plain)["embed"] is False
    assert deck_config(client.get("/?embed=0").text)["embed"] is False


def test_print_view_is_flagged_for_the_front_end(client):
    html = client.get("/?print-pdf").text
    assert deck_config(html)["printPdf"] is True
    assert re.search(r'<html lang="en" class="deck-page chromeless print-mode">', html)


def test_speaker_view_previews_get_slides_only(client):
    html = client.get("/?receiver&progress=false").text
    assert 'class="topbar"' not in html and 'id="embed-fullscreen"' not in html
    assert "chromeless" in html


def test_unknown_page_is_a_styled_404_with_the_path_escaped(client):
    response = client.get("/nothing/<script>alert(1)</script>")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "Page not found" in response.text and "/static/css/page.css" in response.text
    assert "<script>alert(1)</script>" not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


def test_slide_links_redirect_to_the_deck_or_404(client):
    response = client.get("/slides/one-gpu-7b", follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == "/#/one-gpu-7b/0"
    missing = client.get("/slides/no-such-slide")
    assert missing.status_code == 404 and "Page not found" in missing.text


def test_api_404s_stay_json(client):
    response = client.get("/api/no-such-resource")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}


def test_query_values_never_reach_the_page_unescaped(client):
    payload = '"><script>alert(1)</script>'
    for query in (f"embed={payload}", f"print-pdf={payload}", f"{payload}=1"):
        response = client.get(f"/?{query}")
        assert response.status_code == 200
        assert "<script>alert(1)</script>" not in response.text


def test_live_macro_output_is_escaped_json():
    from app.content.markup import jinja_env

    env = jinja_env((ROOT / "slides").resolve())
    params = {"name": "it's <b>\"quoted\"</b>", "world_size": 4}
    html = env.from_string(
        '{% import "macros.html.j2" as m %}{{ m.live("ddp", params, ["ranks", "timeline"], ["world_size"]) }}'
    ).render(params=params)
    assert "<b>" not in html
    from html.parser import HTMLParser

    found = {}

    class Grab(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if dict(attrs).get("class") == "live-sim":
                found.update(dict(attrs))

    Grab().feed(html)
    assert found["data-scenario"] == "ddp"
    assert json.loads(found["data-params"]) == params
    assert json.loads(found["data-views"]) == ["ranks", "timeline"]
    assert json.loads(found["data-controls"]) == ["world_size"]


@pytest.mark.parametrize(
    "raw_path",
    [
        "/static/../pyproject.toml",
        "/static/%2e%2e/pyproject.toml",
        "/static/..%2fpyproject.toml",
        "/static/%2e%2e%2fapp%2fsettings.py",
        "/static/css/../../app/settings.py",
        "/static//etc/passwd",
        "/static/..\\pyproject.toml",
    ],
)
def test_static_routes_serve_nothing_outside_static(raw_path):
    """Sent as raw ASGI paths: an HTTP client would normalise the dots away before sending."""
    app = create_app(Settings(start_pool_on_startup=False))
    # In a thread of its own: Playwright's sync API may own this thread's event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        status, body = pool.submit(asyncio.run, raw_get(app, raw_path)).result()
    assert status == 404
    assert b"[build-system]" not in body and b"class Settings" not in body and b"root:" not in body


async def raw_get(app, raw_path: str) -> tuple[int, bytes]:
    from urllib.parse import unquote

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": unquote(raw_path), "raw_path": raw_path.encode(), "root_path": "",
        "query_string": b"", "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    messages = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        messages.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return status, body


def test_a_broken_slide_is_a_500_page_not_a_traceback(tmp_path):
    section = tmp_path / "sections" / "00-broken"
    section.mkdir(parents=True)
    (section / "section.toml").write_text('title = "Broken"\n[[slides]]\nid = "broken"\ntitle = "Broken"\n')
    (section / "broken.html.j2").write_text('{% extends "slide.html.j2" %}{% block content %}{{ no_such_variable }}{% endblock %}')
    (tmp_path / "slide.html.j2").write_text((ROOT / "slides" / "slide.html.j2").read_text())
    response = client_for(slides_dir=tmp_path).get("/")
    assert response.status_code == 500
    assert "Something went wrong" in response.text
    assert "Traceback" not in response.text and "no_such_variable" not in response.text


def test_healthz(client):
    assert client.get("/healthz").json()["status"] == "ok"
