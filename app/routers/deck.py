"""The deck: GET / renders every slide (?track=20 a talk's slides only); /slides/{id} is a shareable link
to one slide.

Owns: reading the query (track, embed, print-pdf, receiver) and answering with app.pages.deck's page, a 422
page for an unknown track, or a redirect. Imports app.pages, app.content and app.responses.
"""

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.content.markup import track_query
from app.content.talk import Talk, load_talk
from app.content.talkfile import TalkFileError
from app.pages.deck import render_deck
from app.responses import html_error
from app.settings import Settings

router = APIRouter(tags=["deck"])

TRUTHY = {"1", "true", "yes", "on", ""}


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    return value is not None and value.strip().lower() in TRUTHY


def _load(request: Request) -> Talk | HTMLResponse:
    """The talk the server shows (the deck, or its talk file read again on each request, so that an edit shows on
    reload); a talk file that went wrong since the server started is a page saying where, not a traceback."""
    settings = _settings(request)
    try:
        return load_talk(settings.slides_dir, settings.talk_file)
    except TalkFileError as exc:
        return html_error(request, 503, "The talk file does not load", str(exc))  # not a server fault: 503 until the file is fixed


def unknown_track(request: Request, talk: Talk) -> HTMLResponse | None:
    """A 422 page naming `track` and the allowed values when ?track= names no track."""
    track = request.query_params.get("track")
    if track is None or talk.find_track(track) is not None:
        return None
    if not talk.tracks:  # a talk file is one talk
        return html_error(request, 422, "No such track", f"track: this talk has no tracks; leave it out, not "
                                                         f"{track[:40]!r}")
    allowed = ", ".join(t.name for t in talk.tracks)
    return html_error(request, 422, "No such track",
                      f"track: must be one of {allowed} (or left out for the whole deck), not {track[:40]!r}")


@router.get("/", response_class=HTMLResponse,
            summary="The whole deck (?track=20 a talk's slides, ?embed=1 for iframes, ?print-pdf to print)",
            responses={422: {"description": "No track by that name (an HTML page naming `track` and the allowed "
                                            "values)", "content": {"text/html": {}}}})
def deck_page(request: Request) -> HTMLResponse:
    settings = _settings(request)
    talk = _load(request)
    if isinstance(talk, HTMLResponse):
        return talk
    refused = unknown_track(request, talk)
    if refused is not None:
        return refused
    # reveal.js's speaker view previews the deck in iframes with ?receiver: slides only.
    return HTMLResponse(render_deck(settings, talk, embed=_flag(request, "embed"),
                                    print_pdf="print-pdf" in request.query_params,
                                    receiver="receiver" in request.query_params,
                                    track=request.query_params.get("track")))


@router.get("/slides/{slide_id}", summary="Redirect to one slide of the deck",
            status_code=307,
            responses={307: {"description": "To the slide in the deck"},
                       404: {"description": "No slide by that id (an HTML page)", "content": {"text/html": {}}},
                       422: {"description": "No track by that name (an HTML page)", "content": {"text/html": {}}}})
def slide_link(slide_id: str, request: Request) -> Response:
    talk = _load(request)
    if isinstance(talk, HTMLResponse):
        return talk
    slide = talk.find(slide_id)
    if slide is None:
        raise HTTPException(status_code=404, detail=f"No slide named {slide_id!r}")
    refused = unknown_track(request, talk)
    if refused is not None:
        return refused
    # ?track=20 keeps the talk when it has the slide; else the whole deck, which has every slide.
    track = request.query_params.get("track")
    query = track_query(track) if track and slide.id in talk.find_track(track).slides else ""
    # The id matched a manifest entry, which only allows [a-z0-9-]: safe to put in a URL as is.
    return RedirectResponse(url=f"/{query}#/{slide.id}/0", status_code=307)
