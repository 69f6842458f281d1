"""The memory calculator computes in the page (static/js/calculator.js), so that it works without a
server. Its numbers must be simulations.formulas' numbers: the page's `calculate` is run in
Chromium over a grid of inputs and compared, field by field, with app.calculator.calculate
(which calls simulations.formulas). Its input bounds must be the API's, and bad input is refused
naming the field."""

from __future__ import annotations

import itertools
import math

import pytest
from pydantic import ValidationError

from app.calculator import CalculatorParams, calculate
from simulations import hardware

pytestmark = pytest.mark.browser

MODELS = [
    {"model": "1B"}, {"model": "7B"}, {"model": "70B"}, {"model": "405B"},
    {"model": "custom", "hidden": 1024, "layers": 12, "heads": 16, "vocab": 50257},
    {"model": "custom", "hidden": 1024, "layers": 12, "heads": 16, "vocab": 50257, "psi": 350_000_000},
    {"model": "custom", "psi": 4610},
]
LAYOUTS = [(1, 1, 1), (8, 1, 1), (16, 4, 1), (64, 2, 4), (96, 8, 3)]


def grid() -> list[dict]:
    cases = []
    for model, precision, stage, (gpus, tp, pp), ckpt, offload, (seq, mb), flash in itertools.product(
            MODELS, ["bf16", "fp32"], [0, 1, 2, 3], LAYOUTS, [False, True], [False, True], [(4096, 1), (1, 1), (8192, 2)],
            [True, False]):
        cases.append({**model, "precision": precision, "zero_stage": stage, "gpus": gpus, "tp": tp, "pp": pp,
                      "activation_checkpointing": ckpt, "cpu_offload": offload, "seq_len": seq, "micro_batch": mb,
                      "flash_attention": flash})
    return cases


@pytest.fixture
def calculator(page, deck_url):
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204))  # a JSON page has no icon link
    page.goto(deck_url + "/healthz")
    page.evaluate("async () => { window.calc = await import('/static/js/calculator.js'); }")
    return page


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


def test_the_page_computes_the_same_bytes_as_simulations_formulas(calculator):
    cases = grid()
    assert len(cases) > 3000
    in_page = calculator.evaluate("([cases, lines]) => cases.map((c) => window.calc.calculate(c, lines))",
                                 [cases, hardware.MEMORY_LINES])
    for case, js in zip(cases, in_page):
        py = calculate(CalculatorParams(**case))
        where = f"{case}"
        assert close(js["psi"], py.psi), where
        assert js["dp"] == py.dp, where
        assert set(js["per_gpu"]) == set(py.per_gpu), where
        for role, value in py.per_gpu.items():
            assert close(js["per_gpu"][role], value), (where, role, js["per_gpu"][role], value)
        assert close(js["total"], py.total), where
        assert close(js["host_per_gpu"], py.host_per_gpu), where
        assert [(c["name"], c["bytes"], c["fits"]) for c in js["capacities"]] == \
            [(c.name, c.bytes, c.fits) for c in py.capacities], where
        assert js["formula"] == py.formula, where


def test_the_page_uses_the_apis_bounds_and_refuses_what_the_api_refuses(calculator):
    fields = {f["name"]: f for f in calculator.evaluate("() => window.calc.FIELDS")}
    for name, info in CalculatorParams.model_fields.items():
        bounds = {type(m).__name__: m for m in info.metadata}
        if fields[name]["type"] == "select" and bounds:  # zero_stage: a choice of every allowed value
            assert [int(o) for o in fields[name]["options"]] == list(range(bounds["Ge"].ge, bounds["Le"].le + 1))
            continue
        if "Ge" in bounds:
            assert fields[name]["min"] == bounds["Ge"].ge, name
        if "Le" in bounds:
            assert fields[name]["max"] == bounds["Le"].le, name
    refused = [
        ({"model": "7B", "gpus": 6, "tp": 4}, "GPUs"),
        ({"model": "7B", "tp": 65}, "TP"),
        ({"model": "7B", "seq_len": 0}, "seq"),
        ({"model": "custom", "hidden": 1024}, "custom model"),
        ({"model": "custom", "hidden": 32, "layers": 2, "heads": 2, "vocab": 10}, "hidden"),
    ]
    for params, field in refused:
        with pytest.raises(ValidationError):
            CalculatorParams(**params)
        message = calculator.evaluate("(p) => window.calc.validate(p)", params)
        assert message and field in message, (params, message)
    assert calculator.evaluate("() => window.calc.validate({model: '7B', gpus: 64, tp: 8, pp: 2})") is None


def test_sizes_read_as_people_say_them(calculator):
    fmt = calculator.evaluate("() => [7e10, 7e9, 4.05e11, 4610, 1.2345e9, 2e12].map(window.calc.formatCount)")
    assert fmt == ["70 B", "7 B", "405 B", "4,610", "1.23 B", "2 T"]
