"""The estimator's slides in a real browser: the layout chooser's first ranking, then the estimator's answer
to new inputs, and a message (not a broken table) for an impossible cluster; a live run re-timed on a
modelled cluster."""

from __future__ import annotations

import os
import re

import pytest

from tests.browser.viewcheck import cut_off, measure

pytestmark = pytest.mark.browser


def _ask(page, slide, **inputs):
    """Set the chooser's inputs and wait for its answer for that many GPUs (every row's TP·PP·CP·DP)."""
    for name, value in inputs.items():
        if slide.locator(f"select[name={name}]").count():
            slide.locator(f"select[name={name}]").select_option(value)
            continue
        slide.locator(f"input[name={name}]").fill(str(value))
        slide.locator(f"input[name={name}]").dispatch_event("change")
    page.wait_for_function(
        "gpus => { const m = document.querySelector('#layout-chooser .chooser-message').textContent;"
        " return m.includes('fastest') && document.querySelector('#layout-chooser tbody th').textContent === '1'"
        " && [...document.querySelectorAll('#layout-chooser tbody tr')].every(tr => "
        "      Number(tr.children[1].textContent.split('×').map(Number).reduce((a, b) => a * b, 1)) === gpus); }",
        arg=inputs["gpus"], timeout=60_000)
    return [[cell.strip() for cell in row] for row in page.eval_on_selector_all(
        "#layout-chooser tbody tr", "rows => rows.map(r => [...r.children].map(c => c.textContent))")]


def test_layout_chooser_ranks_layouts_for_new_inputs(page, deck_url):
    page.goto(f"{deck_url}/#/layout-chooser/0")
    page.wait_for_selector("html.deck-ready")
    slide = page.locator("#layout-chooser")
    headers = slide.locator("thead th").all_text_contents()
    ep, zero, step = headers.index("EP"), headers.index("ZeRO"), headers.index("step")
    rendered = slide.locator("tbody tr").first.locator("th, td").all_text_contents()
    # rendered by the server: Llama 3 70B at 8,192 tokens on 1,024 H100s is fastest with Megatron's TP x PP and ZeRO-1
    assert rendered[zero] == "1" and "interleaved" in rendered[headers.index("schedule")], rendered
    # a mixture of experts: the fastest layout splits the experts (EP > 1), drawn by the chooser's script
    rows = _ask(page, slide, model="mixtral-8x7b", seq_len=4096, gpus=256, global_batch=256)
    assert int(rows[0][ep]) > 1, rows
    steps = [float(r[step].split()[0]) for r in rows]
    assert steps == sorted(steps) and len(steps) >= 1
    rows = _ask(page, slide, model="llama3-70b", seq_len=2048, gpus=1024, global_batch=1024)
    assert rows[0][zero].startswith("3, HSDP"), rows  # at 2,048 tokens on 1,024 hybrid sharding leads: the script's label
    # the software is an input: FP8 matmuls make the fastest layout faster; full recomputation of every layer slower
    bf16_step = float(rows[0][step].split()[0])
    rows = _ask(page, slide, precision="fp8", gpus=1024)
    assert float(rows[0][step].split()[0]) < bf16_step, rows
    rows = _ask(page, slide, precision="bf16", recompute="full", recompute_every=1, gpus=1024)
    assert float(rows[0][step].split()[0]) > bf16_step, rows
    _ask(page, slide, recompute="selective", gpus=1024)

    slide.locator("input[name=gpus]").fill("12")
    slide.locator("input[name=gpus]").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('#layout-chooser .chooser-message').textContent"
                           ".includes('multiple of gpus_per_node')", timeout=60_000)
    # the browser logs the 422 it was answered; nothing else may have gone wrong
    assert page.console_errors and all("422" in e for e in page.console_errors), page.console_errors
    page.console_errors.clear()


def test_a_live_run_is_replayed_on_a_modelled_cluster(page, deck_url):
    page.goto(f"{deck_url}/#/on-a-cluster/1")  # step 0 asks the prediction question
    page.wait_for_selector("html.deck-ready")
    # The view draws into a layer of its SVG (the player's frame layer), which carries the count.
    page.wait_for_selector("#on-a-cluster svg.sim-view-projected[data-spans]", timeout=120_000)
    spans = int(page.get_attribute("#on-a-cluster svg.sim-view-projected[data-spans]", "data-spans"))
    # F and B of 8 micro-batches on 4 stages, each stage's optimizer step and its wait for the slowest GPU
    assert spans == 2 * 4 * 8 + 4 + 4
    # 4 stages, each a node of 8 GPUs, said in words
    assert "Llama 3 70B on 32 H100s, modelled" in page.text_content("#on-a-cluster svg.sim-view-projected")


def _replayed(page, deck_url, slide):
    page.goto(f"{deck_url}/#/{slide}/0")
    page.wait_for_selector("html.deck-ready")
    svg = f"#{slide} svg.sim-view-projected"
    page.wait_for_selector(f"{svg}[data-spans]", timeout=120_000)
    return svg


def test_zero3_is_replayed_layer_by_layer_with_its_gathers(page, deck_url):
    svg = _replayed(page, deck_url, "zero3-on-a-cluster")
    labels = page.locator(f"{svg} .lane-label").all_text_contents()
    assert "ZeRO-3" in labels and "TP comm." in labels
    assert page.locator(f"{svg} .projected-title").all_text_contents() == ["Llama 3 70B on 32 H100s, modelled"]
    gathers = page.locator(f"{svg} .span-zero3").count()
    # Llama 3 70B: forward and backward gathers, a reduce-scatter, and the root unit's gather and reduce-scatter;
    # 2 micro-batches
    assert gathers == (3 * 80 + 2) * 2


def test_the_projected_view_says_how_far_to_trust_it(page, deck_url):
    """Under the timeline, the estimator's error on published runs of the same kind, as the replay answered it (its
    own sentence where that fits one line, else the same figures said shorter), at reading size."""
    answers = []
    page.on("response", lambda r: answers.append(r) if "/api/estimate/replay?" in r.url else None)
    svg = _replayed(page, deck_url, "zero3-on-a-cluster")
    validation = answers[-1].json()["validation"]
    caption = " ".join(page.locator(f"{svg} .projected-trust").all_text_contents()).replace("\u00a0", " ")
    assert caption in (f"How far to trust it: {validation['summary']}",
                       f"Error on {validation['runs']} published {validation['scope']}: median "
                       f"{round(100 * validation['median_error'])} %, worst {round(100 * validation['worst_error'])} %")
    px = page.evaluate(f"() => [...document.querySelectorAll('{svg} .projected-trust')].map(t => "
                       "parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)")
    assert px and min(px) >= 16, px


def test_tensor_parallel_is_replayed_with_its_collectives_exposed(page, deck_url):
    svg = _replayed(page, deck_url, "tp-on-a-cluster")
    assert page.locator(f"{svg} .span-tp").count() == 2 * 32 + 1  # per layer each way, and the embedding's
    text = page.text_content(svg)
    # The slide's cluster: Llama 3 8B (32 layers) fits 4 H100s with TP 4; 70B would not (issue 19).
    assert "Llama 3 8B on 4 H100s, modelled" in text and "does not fit" not in text, text


def _measured_here(ranks: int) -> str:
    """The badge of a live run: with fewer cores than ranks it says the ranks took turns (their wall times too)."""
    cores = len(os.sched_getaffinity(0))
    if cores < ranks:
        return f"measured: {ranks} ranks on {cores} core{'s' if cores != 1 else ''}"
    return "measured on this machine"


def test_a_live_slide_switches_between_measured_and_modelled_time(page, deck_url):
    page.goto(f"{deck_url}/#/ddp-live/1")  # step 0 asks the prediction question
    page.wait_for_selector("html.deck-ready")
    sim = "#ddp-live .live-sim"
    page.wait_for_selector(f"{sim}[data-status=done]", timeout=120_000)
    steps = page.get_attribute(sim, "data-sim-steps")
    badge = page.locator(f"{sim} .sim-clock")
    assert badge.text_content() == _measured_here(ranks=4)
    assert page.locator(f"{sim} select[name=time_on]").input_value() == "machine"  # the default
    assert page.locator(f"{sim} svg.sim-view-projected").count() == 0

    page.select_option(f"{sim} select[name=time_on]", "h100-80gb")
    view = f"{sim} svg.sim-cluster-view"
    page.wait_for_selector(f"{view}[data-spans]", timeout=60_000)
    assert int(page.get_attribute(view, "data-spans")) > 0
    text = page.text_content(view)
    assert "Llama 3 70B on 32 H100s, modelled" in text  # 4 live ranks, each a node of 8 GPUs
    assert re.search(r"step \d+(\.\d+)? (s|ms) ", text), text  # real time units, not CPU milliseconds
    assert page.locator(f"{view} .axis text").last.text_content().endswith(" s")
    assert badge.text_content() == "modelled"
    assert not page.locator(f"{sim} svg.sim-view-ranks").is_visible()
    # the size control offers the run's own size first, by name
    size = page.locator(f"{sim} select[name=cluster_gpus]")
    page.wait_for_function(f"() => document.querySelector('{sim} select[name=cluster_gpus]').options[0]"
                           ".textContent === '32 × H100'")
    assert size.is_visible() and size.input_value() == ""

    page.select_option(f"{sim} select[name=time_on]", "machine")
    assert badge.text_content() == _measured_here(ranks=4)
    assert page.locator(f"{sim} svg.sim-view-ranks").is_visible()
    assert page.locator(view).count() == 0
    assert page.get_attribute(sim, "data-sim-steps") == steps  # the run's steps are untouched
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => document.querySelector('{sim}').dataset.simStep === '1'")


def _modelled(page, deck_url, slide, step=1):
    """`slide` at `step` with "time on" set to an H100 cluster in each of its players: the players' selectors."""
    page.goto(f"{deck_url}/#/{slide}/{step}")
    page.wait_for_selector("html.deck-ready")
    sims = f"#{slide} .live-sim"
    page.wait_for_function(f"() => [...document.querySelectorAll('{sims}')].every(e => e.dataset.status === 'done')",
                           timeout=180_000)
    for select in page.locator(f"{sims} select[name=time_on]").all():
        select.select_option("h100-80gb")
    page.wait_for_function(f"() => [...document.querySelectorAll('{sims} svg.sim-cluster-view')]"
                           ".every(v => v.hasAttribute('data-spans'))", timeout=60_000)
    return sims


def test_a_cluster_size_you_choose_is_asked_for_and_said_in_words(page, deck_url):
    sim = _modelled(page, deck_url, "ddp-live")
    view = f"{sim} svg.sim-cluster-view"
    size = page.locator(f"{sim} select[name=cluster_gpus]")
    page.wait_for_function(f"() => document.querySelector('{sim} select[name=cluster_gpus]').options.length > 1")
    # The run's own 32 GPUs and larger multiples of it, in whole nodes, up to 16,384.
    offered = size.locator("option").all_text_contents()
    assert offered[0] == "32 × H100" and "1,024 × H100" in offered and offered[-1] == "16,384 × H100", offered
    counts = [int(t.split(" ")[0].replace(",", "")) for t in offered]
    assert counts == sorted(counts) and all(n % 32 == 0 for n in counts)
    steps = page.get_attribute(sim, "data-sim-steps")
    step = page.evaluate("() => window.distdeck.position().step")

    with page.expect_request(lambda r: "/api/estimate/replay?" in r.url and "gpus=1024" in r.url):
        size.select_option("1024")
    page.wait_for_function(f"() => document.querySelector('{view} .projected-title')?.textContent"
                           " === 'Llama 3 70B on 1,024 H100s, modelled'", timeout=60_000)
    assert "DP 128" in page.text_content(view)  # 1,024 GPUs in nodes of TP 8: 128 replicas
    # Another GPU type names the sizes after it; the chosen size stays.
    with page.expect_request(lambda r: "gpu=b200" in r.url and "gpus=1024" in r.url):
        page.select_option(f"{sim} select[name=time_on]", "b200")
    page.wait_for_function(f"() => document.querySelector('{view} .projected-title')?.textContent"
                           " === 'Llama 3 70B on 1,024 B200s, modelled'", timeout=60_000)
    assert size.locator("option:checked").text_content() == "1,024 × B200"
    # Keys typed into the size control are for it, not for the deck.
    size.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => window.distdeck.position().step") == step
    # The run, its steps and its question are untouched.
    assert page.get_attribute(sim, "data-sim-steps") == steps
    assert page.locator("#ddp-live .predict").count() == 1


def test_a_cluster_size_the_run_cannot_have_is_refused_in_words(page, deck_url):
    sim = _modelled(page, deck_url, "ddp-live")
    view = f"{sim} svg.sim-cluster-view"
    page.wait_for_function(f"() => document.querySelector('{sim} select[name=cluster_gpus]').options.length > 1")
    # 12 GPUs: not a multiple of the run's TP 8 (a size the control does not offer; a hand-edited page could ask).
    page.locator(f"{sim} select[name=cluster_gpus]").evaluate(
        "(el) => { el.append(Object.assign(document.createElement('option'), { value: '12', textContent: '12' }));"
        " el.value = '12'; el.dispatchEvent(new Event('change')); }")
    page.wait_for_selector(f"{view}[data-error]", timeout=60_000)
    said = " ".join(page.locator(f"{view} text").all_text_contents())
    assert "12 GPUs cannot model this run" in said and "multiple of the run's tp·pp·cp = 8" in said, said
    assert "query" not in said and "value_error" not in said
    assert page.locator(f"{view} .span").count() == 0
    # the browser logs the 422 it was answered; nothing else may have gone wrong
    assert page.console_errors and all("422" in e for e in page.console_errors), page.console_errors
    page.console_errors.clear()
    # A size it can have draws the projection again.
    page.locator(f"{sim} select[name=cluster_gpus]").select_option("")
    page.wait_for_selector(f"{view}[data-spans]:not([data-error])", timeout=60_000)
    assert "Llama 3 70B on 32 H100s, modelled" in page.text_content(view)


def _console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


@pytest.mark.parametrize("size", [(1280, 720), (1024, 768)], ids=["1280x720", "1024x768"])
def test_a_modelled_cluster_reads_from_the_back_row(browser, deck_url, size):
    """The projected view in half-width columns (pp-side-by-side) and across a slide (ddp-live), at the run's own
    size and at 1,024 GPUs, at the first, middle and last step: at 1280×720 every text in the player at 16 px or
    more (ticks 14), nothing overlapping; at both sizes nothing cut off, the header with its extra selects too."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, reduced_motion="reduce")
    page = context.new_page()
    errors = _console_errors(page)
    problems: list[str] = []
    smallest: dict[str, float] = {}
    try:
        for slide, run in (("pp-side-by-side", 0), ("ddp-live", 1)):  # ddp-live's step 0 asks its question
            sims = _modelled(page, deck_url, slide, step=run)
            count = page.evaluate("() => window.distdeck.position().stepCount")
            first = int(page.evaluate("(id) => Boolean(document.querySelector(`#${id} .predict`))", slide))
            page.wait_for_function(f"() => [...document.querySelectorAll('{sims} select[name=cluster_gpus]')]"
                                   ".every(s => [...s.options].some(o => o.value === '1024'))", timeout=60_000)
            for gpus, words in (("", "32 H100s"), ("1024", "1,024 H100s")):
                for select in page.locator(f"{sims} select[name=cluster_gpus]").all():
                    select.select_option(gpus)
                for step in sorted({first, (first + count - 1) // 2, count - 1}):
                    page.evaluate("([id, k]) => { location.hash = `#/${id}/${k}`; }", [slide, step])
                    page.wait_for_function("(k) => window.distdeck.position().step === k", arg=step)
                    page.wait_for_function(
                        f"() => [...document.querySelectorAll('{sims} svg.sim-cluster-view .projected-title')]"
                        f".map(t => t.textContent).join(' ').includes('{words}')", timeout=60_000)
                    page.wait_for_timeout(200)  # the ResizeObserver's redraw, if the pane changed
                    where = f"{slide} {words} step {step}"
                    if size == (1280, 720):
                        report = measure(page, slide, step)
                        views = {t["view"] for t in report.texts}
                        assert any("projected" in v for v in views), (where, views)
                        problems += [f"{where}: {p}" for p in report.problems()]
                        for t in report.texts:
                            key = f"{t['view'].split(' ')[0]}{' ticks' if t['tick'] else ''}"
                            smallest[key] = min(smallest.get(key, 99.0), round(t["px"], 1))
                    problems += [f"{where}: {p}" for p in cut_off(page, slide)]
        assert problems == [], "\n".join(problems)
        assert errors == []
        print("smallest rendered text per view (px):", dict(sorted(smallest.items())))  # noqa: T201
    finally:
        context.close()


def _answer(timeline: list[dict]) -> dict:
    """An estimator's answer of the replay's shape around `timeline` (the scenarios whose replays are still to come)."""
    return {"model": "llama3-8b", "gpu": "h100-80gb", "gpus": 64, "gpus_per_node": 8, "tp": 1, "pp": 1, "cp": 2,
            "ep": 4, "dp": 32, "zero_stage": 1, "schedule": "1f1b", "recompute": "selective", "global_batch": 64,
            "micro_batch": 1, "virtual_stages": 1, "micro_batches": 1, "step_time_s": 4.0, "tokens_per_s": 1.0,
            "model_tflops_per_gpu": 1.0, "mfu": 0.4, "bubble_fraction": 0.0, "exposed_comm_s": 0.5,
            "exposed_comm_by_kind_s": {}, "comm_total_s": {}, "compute_s": 3.5, "optimizer_s": 0.0,
            "memory_per_gpu_bytes": {"total": 1.0}, "gpu_memory_bytes": 8e10, "fits": True, "timeline": timeline}


def test_new_kinds_of_span_get_lanes_names_and_colours_of_their_own(page, deck_url):
    """DiLoCo's inner steps and outer sync, expert all-to-alls, Ulysses' (or Llama 3's) CP communication: each
    communication kind on a lane named for it, inner steps named on the compute lane and in the legend."""
    span = {"rank": 0, "stage": 0, "layer": None}
    timeline = [{**span, "stream": "compute", "kind": "step", "mb": i, "start": i * 0.8, "end": i * 0.8 + 0.8}
                for i in range(4)]
    timeline += [{**span, "stream": "compute", "kind": "opt", "mb": -1, "start": 3.7, "end": 4.0},
                 {**span, "stream": "comm", "kind": "outer", "mb": -1, "start": 3.2, "end": 3.7},
                 {**span, "stream": "comm", "kind": "ep", "mb": 0, "start": 0.1, "end": 0.3},
                 {**span, "stream": "comm", "kind": "ep", "mb": 1, "start": 0.9, "end": 1.1},
                 {**span, "stream": "comm", "kind": "cp", "mb": 0, "start": 0.4, "end": 0.5},
                 {**span, "stream": "comm", "kind": "dp", "mb": -1, "start": 3.0, "end": 3.2}]
    page.route("**/api/estimate/replay?*", lambda route: route.fulfill(json=_answer(timeline)))
    sim = _modelled(page, deck_url, "ddp-live")
    view = f"{sim} svg.sim-cluster-view"
    labels = page.locator(f"{view} text.lane-label:not(.projected-figures)").all_text_contents()
    assert labels == ["compute", "CP comm.", "EP all-to-all", "DP reduce", "outer sync"], labels
    assert page.locator(f"{view} .projected-title").text_content() == "Llama 3 8B on 64 H100s, modelled"
    assert "CP 2 · EP 4 · DP 32" in page.text_content(view)
    assert page.locator(f"{view} .span-step").count() == 4
    assert page.locator(f"{view} .span-step .span-label").all_text_contents() == ["step 1", "step 2", "step 3", "step 4"]
    assert sorted(page.locator(f"{view} .legend-label").all_text_contents()) == ["inner step", "optimizer"]
    fills = page.evaluate(f"() => Object.fromEntries(['step', 'opt', 'outer', 'ep', 'cp', 'dp'].map(k => [k,"
                          f" getComputedStyle(document.querySelector('{view} .span-' + k + ' rect')).fill]))")
    assert len(set(fills.values())) == len(fills), fills  # each kind its own colour
    assert page.locator(f"{view} .span-outer rect title").text_content().startswith("outer sync of the pseudo-gradients")


def test_the_sizes_offered_are_multiples_of_the_run_in_whole_nodes(page, deck_url):
    page.goto(f"{deck_url}/#/ddp-live/0")
    page.wait_for_selector("html.deck-ready")
    sizes = page.evaluate("async () => { const m = await import('/static/js/player/views/projected.js');"
                          " return Object.fromEntries([1, 2, 4, 24, 32, 16384].map(n => [n, m.clusterSizes(n)])); }")
    assert sizes["4"] == [4, 8, 32, 128, 512, 1024, 2048, 16384]  # TP 4 in one node: ×2 is a whole node
    assert sizes["32"] == [32, 64, 256, 1024, 4096, 16384]  # ×1, ×2, ×8, ×32, ×128, ×512
    assert sizes["24"] == [24, 48, 192, 768, 3072, 12288]  # 1,024 is no multiple of 24
    assert sizes["16384"] == [16384]
    for own, offered in sizes.items():
        assert offered[0] == int(own) and offered == sorted(set(offered)) and offered[-1] <= 16384
        assert all(n % int(own) == 0 and (n <= 8 or n % 8 == 0) for n in offered), (own, offered)


def test_side_by_side_players_are_timed_on_the_same_cluster(page, deck_url):
    page.goto(f"{deck_url}/#/pp-side-by-side/0")
    page.wait_for_selector("html.deck-ready")
    sims = "#pp-side-by-side .live-sim"
    page.wait_for_function(f"() => [...document.querySelectorAll('{sims}')].every(e => e.dataset.status === 'done')",
                           timeout=180_000)
    page.locator(f"{sims} select[name=time_on]").first.select_option("h200")
    titles = f"() => [...document.querySelectorAll('{sims} svg.sim-cluster-view .projected-title')].map(t => t.textContent)"
    page.wait_for_function(f"() => ({titles})().join('|') === 'Llama 3 70B on 32 H200s, modelled|Llama 3 70B on 32 H200s, modelled'",
                           timeout=60_000)
    page.wait_for_function(f"() => document.querySelector('{sims} select[name=cluster_gpus]').options.length > 1")
    page.locator(f"{sims} select[name=cluster_gpus]").last.select_option("1024")
    page.wait_for_function(f"() => ({titles})().every(t => t === 'Llama 3 70B on 1,024 H200s, modelled')", timeout=60_000)
    # GPipe and 1F1B: the same bubble on the same cluster, two schedules (the titles change before the spans'
    # data join has drawn them, so wait for the spans)
    spans = f"() => document.querySelectorAll('{sims} svg.sim-cluster-view .span-F').length"
    page.wait_for_function(f"() => ({spans})() === 2 * 4 * 8", timeout=60_000)
    page.locator(f"{sims} select[name=time_on]").last.select_option("machine")
    assert page.locator(f"{sims} svg.sim-cluster-view").count() == 0
    assert page.locator(f"{sims} svg.sim-view-pipeline").evaluate_all("(vs) => vs.every(v => v.checkVisibility())")


@pytest.mark.parametrize("slide,lane,header", [
    ("ulysses-live", "CP all-to-all", "(Ulysses all-to-all)"),  # the live run's method, replayed as such
    ("hsdp-live", "ZeRO-3", "HSDP: ZeRO-3 over 8, replicated 2×"),  # shard groups of a node, replicas across nodes
])
def test_every_scenario_replays_with_its_own_way_of_communicating(page, deck_url, slide, lane, header):
    """The replays added for the last scenarios, through the real estimator: the lane and the header say how
    the modelled run communicates, as the live run does."""
    sim = _modelled(page, deck_url, slide)
    view = f"{sim} svg.sim-cluster-view"
    labels = page.locator(f"{view} text.lane-label:not(.projected-figures)").all_text_contents()
    assert lane in labels, labels
    assert header in page.text_content(view)


def test_a_narrow_projected_view_still_names_the_runs_it_trusts(page, deck_url):
    """In a half-width pane (GPipe beside 1F1B) the trust caption takes its shorter form; it still says which
    published runs the error is on (their kind and GPU), not "runs like this"."""
    slide = "pp-side-by-side"
    page.goto(f"{deck_url}/#/{slide}/1")
    page.wait_for_selector("html.deck-ready")
    page.locator(f"#{slide} select").first.select_option("a100-80gb")
    svg = f"#{slide} svg.sim-view-projected"
    page.wait_for_selector(f"{svg} .projected-trust", timeout=120_000)
    caption = " ".join(page.locator(f"{svg} .projected-trust").all_text_contents()).replace("\u00a0", " ")
    assert "runs on A100" in caption and "like this" not in caption, caption
