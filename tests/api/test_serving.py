"""The server under load and abuse (issue 14): hostile headers, errors that keep their security headers,
a widget page that never reflects the Host header, and a widget that refuses what the pool cannot run."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations.runtime import RankPool
from tests.sse import read_events

SECURITY_HEADERS = ("content-security-policy", "x-content-type-options", "referrer-policy")


@pytest.fixture
def app_without_pool():
    return create_app(Settings(), pool=RankPool(size=2))  # never started: nothing here runs a job


# -- 1. Last-Event-ID -------------------------------------------------------------------------------


@pytest.mark.slow
# Header bytes are read as latin-1: b"\xb2" is "²", which str.isdigit() accepts and int() refuses.
@pytest.mark.parametrize("last_event_id", [b"\xb2", b"\xb9", "٣".encode(), b"9" * 5000, b"-3", b"+2", b"0x10", b"1e3"])
def test_a_last_event_id_that_is_not_a_plain_index_starts_from_the_first_frame(pool, last_event_id):
    with TestClient(create_app(Settings(), pool=pool), raise_server_exceptions=False) as client:
        with client.stream("GET", "/api/simulations/ddp/frames?world_size=1",
                           headers={"Last-Event-ID": last_event_id}) as response:
            assert response.status_code == 200
            events = list(read_events(response.iter_lines()))
    frames = [e for e in events if e[0] == "frame"]
    assert events[-1][0] == "done" and frames[0][1] == "0"


@pytest.mark.slow
def test_a_plain_last_event_id_still_resumes(pool):
    with TestClient(create_app(Settings(), pool=pool)) as client:
        with client.stream("GET", "/api/simulations/ddp/frames?world_size=1",
                           headers={"Last-Event-ID": "2"}) as response:
            frames = [e for e in read_events(response.iter_lines()) if e[0] == "frame"]
    assert frames[0][1] == "3"


# -- 2. security headers on every response, errors included ---------------------------------------


@pytest.mark.parametrize("path", ["/boom", "/api/boom"])
def test_a_500_carries_the_security_headers(app_without_pool, path):
    @app_without_pool.get(path)
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app_without_pool, raise_server_exceptions=False) as client:
        response = client.get(path)
    assert response.status_code == 500
    assert "a bug" not in response.text and "Traceback" not in response.text
    for name in SECURITY_HEADERS:
        assert name in response.headers, name
    assert response.headers["x-content-type-options"] == "nosniff"


# -- 8. the Host header is never reflected; the widget refuses what the pool cannot run ------------


@pytest.mark.parametrize("path", ["/embed/ddp?world_size=2&steps=2", "/embed/ring_attention?world_size=2"])
def test_the_widget_page_never_reflects_the_host_header(app_without_pool, path):
    with TestClient(app_without_pool) as client:
        page = client.get(path, headers={"Host": "evil.example:666"})
    assert page.status_code == 200
    assert "evil.example" not in page.text
    href = re.search(r'id="embed-open" href="([^"]*)"', page.text).group(1)  # the open-in-a-new-tab link
    assert href.startswith("./"), href


def test_the_widget_link_opens_the_same_widget_with_its_params(app_without_pool):
    with TestClient(app_without_pool) as client:
        page = client.get("/embed/ddp?world_size=2&steps=2")
    assert 'href="./ddp?world_size=2&amp;steps=2"' in page.text


def test_the_widget_for_more_ranks_than_the_pool_has_is_a_422_page(app_without_pool):
    with TestClient(app_without_pool) as client:
        page = client.get("/embed/ddp?world_size=4")
        fits = client.get("/embed/ddp?world_size=2")
        default = client.get("/embed/ddp")  # ddp's default world_size is 4
    assert page.status_code == 422
    assert "world_size" in page.text and "pool has 2" in page.text
    assert fits.status_code == 200
    assert default.status_code == 422
