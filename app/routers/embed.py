"""One live simulation as a standalone widget, for an iframe in a blog post.

GET /embed/{scenario}?<params>[&controls=world_size,bucket_kb][&views=ranks,timeline]

The page is a one-slide deck in embed mode, so it behaves as the embedded deck does: a click
takes the keyboard (with a visible focus ring), → and ← step through the run's frames, and the
bar has full-screen and open-in-a-new-tab buttons; CSP frame-ancestors comes from the settings
like every other page. Parameters are validated with the scenario's own pydantic model: a bad
value is a 422 page naming the field and its bound, an unknown scenario a 404 page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from app.routers.deck import WIDGET_JS, page_assets
from app.routers.simulations import pool_size, too_many_ranks
from app.settings import Settings
from app.slides import jinja_env
from simulations import scenarios
from simulations.frames import RunFile, View
from simulations.runtime import Run

router = APIRouter(tags=["embed"])

VIEWS = set(get_args(View))
# Query keys of the page itself, not of the scenario.
PAGE_KEYS = {"controls", "views", "embed"}


class WidgetError(ValueError):
    """A query the widget cannot show; the message names the field and what it accepts."""


def _names(raw: str | None) -> list[str] | None:
    if raw is None:
        return None
    return [name.strip() for name in raw.split(",") if name.strip()]


def widget_spec(scenario: scenarios.Scenario, query: dict[str, str]) -> dict[str, Any]:
    """Query -> {params, controls, views} for the page; raises WidgetError for anything out of bounds."""
    fields = scenario.params.model_fields
    given = {k: v for k, v in query.items() if k not in PAGE_KEYS}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise WidgetError(f"{unknown[0]}: not a parameter of {scenario.name} (it takes {', '.join(fields)})")
    try:
        params = scenario.params.model_validate(given)
    except ValidationError as exc:
        raise WidgetError("; ".join(_describe(error) for error in exc.errors(include_url=False))) from None
    dumped = params.model_dump(mode="json")
    controls = _names(query.get("controls"))
    controls = list(scenario.controls) if controls is None else controls
    for name in controls:
        if name not in fields:
            raise WidgetError(f"controls: {name!r} is not a parameter of {scenario.name} (it takes {', '.join(fields)})")
    views = _names(query.get("views")) or list(scenario.views)
    for name in views:
        if name not in VIEWS:
            raise WidgetError(f"views: {name!r} is not a view (one of {', '.join(sorted(VIEWS))})")
    return {"params": {k: dumped[k] for k in given}, "controls": controls, "views": views}


def _describe(error: dict) -> str:
    field = ".".join(str(part) for part in error.get("loc", ())) or "params"
    value = error.get("input")
    got = f" (got {value!r})" if not isinstance(value, dict) and value is not None else ""
    return f"{field}: {error['msg']}{got}"


# A first frame larger than this is left to the stream: the page would wait for it instead.
FIRST_FRAME_MAX_BYTES = 32 << 10
# The run's captions go with its first frame (room for the longest is kept from the start, so the views do
# not shrink as frames arrive) when the run has at most this many frames: each is decoded to read it.
CAPTIONS_MAX_FRAMES = 400


def first_frame(run: Run | RunFile | None) -> dict[str, Any] | None:
    """A run's meta, first frame and distinct captions, for the widget page to draw at once
    (static/js/player/player.js); None when there is no frame yet, the run failed, or the frame is too
    large to put in the page."""
    if run is None or getattr(run, "error", None) is not None or not run.frames:
        return None
    frames = run.frames
    frame = frames[0]
    if len(frame.model_dump_json()) > FIRST_FRAME_MAX_BYTES:
        return None
    finished = isinstance(run, RunFile) or run.done
    captions = [frame.caption]
    if finished and len(frames) <= CAPTIONS_MAX_FRAMES:
        captions = list(dict.fromkeys(f.caption for f in frames if f.caption))
    return {"meta": run.meta.model_dump(mode="json"), "frame": frame.model_dump(mode="json"), "captions": captions}


def render_widget(settings: Settings, scenario: scenarios.Scenario, spec: dict[str, Any], *, root: str = "/",
                  static_site: bool = False, open_href: str | None = None, run_id: str | None = None,
                  first: dict[str, Any] | None = None) -> str:
    """The widget page; with `run_id`, it replays that recorded run instead of starting a live one; with
    `first` (first_frame()), it shows that frame before its script has run and draws it as soon as it has."""
    env = jinja_env(Path(settings.slides_dir).resolve())
    config = {
        "embed": True,
        "printPdf": False,
        "root": root,
        "staticSite": static_site,
        "postMessageOrigins": settings.postmessage_origins,
        "sections": [],
        "widget": {"scenario": scenario.name, **spec},
    }
    return env.get_template("embed.html.j2").render(
        deck={"title": scenario.title, "sections": []},
        scenario=scenario,
        slides_html=[],
        slide_count=1,
        embed=True,
        chrome=False,
        print_pdf=False,
        config=config,
        open_href=open_href or "",
        run_id=run_id,
        first=first,
        **spec,
        **page_assets(settings, root, static_site, views=spec["views"], entry=WIDGET_JS),
    )


def _error_page(request: Request, status_code: int, heading: str, message: str) -> HTMLResponse:
    env = jinja_env(Path(request.app.state.settings.slides_dir).resolve())
    html = env.get_template("error.html.j2").render(status_code=status_code, heading=heading, message=message,
                                                    path=None)
    return HTMLResponse(html, status_code=status_code)


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
        return _error_page(request, 422, "These parameters cannot be shown", str(exc))
    too_many = too_many_ranks(scenario, scenario.params.model_validate(spec["params"]), pool_size(request))
    if too_many:
        return _error_page(request, 422, "These parameters cannot be shown", f"world_size: {too_many}")
    # The run's first frame if the server has this run cached (or running): peeking starts no run, so a
    # crawler's GET costs nothing; the page's own stream starts it.
    simulator = getattr(request.app.state, "simulator", None)  # none before the app's startup has run
    run = simulator.peek(name, scenario.params.model_validate(spec["params"])) if simulator else None
    return HTMLResponse(render_widget(request.app.state.settings, scenario, spec,
                                      open_href=relative_href(name, request), first=first_frame(run)))


def relative_href(last_segment: str, request: Request) -> str:
    """"Open in a new tab": this same page, with its query, as a link relative to it. Never built from
    the Host header, which the client chooses (a reflected host would point the link at any site)."""
    query = urlencode(list(request.query_params.multi_items()), safe=",")
    return "./" + quote(last_segment, safe="") + (f"?{query}" if query else "")
