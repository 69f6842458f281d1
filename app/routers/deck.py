"""The deck: GET / renders every slide (?track=20 a talk's slides only); /slides/{id} is a shareable link
to one slide."""

import re
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app import pacing
from app.delivery import fingerprints
from app.settings import Settings
from app.slides import Deck, jinja_env, load_deck, render_slides, track_query

router = APIRouter(tags=["deck"])

TRUTHY = {"1", "true", "yes", "on", ""}

# Front-end parts other code owns (the live player); linked only once they exist.
OPTIONAL_JS = ("js/player/index.js",)
OPTIONAL_CSS = ("css/player.css",)
# Loaded first on a static export's pages: answers the pages' API calls from the recorded runs.
STATIC_SITE_JS = "js/static-site.js"
# A page's entry script: the whole deck's (formulas, speaker view, print), or a widget's (one live slide only).
BOOT_JS = "js/deck/boot.js"
WIDGET_JS = "js/deck/widget.js"
# A slide's own module script (inline, or with a src): inert in the page (a type no browser runs), started by
# deck.html.j2's loader once the first view has painted, in document order, as the parser would have run it;
# fetched while the page is parsed, it and its imports would hold back the first paint on a phone's network.
SLIDE_MODULE = re.compile(r"<script\s+type=([\"'])module\1")
AFTER_PAINT = "distdeck/after-paint"


def after_paint(html: str) -> str:
    """A slide's module scripts made inert, for the loader to start after the first paint."""
    return SLIDE_MODULE.sub(f'<script type="{AFTER_PAINT}"', html)


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    return value is not None and value.strip().lower() in TRUTHY


def page_assets(settings: Settings, root: str, static_site: bool, views: list[str] | tuple[str, ...] = (),
                entry: str = BOOT_JS) -> dict:
    """The page's entry script (`entry`: BOOT_JS, or WIDGET_JS for a widget) and the optional scripts and
    styles, as fingerprinted URLs under `root` ("/" on the server, relative in an export); `asset(path)` for
    any other static file, the import map that fingerprints the imports, and the modules to preload: every
    one the page's scripts import, and the player's `views` (a widget's), so the browser fetches them
    together instead of one level of imports per round trip."""
    static = Path(settings.static_dir)
    prints = fingerprints(static)
    scripts = [STATIC_SITE_JS] * static_site + [entry] + [p for p in OPTIONAL_JS if (static / p).is_file()]
    imported = prints.static_imports(scripts)
    imported += [p for p in prints.static_imports([f"js/player/views/{view}.js" for view in views]) if p not in imported]
    return {
        "root": root,
        "asset": lambda path: prints.url(root, path),
        "inline_css": lambda paths: prints.inline_css(root, paths),
        "import_map": prints.import_map(root),
        "module_preloads": [prints.url(root, p) for p in imported if p not in scripts],
        "static_site_js": prints.url(root, STATIC_SITE_JS) if static_site else None,
        "entry_js": prints.url(root, entry),
        "after_paint_type": AFTER_PAINT,
        "extra_js": [prints.url(root, p) for p in OPTIONAL_JS if (static / p).is_file()],
        "extra_css": [p for p in OPTIONAL_CSS if (static / p).is_file()],
    }


def track_page(track: str | None) -> str:
    """The file a static export writes a track's deck to, beside its index.html (a static host has no
    query string to read, so index.html?track=20 goes there: see deck.html.j2)."""
    return f"track-{track}.html" if track else "index.html"


def tracks_config(deck: Deck, budgets: dict[str, pacing.Budget]) -> dict:
    """The track the page shows and the speaker window's pacing, for the page's config."""
    total = sum(b.seconds for b in budgets.values())
    return {
        "track": deck.track.name if deck.track else None,
        "pacing": {
            # The slot the talk must fit: the track's minutes; the whole deck has none but its budgets.
            "slotSeconds": deck.track.minutes * 60 if deck.track else round(total),
            "budgets": {slide_id: b.seconds for slide_id, b in budgets.items()},
            # The panel's tooltip: how the budgets were made.
            "model": f"notes at {pacing.WORDS_PER_MINUTE} words a minute, {pacing.SECONDS_PER_STEP} s a step "
                     f"(a live run: its presses at its defaults), {pacing.PREDICTION_PAUSE_S} s a question",
        },
    }


def render_deck(settings: Settings, *, embed: bool = False, print_pdf: bool = False, receiver: bool = False,
                root: str = "/", static_site: bool = False, track: str | None = None) -> str:
    """The deck's HTML. `root`: the site's root as the page sees it ("/" on the server; "" or "../" in a
    static export, so that it works from any folder); `static_site`: no server, runs are recorded files;
    `track`: a talk's slides only (a name in slides/tracks.toml; KeyError if none)."""
    slides_dir = Path(settings.slides_dir).resolve()
    env = jinja_env(slides_dir)
    deck = load_deck(slides_dir)
    if track is not None:
        deck = deck.for_track(track)
    slides_html = render_slides(deck, env, embed=embed, print_pdf=print_pdf, root=root)
    config = {
        "embed": embed,
        "printPdf": print_pdf,
        "root": root,
        "staticSite": static_site,
        # Origins whose postMessage commands the deck obeys ("*" = any); replies go to the sender only.
        "postMessageOrigins": settings.postmessage_origins,
        "sections": [
            {"slug": s.slug, "title": s.title, "first": s.slides[0].id} for s in deck.sections
        ],
        **tracks_config(deck, pacing.budgets(deck, slides_html)),
    }
    return env.get_template("deck.html.j2").render(
        deck=deck,
        slides_html=[fingerprints(settings.static_dir).in_html(after_paint(html)) for html in slides_html],
        slide_count=len(deck.slides),
        embed=embed,
        chrome=not (embed or receiver or print_pdf),
        print_pdf=print_pdf,
        config=config,
        open_href=(root or "./") + (track_query(deck.track.name) if deck.track else ""),
        track_pages={t.name: track_page(t.name) for t in deck.tracks} if static_site else None,
        **page_assets(settings, root, static_site),
    )


def unknown_track(request: Request, deck: Deck) -> HTMLResponse | None:
    """A 422 page naming `track` and the allowed values when ?track= names no track."""
    track = request.query_params.get("track")
    if track is None or deck.find_track(track) is not None:
        return None
    from app.routers.embed import _error_page  # embed imports this module

    allowed = ", ".join(t.name for t in deck.tracks)
    return _error_page(request, 422, "No such track",
                       f"track: must be one of {allowed} (or left out for the whole deck), not {track[:40]!r}")


@router.get("/", response_class=HTMLResponse,
            summary="The whole deck (?track=20 a talk's slides, ?embed=1 for iframes, ?print-pdf to print)",
            responses={422: {"description": "No track by that name (an HTML page naming `track` and the allowed "
                                            "values)", "content": {"text/html": {}}}})
def deck_page(request: Request) -> HTMLResponse:
    settings = _settings(request)
    refused = unknown_track(request, load_deck(Path(settings.slides_dir).resolve()))
    if refused is not None:
        return refused
    # reveal.js's speaker view previews the deck in iframes with ?receiver: slides only.
    return HTMLResponse(render_deck(settings, embed=_flag(request, "embed"),
                                    print_pdf="print-pdf" in request.query_params,
                                    receiver="receiver" in request.query_params,
                                    track=request.query_params.get("track")))


@router.get("/slides/{slide_id}", summary="Redirect to one slide of the deck",
            status_code=307,
            responses={307: {"description": "To the slide in the deck"},
                       404: {"description": "No slide by that id (an HTML page)", "content": {"text/html": {}}},
                       422: {"description": "No track by that name (an HTML page)", "content": {"text/html": {}}}})
def slide_link(slide_id: str, request: Request) -> Response:
    deck = load_deck(Path(_settings(request).slides_dir).resolve())
    slide = deck.find(slide_id)
    if slide is None:
        raise HTTPException(status_code=404, detail=f"No slide named {slide_id!r}")
    refused = unknown_track(request, deck)
    if refused is not None:
        return refused
    # ?track=20 keeps the talk when it has the slide; else the whole deck, which has every slide.
    track = request.query_params.get("track")
    query = track_query(track) if track and slide.id in deck.find_track(track).slides else ""
    # The id matched a manifest entry, which only allows [a-z0-9-]: safe to put in a URL as is.
    return RedirectResponse(url=f"/{query}#/{slide.id}/0", status_code=307)
