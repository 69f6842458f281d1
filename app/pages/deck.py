"""The deck page: a talk's slides in reveal.js, whole or one track, for the server or a static export, in
any of its modes (embedded, printed, a speaker view's receiver).

Owns: render_deck, the page's config (tracks_config: the track, the speaker window's pacing), and the file a
track's page has in an export (track_page). Imports app.pages.assets, app.content and app.delivery.
"""

from app.content import pacing
from app.content.markup import track_query
from app.content.talk import Talk
from app.delivery import fingerprints
from app.pages.assets import after_paint, page_assets
from app.settings import Settings


def track_page(track: str | None) -> str:
    """The file a static export writes a track's deck to, beside its index.html (a static host has no
    query string to read, so index.html?track=20 goes there: see deck.html.j2)."""
    return f"track-{track}.html" if track else "index.html"


def tracks_config(talk: Talk, budgets: dict[str, pacing.Budget]) -> dict:
    """The track the page shows and the speaker window's pacing, for the page's config."""
    total = sum(b.seconds for b in budgets.values())
    return {
        "track": talk.track.name if talk.track else None,
        "pacing": {
            # The slot the talk must fit: the track's (or talk file's) minutes; the whole deck has none but its budgets.
            "slotSeconds": talk.minutes * 60 if talk.minutes else round(total),
            "budgets": {slide_id: b.seconds for slide_id, b in budgets.items()},
            # The panel's tooltip: how the budgets were made.
            "model": f"notes at {pacing.WORDS_PER_MINUTE} words a minute, {pacing.SECONDS_PER_STEP} s a step "
                     f"(a live run: its presses at its defaults), {pacing.PREDICTION_PAUSE_S} s a question",
        },
    }


def render_deck(settings: Settings, talk: Talk, *, embed: bool = False, print_pdf: bool = False,
                receiver: bool = False, root: str = "/", static_site: bool = False, track: str | None = None) -> str:
    """The talk's deck page. `root`: the site's root as the page sees it ("/" on the server; "" or "../" in a
    static export, so that it works from any folder); `static_site`: no server, runs are recorded files;
    `track`: one of the talk's tracks only (a name in slides/tracks.toml; KeyError if none)."""
    if track is not None:
        talk = talk.for_track(track)
    slides_html = talk.slides_html(embed=embed, print_pdf=print_pdf, root=root)
    config = {
        "embed": embed,
        "printPdf": print_pdf,
        "root": root,
        "staticSite": static_site,
        # Origins whose postMessage commands the deck obeys ("*" = any); replies go to the sender only.
        "postMessageOrigins": settings.postmessage_origins,
        "sections": [
            {"slug": s.slug, "title": s.title, "first": s.slides[0].id} for s in talk.sections
        ],
        **tracks_config(talk, talk.budgets(slides_html)),
    }
    return talk.env.get_template("deck.html.j2").render(
        deck=talk.deck,
        slides_html=[fingerprints(settings.static_dir).in_html(after_paint(html)) for html in slides_html],
        slide_count=len(talk.slides),
        embed=embed,
        chrome=not (embed or receiver or print_pdf),
        print_pdf=print_pdf,
        config=config,
        open_href=(root or "./") + (track_query(talk.track.name) if talk.track else ""),
        track_pages={t.name: track_page(t.name) for t in talk.tracks} if static_site else None,
        **page_assets(settings, root, static_site),
    )
