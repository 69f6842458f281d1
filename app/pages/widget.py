"""The widget page: one live simulation as a standalone page for an iframe (a one-slide deck in embed mode),
live from the server or replaying a recorded run; also what a recorded run's page is.

Owns: reading a widget's query (widget_spec, WidgetError: the field and what it accepts), the first frame put
in the page so it draws at once (first_frame), and render_widget. Imports app.pages.assets, app.content.markup
and simulations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from app.content.markup import jinja_env
from app.pages.assets import WIDGET_JS, page_assets
from app.settings import Settings
from simulations import scenarios
from simulations.frames import RunFile, View
from simulations.runtime import Run

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
