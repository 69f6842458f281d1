"""A talk file served (DISTDECK_TALK_FILE, `serve --talk`): its deck page, a link to one of its slides, the
speaker view's slot from its `minutes`, and a file broken after the server started answered with a page that
says where, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.content.talkfile import STARTER_TALK
from app.main import create_app
from app.settings import Settings
from tests.api.test_deck import deck_config


@pytest.fixture
def talk_file(tmp_path) -> Path:
    path = tmp_path / "talk.md"
    path.write_text(STARTER_TALK.read_text(encoding="utf-8").replace("minutes: 10", "minutes: 7"), encoding="utf-8")
    return path


@pytest.fixture
def client(talk_file) -> TestClient:
    return TestClient(create_app(Settings(start_pool_on_startup=False, talk_file=talk_file)),
                      raise_server_exceptions=False)


def test_the_talk_is_the_deck_page(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.text
    assert "<title>Data parallelism, live &middot; distdeck</title>" in html
    ids = ["title", "one-gpu-is-not-enough", "ddp-live", "two-ranks-gradients-averaged-by-a-ring", "thank-you"]
    assert [line.split('"')[1] for line in html.split("<section id=")[1:]] == ids
    config = deck_config(html)
    assert [s["title"] for s in config["sections"]] == ["Why many GPUs", "Your own run"]
    assert config["pacing"]["slotSeconds"] == 7 * 60 and set(config["pacing"]["budgets"]) == set(ids)
    assert config["track"] is None and 'class="track-menu"' not in html  # a talk file has no tracks to switch
    assert html.count('class="live-sim"') == 2
    assert "Everything after a line" in html  # the own slide's notes


def test_a_slide_link_opens_the_talk_at_it(client):
    response = client.get("/slides/two-ranks-gradients-averaged-by-a-ring", follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/#/two-ranks-gradients-averaged-by-a-ring/0"
    assert client.get("/slides/zero-stages", follow_redirects=False).status_code == 404  # in the deck, not the talk
    refused = client.get("/?track=20")  # the deck's tracks are not the talk's
    assert refused.status_code == 422 and "this talk has no tracks" in refused.text


def test_an_edit_shows_on_reload_and_a_broken_edit_is_a_page_naming_the_line(client, talk_file):
    talk_file.write_text(talk_file.read_text().replace("## Thank you", "## Thanks, everyone"))
    assert 'id="thanks-everyone"' in client.get("/").text
    talk_file.write_text(talk_file.read_text().replace("@slide ddp-live", "@slide ddp-lives"))
    line = talk_file.read_text().splitlines().index("@slide ddp-lives") + 1
    for path in ("/", "/slides/ddp-live"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 503 and "Traceback" not in response.text
        assert f"{talk_file}:{line}: @slide ddp-lives" in response.text
