"""`make test`: the suite as two pytest sessions side by side, one per core.

Run one after the other, the tests left a core of this 2-core machine idle most of the time: a browser test
mostly waits for a page to draw or a live run to stream, an API test for its ranks. Side by side, each
session keeps what its tests share to itself (its rank pool, its background work: tests/conftest.py):

- the deck's live runs: the browser tests that walk the deck's live slides on the deck server or on the
  static export (tests/browser/sites.py). They share one export, whose runs the server's cache then holds;
  split across two sessions, each session would run every one of the deck's runs.
- the rest: every other test (API, units, planted bugs, the container image, the browser tests with servers
  of their own), a new test file included.

    python scripts/test_side_by_side.py [pytest options...] [test paths...]

The options go to both sessions; named test paths run in one plain pytest session instead. Each session's output is printed whole when it ends, so the two never
interleave; the exit status is the first failing session's (pytest's own codes), else 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIVE_DECK = [f"tests/browser/test_{name}.py" for name in (
    "deck_browser", "full_deck", "live_views", "print_and_speaker", "phone_and_widget_sizes", "embed_widget",
    "failures_slide", "lazy_players", "widget_main_thread")]
GROUPS = {  # name -> what its pytest collects
    "the deck's live runs": LIVE_DECK,
    "the rest": ["tests", *(f"--ignore={path}" for path in LIVE_DECK)],
}
NO_TESTS_COLLECTED = 5  # pytest's status when a selection (-k, -m) leaves a session nothing to run


def main(options: list[str]) -> int:
    if any(not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists() for arg in options):
        # Tests named on the command line: one session runs just those, as pytest itself would.
        return subprocess.call([sys.executable, "-m", "pytest", *options], cwd=ROOT)
    started = time.monotonic()
    runs = {}
    for name, paths in GROUPS.items():
        log = tempfile.TemporaryFile(mode="w+")
        # A process group of its own: stopping the suite stops everything the session started.
        process = subprocess.Popen([sys.executable, "-m", "pytest", *options, *paths], cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        runs[name] = (process, log)
    print(f"{len(runs)} pytest sessions side by side: {', '.join(GROUPS)}; each one's output when it ends",
          flush=True)

    def stop(signum, _frame):
        for process, _ in runs.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    statuses, pending = {}, dict(runs)
    while pending:
        for name, (process, log) in list(pending.items()):
            if process.poll() is None:
                continue
            del pending[name]
            statuses[name] = process.returncode
            log.seek(0)
            minutes = (time.monotonic() - started) / 60
            print(f"\n===== {name}: pytest exited {process.returncode} after {minutes:.1f} min =====", flush=True)
            sys.stdout.write(log.read())
            sys.stdout.flush()
        time.sleep(0.5)
    print(f"\n===== both sessions done in {(time.monotonic() - started) / 60:.1f} min: "
          + ", ".join(f"{name} exited {status}" for name, status in statuses.items()) + " =====")
    failed = [status for status in statuses.values() if status not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return NO_TESTS_COLLECTED if all(s == NO_TESTS_COLLECTED for s in statuses.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
