"""HEAD answers wherever GET does (app/head.py): every GET route of the app, with the GET's status and
headers and no body; the operations that start a run answer their headers without starting one, and a
HEAD of a stream does not stay open."""

from __future__ import annotations

import anyio
import pytest
from fastapi.testclient import TestClient
from starlette.responses import StreamingResponse

from app.head import HeadAsGet
from app.main import create_app
from app.settings import Settings
from simulations.frames import Check, Frame, Meta, RankState, RunFile, Summary

RUN_ID = "ddp-2"
# A value for each path parameter of the app's routes (a new parameter makes test_every_get_route_is_covered fail).
PATH_VALUES = {"{slide_id}": "memory-wall", "{name}": "ddp", "{run_id}": RUN_ID}
# GETs that start a simulation run: their HEAD is checked on its own (no run), not compared with a GET.
# Query strings a route needs to answer 200.
QUERY = {"/api/estimate/replay": "?scenario=ddp"}
STARTS_A_RUN = {"/api/simulations/{name}/frames", "/api/simulations/{name}/trace"}


def get_routes(routes, prefix: str = "") -> list[str]:
    """The path of every route answering GET, included routers walked through."""
    paths = []
    for route in routes:
        if hasattr(route, "original_router"):  # FastAPI's included router
            paths += get_routes(route.original_router.routes, prefix + route.include_context.prefix)
        elif "GET" in (getattr(route, "methods", None) or ()):
            paths.append(prefix + route.path)
    return paths


def concrete(path: str) -> str:
    for name, value in PATH_VALUES.items():
        path = path.replace(name, value)
    return path


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> TestClient:
    runs = tmp_path_factory.mktemp("runs")
    run = RunFile(meta=Meta(scenario="ddp", title="DDP", params={"world_size": 2}, world_size=2, backend="gloo",
                            views=[]),
                  frames=[Frame(index=0, phase="shard", caption="start", ranks=[RankState(rank=0), RankState(rank=1)])],
                  summary=Summary(checks=[Check(name="grads", passed=True)]))
    (runs / f"{RUN_ID}.json").write_text(run.model_dump_json())
    # No rank pool: a HEAD that tried to start a run would fail here rather than quietly run one.
    with TestClient(create_app(Settings(start_pool_on_startup=False, pool_size=4, runs_dir=runs)),
                    raise_server_exceptions=False) as client:
        yield client


APP = create_app(Settings(start_pool_on_startup=False))
GET_PATHS = sorted(set(get_routes(APP.routes)) - STARTS_A_RUN)


def test_every_get_route_is_covered():
    paths = get_routes(APP.routes)
    assert {"/healthz", "/runs", "/runs/{run_id}", "/api/simulations", "/embed/{name}"} <= set(paths)
    assert STARTS_A_RUN <= set(paths)
    for path in paths:
        assert "{" not in concrete(path), f"no test value for a parameter of {path}"
    # OpenAPI lists GET (and the estimate's POST, which carries a hardware profile in its body), never HEAD: HEAD
    # is the middleware's, not an operation of its own.
    operations = {(path, op) for path, ops in APP.openapi()["paths"].items() for op in ops}
    assert {op for _, op in operations} == {"get", "post"}
    assert {path for path, op in operations if op == "post"} == {"/api/estimate"}


def assert_head_is_get(client: TestClient, path: str) -> None:
    get = client.get(path, follow_redirects=False)
    head = client.head(path, follow_redirects=False)
    assert head.status_code == get.status_code, path
    assert head.content == b"", path
    for header in ("content-type", "content-length", "location", "content-security-policy", "cache-control"):
        assert head.headers.get(header) == get.headers.get(header), (path, header)


@pytest.mark.parametrize("path", GET_PATHS)
def test_head_of_every_get_route(client, path):
    url = concrete(path) + QUERY.get(path, "")
    assert_head_is_get(client, url)
    assert client.head(url).status_code < 400, url


@pytest.mark.parametrize("path", [
    "/", "/?embed=1", "/?print-pdf", "/embed/ddp", "/embed/ddp?world_size=2&controls=world_size",
    "/static/js/deck/boot.js", "/static/css/deck.css", "/api/simulations/ddp", "/api/calculator",
])
def test_head_is_get_without_the_body(client, path):
    assert client.get(path).status_code == 200
    assert_head_is_get(client, path)


@pytest.mark.parametrize("path", [
    "/slides/no-such-slide", "/embed/no-such-scenario", "/embed/ddp?world_size=99", "/runs/nope",
    "/api/runs/nope/frames", "/api/simulations/nope", "/api/calculator?params_b=-1", "/static/nope.js",
])
def test_head_follows_get_on_errors(client, path):
    assert client.get(path).status_code in (404, 422)
    assert_head_is_get(client, path)


def test_head_follows_get_on_redirects(client):
    slide = client.head("/slides/memory-wall", follow_redirects=False)
    assert slide.status_code == 307 and slide.headers["location"] == "/#/memory-wall/0"


@pytest.mark.parametrize("operation, content_type", [("frames", "text/event-stream"), ("trace", "application/json")])
def test_head_of_a_run_checks_the_request_but_starts_no_run(client, operation, content_type):
    head = client.head(f"/api/simulations/ddp/{operation}?world_size=2")
    assert head.status_code == 200 and head.content == b""  # (no pool here: starting a run would fail)
    assert head.headers["content-type"].startswith(content_type)
    assert client.head(f"/api/simulations/nope/{operation}").status_code == 404
    bad = client.head(f"/api/simulations/ddp/{operation}?world_size=99")
    assert bad.status_code == 422 and bad.content == b""
    # More ranks than this server's pool of 4 (the schema allows 8): the GET's 422, checked without a run.
    assert client.head(f"/api/simulations/ddp/{operation}?world_size=8").status_code == 422


def test_head_of_an_endless_stream_ends_at_its_headers():
    produced = []

    async def endless():
        while True:
            produced.append(1)
            yield b"data: tick\n\n"
            await anyio.sleep(0.01)

    async def stream_app(scope, receive, send):
        await StreamingResponse(endless(), media_type="text/event-stream")(scope, receive, send)

    head = TestClient(HeadAsGet(stream_app)).head("/", timeout=10)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"].startswith("text/event-stream")
    assert len(produced) <= 2  # stopped at once, not drained
