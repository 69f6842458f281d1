"""HEAD answers wherever GET does on the pages a link checker visits: the deck, a slide link, a
widget, the static files. Same status and headers as GET, no body."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)


@pytest.mark.parametrize("path", [
    "/", "/?embed=1", "/?print-pdf", "/embed/ddp", "/embed/ddp?world_size=2&controls=world_size",
    "/static/js/deck/boot.js", "/static/css/deck.css",
])
def test_head_is_get_without_the_body(client, path):
    get = client.get(path)
    head = client.head(path)
    assert get.status_code == 200, get.text[:200]
    assert head.status_code == 200
    assert head.content == b""
    for header in ("content-type", "content-security-policy"):
        assert head.headers.get(header) == get.headers.get(header), header


def test_head_follows_get_on_redirects_and_errors(client):
    slide = client.head("/slides/memory-wall", follow_redirects=False)
    assert slide.status_code == 307 and slide.headers["location"] == "/#/memory-wall/0"
    assert client.head("/slides/no-such-slide").status_code == 404
    assert client.head("/embed/no-such-scenario").status_code == 404
    assert client.head("/embed/ddp?world_size=99").status_code == 422
