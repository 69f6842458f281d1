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


# Pytest plugins these checks do not use (no fuzzing, no property tests, no async tests): importing them
# (schemathesis, hypothesis) was half of each run's collection. An async test would fail without anyio's.
UNUSED_PLUGINS = ["schemathesis", "hypothesispytest", "anyio"]


def _command(mutant_id: str | None) -> tuple[list[str], dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTDECK_ESTIMATE_MUTANT": mutant_id or ""}
    unused = [arg for plugin in UNUSED_PLUGINS for arg in ("-p", f"no:{plugin}")]
    return [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *unused,
            "-p", "tests.mutation.estimate_mutants", *CHECKS], env


def _run(mutant_id: str | None) -> subprocess.CompletedProcess:
    """The run of `mutant_id` (None: the unmutated estimator), from the background runs if they have it."""
    if _background is not None and mutant_id in _background.ids:
        return _background.result(mutant_id)
    argv, env = _command(mutant_id)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


RUN_TIMEOUT_S = 300


# Runs at once: each is a pytest of its own on one core, mostly starting Python and collecting (about 5 s on a
# quiet machine), so two keep this machine's two cores busy while the tests before them wait on ranks and sockets.
AT_ONCE = 2


class BackgroundRuns:
    """The runs the collected tests will ask for, AT_ONCE at a time in threads, in the order the tests ask: each is
    independent of every other test, so they run beside the tests before them."""

    def __init__(self, ids: list[str | None]) -> None:
        self.ids = ids
        self.results: dict[str | None, subprocess.CompletedProcess | BaseException] = {}
        self.ready = threading.Condition()
        self.next = 0
        self.running: set[subprocess.Popen] = set()
        self.stopped = False
        for worker in range(AT_ONCE):
            threading.Thread(target=self._work, daemon=True, name=f"estimator-mutants-{worker}").start()

    def _work(self) -> None:
        while True:
            with self.ready:
                if self.next == len(self.ids):
                    return
                mutant_id = self.ids[self.next]
                self.next += 1
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
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
            self.running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        finally:
            with self.ready:
                self.running.discard(process)
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

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
            for process in self.running:
                process.kill()


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
