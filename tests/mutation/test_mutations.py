"""Mutation tests: every planted bug in mutation_list.py must make a self-check fail or the run error.

The mutants run in a process of their own (mutation_runner.py), because the rank processes must
preload the hook that loads patched copies of the scenarios, and a process's forkserver keeps the
preload it started with. The scenario files on disk are never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mutation_list import MUTANTS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_mutants_cover_every_scenario_and_are_many():
    from simulations import scenarios

    assert len(MUTANTS) >= 25
    covered = {m.scenario for m in MUTANTS}
    missing = set(scenarios.all_scenarios()) - covered
    assert not missing, f"scenarios without mutants: {sorted(missing)}"


@pytest.mark.timeout(900)
def test_every_mutant_is_caught(tmp_path):
    out = tmp_path / "mutation.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("mutation_runner.py")), "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    broken = {k: v["by"] for k, v in report["baselines"].items() if v["killed"]}
    assert not broken, f"unmutated runs fail their own checks: {broken}"
    survivors = sorted(k for k, v in report["mutants"].items() if not v["killed"])
    assert not survivors, f"mutants no check caught ({report['score']} killed): {survivors}"
    assert len(report["mutants"]) == len(MUTANTS)
