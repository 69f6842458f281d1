"""Tracks (slides/tracks.toml): talks for a 20-, 45- and 90-minute slot, each a story of its own,
and the pacing budgets (app/content/pacing.py) that say whether each fits its slot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.content import pacing, steps
from app.content.live import default_runs, source_hash
from app.content.manifest import ManifestError, load_deck
from app.content.markup import jinja_env, render_slides

ROOT = Path(__file__).resolve().parents[2]
SLIDES = (ROOT / "slides").resolve()

# Words that point at another slide. A slide whose text (on the slide or in its notes) uses one must
# name the slides it points at in its manifest (`refers`), so that a track can be checked to have them.
BACK_REFERENCES = re.compile(
    r"\bas we (?:saw|have seen|showed|measured)\b|\bwe (?:saw|have seen|'ve seen)\b|\bearlier\b"
    r"|\bas (?:taught|shown) (?:in|on)\b|\bthe talk has\b|\brecall\b"
    r"|\bthe (?:previous|last|next|first|following)(?: \w+)? (?:slides?|sections?)\b"
    r"|\blater in the (?:talk|deck)\b|\bthe same as \w+'s\b"
    r"|\bthe \w+ section\b|\bon the \w+ slides\b"
    r"|\bthe \w+ (?:run|slide) of the \w+ section\b",
    re.I,
)


@pytest.fixture(scope="module")
def deck():
    return load_deck(SLIDES)


@pytest.fixture(scope="module")
def rendered(deck):
    return dict(zip([s.id for s in deck.slides], render_slides(deck, jinja_env(SLIDES)), strict=True))


@pytest.fixture(scope="module")
def budgets(deck, rendered):
    return pacing.budgets(deck, [rendered[s.id] for s in deck.slides])


@pytest.fixture(scope="module")
def track_rendered(deck):
    """Each track's slides as its page renders them (a short-notes track: the short notes), by track and slide id."""
    rendered = {}
    for track in deck.tracks:
        tdeck = deck.for_track(track.name)
        rendered[track.name] = dict(zip(track.slides, render_slides(tdeck, jinja_env(SLIDES)), strict=True))
    return rendered


@pytest.fixture(scope="module")
def track_budgets(deck, track_rendered):
    """Each track's budgets, from the notes its page shows."""
    return {t.name: pacing.budgets(deck.for_track(t.name), list(track_rendered[t.name].values())) for t in deck.tracks}


def text_of(slide_html: str) -> str:
    """What is read on the slide and in its notes: no scripts, no tags."""
    text = re.sub(r"<script\b.*?</script>", " ", slide_html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


def back_references(slide_html: str) -> list[str]:
    return [m.group(0) for m in BACK_REFERENCES.finditer(text_of(slide_html))]


def scenarios_of(slide_html: str) -> set[str]:
    return set(re.findall(r'class="live-sim" data-scenario="([a-z_0-9]+)"', slide_html))


def test_three_tracks_of_about_15_35_and_45_slides(deck):
    sizes = {t.name: len(t.talk_slides) for t in deck.tracks}
    assert set(sizes) == {"20", "45", "90"}
    assert 12 <= sizes["20"] <= 18 and 25 <= sizes["45"] <= 40 and 40 <= sizes["90"] <= 60, sizes
    assert {t.name: t.minutes for t in deck.tracks} == {"20": 20, "45": 45, "90": 90}
    assert {t.name: t.notes for t in deck.tracks} == {"20": "short", "45": "short", "90": "long"}


# A slot needs room for a question and one live tweak (a control changed, the run replayed): a track is written
# for about 90 % of its minutes (18, 40.5, 81). The budgets are estimates (words at a speaking rate, seconds per
# press), so a track is held between 80 % and 95 %: above, the first question eats the close; below, a third of
# the slot's story is missing. The backup slides after the close are not part of the talk's time.
SLOT_SHARE = (0.80, 0.95)


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_each_track_takes_about_90_percent_of_its_slot(deck, track_budgets, name):
    track = deck.find_track(name)
    total, slot = pacing.track_minutes(SLIDES)[name]
    # the same sum over the notes the track's page shows, its backup slides left out
    assert total == pytest.approx(sum(track_budgets[name][i].seconds for i in track.talk_slides) / 60)
    low, high = (share * slot for share in SLOT_SHARE)
    assert low <= total <= high, f"track {name}: {total:.1f} min for a {slot}-min slot (aim: {0.9 * slot:g})"


def test_the_whole_deck_is_longer_than_the_longest_track(deck, budgets):
    assert sum(b.seconds for b in budgets.values()) / 60 > max(t.minutes for t in deck.tracks)


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_each_track_runs_ddp_zero_and_pipeline_live_and_ends_with_the_conclusion(deck, rendered, name):
    track = deck.find_track(name)
    played = set().union(*(scenarios_of(rendered[i]) for i in track.slides))
    assert {"ddp", "zero", "pipeline"} <= played, f"track {name} runs {sorted(played)}"
    assert track.slides[0] == "title"
    assert deck.find(track.slides[-1]).section_slug.endswith("-conclusion"), track.slides[-1]
    # The talk closes on which method to reach for when; the table of checks is a backup after it.
    assert track.talk_slides[-1] == "reach-for" and track.backup == ["conclusion-measured"]
    # Data parallelism is introduced once: basics-many-gpus and ddp-intro teach the same thing.
    assert len({"basics-many-gpus", "ddp-intro"} & set(track.slides)) == 1


def test_the_back_reference_finder_finds_what_the_deck_says():
    assert back_references("<p>It is the ratio on the previous slide.</p>") == ["the previous slide"]
    assert back_references("<aside class='notes'>As we saw, and the ZeRO section removes it</aside>") \
        == ["As we saw", "the ZeRO section"]
    assert back_references("<p>the previous stage waits; the rest of this section; this section</p>") == []
    assert back_references("<dd>next step, then next slide</dd> as measured in the scaling book") == []
    assert back_references("The next three slides run it. The bubble is the same as GPipe's; more later in the talk.") \
        == ["The next three slides", "the same as GPipe's", "later in the talk"]


def test_every_slide_that_refers_elsewhere_names_the_slides(deck, rendered):
    """The deck's own text: a slide that points at another slide declares which (section.toml `refers`)."""
    unnamed = {s.id: back_references(rendered[s.id]) for s in deck.slides
               if back_references(rendered[s.id]) and not s.refers}
    assert unnamed == {}, f"slides that refer elsewhere without `refers` in their manifest: {unnamed}"


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_no_slide_in_a_track_refers_to_a_slide_outside_it(deck, name):
    track = deck.find_track(name)
    outside = {i: [r for r in deck.find(i).refers if r not in track.slides] for i in track.slides}
    assert {i: r for i, r in outside.items() if r} == {}, f"track {name} refers to slides it does not show"


def test_a_track_deck_keeps_only_its_slides_and_sections(deck):
    twenty = deck.for_track("20")
    assert [s.id for s in twenty.slides] == deck.find_track("20").slides
    assert all(section.slides for section in twenty.sections)
    assert len(twenty.sections) < len(deck.sections) and twenty.track.name == "20"
    contents = render_slides(deck.for_track("45"), jinja_env(SLIDES))[1]
    shown = re.findall(r'href="#/([a-z0-9-]+)/0"', contents)
    assert shown and set(shown) <= set(deck.find_track("45").slides)
    with pytest.raises(KeyError):
        deck.for_track("30")


def test_budget_arithmetic():
    notes = " ".join(["word"] * 280)  # two minutes at 140 words per minute
    static = pacing.slide_budget(3, f'<section><aside class="notes">{notes}</aside></section>')
    assert static == pacing.Budget(words=280, steps=3, questions=0, seconds=120 + 2 * pacing.SECONDS_PER_STEP)
    # DDP at its defaults (ddp-live's run): 19 frames, a press each; after a question the player allows 19
    ddp = """<div class="live-sim" data-scenario="ddp" data-params='{}'></div>"""
    assert pacing.slide_budget(1, ddp + f'<aside class="notes">{notes}</aside>').steps == 19
    live = pacing.slide_budget(1, ddp + f'<div class="predict"></div><aside class="notes">{notes}</aside>')
    assert live.steps == 1 + 19  # the question, then the run
    assert live.seconds == 120 + 19 * pacing.SECONDS_PER_STEP + pacing.PREDICTION_PAUSE_S
    # two players on one slide step together: the slide takes the longer run's presses
    pipelines = "".join(f"""<div class="live-sim" data-scenario="pipeline" data-params='{{"schedule": "{s}", "microbatches": {m}}}'></div>"""
                        for s, m in (("gpipe", 1), ("interleaved_1f1b", 8)))
    pipelines = pipelines.replace('"microbatches": 8', '"microbatches": 8, "virtual_stages": 2')
    assert pacing.slide_budget(1, pipelines).steps == 16  # pp-naive's 10 frames, pp-interleaved's 40 in 16


def test_group_frames_follows_the_players_rule():
    """The rule of static/js/player/player.js's groupFrames (the browser test checks the two agree on every
    recorded run): a frame a step up to the budget; runs of one phase, a reduce-scatter joined by its free,
    a gather a step of its own (a press rests on the gathered parameters); a few long phases cut into about
    16 steps; too many groups merged evenly."""
    assert steps.group_frames(["setup"] + ["forward"] * 19) == [(i, i) for i in range(20)]
    joined = ["setup"] + ["all_gather", "reduce_scatter", "free", "free"] * 6  # 25 frames, 13 groups
    assert steps.group_frames(joined)[:4] == [(0, 0), (1, 1), (2, 4), (5, 5)]
    few = ["setup"] + ["slot"] * 30 + ["done"]
    grouped = steps.group_frames(few)
    assert len(grouped) == 16 and grouped[0] == (0, 0) and grouped[-1] == (31, 31)
    assert [a for a, _ in grouped[1:]] == sorted({a for a, _ in grouped[1:]})  # pieces of the long phase, in order
    many = [f"phase{i}" for i in range(45)]
    assert steps.group_frames(many) == [(i, min(i + 2, 44)) for i in range(0, 45, 3)]  # 45 groups, 3 a step
    assert steps.js_round(2.5) == 3 and steps.js_round(3.5) == 4  # JavaScript's Math.round, not banker's


def test_every_live_slide_has_a_current_recording(deck, rendered):
    """Each live slide's default run is in slides/live_steps.json, recorded from the scenario's current source
    (its hash, as the static export computes it). If this fails: `.venv/bin/python -m app.content.pacing`."""

    recorded = pacing.recorded_phases()
    missing, stale = [], []
    for slide in deck.slides:
        for scenario, params in default_runs(rendered[slide.id]):
            entry = recorded.get(pacing.run_key(scenario, params))
            if entry is None:
                missing.append(f"{slide.id} ({scenario})")
            elif entry["source_hash"] != source_hash(scenario):
                stale.append(f"{slide.id} ({scenario})")
    assert not missing and not stale, (f"not recorded: {missing}; recorded from an older source: {stale}; "
                                       "record them again with `.venv/bin/python -m app.content.pacing`")


def test_a_live_slides_budget_counts_its_own_presses(deck, rendered, budgets):
    """A short run is budgeted at its few presses, a long one at the player's most (was: 16 for every run)."""
    assert budgets["ep-live"].steps < 10 < budgets["fsdp2-mesh"].steps == steps.MAX_STEPS


# ---- the manifest's checks ----

def write_deck(root: Path, tracks: str, refers: str = "") -> None:
    section = root / "sections" / "00-a"
    section.mkdir(parents=True)
    (section / "section.toml").write_text(
        f'title = "A"\n[[slides]]\nid = "one"\ntitle = "One"\n{refers}\n[[slides]]\nid = "two"\ntitle = "Two"\n')
    for name in ("one", "two"):
        (section / f"{name}.html.j2").write_text("")
    (root / "tracks.toml").write_text(tracks)


def test_an_unknown_slide_in_a_track_is_refused(tmp_path):
    write_deck(tmp_path, '[[tracks]]\nname = "20"\ntitle = "T"\nminutes = 20\nslides = ["one", "three"]\n')
    with pytest.raises(ManifestError, match="track '20' names 'three': no such slide"):
        load_deck(tmp_path)


def test_a_track_out_of_deck_order_or_repeating_a_slide_is_refused(tmp_path):
    write_deck(tmp_path, '[[tracks]]\nname = "20"\ntitle = "T"\nminutes = 20\nslides = ["two", "one"]\n')
    with pytest.raises(ManifestError, match="in deck order"):
        load_deck(tmp_path)


def test_an_unknown_refers_is_refused(tmp_path):
    write_deck(tmp_path, "", refers='refers = ["nowhere"]')
    with pytest.raises(ManifestError, match="'one' refers to 'nowhere'"):
        load_deck(tmp_path)


def test_a_track_declared_twice_is_refused(tmp_path):
    one = '[[tracks]]\nname = "20"\ntitle = "T"\nminutes = 20\nslides = ["one"]\n'
    write_deck(tmp_path, one + one)
    with pytest.raises(ManifestError, match="declared twice"):
        load_deck(tmp_path)


# ---- the track over HTTP: the server renders the track's slides ----

@pytest.fixture(scope="module")
def client():
    from tests.api.test_deck import client_for

    return client_for()


def sections_in(html: str) -> list[str]:
    return re.findall(r'<section id="([a-z0-9-]+)" data-slide-id=', html)


@pytest.mark.parametrize("query", ["?track=20", "?track=20&embed=1", "?track=20&print-pdf", "?track=20&receiver"])
def test_every_view_of_the_deck_shows_the_tracks_slides(client, deck, query):
    from tests.api.test_deck import deck_config

    response = client.get("/" + query)
    assert response.status_code == 200
    assert sections_in(response.text) == deck.find_track("20").slides
    config = deck_config(response.text)
    assert config["track"] == "20" and config["pacing"]["slotSeconds"] == 20 * 60
    assert set(config["pacing"]["budgets"]) == set(deck.find_track("20").slides)
    if "embed" in query:  # open-in-a-new-tab opens the same talk
        assert 'id="embed-open" href="/?track=20"' in response.text


def test_the_top_bar_and_the_title_slide_offer_every_track(client, deck):
    html = client.get("/?track=45").text
    assert f'id="deck-position">Slide 1/{len(deck.find_track("45").slides)}<' in html and ">45-min talk</button>" in html
    menu = html.split('id="track-list"')[1].split("</ul>")[0]
    assert re.findall(r'href="([^"]*)"', menu) == ["?track=20", "?track=45", "?track=90", "?"]
    assert 'href="?track=45" aria-current="page"' in menu
    title = html.split('<section id="title"')[1].split("</section>")[0]
    assert re.findall(r'<a href="([^"]*)"', title) == ["?track=20", "?track=45", "?track=90", "?"]
    embedded = client.get("/?track=45&embed=1").text.split('<section id="title"')[1].split("</section>")[0]
    assert 'href="?track=20&amp;embed=1"' in embedded and 'href="?embed=1"' in embedded


@pytest.mark.parametrize("bad", ["bogus", "", "20%3Cscript%3E", "2O"])
def test_an_unknown_track_is_a_422_naming_track_and_the_allowed_values(client, bad):
    response = client.get(f"/?track={bad}")
    assert response.status_code == 422 and response.headers["content-type"].startswith("text/html")
    assert "track: must be one of 20, 45, 90" in response.text and "<script>" not in response.text.split("<main")[1]
    assert client.get(f"/slides/ddp-live?track={bad}").status_code == 422


def test_a_slide_link_keeps_the_track_when_the_track_has_the_slide(client):
    keeps = client.get("/slides/ddp-live?track=20", follow_redirects=False)
    assert keeps.status_code == 307 and keeps.headers["location"] == "/?track=20#/ddp-live/0"
    whole = client.get("/slides/ep-live?track=20", follow_redirects=False)
    assert whole.headers["location"] == "/#/ep-live/0"


def test_the_static_export_writes_a_page_per_track_and_sends_the_query_there(tmp_path):
    from app import export
    from app.settings import Settings

    export.write_pages(Settings(start_pool_on_startup=False), tmp_path, [])
    for folder in (tmp_path, tmp_path / "embed"):
        for name, track in (("index.html", None), ("track-20.html", "20"), ("track-90.html", "90")):
            html = (folder / name).read_text()
            assert len(sections_in(html)) == (len(load_deck(SLIDES).find_track(track).slides) if track else
                                              len(load_deck(SLIDES).slides)), f"{folder.name}/{name}"
            head = html.split("</head>")[0]
            assert '{"20": "track-20.html", "45": "track-45.html", "90": "track-90.html"}' in head
            # The redirect runs (in the head) before the static site's module is started (the loader at the end
            # of the body, once the first view has painted; the import map may name the module earlier).
            module = re.search(r'"first": \["[^"]*static-site\.js', html)
            assert module and "window.location.replace" in head and len(head) < module.start()


# ---- the story each track tells ----

NOTES_BLOCK = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
# What a speaker would not say aloud: the simulator's own vocabulary, tolerances, formula shorthands, file names.
NOT_SPOKEN = re.compile(
    r"\bgloo\b|resize-to-zero|\b1e-\d|saved-tensor|\d·[a-z]·[a-z]|[a-z]·[a-z]·[a-z]|et al\.'s"
    r"|\b[\w/]+\.(?:py|js|json|toml|j2|html)\b|\bsimulations/|\bstatic/|\bslides/",
    re.I,
)


def spoken_notes(slide_html: str) -> str:
    return " ".join(TAG_OR_SPACE.sub(" ", notes) for notes in NOTES_BLOCK.findall(slide_html)).split()


TAG_OR_SPACE = re.compile(r"<[^>]+>|\s+")


def content_of(slide_html: str) -> str:
    """What is on the slide itself: no notes, no scripts."""
    return re.sub(r'<aside class="notes">.*?</aside>|<script\b.*?</script>', " ", slide_html, flags=re.S)


@pytest.mark.parametrize("name", ["20", "45"])
def test_a_short_track_gives_each_slide_two_or_three_spoken_points(deck, rendered, track_rendered, name):
    """The 20- and 45-minute tracks show each slide's short notes: 60-90 words a speaker can say, no simulator
    jargon or file names; the whole deck keeps the long form."""
    track = deck.find_track(name)
    for slide_id in track.slides:
        words = spoken_notes(track_rendered[name][slide_id])
        text = " ".join(words)
        assert 60 <= len(words) <= 90, f"track {name}, {slide_id}: {len(words)} words of notes"
        assert not NOT_SPOKEN.search(text), f"track {name}, {slide_id}: {NOT_SPOKEN.search(text).group(0)!r} in the notes"
        assert words != spoken_notes(rendered[slide_id]), f"{slide_id}: the short notes are the long ones"


def test_the_90_minute_track_and_print_show_the_long_notes(deck, rendered, track_rendered):
    for slide_id in deck.find_track("90").slides:
        assert spoken_notes(track_rendered["90"][slide_id]) == spoken_notes(rendered[slide_id]), slide_id
    printed = render_slides(deck.for_track("20"), jinja_env(SLIDES), print_pdf=True)
    assert spoken_notes(printed[1]) == spoken_notes(rendered[deck.find_track("20").slides[1]])


def test_the_not_spoken_finder_finds_what_the_old_notes_said():
    for said in ("a real run on gloo ranks", "FSDP's resize-to-zero trick", "equal to 1e-6",
                 "Korthikanti et al.'s 34·s·b·h bytes", "the file in simulations/scenarios", "see pacing.py"):
        assert NOT_SPOKEN.search(said), said
    assert not NOT_SPOKEN.search("b times s times h numbers, for micro-batch b; et al. measured it in 2022")


# The parallelisms the title slide can promise, and the live run that shows each.
PROMISES = {"data": "ddp", "sharded": "zero", "pipeline": "pipeline", "tensor": "tensor_parallel",
            "expert": "expert_parallel", "context": "ring_attention"}


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_the_title_slide_promises_what_the_track_shows(deck, track_rendered, name):
    subtitle = re.search(r'class="subtitle">(.*?)&mdash;', track_rendered[name]["title"], re.S).group(1).lower()
    played = set().union(*(scenarios_of(html) for html in track_rendered[name].values()))
    promised = {kind for kind in PROMISES if re.search(rf"\b{kind}\b", subtitle)}
    assert promised == {kind for kind, scenario in PROMISES.items() if scenario in played}, subtitle


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_the_close_has_a_row_for_each_method_the_track_showed(deck, track_rendered, name):
    close = track_rendered[name]["reach-for"]
    rows = set(re.findall(r'<th scope="row">([^<]+)</th>', content_of(close)))
    played = set().union(*(scenarios_of(html) for html in track_rendered[name].values()))
    expected = {"DDP", "ZeRO-1, -2", "ZeRO-3 / FSDP", "Pipeline", "Tensor"}
    expected |= {"Context"} if "ring_attention" in played else set()
    expected |= {"Experts"} if "expert_parallel" in played else set()
    assert rows == expected
    assert "{{" not in close and "GB" in close and "MB" in close  # figures rendered, in units


@pytest.mark.parametrize("name", ["20", "45", "90"])
def test_a_rank_is_defined_on_the_first_slide_that_shows_the_word(deck, track_rendered, name):
    first = next(i for i in deck.find_track(name).slides if re.search(r"\branks?\b", text_of(content_of(track_rendered[name][i]))))
    assert "<strong>rank</strong>" in track_rendered[name][first], f"track {name}: {first} says rank before defining it"


def test_backup_slides_must_close_the_track(tmp_path):
    write_deck(tmp_path, '[[tracks]]\nname = "20"\ntitle = "T"\nminutes = 20\nslides = ["one", "two"]\nbackup = ["one"]\n')
    with pytest.raises(ManifestError, match="backup slides must be the last"):
        load_deck(tmp_path)
    (tmp_path / "tracks.toml").write_text('[[tracks]]\nname = "20"\ntitle = "T"\nminutes = 20\nslides = ["one", "two"]\nbackup = ["two"]\n')
    assert load_deck(tmp_path).find_track("20").talk_slides == ["one"]
