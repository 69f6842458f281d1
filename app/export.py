"""`distdeck export DIR`: the deck as a static site, with its live slides' runs recorded.

The site works from any static host and any folder of it (a Hugo or GitHub Pages sub-folder):
every URL in its pages is relative, and the pages know they have no server (config
`staticSite`), so the player replays recorded run files instead of streaming from the API.

    DIR/index.html                    the deck
    DIR/track-<name>.html             a track of it (index.html?track=20 goes there)
    DIR/embed/index.html              the deck in embed mode (for an iframe)
    DIR/embed/track-<name>.html       a track of it, embedded
    DIR/embed/<scenario>/index.html   one simulation as a widget
    DIR/static/...                    CSS, JS, vendor files
    DIR/api/simulations.json          the scenario catalog (what GET /api/simulations answers)
    DIR/runs/index.json               the recorded runs: scenario, params, file, source hash
    DIR/runs/<scenario>/<id>.json     one run file each (simulations.frames.RunFile)
    DIR/**/<file>.gz, <file>.br       every text file precompressed, for hosts that serve those

What is recorded: for every `.live-sim` on every slide, its default run, plus (variants="grid")
a small grid from the slide's controls and the scenario's JSON Schema, one control at a time:
enums and booleans every value; small integer ranges (at most 8) 2, 4 and 8; other
numbers half and double the default. Plus each widget's defaults and grid, and the runs the
bubble plot's script asks for; past MAX_RUNS, fewer grid variants per slide. Re-exporting reuses a run file whose scenario, validated params,
and scenario source hash are unchanged. A run that errors or fails a check fails the export.

Owns: planning the runs to record (plan), recording and reusing them, writing the site and precompressing
it. The second client of the page layer, beside the routers: every page it writes comes from app.pages, from
one Talk loaded at the start. Imports app.pages, app.content, app.settings, simulations, and the scenario
catalog GET /api/simulations answers (app.routers.simulations.list_scenarios).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.content.live import Variants, run_id, source_hash
from app.content.manifest import ManifestError
from app.content.runs import RunPlanError, Wanted, differences, plan_runs
from app.content.talk import Talk, load_talk
from app.content.talkfile import TalkFileError
from app.pages.deck import render_deck, track_page
from app.pages.widget import first_frame, render_widget, widget_spec
from app.settings import Settings
from simulations import scenarios
from simulations.frames import SCHEMA_VERSION, RunFile

if TYPE_CHECKING:
    from pydantic import BaseModel

    from simulations.runtime import Run

# Keep the export small (and `make export` a few minutes): past this, fewer grid variants per slide.
MAX_RUNS = 150
# Static files that are not part of the site (scratch pages start with "_").
IGNORED_STATIC = shutil.ignore_patterns("_*", ".installed", ".DS_Store")
# Text files written again as .gz (and .br, with the brotli package) beside themselves, for hosts that
# serve a precompressed file to a client that accepts it (nginx gzip_static, Caddy precompressed, ...).
PRECOMPRESSED = {".html", ".js", ".mjs", ".css", ".json", ".svg", ".map", ".txt"}
PRECOMPRESS_MIN_BYTES = 512
# Measured on static/ (7.5 MB): quality 5 takes 1.2 s for 3.14 MB, 11 takes 78 s for 2.99 MB.
PRECOMPRESS_BROTLI_QUALITY = 5
ABSOLUTE_STATIC = re.compile(r"""(?P<attr>(?:src|href)=["'])/static/""")


class ExportError(RuntimeError):
    """The export cannot be completed; the message says which run or file and why."""


@dataclass
class ExportReport:
    out_dir: Path
    recorded: list[str] = field(default_factory=list)  # run ids recorded now
    reused: list[str] = field(default_factory=list)  # run ids kept from an earlier export
    skipped: list[str] = field(default_factory=list)  # grid variants the scenario rejects, and why
    live_sims: int = 0

    @property
    def runs(self) -> int:
        return len(self.recorded) + len(self.reused)


# -- what to record ----------------------------------------------------------------------------------


def plan(settings: Settings, variants: Variants, pool_size: int, budget: int = MAX_RUNS,
         talk: Talk | None = None) -> tuple[list[Wanted], list[str], int]:
    """The runs the export records (app.content.runs.plan_runs) for the talk (the deck under the settings'
    slides_dir if None), within `budget`; ExportError if a slide's own run cannot be had."""
    try:
        return plan_runs(talk or _load(settings), variants, pool_size, budget)
    except RunPlanError as exc:
        raise ExportError(str(exc)) from None


def _load(settings: Settings) -> Talk:
    try:
        return load_talk(settings.slides_dir, settings.talk_file)
    except ManifestError as exc:
        raise ExportError(f"the deck does not load: {exc}") from None
    except TalkFileError as exc:
        raise ExportError(str(exc)) from None


# -- reuse -------------------------------------------------------------------------------------------


def _read_index(path: Path) -> dict[str, dict]:
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if index.get("schema_version") != SCHEMA_VERSION:
        return {}
    return {entry["id"]: entry for entry in index.get("runs", [])}


# -- the export --------------------------------------------------------------------------------------


def relative_urls(html: str, root: str) -> str:
    """Slides that write src="/static/..." get it under the export's root instead of the host's."""
    return ABSOLUTE_STATIC.sub(lambda m: f"{m['attr']}{root}static/", html)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_pages(settings: Settings, out: Path, used: list[str], talk: Talk | None = None) -> None:
    """Every page of the site (the deck and its tracks, plain and embedded; each used scenario's widget), the
    static files and the scenario catalog, into `out`; `talk`: the deck under the settings' slides_dir if None."""
    talk = talk or load_talk(settings.slides_dir, settings.talk_file)
    static = Path(settings.static_dir)
    for vendor in ("reveal.js", "katex", "d3"):
        if not (static / "vendor" / vendor).is_dir():
            raise ExportError(f"{static / 'vendor' / vendor} is missing: run `make install` first")
    shutil.copytree(static, out / "static", ignore=IGNORED_STATIC, dirs_exist_ok=True)
    _write(out / ".nojekyll", "")  # GitHub Pages: serve every file as is
    # The whole deck and each track (a static host has no query string to read: a page per track).
    for track in [None, *(t.name for t in talk.tracks)]:
        _write(out / track_page(track),
               relative_urls(render_deck(settings, talk, root="./", static_site=True, track=track), "./"))
        _write(out / "embed" / track_page(track),
               relative_urls(render_deck(settings, talk, embed=True, root="../", static_site=True, track=track),
                             "../"))
    for name in used:
        scenario = scenarios.get(name)
        # The recorded run of the widget's defaults: its first frame goes in the page, drawn at once.
        recorded = out / "runs" / name / f"{run_id(name, scenario.params())}.json"
        first = first_frame(RunFile.model_validate_json(recorded.read_text())) if recorded.is_file() else None
        html = render_widget(settings, scenario, widget_spec(scenario, {}), root="../../", static_site=True,
                             open_href="./", first=first)
        _write(out / "embed" / name / "index.html", relative_urls(html, "../../"))
    from app.routers.simulations import list_scenarios

    catalog = [info.model_dump(mode="json") for info in list_scenarios()]
    _write(out / "api" / "simulations.json", json.dumps(catalog))


def precompress(out: Path) -> None:
    """<file>.gz and <file>.br beside each text file of the site, carrying the file's mtime: one whose mtime
    still matches its file's is kept (a re-export), one whose file is gone is removed."""
    try:
        import brotli
    except ImportError:
        brotli = None
    encoders = {".gz": lambda data: gzip.compress(data, compresslevel=9, mtime=0)}
    if brotli is not None:
        encoders[".br"] = lambda data: brotli.compress(data, quality=PRECOMPRESS_BROTLI_QUALITY, mode=brotli.MODE_TEXT)
    for path in sorted(out.rglob("*")):
        if path.suffix in (".gz", ".br") and not path.with_suffix("").is_file():
            path.unlink()  # its file was removed (a stale run)
        if not path.is_file() or path.suffix not in PRECOMPRESSED or path.stat().st_size < PRECOMPRESS_MIN_BYTES:
            continue
        mtime = path.stat().st_mtime_ns
        for suffix, encode in encoders.items():
            target = path.with_name(path.name + suffix)
            if not target.is_file() or target.stat().st_mtime_ns != mtime:
                target.write_bytes(encode(path.read_bytes()))
                os.utime(target, ns=(mtime, mtime))


def export_site(out_dir: Path, *, settings: Settings | None = None, pool=None, variants: Variants = "grid",
                on_plan: Callable[[int, int], None] | None = None,
                on_run: Callable[[Wanted, str], None] | None = None,
                record: Callable[[str, BaseModel], Run] | None = None) -> ExportReport:
    """Write the static site into `out_dir`. `pool`: a started RankPool (one is started if None and
    something needs recording). `on_plan(to_record, to_reuse)` and `on_run(wanted, "recording" | "done")`
    report progress. `record(scenario, params)`, if given, makes each finished run instead of a simulate()
    on the pool: a server's simulator, whose cache then holds the runs for its own pages.
    Raises ExportError if a run errors or fails a check (the others are kept)."""
    from simulations.runtime import RankPool, simulate

    settings = settings or Settings()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = ExportReport(out)
    pool_size = pool.size if pool is not None else settings.pool_size
    talk = _load(settings)  # the one read of the slides: the runs are planned and the pages written from it
    wanted, report.skipped, report.live_sims = plan(settings, variants, pool_size, talk=talk)
    index_path = out / "runs" / "index.json"
    previous = _read_index(index_path)
    hashes = {name: source_hash(name) for name in {w.scenario for w in wanted}}

    entries: list[dict] = []
    to_record: list[Wanted] = []
    for item in wanted:
        old = previous.get(item.id)
        file = out / "runs" / item.scenario / f"{item.id}.json"
        if old and old.get("source_hash") == hashes[item.scenario] and old.get("passed") and file.is_file():
            entries.append({**old, "requests": item.requests, "where": item.where})
            report.reused.append(item.id)
        else:
            to_record.append(item)
    if on_plan:
        on_plan(len(to_record), len(report.reused))

    failures: list[str] = []
    owned = None
    if to_record and pool is None and record is None:
        owned = pool = RankPool(size=settings.pool_size, backend=settings.backend,
                                job_timeout_s=settings.job_timeout_s)
        pool.start(background=False)
    try:
        for item in to_record:
            if on_run:
                on_run(item, "recording")
            run = record(item.scenario, item.params) if record else simulate(pool, item.scenario, item.params)
            label = f"{item.scenario} {differences(scenarios.get(item.scenario), item.params.model_dump(mode='json'))}"
            if run.error is not None:
                failures.append(f"{label} ({', '.join(item.where)}): the run failed: {run.error}")
            elif not run.summary.passed:
                # Each failed check by name, with what it measured against what it expected and why: the part
                # that failed, not the run as a whole.
                failed = [f"check “{c.name}”: measured {c.measured}, expected {c.expected}"
                          + (f" ({c.detail})" if c.detail else "") for c in run.summary.checks if not c.passed]
                failures.append(f"{label} ({', '.join(item.where)}): failed its checks: {'; '.join(failed)}")
            else:
                file = Path("runs") / item.scenario / f"{item.id}.json"
                _write(out / file, run.to_file().model_dump_json())
                entries.append({"id": item.id, "scenario": item.scenario, "file": file.as_posix(),
                                "params": item.params.model_dump(mode="json"), "requests": item.requests,
                                "where": item.where, "source_hash": hashes[item.scenario],
                                "frames": len(run.frames), "passed": True})
                report.recorded.append(item.id)
            if on_run:
                on_run(item, "done")
    finally:
        if owned is not None:
            owned.close()

    entries.sort(key=lambda e: (e["scenario"], e["id"]))
    kept = {out / e["file"] for e in entries}
    for stale in (out / "runs").glob("*/*.json"):  # runs no slide asks for any more
        if stale not in kept:
            stale.unlink()
    _write(index_path, json.dumps({"schema_version": SCHEMA_VERSION, "runs": entries}, indent=1))
    write_pages(settings, out, sorted({w.scenario for w in wanted if any(p.startswith("widget") for p in w.where)}),
                talk)
    precompress(out)
    if failures:
        raise ExportError(f"{len(failures)} run(s) failed, so the export is incomplete:\n  " + "\n  ".join(failures))
    return report
