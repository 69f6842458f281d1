"""The deck: GET / renders every slide; /slides/{id} is a shareable link to one slide."""

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.settings import Settings
from app.slides import jinja_env, load_deck, render_slides

router = APIRouter(tags=["deck"])

TRUTHY = {"1", "true", "yes", "on", ""}

# Front-end parts other code owns (the live player); linked only once they exist.
OPTIONAL_JS = ("js/player/index.js",)
OPTIONAL_CSS = ("css/player.css",)


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    return value is not None and value.strip().lower() in TRUTHY


@router.get("/", response_class=HTMLResponse, summary="The whole deck (?embed=1 for iframes, ?print-pdf to print)")
def deck_page(request: Request) -> HTMLResponse:
    settings = _settings(request)
    slides_dir = Path(settings.slides_dir).resolve()
    env = jinja_env(slides_dir)
    deck = load_deck(slides_dir)
    embed = _flag(request, "embed")
    print_pdf = "print-pdf" in request.query_params
    # reveal.js's speaker view previews the deck in iframes with ?receiver: slides only.
    receiver = "receiver" in request.query_params
    config = {
        "embed": embed,
        "printPdf": print_pdf,
        # Origins whose postMessage commands the deck obeys ("*" = any); replies go to the sender only.
        "postMessageOrigins": settings.postmessage_origins,
        "sections": [
            {"slug": s.slug, "title": s.title, "first": s.slides[0].id} for s in deck.sections
        ],
    }
    static = Path(settings.static_dir)
    html = env.get_template("deck.html.j2").render(
        deck=deck,
        slides_html=render_slides(deck, env, embed=embed, print_pdf=print_pdf),
        slide_count=len(deck.slides),
        embed=embed,
        chrome=not (embed or receiver or print_pdf),
        print_pdf=print_pdf,
        config=config,
        extra_js=[f"/static/{p}" for p in OPTIONAL_JS if (static / p).is_file()],
        extra_css=[f"/static/{p}" for p in OPTIONAL_CSS if (static / p).is_file()],
    )
    return HTMLResponse(html)


@router.get("/slides/{slide_id}", summary="Redirect to one slide of the deck")
def slide_link(slide_id: str, request: Request) -> RedirectResponse:
    deck = load_deck(Path(_settings(request).slides_dir).resolve())
    slide = deck.find(slide_id)
    if slide is None:
        raise HTTPException(status_code=404, detail=f"No slide named {slide_id!r}")
    # The id matched a manifest entry, which only allows [a-z0-9-]: safe to put in a URL as is.
    return RedirectResponse(url=f"/#/{slide.id}/0", status_code=307)
