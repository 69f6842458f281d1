"""Run mutants on a warm rank pool and say, for each, whether a self-check caught it.

    python tests/mutation/mutation_runner.py [--json OUT] [ID ...]

A run of its own process: the pool's forkserver must preload `mutation_hook`, and a process's
forkserver starts once, with the preload it had then. First every (scenario, params) the mutants
use runs unmutated, and must pass all its checks (else a "kill" would mean nothing); then each
mutant. A mutant is killed when a check fails or the run errors (a rank raised, hung or died).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import mutation_hook  # noqa: E402,F401  (installs the "mutant:" lookup in this process too)
from mutation_list import BY_ID, MUTANTS  # noqa: E402

from simulations.runtime import RankPool, simulate  # noqa: E402


def outcome(pool: RankPool, name: str, params: dict) -> dict:
    start = time.perf_counter()
    run = simulate(pool, name, params)
    took = round(time.perf_counter() - start, 2)
    if run.error is not None:
        return {"killed": True, "by": "error: " + run.error[:300], "s": took}
    failed = [c.name for c in run.summary.checks if not c.passed]
    return {"killed": bool(failed), "by": failed, "s": took, "checks": len(run.summary.checks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--job-timeout", type=float, default=40.0)
    args = parser.parse_args(argv)
    chosen = [BY_ID[i] for i in args.ids] if args.ids else MUTANTS

    for m in chosen:  # a snippet that no longer matches is a broken mutant, not a surviving one
        mutation_hook.patched_source(m.id)

    pool = RankPool(size=8, backend="gloo", job_timeout_s=args.job_timeout)
    mp.get_context("forkserver").set_forkserver_preload(
        ["simulations.runtime.preload", "simulations.runtime.worker", "mutation_hook"])
    pool.start(background=False)
    report: dict = {"baselines": {}, "mutants": {}}
    try:
        for key in sorted({(m.scenario_name, json.dumps(m.params, sort_keys=True)) for m in chosen}):
            name, params = key[0], json.loads(key[1])
            result = outcome(pool, name, params)
            report["baselines"][f"{name} {key[1]}"] = result
            print(f"baseline {name} {key[1]}: {'FAILS ' + str(result['by']) if result['killed'] else 'passes'}"
                  f" ({result['s']} s)", flush=True)
        for m in chosen:
            result = outcome(pool, mutation_hook.PREFIX + m.id, m.params)
            report["mutants"][m.id] = result
            print(f"{m.id:<28} {'killed  ' if result['killed'] else 'SURVIVED'} {result['s']:6.2f} s  "
                  f"{result['by'] if result['killed'] else m.bug}", flush=True)
    finally:
        pool.close()
    killed = sum(r["killed"] for r in report["mutants"].values())
    report["score"] = f"{killed}/{len(report['mutants'])}"
    print(f"mutation score: {report['score']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
