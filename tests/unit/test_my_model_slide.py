"""The "my model on my GPU" slide (issue 37, item 4): every time and verdict on it is the estimator's."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app import estimate_math
from app.main import create_app
from app.settings import Settings


def test_the_slide_shows_the_estimators_step_tokens_and_margin_for_each_model_and_gpu():
    html = TestClient(create_app(Settings(start_pool_on_startup=False))).get("/?track=90").text
    slide = re.search(r'<section[^>]*id="my-model-my-gpu".*?</section>', html, re.S).group(0)
    rows = {re.sub(r"<[^>]+>", "", r.group(1)).strip(): r.group(0)
            for r in re.finditer(r"<tr><th scope=\"row\">(.*?)</th>.*?</tr>", slide, re.S)}
    assert set(rows) == set(estimate_math.ONE_GPU_MODELS)
    for name, row in rows.items():
        cells = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td.*?</td>", row, re.S)]
        for (time_cell, fit_cell), gpu in zip(zip(cells[::2], cells[1::2]), ("h100-80gb", "h200")):
            e = estimate_math.one_gpu(name, gpu)
            fit = e.fit
            if fit["margin_bytes"] >= 0:
                assert fit_cell == f"yes, {fit['margin_bytes'] / 1e9:.1f} GB to spare"
            elif fit["optimistic_margin_bytes"] < 0:
                assert fit_cell == f"no, {-fit['optimistic_margin_bytes'] / 1e9:.1f} GB missing"
            else:
                assert fit_cell.startswith(f"maybe: {-fit['margin_bytes'] / 1e9:.1f} GB short")
            if e.fits:
                assert time_cell == f"{estimate_math.seconds(e.step_time_s)} · {e.tokens_per_s:,.0f}"
            else:
                assert time_cell == "—"  # a step that cannot run has no time to show
