"""One live simulation as a standalone widget, for an iframe in a blog post.

GET /embed/{scenario}?<params>[&controls=world_size,bucket_kb][&views=ranks,timeline]

The page is a one-slide deck in embed mode, so it behaves as the embedded deck does: a click
takes the keyboard (with a visible focus ring), → and ← step through the run's frames, and the
bar has full-screen and open-in-a-new-tab buttons; CSP frame-ancestors comes from the settings
like every other page. Parameters are validated with the scenario's own pydantic model: a bad
value is a 422 page naming the field and its bound, an unknown scenario a 404 page.

Owns: turning the request into app.pages.widget's page (or an HTML error). Imports app.pages, app.responses,
the pool's size from app.routers.simulations, and simulations.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from app.pages.widget import WidgetError, first_frame, render_widget, widget_spec
from app.responses import html_error, relative_href
from app.routers.simulations import pool_size, too_many_ranks
from simulations import scenarios

router = APIRouter(tags=["embed"])

HTML_ERRORS = {404: {"description": "No scenario by that name (an HTML page)", "content": {"text/html": {}}},
               422: {"description": "Parameters the widget cannot show, or more ranks than the pool has: an HTML "
                                    "page naming the field and its bound", "content": {"text/html": {}}}}


@router.get("/embed/{name}", response_class=HTMLResponse,
            summary="One live simulation as an embeddable widget", responses=HTML_ERRORS)
def embed_widget(name: str, request: Request) -> HTMLResponse:
    try:
        scenario = scenarios.get(name)
    except scenarios.UnknownScenario:
        raise HTTPException(404, f"no scenario named {name!r}") from None
    try:
        spec = widget_spec(scenario, dict(request.query_params))
    except WidgetError as exc:
        return html_error(request, 422, "These parameters cannot be shown", str(exc))
    too_many = too_many_ranks(scenario, scenario.params.model_validate(spec["params"]), pool_size(request))
    if too_many:
        return html_error(request, 422, "These parameters cannot be shown", f"world_size: {too_many}")
    # The run's first frame if the server has this run cached (or running): peeking starts no run, so a
    # crawler's GET costs nothing; the page's own stream starts it.
    simulator = getattr(request.app.state, "simulator", None)  # none before the app's startup has run
    run = simulator.peek(name, scenario.params.model_validate(spec["params"])) if simulator else None
    return HTMLResponse(render_widget(request.app.state.settings, scenario, spec,
                                      open_href=relative_href(name, request), first=first_frame(run)))
