"""Talk files (app/content/talkfile.py): every feature of the format parsed into the Talk the pages read, each
kind of broken file refused as `FILE:LINE: what is wrong`, nothing of the file run as a template, and the CLI's
`new`, `serve --talk` and `export --talk` answering bad files with that message and exit 2."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.content.live import find_live_sims
from app.content.manifest import load_deck
from app.content.talk import load_talk
from app.content.talkfile import STARTER_TALK, TalkFileError, parse_talk_file
from simulations import scenarios

ROOT = Path(__file__).resolve().parents[2]
SLIDES = ROOT / "slides"
DECK = load_deck(SLIDES)
runner = CliRunner()

# Every feature once; the line numbers in the comments are the file's.
EVERY_FEATURE = """---
title: "My {{ 7 * 7 }} talk"
speaker: Ada Lovelace
event: PyCon 2026
date: 2026-11-28
minutes: 12
---
# Part one

## Memory, by hand <b>bold</b>

- one $M = 16\\Psi$ costs $5 and $10
- two {% raw %}{{ config }}

$$
\\frac{16\\Psi}{N}
$$

| model | bytes |
|---|--:|
| 7B | 112 GB |

[a link](javascript:alert(1))

Note: Say **this** first. {{ 6 * 7 }}
And this.
---
@slide ddp-live
---
## Code

```python
x = 1
---
Note: not notes: inside a fence
@slide ddp-live
```
---
# Part two
## My run

```live
ddp world_size=2 bucket_kb=0.5
```

Note: Two ranks.
---
@slide zero-stages
"""


def write(tmp_path: Path, text: str, name: str = "talk.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str) -> TalkFileError:
    with pytest.raises(TalkFileError) as caught:
        parse_talk_file(write(tmp_path, text), SLIDES, DECK)
    return caught.value


@pytest.fixture(scope="module")
def talk(tmp_path_factory):
    return load_talk(SLIDES, write(tmp_path_factory.mktemp("talk"), EVERY_FEATURE))


@pytest.fixture(scope="module")
def slides_html(talk) -> list[str]:
    return talk.slides_html(embed=False, print_pdf=False, root="/")


def test_front_matter_makes_the_title_slide_and_the_slot(talk, slides_html):
    assert talk.title == "My {{ 7 * 7 }} talk" and talk.minutes == 12
    assert talk.deck.speaker == "Ada Lovelace" and talk.deck.event == "PyCon 2026" and talk.deck.date == "2026-11-28"
    title = slides_html[0]
    assert talk.slides[0].id == "title"
    assert "<h1>My {{ 7 * 7 }} talk</h1>" in title and "PyCon 2026" in title and "Ada Lovelace · 2026-11-28" in title


def test_slides_split_on_rules_outside_fences_with_ids_from_titles(talk):
    assert [s.id for s in talk.slides] == ["title", "memory-by-hand-b-bold-b", "ddp-live", "code", "my-run",
                                           "zero-stages"]
    assert talk.slides[3].title == "Code"


def test_sections_from_hash_headings_hold_the_included_slides(talk):
    assert [(s.title, [x.id for x in s.slides]) for s in talk.sections] == [
        ("Part one", ["title", "memory-by-hand-b-bold-b", "ddp-live", "code"]),
        ("Part two", ["my-run", "zero-stages"])]
    # Each slide says its section in the markup (the top bar's data-section).
    assert all(slide.section_slug == section.slug for section in talk.sections for slide in section.slides)


def test_without_headings_included_slides_bring_their_deck_sections(tmp_path):
    deck = parse_talk_file(write(tmp_path, "---\ntitle: T\n---\n## Mine\n---\n@slide ddp-live\n---\n@slide zero-stages"
                                           "\n---\n## After"), SLIDES, DECK)
    ddp, zero = DECK.find("ddp-live"), DECK.find("zero-stages")
    titles = {s.slug: s.title for s in DECK.sections}
    assert [(s.title, [x.id for x in s.slides]) for s in deck.sections] == [
        ("T", ["title", "mine"]), (titles[ddp.section_slug], ["ddp-live"]),
        (titles[zero.section_slug], ["zero-stages", "after"])]


def test_markdown_list_math_table_and_notes(talk, slides_html):
    own = slides_html[1]
    assert '<li>one <span class="tex" data-tex="M = 16\\Psi">M = 16\\Psi</span> costs $5 and $10</li>' in own
    assert '<span class="tex tex-display" data-tex="\\frac{16\\Psi}{N}" data-display="true">' in own
    assert re.search(r"<table>.*<th>model</th>.*<td style=\"text-align:right\">112 GB</td>.*</table>", own, re.S)
    notes = re.search(r'<aside class="notes">(.*?)</aside>', own, re.S)[1]
    assert "<strong>this</strong>" in notes and "And this." in notes
    assert "Note:" not in own.split('<aside class="notes">')[0]
    # A `Note:` inside a fence is code, not the start of notes; `---` there does not end the slide.
    assert "---\nNote: not notes: inside a fence\n@slide ddp-live" in slides_html[3]


def test_nothing_in_a_talk_file_runs_as_a_template_or_as_html(talk, slides_html):
    own = slides_html[1]
    # Jinja syntax is shown as written: never evaluated (49, 42 and the config would be).
    assert "{% raw %}{{ config }}" in own and "{{ 6 * 7 }}" in own and "42" not in own
    assert "My {{ 7 * 7 }} talk" in slides_html[0] and "49" not in slides_html[0]
    # Raw HTML is text; a javascript: link is no link.
    assert "&lt;b&gt;bold&lt;/b&gt;" in own and "<b>" not in own
    assert "javascript:" not in own.replace("[a link](javascript:alert(1))", "")


def test_an_included_slide_is_the_decks_own_whole(talk, slides_html):
    deck_html = load_talk(SLIDES).slides_html(embed=False, print_pdf=False, root="/")
    own = deck_html[[s.id for s in DECK.slides].index("ddp-live")]
    included = slides_html[2]
    # The same slide (live view, question, notes); only its section (the talk's) differs.
    assert re.sub(r'data-section="[^"]*"', "", included) == re.sub(r'data-section="[^"]*"', "", own)
    assert talk.slides[5].steps == DECK.find("zero-stages").steps


def test_a_live_block_is_the_decks_live_markup_with_validated_params(talk, slides_html):
    sims = find_live_sims(slides_html)
    mine = next(s for s in sims if s.slide == "my-run")
    ddp = scenarios.get("ddp")
    # Typed by the scenario's own model (the file says strings), only what the block set, the scenario's controls.
    assert mine.scenario == "ddp" and mine.params == {"world_size": 2, "bucket_kb": 0.5}
    assert mine.controls == list(ddp.controls)
    assert '<h2 class="compact">My run</h2>' in slides_html[4]
    assert [s.slide for s in sims] == ["ddp-live", "my-run"]


def test_pacing_budget_and_notes_reach_the_page(talk, slides_html):
    budgets = talk.budgets(slides_html)
    assert set(budgets) == {s.id for s in talk.slides}
    assert budgets["memory-by-hand-b-bold-b"].words == len("Say this first. {{ 6 * 7 }} And this.".split())


def test_the_starter_talk_parses_and_shows_every_feature(tmp_path):
    starter = load_talk(SLIDES, STARTER_TALK)
    html = "".join(starter.slides_html(root="/"))
    assert starter.deck.speaker and starter.deck.event and starter.minutes
    assert "<table>" in html and 'class="tex tex-display"' in html and "<ul>" in html
    assert any(s.id in {d.id for d in DECK.slides} for s in starter.slides[1:]), "an included deck slide"
    sims = find_live_sims(starter.slides_html(root="/"))
    own_ids = {s.id for s in starter.slides} - {d.id for d in DECK.slides}
    assert any(s.slide in own_ids for s in sims), "a live block of its own"
    assert all(re.search(r'<aside class="notes">\s*\S', h) for h, s in zip(starter.slides_html(root="/"),
                                                                        starter.slides) if s.id in own_ids
               and s.id != "thank-you" and s.id != "title")


BROKEN = [
    # (file, line, words the message has)
    ("---\ntitle: T\n---\n## A\n---\n@slide ddp-lve\n", 6, ["@slide ddp-lve", "did you mean ddp-live"]),
    ("---\ntitle: T\n---\n@slide ddp-live\n---\n@slide ddp-live\n", 6, ["already on line 4"]),
    ("---\ntitle: T\n---\n@slide ddp-live\nmore words\n", 5, ["stands alone"]),
    ("---\ntitle: T\n---\n@slide ddp-live\nNote: mine\n", 5, ["own notes"]),
    ("---\ntitle: T\n---\n## Mine\n\nText\n@slide ddp-live\n", 7, ["a line --- before it"]),
    ("---\ntitle: T\n---\n@slide\n", 4, ["one slide id"]),
    ("---\ntitle: T\n---\n## A\n\n```live\ndpp world_size=2\n```\n", 7,
     ["unknown scenario 'dpp'", "ddp, diloco"]),
    ("---\ntitle: T\n---\n## A\n\n```live\nddp world_size=9\n```\n", 7, ["world_size", "less than or equal to 8"]),
    ("---\ntitle: T\n---\n## A\n\n```live\nddp world_size=two\n```\n", 7, ["world_size", "valid integer"]),
    ("---\ntitle: T\n---\n## A\n\n```live\npipeline schedule=fast\n```\n", 7,
     ["schedule", "'gpipe', '1f1b', 'interleaved_1f1b' or 'zero_bubble'"]),
    ("---\ntitle: T\n---\n## A\n\n```live\nddp colour=red\n```\n", 7, ["colour: not a parameter of ddp",
                                                                      "world_size, bucket_kb"]),
    ("---\ntitle: T\n---\n## A\n\n```live\nddp world_size\n```\n", 7, ["key=value"]),
    ("---\ntitle: T\n---\n## A\n\n```live\n```\n", 6, ["empty live block"]),
    ("---\ntitle: T\n---\n## A\n\n```live\nddp\nzero\n```\n", 8, ["one line"]),
    ("---\ntitle: T\n---\n## A\nNote: x\n\n```live\nddp\n```\n", 7, ["not in its notes"]),
    ("---\ntitle: T\n---\n## A\n\n```python\nx = 1\n---\n## B\n", 6, ["``` fence opened here is never closed"]),
    ("---\ntitle: T\nminutes: lots\n---\n", 3, ["minutes", "valid integer"]),
    ("---\ntitle: T\nminutes: 0\n---\n", 3, ["minutes", "greater than or equal to 1"]),
    ("---\ntitle: T\nauthor: me\n---\n", 3, ["author: not a front matter key", "title, speaker, event, date, minutes"]),
    ("---\ntitle: T\n  speaker: x\n---\n", 3, ["not valid YAML"]),
    ("---\n- a list\n---\n", 2, ["keys and values"]),
    ("---\nspeaker: x\n---\n", 1, ["title: the front matter must say it"]),
    ("---\ntitle: T\n", 1, ["never closed"]),
    ("# No front matter\n", 1, ["starts with its front matter"]),
]


@pytest.mark.parametrize("text, line, words", BROKEN, ids=[f"{n}-{w[0][:24]}" for n, (_, _, w) in enumerate(BROKEN)])
def test_a_broken_file_is_refused_at_its_line(tmp_path, text, line, words):
    error = refused(tmp_path, text)
    path = str(tmp_path / "talk.md")
    assert str(error).startswith(f"{path}:{line}: "), str(error)
    for word in words:
        assert word in str(error)


def test_a_missing_or_unreadable_file_is_named(tmp_path):
    assert str(refused_path(tmp_path / "nope.md")) == f"{tmp_path / 'nope.md'}: no such file"
    assert "a folder" in str(refused_path(tmp_path))
    bad = tmp_path / "latin1.md"
    bad.write_bytes(b"---\ntitle: caf\xe9\n---\n")
    assert str(refused_path(bad)) == f"{bad}:2: not UTF-8 text"


def refused_path(path: Path) -> TalkFileError:
    with pytest.raises(TalkFileError) as caught:
        parse_talk_file(path, SLIDES, DECK)
    return caught.value


# -- the command line ---------------------------------------------------------------------------------


def no_talk_in_the_environment(monkeypatch) -> None:
    """DISTDECK_TALK_FILE unset now, and unset again after the test (serve --talk sets it for its workers)."""
    monkeypatch.setenv("DISTDECK_TALK_FILE", "")
    monkeypatch.delenv("DISTDECK_TALK_FILE")


def test_new_writes_the_starter_and_never_overwrites(tmp_path):
    target = tmp_path / "mine.md"
    result = runner.invoke(cli, ["new", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == STARTER_TALK.read_text() and f"serve --talk {target}" in result.output
    target.write_text("my own words")
    again = runner.invoke(cli, ["new", str(target)])
    assert again.exit_code == 2 and "exists" in again.output and "Traceback" not in again.output
    assert target.read_text() == "my own words"


@pytest.mark.parametrize("command", [["serve"], ["export", "SITE"]])
def test_serve_and_export_refuse_a_broken_talk_with_its_line(tmp_path, command, monkeypatch):
    import uvicorn

    from app import export

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server started"))
    monkeypatch.setattr(export, "export_site", lambda *a, **k: pytest.fail("the export started"))
    no_talk_in_the_environment(monkeypatch)
    args = [str(tmp_path / "site") if a == "SITE" else a for a in command]
    bad = write(tmp_path, "---\ntitle: T\n---\n## A\n\n```live\nddp world_size=9\n```\n", "bad.md")
    result = runner.invoke(cli, [*args, "--talk", str(bad)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{bad}:7: ddp: world_size: Input should be less than or equal to 8" in result.output
    missing = runner.invoke(cli, [*args, "--talk", str(tmp_path / "nope.md")])
    assert missing.exit_code == 2 and f"{tmp_path / 'nope.md'}: no such file" in missing.output
    assert not (tmp_path / "site").exists()


def test_serve_checks_a_talk_file_named_by_the_environment(tmp_path, monkeypatch):
    """The Docker image's way (DISTDECK_TALK_FILE): refused before the server starts, as --talk is."""
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server started"))
    bad = write(tmp_path, "---\ntitle: T\n---\n@slide nope-nope-nope\n", "bad.md")
    monkeypatch.setenv("DISTDECK_TALK_FILE", str(bad))
    result = runner.invoke(cli, ["serve"])
    assert result.exit_code == 2 and f"{bad}:4: @slide nope-nope-nope" in result.output


def test_serve_passes_a_good_talk_to_the_server(tmp_path, monkeypatch):
    import uvicorn

    started = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.update(k))
    no_talk_in_the_environment(monkeypatch)
    good = write(tmp_path, EVERY_FEATURE)
    result = runner.invoke(cli, ["serve", "--talk", str(good), "--port", "8123"])
    assert result.exit_code == 0, result.output
    # The path travels to the server (and its --reload workers) through the environment, as --runs does.
    assert started["port"] == 8123 and os.environ["DISTDECK_TALK_FILE"] == str(good.absolute())


def test_the_readmes_example_talk_parses(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"````markdown\n(.*?)````\n", readme, re.S)[1]
    talk = load_talk(SLIDES, write(tmp_path, example))
    assert [s.id for s in talk.slides] == ["title", "one-gpu-is-not-enough", "ddp-live", "two-ranks-live"]
    assert [s.title for s in talk.sections] == ["Why many GPUs"]


def test_serve_refuses_a_live_block_larger_than_its_pool(tmp_path, monkeypatch):
    """A block the schema allows (8 ranks) but this server's pool cannot run is refused at start, at its line,
    not when a viewer reaches its slide."""
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the server started"))
    no_talk_in_the_environment(monkeypatch)
    monkeypatch.setenv("DISTDECK_POOL_SIZE", "2")
    talk = write(tmp_path, "---\ntitle: T\n---\n## A\n\n```live\nddp world_size=2\n```\n---\n## B\n\n"
                           "```live\nddp world_size=4\n```\n", "big.md")
    result = runner.invoke(cli, ["serve", "--talk", str(talk)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{talk}:13: ddp needs 4 ranks; this server's pool has 2" in result.output
