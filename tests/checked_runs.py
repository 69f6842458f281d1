"""Runs this session has already seen pass every self-check, by their run key: the browser tests' static export
(tests/browser/sites.py) records the deck's default runs, failing on any failed check, and the grid test
(tests/unit/test_every_variant_passes.py) then runs only the rest of the grid instead of those again."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from simulations import scenarios
from simulations.runtime.runs import run_key

_passed: set[str] = set()


def note_export(out_dir: Path) -> None:
    """Every run an export wrote to `out_dir` (only runs that passed every check are written)."""
    for entry in json.loads((Path(out_dir) / "runs" / "index.json").read_text())["runs"]:
        if entry["passed"]:
            params = scenarios.get(entry["scenario"]).params.model_validate(entry["params"])
            _passed.add(run_key(entry["scenario"], params))


def passed(name: str, params: BaseModel) -> bool:
    return run_key(name, params) in _passed
