"""The talk's manifest: sections discovered under slides/sections/, each with its own, and the tracks.

Layout (so that a new section never touches a shared file):

    slides/macros.html.j2            shared macros (tex, stepped, live, ...)
    slides/slide.html.j2             the <section> wrapper every slide extends
    slides/sections/<NN>-<slug>/
        section.toml                 title = "...", short = "..." (top bar), then one [[slides]] table per slide
        <slide-id>.html.j2           the slide: {% block content %}, {% block notes %} (the long notes: the
                                     whole deck, the 90-minute track, print) and {% block short_notes %} (two
                                     or three spoken points, what a track with notes = "short" shows)

A [[slides]] table has `id` (unique in the deck, used in the URL), `title`, and optionally
`steps` (how many steps a static stepped slide has), `template` (defaults to `<id>.html.j2`) and
`refers` (the slides this one's text refers to, "as the previous slide showed": a track that has
this slide must have those too).

    slides/tracks.toml               the talks for a conference slot (?track=20): one [[tracks]] table
                                     each, name, title, minutes, its slides' ids in deck order, which
                                     notes it shows ("short" or "long") and its backup slides (the last
                                     of its slides, shown after the close for questions, outside the slot)

Owns: the Slide, Section, Track and Deck models and reading them from those files, checked. Imports
nothing of app/.
"""

import tomllib
from pathlib import Path

from typing import Literal

from pydantic import BaseModel, Field, ValidationError

SLIDE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
TRACKS_FILE = "tracks.toml"


class ManifestError(ValueError):
    """A section manifest is malformed; the message names the file."""


class Slide(BaseModel):
    id: str = Field(pattern=SLIDE_ID_PATTERN, max_length=64)
    title: str = Field(min_length=1)
    steps: int = Field(1, ge=1, le=100)
    template: str | None = None
    refers: list[str] = []
    # Filled in by load_deck, not read from TOML.
    section_slug: str = ""
    template_path: str = ""


class Section(BaseModel):
    slug: str
    title: str = Field(min_length=1)
    short: str | None = Field(None, min_length=1, max_length=16)  # the top bar's label; 14 titles do not fit
    slides: list[Slide] = Field(min_length=1)


class Track(BaseModel):
    """A talk for a slot, chosen by the authors: a coherent subset of the deck's slides, in deck order."""

    name: str = Field(pattern=SLIDE_ID_PATTERN, max_length=16)  # the ?track= value
    title: str = Field(min_length=1)
    minutes: int = Field(ge=1, le=600)  # the slot it is written for
    slides: list[str] = Field(min_length=1)
    # "short": each slide's short_notes block, two or three points to say (a slide without one keeps its long
    # notes); "long": the notes block, the long form. Print always shows the long form (slides/slide.html.j2).
    notes: Literal["short", "long"] = "long"
    # The last of `slides`, after the closing slide: there for questions, not part of the talk's time.
    backup: list[str] = []

    @property
    def talk_slides(self) -> list[str]:
        """The slides the talk is given with, in order: its slides without the backup ones."""
        return self.slides[:len(self.slides) - len(self.backup)]


class Deck(BaseModel):
    title: str
    sections: list[Section]
    tracks: list[Track] = []
    track: Track | None = None  # set on the deck of one track (for_track)
    minutes: int | None = None  # the slot of a talk that is not a track (a talk file's front matter)

    @property
    def slides(self) -> list[Slide]:
        return [slide for section in self.sections for slide in section.slides]

    def find(self, slide_id: str) -> Slide | None:
        return next((s for s in self.slides if s.id == slide_id), None)

    def find_track(self, name: str) -> Track | None:
        return next((t for t in self.tracks if t.name == name), None)

    def for_track(self, name: str) -> "Deck":
        """The deck as the track `name` gives it: its slides only, sections without one left out."""
        track = self.find_track(name)
        if track is None:
            raise KeyError(name)
        keep = set(track.slides)
        sections = [section.model_copy(update={"slides": [s for s in section.slides if s.id in keep]})
                    for section in self.sections]
        return self.model_copy(update={"sections": [s for s in sections if s.slides], "track": track})

    def print_page_count(self) -> int:
        """Pages of the ?print-pdf view: one per slide, one per step of a stepped slide."""
        return sum(slide.steps for slide in self.slides)


def load_deck(slides_dir: Path, title: str = "Distributed training, for real") -> Deck:
    """Read every slides/sections/*/section.toml in sorted order and check the whole deck."""
    sections_dir = slides_dir / "sections"
    sections: list[Section] = []
    # Empty directories (a section being started; git does not even keep them) are skipped.
    for section_dir in sorted(p for p in sections_dir.iterdir() if p.is_dir() and any(p.iterdir())):
        manifest = section_dir / "section.toml"
        if not manifest.is_file():
            raise ManifestError(f"{section_dir}: missing section.toml")
        try:
            data = tomllib.loads(manifest.read_text(encoding="utf-8"))
            section = Section(slug=section_dir.name, **data)
        except (tomllib.TOMLDecodeError, ValidationError, TypeError) as exc:
            raise ManifestError(f"{manifest}: {exc}") from exc
        for slide in section.slides:
            slide.section_slug = section.slug
            slide.template_path = f"sections/{section.slug}/{slide.template or slide.id + '.html.j2'}"
            if not (slides_dir / slide.template_path).is_file():
                raise ManifestError(f"{manifest}: slide {slide.id!r} has no template {slide.template_path}")
        sections.append(section)
    all_slides = [s for section in sections for s in section.slides]
    seen: set[str] = set()
    for slide in all_slides:
        if slide.id in seen:
            raise ManifestError(f"slide id {slide.id!r} is used twice; ids name slides in URLs")
        seen.add(slide.id)
    if not sections:
        raise ManifestError(f"{sections_dir}: no sections")
    order = {slide.id: i for i, slide in enumerate(all_slides)}
    for slide in all_slides:
        unknown = [ref for ref in slide.refers if ref not in order]
        if unknown:
            raise ManifestError(f"slide {slide.id!r} refers to {', '.join(map(repr, unknown))}: no such slide")
    return Deck(title=title, sections=sections, tracks=load_tracks(slides_dir / TRACKS_FILE, order))


def load_tracks(path: Path, order: dict[str, int]) -> list[Track]:
    """slides/tracks.toml, checked against the deck's slide ids (`order`: id -> position in the deck)."""
    if not path.is_file():
        return []
    try:
        tracks = [Track(**entry) for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("tracks", [])]
    except (tomllib.TOMLDecodeError, ValidationError, TypeError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    names: set[str] = set()
    for track in tracks:
        if track.name in names:
            raise ManifestError(f"{path}: track {track.name!r} is declared twice")
        names.add(track.name)
        unknown = [slide_id for slide_id in track.slides if slide_id not in order]
        if unknown:
            raise ManifestError(f"{path}: track {track.name!r} names {', '.join(map(repr, unknown))}: no such slide")
        positions = [order[slide_id] for slide_id in track.slides]
        if positions != sorted(set(positions)):
            raise ManifestError(f"{path}: track {track.name!r} must list its slides once each, in deck order")
        if track.backup and (track.slides[-len(track.backup):] != track.backup
                             or len(track.backup) >= len(track.slides)):
            raise ManifestError(f"{path}: track {track.name!r}: backup slides must be the last of its slides, "
                                f"after at least one slide of the talk")
    return tracks
