"""The Talk: one talk as a value, loaded once and read by every page and by the export.

A talk is a title, sections of slides, the tracks a listener can switch to, and the track it is (if one);
its slides render to markup in the talk's Jinja environment, and from that markup come the live simulations
each slide starts and each slide's time budget. The whole deck is a Talk (`load_talk`), and so is each of its
tracks (`Talk.for_track`) and a presenter's own talk file (`load_talk(slides_dir, talk_file)`, read by
app.content.talkfile), so that the page layer and the export never ask where a talk came from.

Owns: Talk, load_talk. Imports app.content's manifest, markup, live, pacing and talkfile modules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jinja2 import Environment

from app.content.live import LiveSim, find_live_sims, find_scripted_runs
from app.content.manifest import Deck, Section, Slide, Track, load_deck
from app.content.markup import jinja_env, render_slides
from app.content.pacing import Budget, budgets
from app.content.talkfile import parse_talk_file


@dataclass(frozen=True)
class Talk:
    deck: Deck  # title, sections of slides, the tracks on offer, the track this talk is
    env: Environment  # what its slides (and the pages around them) render in

    @property
    def title(self) -> str:
        return self.deck.title

    @property
    def sections(self) -> list[Section]:
        return self.deck.sections

    @property
    def slides(self) -> list[Slide]:
        return self.deck.slides

    @property
    def tracks(self) -> list[Track]:
        return self.deck.tracks

    @property
    def track(self) -> Track | None:
        return self.deck.track

    @property
    def minutes(self) -> int | None:
        """The slot the talk must fit: its track's, or a talk file's `minutes`; None for the whole deck."""
        return self.deck.track.minutes if self.deck.track else self.deck.minutes

    def find(self, slide_id: str) -> Slide | None:
        return self.deck.find(slide_id)

    def find_track(self, name: str) -> Track | None:
        return self.deck.find_track(name)

    def for_track(self, name: str) -> Talk:
        """The talk the track `name` gives: its slides only (KeyError if there is no such track)."""
        return replace(self, deck=self.deck.for_track(name))

    def slides_html(self, **context: Any) -> list[str]:
        """Each slide's <section> markup, in order; `context` (embed, print_pdf, root) goes to the templates."""
        return render_slides(self.deck, self.env, **context)

    def budgets(self, slides_html: list[str]) -> dict[str, Budget]:
        """Each slide's time budget, by id, from its markup (slides_html(), as the page shows it)."""
        return budgets(self.deck, slides_html)

    def live_slides_html(self) -> list[str]:
        """The markup the live simulations are read from: the deck's own, as a page at the site's root shows it."""
        return self.slides_html(embed=False, print_pdf=False, root="./")

    def live_sims(self, slides_html: list[str] | None = None) -> list[LiveSim]:
        """The live simulations the slides' players start, in slide order."""
        return find_live_sims(self.live_slides_html() if slides_html is None else slides_html)

    def scripted_runs(self, slides_html: list[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """(slide, scenario, params) of the runs slide scripts fetch themselves (`data-runs`)."""
        return find_scripted_runs(self.live_slides_html() if slides_html is None else slides_html)

def load_talk(slides_dir: Path, talk_file: Path | None = None) -> Talk:
    """The whole deck under `slides_dir` (ManifestError if a manifest is malformed), or, with `talk_file`, the
    talk that file makes of it (TalkFileError naming the file's line if the file is wrong)."""
    slides_dir = Path(slides_dir).resolve()
    deck = load_deck(slides_dir)
    if talk_file is not None:
        deck = parse_talk_file(talk_file, slides_dir, deck)
    return Talk(deck, jinja_env(slides_dir))
