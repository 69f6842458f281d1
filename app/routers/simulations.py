"""Live simulations: the catalog, runs streamed as Server-Sent Events, Chrome traces, recorded runs."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from sse_starlette.sse import EventSourceResponse

from app.delivery import finished_run_body
from app.head import is_head
from simulations import scenarios
from simulations.chrome_trace import chrome_trace
from simulations.runtime import Overloaded, Run, Simulator
from simulations.runtime.pool import TOO_LARGE
from simulations.runtime.runs import TooManyRuns, sse

router = APIRouter(prefix="/api", tags=["simulations"])

RETRY_AFTER_S = 2
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
SHUTTING_DOWN = sse("error", json.dumps({"message": "the server is shutting down"}))


class ScenarioInfo(BaseModel):
    name: str
    title: str
    description: str
    views: list[str]
    controls: list[str]
    params_schema: dict[str, Any]
    defaults: dict[str, Any]


class Problem(BaseModel):
    detail: str


NOT_FOUND = {404: {"model": Problem, "description": "No scenario by that name"}}
BUSY = {429: {"model": Problem, "description": "This client already has its share of runs waiting or running "
                                               "(Retry-After)"},
        503: {"model": Problem, "description": "Too many runs are waiting (Retry-After)"}}


class RecordedRunInfo(BaseModel):
    id: str
    scenario: str
    title: str
    params: dict[str, Any]
    world_size: int
    backend: str
    frames: int
    passed: bool


def _scenario_info(scenario: scenarios.Scenario) -> ScenarioInfo:
    return ScenarioInfo(name=scenario.name, title=scenario.title, description=scenario.description,
                        views=list(scenario.views), controls=list(scenario.controls),
                        params_schema=scenario.params.model_json_schema(),
                        defaults=scenario.params().model_dump(mode="json"))


def _scenario(name: str) -> scenarios.Scenario:
    try:
        return scenarios.get(name)
    except scenarios.UnknownScenario:
        raise HTTPException(404, f"no scenario named {name!r}; see /api/simulations") from None


def _params(scenario: scenarios.Scenario, request: Request) -> BaseModel:
    """Query string -> the scenario's params; a bad value is a 422 naming the field and its bound."""
    try:
        return scenario.params.model_validate(dict(request.query_params))
    except ValidationError as exc:
        errors = [{**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def pool_size(request: Request) -> int:
    """Ranks this server can run at once (its pool's size)."""
    simulator = getattr(request.app.state, "simulator", None)
    return simulator.pool.size if simulator is not None else request.app.state.settings.pool_size


def too_many_ranks(scenario: scenarios.Scenario, params: BaseModel, available: int) -> str | None:
    """Why these params cannot run on a pool of `available` ranks (the schema allows up to 8), or None."""
    ranks = scenario.world_size(params)
    if ranks <= available:
        return None
    return f"these params need {ranks} ranks; this server's pool has {available} (DISTDECK_POOL_SIZE)"


def _check_ranks(scenario: scenarios.Scenario, params: BaseModel, available: int) -> None:
    too_many = too_many_ranks(scenario, params, available)
    if too_many:
        raise RequestValidationError([{
            "type": "less_than_equal", "loc": ("query", "world_size"), "input": scenario.world_size(params),
            "ctx": {"le": available}, "msg": too_many}])


def _submit(request: Request, name: str, params: BaseModel) -> Run:
    simulator: Simulator = request.app.state.simulator
    scenario = scenarios.get(name)
    _check_ranks(scenario, params, simulator.pool.size)
    try:
        return simulator.submit(name, params, client=request.client.host if request.client else None)
    except TooManyRuns as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    except Overloaded as exc:
        raise HTTPException(503, f"the simulator is busy: {exc}",
                            headers={"Retry-After": str(RETRY_AFTER_S)}) from None


LAST_EVENT_ID = re.compile(r"[0-9]{1,9}")  # ASCII digits only (str.isdigit() takes "²"), and short


def _resume_after(request: Request) -> int:
    """Last-Event-ID: k resumes at frame k + 1; anything else starts from the beginning."""
    last = request.headers.get("last-event-id", "")
    return int(last) if LAST_EVENT_ID.fullmatch(last) else -1


class FinishedRun(Response):
    """A finished run's events, already encoded (and compressed, where `encoding` says so), written as they
    are: no task group, no pings (it ends at once). What most viewers of a talk get, all at the same time,
    so it is kept as cheap as it goes."""

    media_type = "text/event-stream"

    def __init__(self, parts: list[bytes], encoding: str | None = None):
        super().__init__(headers=SSE_HEADERS)
        self.parts = parts
        self.headers["content-length"] = str(sum(len(p) for p in parts))
        if encoding is not None:  # the Compression middleware passes an encoded body on as it is
            self.headers["content-encoding"] = encoding
            self.headers["vary"] = "Accept-Encoding"

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if "content-encoding" in self.headers:  # one write, no empty one after it: a crowd pays per message
            await send({"type": "http.response.body", "body": b"".join(self.parts), "more_body": False})
            return
        for part in self.parts:  # each part on its own, so that the middleware may stream-compress them
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(request: Request, run: Run) -> Response:
    """The run's events, already encoded (the same bytes for every viewer). A finished run's are compressed
    once per encoding and kept with it (app/delivery.py); a run in progress is compressed per viewer by the
    Compression middleware. On server shutdown the stream ends with an `error` event saying so, rather
    than being cut."""
    after = _resume_after(request)
    if run.done:
        return FinishedRun(*await finished_run_body(run, request.headers.get("accept-encoding", ""), after))
    shutdown = anyio.Event()
    events = run.stream(after, until=shutdown.wait(), farewell=SHUTTING_DOWN)
    return EventSourceResponse(events, ping=15, shutdown_event=shutdown, shutdown_grace_period=2, headers=SSE_HEADERS)


@router.get("/simulations", response_model=list[ScenarioInfo])
def list_scenarios() -> list[ScenarioInfo]:
    return [_scenario_info(s) for s in scenarios.all_scenarios().values()]


@router.get("/simulations/{name}", response_model=ScenarioInfo, responses=NOT_FOUND)
def describe_scenario(name: str) -> ScenarioInfo:
    return _scenario_info(_scenario(name))


@router.get("/simulations/{name}/frames", response_class=EventSourceResponse,
            responses={200: {"description": "text/event-stream: meta, frame*, summary, done | error. "
                                            "Last-Event-ID: k resumes after frame k."}, **NOT_FOUND, **BUSY})
async def stream_frames(name: str, request: Request) -> Response:
    # async: no hop to the thread pool per viewer (nothing here blocks), which a crowd of viewers feels.
    scenario = _scenario(name)
    params = _params(scenario, request)
    if is_head(request):  # the GET's checks and headers without starting a run: a link checker costs no run
        _check_ranks(scenario, params, pool_size(request))
        return Response(media_type="text/event-stream", headers=SSE_HEADERS)
    return await _stream(request, _submit(request, name, params))


@router.get("/simulations/{name}/trace",
            response_model=dict,
            responses={200: {"description": "Chrome trace-event JSON (Perfetto)"}, **NOT_FOUND, **BUSY,
                       500: {"model": Problem, "description": "The run failed (a rank died or hung)"}})
async def trace_json(name: str, request: Request) -> dict | Response:
    scenario = _scenario(name)
    params = _params(scenario, request)
    if is_head(request):  # as for frames: checked, no run (whether a GET gets a 429/503 depends on its moment)
        _check_ranks(scenario, params, pool_size(request))
        return Response(media_type="application/json")
    run = _submit(request, name, params)
    await run.wait()
    if run.error is not None and run.error.startswith(TOO_LARGE):
        raise RequestValidationError([{"type": "too_large", "loc": ("query",), "input": run.meta.params,
                                       "msg": run.error}])
    if run.error is not None:
        raise HTTPException(500, f"the run failed: {run.error}")
    return chrome_trace(run.meta, run.frames)


@router.get("/runs", response_model=list[RecordedRunInfo])
def list_recorded_runs(request: Request) -> list[RecordedRunInfo]:
    return [RecordedRunInfo(id=run_id, scenario=run.meta.scenario, title=run.meta.title, params=run.meta.params,
                            world_size=run.meta.world_size, backend=run.meta.backend, frames=run.frame_count,
                            passed=run.summary.passed)
            for run_id, run in request.app.state.recorded_runs.items()]


@router.get("/runs/{run_id}/frames", response_class=EventSourceResponse,
            responses={404: {"model": Problem, "description": "No recorded run by that id"}})
async def replay_recorded_run(run_id: str, request: Request) -> Response:
    run = request.app.state.recorded_runs.get(run_id)
    if run is None:
        raise HTTPException(404, f"no recorded run {run_id!r}; see /api/runs")
    return await _stream(request, run)
