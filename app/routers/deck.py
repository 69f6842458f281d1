"""The deck: GET / renders every slide; /slides/{id} is a shareable link to one slide."""

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.delivery import fingerprints
from app.settings import Settings
from app.slides import jinja_env, load_deck, render_slides

router = APIRouter(tags=["deck"])

TRUTHY = {"1", "true", "yes", "on", ""}

# Front-end parts other code owns (the live player); linked only once they exist.
OPTIONAL_JS = ("js/player/index.js",)
OPTIONAL_CSS = ("css/player.css",)
# Loaded first on a static export's pages: answers the pages' API calls from the recorded runs.
STATIC_SITE_JS = "js/static-site.js"
BOOT_JS = "js/deck/boot.js"


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    return value is not None and value.strip().lower() in TRUTHY


def page_assets(settings: Settings, root: str, static_site: bool, views: list[str] | tuple[str, ...] = ()) -> dict:
    """The optional scripts and styles, as fingerprinted URLs under `root` ("/" on the server, relative in
    an export); `asset(path)` for any other static file, the import map that fingerprints the imports, and
    the modules to preload: every one the page's scripts import, and the player's `views` (a widget's), so
    the browser fetches them together instead of one level of imports per round trip."""
    static = Path(settings.static_dir)
    prints = fingerprints(static)
    scripts = [STATIC_SITE_JS] * static_site + [BOOT_JS] + [p for p in OPTIONAL_JS if (static / p).is_file()]
    imported = prints.static_imports(scripts)
    imported += [p for p in prints.static_imports([f"js/player/views/{view}.js" for view in views]) if p not in imported]
    return {
        "root": root,
        "asset": lambda path: prints.url(root, path),
        "import_map": prints.import_map(root),
        "module_preloads": [prints.url(root, p) for p in imported if p not in scripts],
        "static_site_js": prints.url(root, STATIC_SITE_JS) if static_site else None,
        "extra_js": [prints.url(root, p) for p in OPTIONAL_JS if (static / p).is_file()],
        "extra_css": [prints.url(root, p) for p in OPTIONAL_CSS if (static / p).is_file()],
    }


def render_deck(settings: Settings, *, embed: bool = False, print_pdf: bool = False, receiver: bool = False,
                root: str = "/", static_site: bool = False) -> str:
    """The deck's HTML. `root`: the site's root as the page sees it ("/" on the server; "" or "../" in a
    static export, so that it works from any folder); `static_site`: no server, runs are recorded files."""
    slides_dir = Path(settings.slides_dir).resolve()
    env = jinja_env(slides_dir)
    deck = load_deck(slides_dir)
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
    }
    return env.get_template("deck.html.j2").render(
        deck=deck,
        slides_html=[fingerprints(settings.static_dir).in_html(html)
                     for html in render_slides(deck, env, embed=embed, print_pdf=print_pdf, root=root)],
        slide_count=len(deck.slides),
        embed=embed,
        chrome=not (embed or receiver or print_pdf),
        print_pdf=print_pdf,
        config=config,
        open_href=root or "./",
        **page_assets(settings, root, static_site),
    )


@router.get("/", response_class=HTMLResponse, summary="The whole deck (?embed=1 for iframes, ?print-pdf to print)")
def deck_page(request: Request) -> HTMLResponse:
    # reveal.js's speaker view previews the deck in iframes with ?receiver: slides only.
    return HTMLResponse(render_deck(_settings(request), embed=_flag(request, "embed"),
                                    print_pdf="print-pdf" in request.query_params,
                                    receiver="receiver" in request.query_params))


@router.get("/slides/{slide_id}", summary="Redirect to one slide of the deck",
            status_code=307,
            responses={307: {"description": "To the slide in the deck"},
                       404: {"description": "No slide by that id (an HTML page)", "content": {"text/html": {}}}})
def slide_link(slide_id: str, request: Request) -> RedirectResponse:
    deck = load_deck(Path(_settings(request).slides_dir).resolve())
    slide = deck.find(slide_id)
    if slide is None:
        raise HTTPException(status_code=404, detail=f"No slide named {slide_id!r}")
    # The id matched a manifest entry, which only allows [a-z0-9-]: safe to put in a URL as is.
    return RedirectResponse(url=f"/#/{slide.id}/0", status_code=307)
