"""The context-parallel bytes slide: its dots are real runs, and each lands on its formula."""

import json

import pytest

from simulations import formulas

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_each_dot_is_a_run_whose_bytes_equal_the_formula(page, deck_url):
    page.goto(f"{deck_url}/#/cp-bytes/0")
    page.wait_for_function("() => /runs measured/.test(document.querySelector('#cp-bytes .cp-status').textContent)",
                           timeout=300_000)
    runs = json.loads(page.get_attribute("#cp-bytes-svg", "data-runs"))
    dots = page.eval_on_selector_all("#cp-bytes .cp-points circle",
                                     "els => els.map(e => [e.dataset.method, Number(e.dataset.bytes)])")
    assert len(dots) == len(runs) == 9
    for run, (method, sent) in zip(runs, dots):
        p = run["params"]
        assert method == ("ring" if run["scenario"] == "ring_attention" else p["method"])
        assert sent == formulas.context_parallel_bytes(method, p["seq_len"], p["heads"], p["head_dim"],
                                                       p["world_size"])["total"]
    # The lesson, read off the measured dots: only the all-to-all's bytes fall as N grows.
    by_method = {}
    for method, sent in dots:
        by_method.setdefault(method, []).append(sent)
    assert by_method["all_to_all"] == sorted(by_method["all_to_all"], reverse=True)
    assert by_method["ring"] == sorted(by_method["ring"]) and by_method["all_gather_kv"] == sorted(by_method["all_gather_kv"])
