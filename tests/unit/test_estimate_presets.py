"""The estimator's GPUs and model presets reach the pages' scripts from the catalogs, not typed in JavaScript.

static/js/presets.js (the layout chooser, the cluster control, the projected view) reads them from the JSON every
page carries (app/templates/base.html.j2, app.content.markup.estimator_presets), so a GPU added to simulations.hardware
(the A100 40 GB) is offered without a second list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.settings import Settings
from app.content.markup import estimator_presets, jinja_env
from simulations.estimate import GPUS, MODELS

ROOT = Path(__file__).resolve().parents[2]


def test_presets_are_the_catalogs_with_names_for_every_entry():
    presets = estimator_presets()
    assert [gpu for gpu, _ in presets["gpus"]] == list(GPUS)
    assert [model for model, _ in presets["models"]] == list(MODELS)
    names = dict(presets["gpus"])
    assert names["a100-40gb"] == "A100 40 GB" and names["h100-80gb"] == "H100"
    assert all(name for _, name in presets["gpus"] + presets["models"])
    assert len(set(names.values())) == len(names)  # two GPUs never read the same on screen


def test_every_page_carries_them_as_json():
    html = jinja_env(Settings().slides_dir.resolve()).get_template("runs.html.j2").render(runs=[], runs_dir="runs")
    found = re.search(r'<script type="application/json" id="estimator-presets">(.*?)</script>', html)
    assert found, "base.html.j2 lost the presets' JSON"
    assert json.loads(found.group(1)) == json.loads(json.dumps(estimator_presets()))


def test_presets_js_types_no_gpu_or_model():
    source = (ROOT / "static/js/presets.js").read_text()
    typed = [name for name in [*GPUS, *MODELS] if name in source]
    assert not typed, f"presets.js types {typed}: they come from the page (#estimator-presets)"
