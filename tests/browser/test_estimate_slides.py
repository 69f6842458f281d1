"""The estimator's slides in a real browser: the layout chooser's first ranking, then the estimator's answer
to new inputs, and a message (not a broken table) for an impossible cluster; a live run re-timed on a
modelled cluster."""

from __future__ import annotations

import re


def test_layout_chooser_ranks_layouts_for_new_inputs(page, deck_url):
    page.goto(f"{deck_url}/#/layout-chooser/0")
    page.wait_for_selector("html.deck-ready")
    slide = page.locator("#layout-chooser")
    first = slide.locator("tbody tr").count()
    assert first >= 1  # rendered by the server into the slide
    slide.locator("select[name=model]").select_option("llama3-8b")
    slide.locator("input[name=gpus]").fill("64")
    slide.locator("input[name=gpus]").dispatch_event("change")
    slide.locator("input[name=global_batch]").fill("256")
    slide.locator("input[name=global_batch]").dispatch_event("change")
    page.wait_for_function(
        "() => { const m = document.querySelector('#layout-chooser .chooser-message').textContent;"
        " return m.includes('fastest') && document.querySelector('#layout-chooser tbody th').textContent === '1'"
        " && [...document.querySelectorAll('#layout-chooser tbody tr')].every(tr => "
        "      Number(tr.children[1].textContent.split('×').map(Number).reduce((a, b) => a * b, 1)) === 64); }",
        timeout=60_000)
    steps = [float(t.split()[0]) for t in slide.locator("tbody tr td:nth-child(7)").all_text_contents()]
    assert steps == sorted(steps) and len(steps) >= 1

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
    page.wait_for_selector("#on-a-cluster svg.sim-view-projected [data-spans]", timeout=120_000)
    spans = int(page.get_attribute("#on-a-cluster svg.sim-view-projected [data-spans]", "data-spans"))
    assert spans == 2 * 4 * 8 + 4  # F and B of 8 micro-batches on 4 stages, and each stage's optimizer step
    assert "modelled:" in page.text_content("#on-a-cluster svg.sim-view-projected")


def _replayed(page, deck_url, slide):
    page.goto(f"{deck_url}/#/{slide}/0")
    page.wait_for_selector("html.deck-ready")
    svg = f"#{slide} svg.sim-view-projected"
    page.wait_for_selector(f"{svg} [data-spans]", timeout=120_000)
    return svg


def test_zero3_is_replayed_layer_by_layer_with_its_gathers(page, deck_url):
    svg = _replayed(page, deck_url, "zero3-on-a-cluster")
    labels = page.locator(f"{svg} .lane-label").all_text_contents()
    assert "ZeRO-3" in labels and "TP comm." in labels and "modelled:" in labels[0]
    gathers = page.locator(f"{svg} .span-zero3").count()
    assert gathers == 3 * 80 * 2  # Llama 3 70B: forward and backward gathers, a reduce-scatter; 2 micro-batches


def test_tensor_parallel_is_replayed_with_its_collectives_exposed(page, deck_url):
    svg = _replayed(page, deck_url, "tp-on-a-cluster")
    assert page.locator(f"{svg} .span-tp").count() == 2 * 80 + 1  # per layer each way, and the embedding's
    assert "does not fit in memory" in page.text_content(svg)  # 70B on 4 GPUs, said so


def test_a_live_slide_switches_between_measured_and_modelled_time(page, deck_url):
    page.goto(f"{deck_url}/#/ddp-live/1")  # step 0 asks the prediction question
    page.wait_for_selector("html.deck-ready")
    sim = "#ddp-live .live-sim"
    page.wait_for_selector(f"{sim}[data-status=done]", timeout=120_000)
    steps = page.get_attribute(sim, "data-sim-steps")
    badge = page.locator(f"{sim} .sim-clock")
    assert badge.text_content() == "measured on this machine"
    assert page.locator(f"{sim} select[name=time_on]").input_value() == "machine"  # the default
    assert page.locator(f"{sim} svg.sim-view-projected").count() == 0

    page.select_option(f"{sim} select[name=time_on]", "h100-80gb")
    view = f"{sim} svg.sim-cluster-view"
    page.wait_for_selector(f"{view}[data-spans]", timeout=60_000)
    assert int(page.get_attribute(view, "data-spans")) > 0
    text = page.text_content(view)
    assert "modelled: 32 × h100-80gb" in text  # 4 live ranks, each a node of 8 GPUs
    assert re.search(r"step \d+(\.\d+)? (s|ms) ", text), text  # real time units, not CPU milliseconds
    assert page.locator(f"{view} .axis text").last.text_content().endswith(" s")
    assert badge.text_content() == "modelled"
    assert not page.locator(f"{sim} svg.sim-view-ranks").is_visible()
    # the option names now say how big the cluster is
    assert page.locator(f"{sim} select[name=time_on] option[value=h100-80gb]").text_content() == "32 × H100"

    page.select_option(f"{sim} select[name=time_on]", "machine")
    assert badge.text_content() == "measured on this machine"
    assert page.locator(f"{sim} svg.sim-view-ranks").is_visible()
    assert page.locator(view).count() == 0
    assert page.get_attribute(sim, "data-sim-steps") == steps  # the run's steps are untouched
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => document.querySelector('{sim}').dataset.simStep === '1'")
