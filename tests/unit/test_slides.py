"""The talk's manifests, slide templates and the memory figures they quote."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest

from app import memory_math as mem
from app.content.manifest import ManifestError, load_deck
from app.content.markup import jinja_env, render_slides

ROOT = Path(__file__).resolve().parents[2]
SLIDES = (ROOT / "slides").resolve()


@pytest.fixture(scope="module")
def deck():
    return load_deck(SLIDES)


@pytest.fixture(scope="module")
def rendered(deck):
    return dict(zip([s.id for s in deck.slides], render_slides(deck, jinja_env(SLIDES))))


def test_sections_are_discovered_in_directory_order(deck):
    slugs = [section.slug for section in deck.sections]
    assert slugs == sorted(slugs)
    assert slugs[:3] == ["00-intro", "01-basics", "01-why-distributed"]
    assert [s.id for s in deck.sections[0].slides] == ["title", "contents", "real-runs", "notation"]


def test_every_slide_has_a_title_and_speaker_notes(rendered, deck):
    for slide in deck.slides:
        notes = re.search(r'<aside class="notes">(.*?)</aside>', rendered[slide.id], re.S)
        assert notes and len(notes.group(1).split()) >= 15, f"{slide.id}: speaker notes missing or too short"
        assert slide.title.strip()


def test_static_steps_match_the_manifest(rendered, deck):
    """data-step k must run 1..steps-1 with no gap: a gap is a → press that shows nothing."""
    for slide in deck.slides:
        html = rendered[slide.id]
        used = {int(k) for k in re.findall(r'\bdata-step="(\d+)"', html)}
        if slide.steps > 1:
            assert used == set(range(1, slide.steps)), slide.id
            assert f'data-steps="{slide.steps}"' in html
        else:
            assert used == set(), f"{slide.id} has data-step parts but no `steps` in its manifest"


def test_contents_slide_lists_every_section(rendered, deck):
    for section in deck.sections:
        assert f'href="#/{section.slides[0].id}/0"' in rendered["contents"]


def test_print_page_count_counts_steps(deck):
    assert deck.print_page_count() == len(deck.slides) + sum(s.steps - 1 for s in deck.slides)
    assert deck.find("one-gpu-7b").steps == 5 and deck.find("nope") is None


def write_section(root: Path, slug: str, manifest: str, templates: dict[str, str]) -> None:
    section = root / "sections" / slug
    section.mkdir(parents=True)
    (section / "section.toml").write_text(manifest)
    for name, text in templates.items():
        (section / name).write_text(text)


def test_duplicate_slide_ids_are_refused(tmp_path):
    one = 'title = "A"\n[[slides]]\nid = "same"\ntitle = "Same"\n'
    write_section(tmp_path, "00-a", one, {"same.html.j2": ""})
    write_section(tmp_path, "01-b", one, {"same.html.j2": ""})
    with pytest.raises(ManifestError, match="used twice"):
        load_deck(tmp_path)


def test_a_slide_without_its_template_is_refused(tmp_path):
    write_section(tmp_path, "00-a", 'title = "A"\n[[slides]]\nid = "ghost"\ntitle = "Ghost"\n', {})
    with pytest.raises(ManifestError, match="ghost"):
        load_deck(tmp_path)


@pytest.mark.parametrize("bad_id", ["Has-Caps", "../etc", "with space", "-leading"])
def test_slide_ids_must_be_url_safe(tmp_path, bad_id):
    write_section(tmp_path, "00-a", f'title = "A"\n[[slides]]\nid = "{bad_id}"\ntitle = "T"\n', {})
    with pytest.raises(ManifestError):
        load_deck(tmp_path)


def test_a_directory_with_files_but_no_manifest_is_refused(tmp_path):
    write_section(tmp_path, "00-a", 'title = "A"\n[[slides]]\nid = "a"\ntitle = "A"\n', {"a.html.j2": ""})
    (tmp_path / "sections" / "01-b").mkdir()
    (tmp_path / "sections" / "01-b" / "b.html.j2").write_text("")
    with pytest.raises(ManifestError, match="missing section.toml"):
        load_deck(tmp_path)


def test_template_file_can_be_named_in_the_manifest(tmp_path):
    write_section(
        tmp_path, "00-a", 'title = "A"\n[[slides]]\nid = "a"\ntitle = "A"\ntemplate = "other.html.j2"\n',
        {"other.html.j2": ""},
    )
    assert load_deck(tmp_path).slides[0].template_path == "sections/00-a/other.html.j2"


# ---- memory figures (REFERENCE.md) ----

@pytest.mark.parametrize("name, gigabytes", [("1B", 16), ("7B", 112), ("70B", 1120), ("405B", 6480)])
def test_sixteen_bytes_per_parameter_matches_the_playbook_table(name, gigabytes):
    assert sum(mem.model_state_bytes(mem.MODEL_SIZES[name]).values()) == pytest.approx(gigabytes * mem.GB)


def test_zero_stages_shard_what_the_zero_paper_says():
    psi, n = 1e9, 8
    total = lambda stage: sum(mem.model_state_bytes(psi, n, stage).values())  # noqa: E731
    assert total(0) == pytest.approx(16 * psi)
    assert total(1) == pytest.approx(2 * psi + 2 * psi + 12 * psi / n)
    assert total(2) == pytest.approx(2 * psi + 14 * psi / n)
    assert total(3) == pytest.approx(16 * psi / n)
    with pytest.raises(ValueError):
        mem.model_state_bytes(psi, n, 4)


def test_seven_b_breakdown_on_the_stepped_slide():
    states = mem.model_state_bytes(7e9)
    assert states == {"params": 14e9, "grads": 14e9, "optimizer": 84e9}


def test_activation_formula_and_recomputation():
    m = mem.LLAMA_7B
    sbh = 4096 * 1 * m.hidden
    assert mem.activation_bytes(4096, 1, m.hidden, m.heads, m.layers) == pytest.approx(
        m.layers * sbh * (34 + 5 * m.heads * 4096 / m.hidden)
    )
    assert mem.activation_bytes(4096, 1, m.hidden, m.heads, m.layers, "selective") == m.layers * sbh * 34
    assert mem.activation_bytes(4096, 1, m.hidden, m.heads, m.layers, "full") == m.layers * 2 * sbh


def test_gpu_counts_and_formatting():
    assert mem.gpus_to_hold(112e9, "H100") == 2
    assert mem.gpus_to_hold(6480e9, "H200") == 46
    assert mem.gb(6480e9) == "6,480 GB" and mem.gb(26.25e9, 1) == "26.2 GB"


# ---- issue 13: corrections, precision, notation (numbers read from simulations.formulas) ----

from simulations import formulas, hardware  # noqa: E402


def text_of(html: str) -> str:
    """The slide's visible text and notes, tags dropped, whitespace squeezed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_seven_b_activations_are_the_flash_attention_figure(rendered):
    s7 = formulas.PRESETS["7B"]
    flash = formulas.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers, flash_attention=True)
    stored = formulas.activation_bytes(4096, 1, s7.hidden, s7.heads, s7.layers)
    slide = rendered["one-gpu-7b"]
    content, notes = slide.split('<aside class="notes">')
    assert mem.gb(flash) in content and mem.gb(stored) not in content  # the bar shows what a Llama run keeps
    assert mem.gb(stored) in notes  # the notes say what storing the scores would cost
    total = sum(mem.model_state_bytes(s7.params).values()) + flash
    assert f"{mem.gb(total)} on one GPU" in text_of(content)
    assert "a hundred gigabytes" not in slide


def test_memory_wall_counts_b200s_and_the_70b_h100s(rendered):
    slide = text_of(rendered["memory-wall"])
    s70 = formulas.model_state_total(formulas.PRESETS["70B"].params)
    assert f"{formulas.gpus_to_hold(s70, 'H100')} H100s just to hold them" in slide
    assert f"B200s ({hardware.gpu('B200').hbm_bytes / formulas.GB:.0f} GB)" in slide
    assert "dozens of GPUs" not in slide


def test_precision_slide_reads_the_playbook_recipes(rendered):
    slide = text_of(rendered["precision"])
    psi = formulas.PRESETS["70B"].params
    for name, recipe in formulas.PRECISION_RECIPES.items():
        row = re.search(re.escape(name) + r" (.*?) " + re.escape(mem.gb(formulas.precision_state_bytes(psi, name))), slide)
        assert row, name
        assert f" {recipe.total} " in f" {row.group(1)} "
    assert mem.gb(formulas.gradient_reduce_bytes(psi, 64, 2)) in slide
    assert mem.gb(formulas.gradient_reduce_bytes(psi, 64, 4)) in slide


def test_ring_overlap_condition_is_computed(rendered):
    h100 = hardware.gpu("H100")
    slide = text_of(rendered["ring-measured"])
    for bandwidth in (h100.nvlink_bandwidth, h100.network_per_gpu):
        assert "{:,.0f}".format(round(formulas.ring_attention_min_block(h100.sustained_flops, bandwidth, causal=True), -2)) in slide
    assert "does not shrink with N: each rank" not in slide or "Ulysses" in slide


def test_notation_is_one_symbol_one_meaning(rendered):
    every = "".join(rendered.values())
    assert "notation" in rendered
    # The symbols the issue found with several meanings are gone from the formulas.
    for old in [r"3g\Psi", r"(g+1)\Psi", r"\partial L}", r"\nabla L ", r"B_{\text{link}}", r"p = \mathrm{softmax}",
                r"g_i\, E_i", "(N-1)B", "k = 12", r"\frac{S}{B}"]:
        assert old not in every, old
    assert r"\pi = \mathrm{softmax}" in rendered["ep-intro"]
    assert r"\mathcal{L}" in rendered["basics-loop"] and r"3m\Psi" in rendered["zero-accumulation"]


def test_accumulation_and_checkpointing_are_taught_once(rendered):
    # Section 04 teaches them; the ZeRO slides refer back instead of repeating the mechanism.
    assert "keep the inputs, recompute the rest" not in rendered["zero-checkpointing"].lower()
    for slide in ("zero-checkpointing", "zero-accumulation"):
        assert "accumulation section" in rendered[slide]
    assert "set_requires_gradient_sync" in rendered["zero-accumulation"]
    assert "tokens in all" in rendered["accumulation-how"]


def test_every_section_with_a_live_slide_asks_a_prediction_first(rendered, deck):
    for section in deck.sections:
        html = [rendered[s.id] for s in section.slides]
        if any('class="live-sim"' in h for h in html):
            assert any('class="predict"' in h for h in html), f"{section.slug}: no predict-then-run question"
    for slide_id, html in rendered.items():
        for spec in re.findall(r"class=\"predict\" data-predict='([^']*)'", html):
            spec = json.loads(spec.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&"))
            assert 2 <= len(spec["choices"]) <= 4, slide_id
            assert set(spec) == {"read", "per", "pick", "format", "source", "unit", "choices"}, "the answer is never in the markup"
            if spec["source"] == "summary":
                assert spec["read"].startswith("figures."), slide_id
            else:  # the estimator's replay of the slide's run, which its projected view shows
                assert spec["source"] == "projection" and 'views=' in html and "projected" in html, slide_id
            # The reveal says why the answer is what it is, shown only after the run is revealed.
            why = re.search(r'<p class="predict-why">([^<]*)</p>', html)
            assert why and len(html_lib.unescape(why.group(1))) >= 30, f"{slide_id}: no reason on the reveal"
            # Short: it shares the answer's row under the run (a longer one wraps to a second line there).
            assert len(html_lib.unescape(why.group(1))) <= 64, f"{slide_id}: the reason outgrows the badge"
            assert 'class="live-sim"' in html, f"{slide_id}: a question needs a run to answer it"


def test_the_story_order(deck):
    """Issue 22's flow: FSDP after DDP and its memory tools, before the pipeline (the contents' notes
    say why), each section's last
    slides before its pros and cons, the pipeline's cluster projection in the pipeline section, and
    the context-parallel section named for what it covers."""
    slugs = [section.slug for section in deck.sections]
    assert slugs[slugs.index("03-ddp"):][:4] == ["03-ddp", "04-accumulation-checkpointing", "05-zero", "06-pipeline"]
    assert "and before the pipeline: FSDP is data parallelism" in " ".join(render_slides(deck, jinja_env(SLIDES))[1].split())
    for section in deck.sections:
        ids = [s.id for s in section.slides]
        closing = [i for i in ids if i.endswith("pros-cons")]
        assert closing in ([], [ids[-1]]), f"{section.slug}: {ids[-1]} after its pros and cons"
    assert deck.find("on-a-cluster").section_slug == "06-pipeline"
    assert next(s.title for s in deck.sections if s.slug == "10-ring-attention") == "Context parallelism"
    # and its summary weighs all of it (ring, all-gather, Ulysses), not ring attention alone
    summary = dict(zip([s.id for s in deck.slides], render_slides(deck, jinja_env(SLIDES))))["ring-pros-cons"]
    assert deck.find("ring-pros-cons").title == "Context parallelism: pros and cons"
    assert all(word in summary for word in ("Ulysses", "all-gather", "ring"))


def test_no_slide_or_note_names_a_file_of_the_repository(rendered):
    """The presenter and the audience have the deck, not its source tree: a slide or a note says what
    was measured and where (a paper, NCCL, the deck's own run), never "see REFERENCE.md" or "zero.py".
    The names checked: every file the repository tracks, and the design notes kept beside it."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    names = {Path(p).name for p in tracked if "." in Path(p).name.strip(".")} | {"REFERENCE.md", "DESIGN.md"}
    pattern = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                         + r")(?![\w-])")
    found = {}
    for slide_id, html in rendered.items():
        text = text_of(re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S))
        hits = sorted(set(pattern.findall(text)))
        if hits:
            found[slide_id] = hits
    assert found == {}, f"slides or notes naming repository files: {found}"


def test_every_projected_view_at_its_defaults_models_a_layout_that_fits(rendered):
    """A live slide whose view is the modelled cluster (the `projected` view) times its run at its
    defaults on the cluster the slide names (else Llama 3 70B on the run's own number of H100s, as
    static/js/player/views/projected.js asks): that layout must fit in the GPUs' memory, or the deck
    would time a training step that cannot run."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    def attribute(tag: str, name: str):
        found = re.search(rf"{name}='([^']*)'", tag)
        return json.loads(found.group(1).replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&")) if found else None

    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    defaults = {s["name"]: s["defaults"] for s in client.get("/api/simulations").json()}
    projected = {}
    for slide_id, html in rendered.items():
        for tag in re.findall(r'<div class="live-sim"[^>]*>', html):
            if "projected" not in attribute(tag, "data-views"):
                continue
            scenario = re.search(r'data-scenario="([^"]+)"', tag).group(1)
            cluster = {"model": "llama3-70b", "gpu": "h100-80gb", **(attribute(tag, "data-cluster") or {})}
            params = {**defaults[scenario], **attribute(tag, "data-params")}
            query = {"scenario": scenario, **cluster, **{k: str(v).lower() if isinstance(v, bool) else v
                                                         for k, v in params.items() if k != "seed" and v is not None}}
            response = client.get("/api/estimate/replay", params=query)
            assert response.status_code == 200, (slide_id, response.text)
            body = response.json()
            projected[slide_id] = (body["model"], body["gpus"], body["fits"], round(body["memory_per_gpu_bytes"]["total"] / 1e9))
    assert {"tp-on-a-cluster", "zero3-on-a-cluster", "on-a-cluster"} <= set(projected)
    assert [s for s, (_, _, fits, _) in projected.items() if not fits] == [], projected


def test_a_question_is_answered_at_a_frame_its_run_has(rendered):
    """data-answer-at names the frame at which the run shows the answer (static/js/deck/predict.js answerFrame): a
    phase of the slide's recorded default run, or a path into its frames with the summary figure it reaches."""
    from app.content import pacing
    from app.content.steps import expand

    recorded = pacing.recorded_phases()
    named = 0
    for slide_id, html in rendered.items():
        for raw in re.findall(r"data-answer-at='([^']*)'", html):
            at = json.loads(html_lib.unescape(raw))
            named += 1
            if "phase" in at:
                (scenario, params), = pacing.default_runs(html)
                phases = expand(recorded[pacing.run_key(scenario, params)]["phases"])
                # Not the run's first frame (the answer would show with the run) and a frame the run has.
                assert at["phase"] in phases[1:], f"{slide_id}: no {at['phase']} frame after the first"
            else:
                assert set(at) == {"frame", "reaches"}, slide_id
                assert at["frame"].startswith("ranks.") and at["reaches"].startswith("figures."), slide_id
    assert named >= 5  # ddp-live, zero3-live, pp-gpipe, pp-1f1b, tp-live
