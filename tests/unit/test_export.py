"""`distdeck export`: the static site's files, relative URLs, recorded runs, the variant grid,
reuse on re-export, and a failing run failing the export. A two-slide deck keeps it fast."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import export
from app.content import live
from app.content.live import control_values
from app.export import ExportError, export_site, plan
from app.settings import Settings
from simulations import scenarios
from simulations.frames import Check, RunFile, Summary

pytestmark = pytest.mark.slow

SECTION = """title = "Tiny"
[[slides]]
id = "tiny-static"
title = "A static slide"
[[slides]]
id = "tiny-live"
title = "A live slide"
"""
STATIC = """{% extends "slide.html.j2" %}
{% block content %}<h2>Static</h2><script type="module" src="/static/js/calculator.js"></script>{% endblock %}
{% block notes %}Notes.{% endblock %}"""
LIVE = """{% extends "slide.html.j2" %}{% import "macros.html.j2" as m %}
{% block content %}{{ m.live("ddp", params={"world_size": 2, "steps": 1}, views=["ranks"],
                             controls=["world_size", "bucket_kb"]) }}{% endblock %}
{% block notes %}Notes.{% endblock %}"""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path) -> Settings:
    slides = tmp_path / "slides"
    section = slides / "sections" / "00-tiny"
    section.mkdir(parents=True)
    for name in ("macros.html.j2", "slide.html.j2"):
        (slides / name).write_text((ROOT / "slides" / name).read_text())
    (section / "section.toml").write_text(SECTION)
    (section / "tiny-static.html.j2").write_text(STATIC)
    (section / "tiny-live.html.j2").write_text(LIVE)
    return Settings(slides_dir=slides, start_pool_on_startup=False)


def test_export_writes_a_static_site_with_relative_urls_and_recorded_runs(settings, tmp_path, pool):
    out = tmp_path / "site"
    report = export_site(out, settings=settings, pool=pool, variants="default")
    # The slide's run (world_size 2) and the ddp widget's defaults (world_size 4).
    assert report.live_sims == 1 and len(report.recorded) == 2 and report.reused == []
    for page in ("index.html", "embed/index.html", "embed/ddp/index.html"):
        html = (out / page).read_text()
        assert not re.search(r"""(?:src|href)=["']/""", html), f"{page} has a root-absolute URL"
        assert '"staticSite": true' in html
    index_html = (out / "index.html").read_text()
    assert 'src="./static/js/calculator.js?v=' in index_html  # the slide's absolute URL made relative
    # started first, once the first view has painted: before any slide script (deck.html.j2's loader)
    assert '"first": ["./static/js/static-site.js?v=' in index_html
    # the inlined CSS's font files, relative to each page
    assert 'url("./static/vendor/fonts/source-sans-pro-latin-400-normal.woff2")' in index_html
    assert 'url("../../static/vendor/fonts/' in (out / "embed/ddp/index.html").read_text()
    assert (out / "embed/ddp/index.html.gz").is_file() and (out / "static/js/player/player.js.br").is_file()
    assert (out / "static/js/player/source.js").is_file() and (out / "static/vendor/d3/d3.min.js").is_file()
    catalog = json.loads((out / "api/simulations.json").read_text())
    assert {s["name"] for s in catalog} == set(scenarios.all_scenarios())

    index = json.loads((out / "runs/index.json").read_text())
    by_size = {e["params"]["world_size"]: e for e in index["runs"]}
    assert set(by_size) == {2, 4}
    for size, entry in by_size.items():
        run = RunFile.model_validate_json((out / entry["file"]).read_text())
        assert run.meta.scenario == "ddp" and run.meta.world_size == size and run.summary.passed
        assert entry["frames"] == len(run.frames) > 0
        assert entry["file"] == f"runs/ddp/{entry['id']}.json"
    assert by_size[2]["requests"][0] == {**live.defaults(scenarios.get("ddp")), "world_size": 2, "steps": 1}
    assert "slide tiny-live" in by_size[2]["where"] and "widget ddp" in by_size[4]["where"]


def test_reexport_reuses_unchanged_runs_and_rerecords_when_the_scenario_changes(settings, tmp_path, pool,
                                                                                monkeypatch):
    out = tmp_path / "site"
    first = export_site(out, settings=settings, pool=pool, variants="default")
    files = sorted((out / "runs").glob("*/*.json"))
    stamps = [f.stat().st_mtime_ns for f in files]

    again = export_site(out, settings=settings, pool=pool, variants="default")
    assert again.recorded == [] and sorted(again.reused) == sorted(first.recorded)
    assert [f.stat().st_mtime_ns for f in files] == stamps, "reused files are not rewritten"

    real = export.source_hash
    monkeypatch.setattr(export, "source_hash", lambda name: "changed" + real(name))
    changed = export_site(out, settings=settings, pool=pool, variants="default")
    assert sorted(changed.recorded) == sorted(first.recorded) and changed.reused == []


def test_source_hash_follows_the_scenario_code():
    assert live.source_hash("ddp") == live.source_hash("ddp")
    assert live.source_hash("ddp") != live.source_hash("pipeline")


def test_grid_varies_one_control_at_a_time_within_the_schema(settings):
    wanted, skipped, sims = plan(settings, "grid", pool_size=8)
    slide = [w for w in wanted if "slide tiny-live" in w.where]
    sizes = sorted(w.params.world_size for w in slide if w.params.bucket_kb == 0.25)
    assert sizes == [2, 4, 8]
    buckets = sorted(w.params.bucket_kb for w in slide if w.params.world_size == 2)
    assert buckets == [0.125, 0.25, 0.5]
    assert all(w.params.steps == 1 for w in slide)
    assert len(wanted) < 20 and sims == 1
    # A smaller pool cannot run 8 ranks: that variant is left out and said so.
    wanted4, skipped4, _ = plan(settings, "grid", pool_size=4)
    assert all(w.params.world_size <= 4 for w in wanted4)
    assert any("needs 8 ranks" in s for s in skipped4)


def test_control_values_from_the_json_schema():
    pipeline = scenarios.get("pipeline").params.model_json_schema()
    assert control_values(live._field_schema(pipeline, "schedule"), "1f1b") == [
        "gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"]
    assert control_values(live._field_schema(pipeline, "microbatches"), 8) == [4, 8, 16]
    zero = scenarios.get("zero").params.model_json_schema()
    assert control_values(live._field_schema(zero, "stage"), 3) == [0, 1, 2, 3]
    assert control_values(live._field_schema(zero, "cpu_offload"), False) == [False, True]


def test_a_failing_run_fails_the_export_with_the_reason(settings, tmp_path, pool, monkeypatch):
    import simulations.runtime as runtime

    real = runtime.simulate

    def failing(pool, name, params, traced=True):
        run = real(pool, name, params, traced)
        if params.world_size == 2:
            run.summary = Summary(checks=[
                Check(name="bytes agree", passed=True, measured=8, expected=8),
                Check(name="gradients agree", passed=False, measured=1.0, expected="≤ 1e-6", detail="max |g − g_ref|")])
        return run

    monkeypatch.setattr(runtime, "simulate", failing)
    with pytest.raises(ExportError, match=r"(?s)1 run\(s\) failed.*world_size=2.*") as failed:
        export_site(tmp_path / "site", settings=settings, pool=pool, variants="default")
    # The message names the check that failed, its measurement, its bound and why; not the ones that passed.
    assert "check “gradients agree”: measured 1.0, expected ≤ 1e-6 (max |g − g_ref|)" in str(failed.value)
    assert "bytes agree" not in str(failed.value)
    # The run that passed is kept, so fixing the other and exporting again records only it.
    index = json.loads((tmp_path / "site/runs/index.json").read_text())
    assert [e["params"]["world_size"] for e in index["runs"]] == [4]


def test_cli_export_exits_non_zero_with_the_message(monkeypatch, tmp_path):
    from app.cli import cli

    def fail(*args, **kwargs):
        raise ExportError("1 run(s) failed, so the export is incomplete:\n  ddp world_size=2: the run failed: boom")

    monkeypatch.setattr(export, "export_site", fail)
    result = CliRunner().invoke(cli, ["export", str(tmp_path / "out"), "--variants", "default"])
    assert result.exit_code == 1
    assert "the run failed: boom" in result.output
    bad = CliRunner().invoke(cli, ["export", str(tmp_path / "out"), "--variants", "all"])
    assert bad.exit_code == 2
