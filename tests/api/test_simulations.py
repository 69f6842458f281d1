"""The simulations API: catalog, the SSE contract with resume, traces, 422s, 503s, recorded runs."""

from __future__ import annotations

import json
import re
import time

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape

from app.main import create_app
from app.settings import Settings
from simulations.frames import SCHEMA_VERSION
from simulations.runtime import RankPool
from simulations.scenarios import ddp
from tests.sse import read_events

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(pool):
    with TestClient(create_app(Settings(), pool=pool), raise_server_exceptions=False) as client:
        yield client


def stream(client, path, headers=None):
    with client.stream("GET", path, headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(read_events(response.iter_lines()))


def test_catalog_lists_scenarios_with_schema_and_defaults(client):
    catalog = {s["name"]: s for s in client.get("/api/simulations").json()}
    ddp = catalog["ddp"]
    assert ddp["defaults"]["world_size"] == 4
    bounds = ddp["params_schema"]["properties"]["world_size"]
    assert (bounds["minimum"], bounds["maximum"]) == (1, 8)
    assert "world_size" in ddp["controls"]
    assert client.get("/api/simulations/ddp").json()["name"] == "ddp"
    assert client.get("/api/simulations/nope").status_code == 404


def test_stream_is_meta_frames_summary_done(client):
    events = stream(client, "/api/simulations/ddp/frames?world_size=3&steps=1")
    kinds = [e[0] for e in events]
    assert kinds[0] == "meta" and kinds[-2:] == ["summary", "done"]
    assert set(kinds[1:-2]) == {"frame"}
    meta = events[0][2]
    assert meta["schema_version"] == SCHEMA_VERSION and meta["world_size"] == 3
    frames = [e for e in events if e[0] == "frame"]
    assert [int(e[1]) for e in frames] == list(range(len(frames)))  # id = frame index
    assert all(len(e[2]["ranks"]) == 3 for e in frames)
    summary = events[-2][2]
    assert summary["checks"] and all(c["passed"] for c in summary["checks"])
    assert {"name", "passed", "measured", "expected", "detail"} <= set(summary["checks"][0])
    assert events[-1][2]["frames"] == len(frames)


def test_last_event_id_resumes_after_that_frame(client):
    path = "/api/simulations/ddp/frames?world_size=2&steps=2"
    full = [e for e in stream(client, path) if e[0] == "frame"]
    resumed = stream(client, path, headers={"Last-Event-ID": "5"})
    frames = [e for e in resumed if e[0] == "frame"]
    assert resumed[0][0] == "meta"
    assert [int(e[1]) for e in frames] == list(range(6, len(full)))
    assert [e[2] for e in frames] == [e[2] for e in full[6:]]  # the same run, replayed from the cache


@pytest.mark.parametrize("query, field, words", [
    ("world_size=0", "world_size", "greater than or equal to 1"),
    ("world_size=999", "world_size", "less than or equal to 8"),
    ("world_size=abc", "world_size", "valid integer"),
    ("bucket_kb=0", "bucket_kb", "greater than or equal to"),
    ("colour=red", "colour", "Extra inputs are not permitted"),
])
def test_bad_params_are_422_naming_field_and_bound(client, query, field, words):
    response = client.get(f"/api/simulations/ddp/frames?{query}")
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["query", field]
    assert words in detail["msg"]
    assert "Traceback" not in response.text


def test_trace_is_chrome_trace_json_with_a_track_per_rank(client):
    trace = client.get("/api/simulations/ddp/trace?world_size=4").json()
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {r: f"rank {r}" for r in range(4)}
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["tid"] for e in spans} == {0, 1, 2, 3}
    assert {"forward", "backward", "optimizer"} <= {e["name"] for e in spans}
    assert all(e["dur"] >= 0 for e in spans)


def test_identical_requests_share_one_run(pool):
    app = create_app(Settings(), pool=pool)
    with TestClient(app):
        simulator = app.state.simulator
        params = {"world_size": 2, "seed": 12345}
        first = simulator.submit("ddp", ddp.Params(**params))
        second = simulator.submit("ddp", ddp.Params(**params))
        assert first is second


def test_past_the_queue_bound_is_503_with_retry_after(pool):
    app = create_app(Settings(max_queued_runs=1), pool=pool)
    with TestClient(app, raise_server_exceptions=False) as client:
        simulator = app.state.simulator
        with pool._job_lock:  # the ranks are busy: runs pile up in the simulator's queue
            simulator.submit("ddp", ddp.Params(world_size=2, seed=101))  # taken by the worker, waits
            deadline = time.monotonic() + 5
            while simulator._queue and time.monotonic() < deadline:
                time.sleep(0.01)
            simulator.submit("ddp", ddp.Params(world_size=2, seed=102))  # fills the queue of one
            response = client.get("/api/simulations/ddp/frames?world_size=2&seed=103")
        assert response.status_code == 503
        assert response.headers["retry-after"] == "2"
        assert "busy" in response.json()["detail"]


def test_a_run_larger_than_the_pool_is_422_naming_the_pool_size(pool):
    small = RankPool(size=2)  # never started: the check comes first
    with TestClient(create_app(Settings(), pool=small)) as client:
        response = client.get("/api/simulations/ddp/frames?world_size=4")
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["query", "world_size"] and "pool has 2" in detail["msg"]


def test_the_widget_page_carries_the_cached_runs_first_frame_and_starts_no_run(client):
    from app.pages.widget import first_frame

    query = "world_size=2&steps=1&width=4"
    cold = client.get(f"/embed/ddp?{query}").text
    assert "sim-first-frame" not in cold, "nothing cached yet: the page waits for its stream"
    assert "sim-first-frame" not in client.get(f"/embed/ddp?{query}").text, "the page itself started no run"
    events = stream(client, f"/api/simulations/ddp/frames?{query}")
    frame0 = next(data for event, _, data in events if event == "frame")
    page = client.get(f"/embed/ddp?{query}").text
    first = json.loads(re.search(r'<script type="application/json" class="sim-first-frame">(.*?)</script>', page).group(1))
    assert first["frame"] == frame0 and first["meta"]["params"]["world_size"] == 2
    captions = [data["caption"] for event, _, data in events if event == "frame"]
    assert first["captions"] == list(dict.fromkeys(captions))  # room for the longest from the start
    assert f'<p class="sim-caption">{escape(frame0["caption"])}</p>' in page  # painted before any script
    assert first_frame(None) is None
