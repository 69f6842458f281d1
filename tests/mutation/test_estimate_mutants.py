"""Every planted bug in the estimator is caught by its hand-computed tests or by the published runs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.mutation.estimate_mutants import MUTANTS, mutated_source

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["tests/unit/test_estimate.py", "tests/unit/test_estimate_invariants.py", "tests/unit/test_estimate_validation.py",
          "tests/unit/test_estimate_other_stacks.py", "tests/unit/test_estimate_memory.py",
          "tests/unit/test_estimate_torchtitan_h100.py", "tests/unit/test_estimate_torchtitan_nd.py"]


def _command(mutant_id: str | None) -> tuple[list[str], dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTDECK_ESTIMATE_MUTANT": mutant_id or ""}
    return [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
            "-p", "tests.mutation.estimate_mutants", *CHECKS], env


def _run(mutant_id: str | None) -> subprocess.CompletedProcess:
    """The run of `mutant_id` (None: the unmutated estimator), from the background runs if they have it."""
    if _background is not None and mutant_id in _background.ids:
        return _background.result(mutant_id)
    argv, env = _command(mutant_id)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


RUN_TIMEOUT_S = 300


class BackgroundRuns:
    """The runs the collected tests will ask for, one at a time in a thread, in the order the tests ask: each is a
    pytest of its own (one core), independent of every other test, so it runs beside the tests before it."""

    def __init__(self, ids: list[str | None]) -> None:
        self.ids = ids
        self.results: dict[str | None, subprocess.CompletedProcess | BaseException] = {}
        self.ready = threading.Condition()
        self.current: subprocess.Popen | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._work, daemon=True, name="estimator-mutants")
        self.thread.start()

    def _work(self) -> None:
        for mutant_id in self.ids:
            try:
                result = self._one(mutant_id)
            except BaseException as error:  # noqa: BLE001 (handed to the test that asks for this run)
                result = error
            with self.ready:
                self.results[mutant_id] = result
                self.ready.notify_all()

    def _one(self, mutant_id: str | None) -> subprocess.CompletedProcess:
        argv, env = _command(mutant_id)
        with self.ready:
            if self.stopped:
                raise RuntimeError("the background runs were stopped")
            self.current = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True)
        try:
            stdout, stderr = self.current.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.current.kill()
            self.current.communicate()
            raise
        return subprocess.CompletedProcess(argv, self.current.returncode, stdout, stderr)

    def result(self, mutant_id: str | None) -> subprocess.CompletedProcess:
        with self.ready:
            self.ready.wait_for(lambda: mutant_id in self.results)
            result = self.results[mutant_id]
        if isinstance(result, BaseException):
            raise result
        return result

    def stop(self) -> None:
        with self.ready:
            self.stopped = True
            if self.current is not None and self.current.poll() is None:
                self.current.kill()


_background: BackgroundRuns | None = None


def start_in_background(items) -> BackgroundRuns:
    """Called by tests/conftest.py once the suite is collected, with this module's tests: their runs start at once."""
    global _background
    _background = BackgroundRuns([item.callspec.params["mutant"].id if hasattr(item, "callspec") else None
                                  for item in items])
    return _background


def test_the_unmutated_estimator_passes_through_the_plugin():
    """The plugin itself changes nothing: without a mutant the same tests pass (so a kill means the bug)."""
    done = _run(None)
    assert done.returncode == 0, done.stdout[-2000:]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_every_estimator_mutant_is_caught(mutant):
    mutated_source(mutant)  # its snippet still matches the code: a broken mutant fails here, not silently
    done = _run(mutant.id)
    assert done.returncode == 1, f"{mutant.id} ({mutant.bug}) survived:\n{done.stdout[-2000:]}"
