"""Recorded runs as pages: GET /runs lists what `distdeck serve --runs DIR` loaded, /runs/{id} replays one.

The run files come from torchrun (`python -m simulations.record`) or `distdeck simulate --out`;
the API behind these pages is /api/runs and /api/runs/{id}/frames (app/routers/simulations.py).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from app.pages.runs import render_runs
from app.pages.widget import first_frame, render_widget
from app.responses import relative_href
from simulations import scenarios

router = APIRouter(tags=["runs"])


@router.get("/runs", response_class=HTMLResponse, summary="The recorded runs this server replays")
def recorded_runs_page(request: Request) -> HTMLResponse:
    return HTMLResponse(render_runs(request.app.state.settings, request.app.state.recorded_runs))


@router.get("/runs/{run_id}", response_class=HTMLResponse, summary="Replay one recorded run in the player",
            responses={404: {"description": "No recorded run by that id (an HTML page)", "content": {"text/html": {}}}})
def recorded_run_page(run_id: str, request: Request) -> HTMLResponse:
    run = request.app.state.recorded_runs.get(run_id)
    if run is None:
        raise HTTPException(404, f"no recorded run {run_id!r}")
    try:
        scenario = scenarios.get(run.meta.scenario)
    except scenarios.UnknownScenario:
        raise HTTPException(404, f"run {run_id!r} is of a scenario this server does not know") from None
    spec = {"params": run.meta.params, "controls": [], "views": list(run.meta.views)}
    return HTMLResponse(render_widget(request.app.state.settings, scenario, spec, run_id=run_id,
                                      open_href=relative_href(run_id, request), first=first_frame(run)))
