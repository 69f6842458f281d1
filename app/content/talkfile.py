"""A presenter's own talk, from one Markdown file: the deck's slides and live simulations as building blocks.

    ---                                   front matter (YAML): title, speaker, event, date, minutes
    title: My talk
    minutes: 20
    ---
    # A section                           a `#` heading opens a section of the top bar
    ## A slide of my own                  CommonMark, tables, code, $…$ and $$…$$ (KaTeX, as the deck's tex macro)
    Note: what I will say                 speaker notes: everything after a line starting `Note:`
    ---                                   the next slide
    @slide ddp-live                       the deck's own slide, whole (notes, live view, question)
    ---
    ```live                               a live simulation: SCENARIO key=value …, checked by the scenario's
    ddp world_size=2                      own params model (the API's names and bounds)
    ```

The file becomes a Deck (a TalkDeck: the front matter beside it) whose own slides are TalkSlides rendered by
app/templates/talk-slide.html.j2 and whose included slides are the deck's, so the Talk built from it is read by
the pages and the export as any other. Nothing in the file is a template: Markdown is rendered to HTML with raw
HTML off (markdown-it escapes it), and that HTML is handed to the slide template as a value, so `{{ … }}` and
`<script>` in a talk file are shown as text. A live block and a formula are the deck's own macros (macros.html.j2's
`live` and `tex`), called with the validated values, so they play and typeset exactly as the deck's.

Every mistake is a TalkFileError, `FILE:LINE: what is wrong`.

Owns: parse_talk_file, TalkDeck, TalkSlide, TalkFileError, STARTER_TALK (the talk `distdeck new` writes, a file
beside this module).
Imports app.content's manifest and markup modules, and simulations.
"""

from __future__ import annotations

import datetime
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.content.manifest import Deck, Section, Slide, load_deck
from app.content.markup import jinja_env
from simulations import scenarios
from simulations.params import describe

# The templates (app/templates) a talk file's own slides render with.
OWN_SLIDE_TEMPLATE = "talk-slide.html.j2"
TITLE_SLIDE_TEMPLATE = "talk-title.html.j2"
# The starter talk `distdeck new` writes: every feature, and it serves as is (tests/unit/test_talkfile.py).
STARTER_TALK = Path(__file__).with_name("starter_talk.md")
SLIDE_BREAK = re.compile(r"^---\s*$")
NOTES_START = re.compile(r"^notes?:[ \t]*", re.IGNORECASE)  # reveal.js's Markdown plugin: `Note:` (or Notes:)
INCLUDE = re.compile(r"^@slide\b[ \t]*(.*?)\s*$")
FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
LIVE_INFO = "live"
SHORT_MAX = 16  # the top bar's label (manifest.Section.short)


class TalkFileError(ValueError):
    """A talk file that cannot be shown: `FILE:LINE: what is wrong`."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        # No line for a file that cannot be read at all.
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path, self.line, self.message = str(path), line, message


class FrontMatter(BaseModel):
    """The talk's front matter: its title slide and its slot."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=200)
    speaker: str | None = Field(None, max_length=200)
    event: str | None = Field(None, max_length=200)
    date: str | None = Field(None, max_length=100)
    minutes: int | None = Field(None, ge=1, le=600)  # the slot (as a track's): the speaker view paces against it

    @field_validator("date", mode="before")
    @classmethod
    def _date_as_written(cls, value: Any) -> Any:
        # YAML reads 2026-11-28 as a date: show it as written.
        return value.isoformat() if isinstance(value, datetime.date) else value

    @field_validator("title", "speaker", "event", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # `event: 2026` is text on a title slide, not a type error.
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class TalkSlide(Slide):
    """A slide of a talk file: its Markdown rendered (html, notes_html), or the title slide (template only)."""

    html: str = ""
    notes_html: str = ""


class TalkDeck(Deck):
    """A talk file's deck: the front matter beside its sections (the title slide reads it)."""

    speaker: str | None = None
    event: str | None = None
    date: str | None = None
    # each ```live block's (line, scenario, ranks it runs): a server checks them against its pool at start
    live_blocks: tuple[tuple[int, str, int], ...] = ()

    def too_large_for(self, pool_size: int) -> tuple[int, str] | None:
        """(line, why) of the first live block that needs more ranks than a pool of `pool_size`, or None."""
        for line, name, ranks in self.live_blocks:
            if ranks > pool_size:
                return line, (f"{name} needs {ranks} ranks; this server's pool has {pool_size} "
                              f"(DISTDECK_POOL_SIZE): fewer ranks, or a larger pool")
        return None


@dataclass
class _Chunk:
    """One slide's lines, as split from the file (line numbers are the file's, from 1)."""

    start: int
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    notes_line: int = 0


def _markdown() -> MarkdownIt:
    # html=False: raw HTML in the file is escaped, never passed through (a talk file may come from anyone, and
    # the page it lands in runs the deck's scripts). linkify off; markdown-it refuses javascript: links itself.
    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    # $…$ needs no space inside it and no digit after the closing $ (pandoc's rule): "$5 and $10" is text.
    return md.use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True)


MARKDOWN = _markdown()


def parse_talk_file(path: Path | str, slides_dir: Path, deck: Deck | None = None) -> TalkDeck:
    """The talk in the file at `path`, with the deck under `slides_dir` (or `deck`) to include slides from.
    Raises TalkFileError naming the line of the first mistake (no line for a missing or unreadable file)."""
    shown = str(path)
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TalkFileError(shown, None, "no such file") from None
    except IsADirectoryError:
        raise TalkFileError(shown, None, "a folder, not a talk file") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise TalkFileError(shown, line, "not UTF-8 text") from None
    except OSError as exc:
        raise TalkFileError(shown, None, f"cannot be read ({exc.strerror})") from None
    return _Parser(shown, slides_dir, deck).parse(text)


class _Parser:
    def __init__(self, shown: str, slides_dir: Path, deck: Deck | None):
        self.shown = shown
        self.slides_dir = Path(slides_dir).resolve()
        self.deck = deck or load_deck(self.slides_dir)
        self.env: Environment = jinja_env(self.slides_dir)
        self.macros = self.env.get_template("macros.html.j2").module
        self.live_blocks: list[tuple[int, str, int]] = []

    def fail(self, line: int, message: str) -> TalkFileError:
        return TalkFileError(self.shown, line, message)

    # -- the file's parts ------------------------------------------------------------------------------

    def parse(self, text: str) -> TalkDeck:
        lines = text.splitlines()
        info, body_start = self.front_matter(lines)
        chunks = self.split(lines, body_start)
        return self.build(info, chunks)

    def front_matter(self, lines: list[str]) -> tuple[FrontMatter, int]:
        """The YAML between the first two `---` lines; returns it and the index of the first line after it."""
        if not lines or not SLIDE_BREAK.match(lines[0]):
            raise self.fail(1, "a talk file starts with its front matter: a line ---, then title: …, then ---")
        end = next((i for i in range(1, len(lines)) if SLIDE_BREAK.match(lines[i])), None)
        if end is None:
            raise self.fail(1, "the front matter opened here is never closed (a line --- ends it)")
        try:
            data = yaml.safe_load("\n".join(lines[1:end]))
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = 2 + mark.line if mark is not None else 1
            raise self.fail(line, f"front matter is not valid YAML: {exc.problem or exc.context}") from None
        except yaml.YAMLError as exc:
            raise self.fail(1, f"front matter is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise self.fail(2, "front matter must be keys and values (title: …, speaker: …, minutes: …)")
        try:
            return FrontMatter.model_validate(data), end + 1
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            key = str(error["loc"][0]) if error["loc"] else ""
            line = next((2 + i for i, text in enumerate(lines[1:end]) if re.match(rf"^{re.escape(key)}\s*:", text)),
                        1) if key else 1
            allowed = ", ".join(FrontMatter.model_fields)
            if error["type"] == "extra_forbidden":
                raise self.fail(line, f"{key}: not a front matter key (one of {allowed})") from None
            if error["type"] == "missing":
                raise self.fail(1, f"{key}: the front matter must say it (keys: {allowed})") from None
            raise self.fail(line, f"{key}: {error['msg']}") from None

    def split(self, lines: list[str], start: int) -> list[_Chunk]:
        """Slides split on `---` lines and notes on `Note:` lines, both outside fenced code; an unclosed fence
        is refused at its opening line."""
        chunks = [_Chunk(start + 1)]
        fence: tuple[str, int] | None = None  # (marker, line) of the open fence
        for index in range(start, len(lines)):
            line, number, chunk = lines[index], index + 1, chunks[-1]
            target = chunk.notes if chunk.notes_line else chunk.lines
            if fence is not None:
                marker = fence[0]
                if re.match(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$", line):
                    fence = None
                target.append(line)
                continue
            opened = FENCE_OPEN.match(line)
            if opened and not (opened[1][0] == "`" and "`" in opened[2]):  # a ``` line with ` after is inline code
                fence = (opened[1], number)
                target.append(line)
            elif SLIDE_BREAK.match(line):
                chunks.append(_Chunk(number + 1))
            elif not chunk.notes_line and NOTES_START.match(line):
                chunk.notes_line = number
                chunk.notes.append(NOTES_START.sub("", line, count=1))
            else:
                target.append(line)
        if fence is not None:
            raise self.fail(fence[1], f"the {fence[0]} fence opened here is never closed (a line {fence[0]} ends it)")
        return [c for c in chunks if any(s.strip() for s in c.lines) or any(s.strip() for s in c.notes)]

    # -- the deck --------------------------------------------------------------------------------------

    def build(self, info: FrontMatter, chunks: list[_Chunk]) -> TalkDeck:
        placed: list[tuple[Slide, tuple, str, str | None]] = []  # (slide, section key, section title, short)
        included: dict[str, int] = {}  # slide id -> its @slide line
        own: list[tuple[TalkSlide, _Chunk, list[Token]]] = []
        heading: tuple[int, str] | None = None  # (line, text) of the last `#` heading: the section it opened
        for chunk in chunks:
            tokens = MARKDOWN.parse("\n".join(chunk.lines))
            include = self.include_line(chunk, tokens)
            if include is not None:
                slide_id, line = include
                slide = self.deck.find(slide_id)
                if slide is None:
                    raise self.fail(line, self.unknown_slide(slide_id))
                if slide_id in included:
                    raise self.fail(line, f"@slide {slide_id} is already on line {included[slide_id]}: a slide id "
                                          f"names one slide in the talk's links")
                included[slide_id] = line
                deck_section = next(s for s in self.deck.sections if s.slug == slide.section_slug)
                # Under a `#` heading, the heading's section; else the deck's section the slide comes from.
                place = (("heading", heading[0]), heading[1], None) if heading else (
                    ("deck", deck_section.slug), deck_section.title, deck_section.short)
            else:
                title, opens = slide_heading(tokens)
                if opens is not None:
                    heading = (chunk.start, opens)
                slide = TalkSlide(id="slide", title=title or f"Slide {len(placed) + 2}",
                                  template_path=OWN_SLIDE_TEMPLATE)
                own.append((slide, chunk, tokens))
                # Under a `#` heading, its section; else the section of the slide before (the talk's first).
                place = (("heading", heading[0]), heading[1], None) if heading else (
                    tuple(placed[-1][1:]) if placed else (("start",), info.title, None))
            placed.append((slide, *place))
        # Ids for the talk's own slides from their titles, never one an included slide has.
        taken = set(included)
        title_slide = TalkSlide(id=unique_id("title", taken), title=info.title, template_path=TITLE_SLIDE_TEMPLATE)
        for slide, chunk, tokens in own:
            slide.id = unique_id(slug(slide.title) or "slide", taken)
            slide.html = self.render(tokens, chunk)
            slide.notes_html = self.render(MARKDOWN.parse("\n".join(chunk.notes)), chunk, notes=True)
        return TalkDeck(title=info.title, sections=self.sections(info, title_slide, placed), minutes=info.minutes,
                        speaker=info.speaker, event=info.event, date=info.date, live_blocks=tuple(self.live_blocks))

    def sections(self, info: FrontMatter, title_slide: TalkSlide,
                 placed: list[tuple[Slide, tuple, str, str | None]]) -> list[Section]:
        """Consecutive slides of one key make a section; the title slide opens the first. A section's slug is
        its position and title (two sections may share a title: a deck section included in two places)."""
        groups: list[tuple[tuple, str, str | None, list[Slide]]] = []
        for slide, key, title, short in placed:
            if groups and groups[-1][0] == key:
                groups[-1][3].append(slide)
            else:
                groups.append((key, title, short, [slide]))
        if not groups:
            groups.append((("start",), info.title, None, []))
        groups[0][3].insert(0, title_slide)
        sections = []
        for number, (_, title, short, slides) in enumerate(groups):
            section_slug = f"{number:02d}-{slug(title)[:40] or 'section'}"
            sections.append(Section(
                slug=section_slug, title=title, short=short or (title if len(title) <= SHORT_MAX else None),
                slides=[s.model_copy(update={"section_slug": section_slug}) for s in slides]))
        return sections

    # -- one slide -------------------------------------------------------------------------------------

    def include_line(self, chunk: _Chunk, tokens: list[Token]) -> tuple[str, int] | None:
        """(slide id, line) if the slide is an `@slide ID` line; an @slide line in a slide's text (not its code)
        with anything else on the slide is refused."""
        at = [(chunk.start + token.map[0] + k, text.strip()) for token in tokens if token.type == "inline" and token.map
              for k, text in enumerate(token.content.splitlines()) if INCLUDE.match(text.strip())]
        if not at:
            return None
        content = [(chunk.start + i, text.strip()) for i, text in enumerate(chunk.lines) if text.strip()]
        line, text = at[0]
        slide_id = INCLUDE.match(text)[1]
        if not slide_id or " " in slide_id:
            raise self.fail(line, "@slide takes one slide id, e.g. @slide ddp-live")
        if len(content) > 1:
            if content[0][0] != line:  # after text of the slide: a --- before it is missing
                raise self.fail(line, f"@slide {slide_id} stands alone on its slide: a line --- before it starts one")
            raise self.fail(content[1][0], f"@slide {slide_id} stands alone on its slide: put this text on a slide "
                                           f"of its own (a line --- before it)")
        if chunk.notes_line:
            raise self.fail(chunk.notes_line, f"@slide {slide_id} brings the deck's own notes: a Note: here has no "
                                              f"slide to go on")
        return slide_id, line

    def unknown_slide(self, slide_id: str) -> str:
        close = difflib.get_close_matches(slide_id, [s.id for s in self.deck.slides], n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}?" if close else "its ids are in slides/sections/*/section.toml"
        return f"@slide {slide_id}: the deck has no slide with this id; {hint}"

    def render(self, tokens: list[Token], chunk: _Chunk, notes: bool = False) -> str:
        """The slide's Markdown as HTML: a live fence as the deck's live macro, math as its tex macro, and the
        headings of a slide with a live view compact (as the deck's live slides have them)."""
        offset = (chunk.notes_line - 1) if notes else (chunk.start - 1)
        live = any(t.type == "fence" and t.info.strip() == LIVE_INFO for t in tokens)
        headings = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
        for i, token in enumerate(tokens):
            if token.type == "fence" and token.info.strip() == LIVE_INFO:
                if notes:
                    raise self.fail(offset + token.map[0] + 1, "a live block goes on the slide, not in its notes")
                token.meta["live"] = self.live_block(token, offset)
            if token.type == "heading_open" and token.tag == "h1" and i + 3 in headings and tokens[i + 3].tag == "h2":
                token.attrSet("class", "section-kicker")  # `# Section` over `## Title`: the section's name, small
            elif live and token.type == "heading_open" and token.tag in ("h1", "h2"):
                token.attrSet("class", "compact")
        return MARKDOWN.renderer.render(tokens, MARKDOWN.options, {"macros": self.macros})

    def live_block(self, token: Token, offset: int) -> str:
        """A ```live fence's markup: the deck's live macro, with params the scenario's own model accepts."""
        first = offset + token.map[0] + 2  # the line after the fence's opening
        rows = [(first + i, text.strip()) for i, text in enumerate(token.content.splitlines()) if text.strip()]
        if not rows:
            raise self.fail(first - 1, "an empty live block: its first line is SCENARIO key=value …, e.g. ddp "
                                       "world_size=2")
        if len(rows) > 1:
            raise self.fail(rows[1][0], "a live block has one line: SCENARIO key=value …")
        line, text = rows[0]
        name, *assignments = text.split()
        try:
            scenario = scenarios.get(name)
        except scenarios.UnknownScenario:
            raise self.fail(line, f"unknown scenario {name!r}; one of {', '.join(scenarios.all_scenarios())}") \
                from None
        given: dict[str, str] = {}
        for item in assignments:
            key, sep, value = item.partition("=")
            if not sep or not key or not value:
                raise self.fail(line, f"{item!r}: parameters are key=value, e.g. world_size=2")
            if key in given:
                raise self.fail(line, f"{key}: given twice")
            given[key] = value
        fields = scenario.params.model_fields
        unknown = [key for key in given if key not in fields]
        if unknown:
            raise self.fail(line, f"{unknown[0]}: not a parameter of {name} (it takes {', '.join(fields)})")
        try:  # the strings as a query string would bring them: the API's model, its bounds and its coercion
            params = scenario.params.model_validate(given)
        except ValidationError as exc:
            raise self.fail(line, f"{name}: {describe(exc)}") from None
        dumped = params.model_dump(mode="json")
        self.live_blocks.append((line, name, scenario.world_size(params)))
        return str(self.macros.live(name, params={key: dumped[key] for key in given},
                                    controls=list(scenario.controls), caption=scenario.title))


def _render_fence(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    if "live" in token.meta:
        return token.meta["live"] + "\n"
    return _FENCE(tokens, idx, options, env)


def _render_math(display: bool):
    def render(self, tokens, idx, options, env) -> str:
        return str(env["macros"].tex(tokens[idx].content.strip(), display=display)) + ("\n" if display else "")

    return render


_FENCE = MARKDOWN.renderer.rules["fence"]
MARKDOWN.add_render_rule("fence", _render_fence)
for _rule, _display in (("math_inline", False), ("math_inline_double", True), ("math_block", True),
                        ("math_block_label", True)):
    MARKDOWN.add_render_rule(_rule, _render_math(_display))


def slide_heading(tokens: list[Token]) -> tuple[str | None, str | None]:
    """(the slide's title: its first heading under a `#` (## …), else its `#` heading's text, else its first
    line's; the text of its first `#` heading, which opens a section, or None)."""
    headings = [(token.tag, plain(tokens[i + 1])) for i, token in enumerate(tokens) if token.type == "heading_open"]
    opens = next((text for tag, text in headings if tag == "h1"), None)
    title = next((text for tag, text in headings if tag != "h1"), opens) or next(
        (plain(t) for t in tokens if t.type == "inline" and plain(t)), None)
    return (title[:120] if title else None), opens


def plain(token: Token) -> str:
    """An inline token's text without its Markdown (what a slide's title and the top bar show)."""
    parts = [child.content for child in (token.children or []) if child.type in ("text", "code_inline",
                                                                                 "math_inline")]
    return re.sub(r"\s+", " ", "".join(parts) if token.children else token.content).strip()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48].strip("-")


def unique_id(base: str, taken: set[str]) -> str:
    base = base if re.match(r"^[a-z0-9]", base) else f"s-{base}"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    taken.add(candidate)
    return candidate
