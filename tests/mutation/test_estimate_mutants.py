"""Every planted bug in the estimator is caught by its hand-computed tests or by the published runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mutation.estimate_mutants import MUTANTS, mutated_source

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["tests/unit/test_estimate.py", "tests/unit/test_estimate_invariants.py", "tests/unit/test_estimate_validation.py",
          "tests/unit/test_estimate_other_stacks.py", "tests/unit/test_estimate_memory.py",
          "tests/unit/test_estimate_torchtitan_h100.py", "tests/unit/test_estimate_torchtitan_nd.py"]


def _run(mutant_id: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTDECK_ESTIMATE_MUTANT": mutant_id or ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "-p", "tests.mutation.estimate_mutants", *CHECKS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_unmutated_estimator_passes_through_the_plugin():
    """The plugin itself changes nothing: without a mutant the same tests pass (so a kill means the bug)."""
    done = _run(None)
    assert done.returncode == 0, done.stdout[-2000:]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_every_estimator_mutant_is_caught(mutant):
    mutated_source(mutant)  # its snippet still matches the code: a broken mutant fails here, not silently
    done = _run(mutant.id)
    assert done.returncode == 1, f"{mutant.id} ({mutant.bug}) survived:\n{done.stdout[-2000:]}"
