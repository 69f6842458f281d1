"""The cluster estimator's speed: one estimate, and a full layout search over a 16,384-GPU cluster.

Targets (issue 12, so the layout chooser is interactive): one estimate ≤ 50 ms, a search ≤ 2 s.
Run alone with `python -m bench.estimate`; `python -m bench` runs it after the other benchmarks.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from simulations.estimate import build, estimate, search

REPEATS = 7
RESULTS = Path(__file__).resolve().parent / "results"


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm caches and imports
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    fixed = build("llama3-405b", gpu="h100-80gb", gpus=16384, tp=8, pp=16, schedule="interleaved_1f1b",
                  virtual_stages=2, micro_batch=1, global_batch=2048, seq_len=8192)
    auto = build("llama3-405b", gpu="h100-80gb", gpus=16384, tp=8, pp=16, schedule="interleaved_1f1b",
                 global_batch=2048)
    grid = build("llama3-405b", gpu="h100-80gb", gpus=16384, global_batch=2048)
    # a mixture of experts: the search also tries every EP degree its 8 experts allow (4 times the grid)
    moe = build("mixtral-8x7b", gpu="h100-80gb", gpus=16384, global_batch=4096, check_layout=False)
    figures = {
        "one_estimate_s": _timed(lambda: estimate(*fixed), REPEATS),
        "one_estimate_auto_s": _timed(lambda: estimate(*auto), REPEATS),
        "search_16384_gpus_s": _timed(lambda: search(*grid), 3),
        "search_moe_16384_gpus_s": _timed(lambda: search(*moe), 3),
    }
    best = search(*grid)[0]
    print(f"estimate: one estimate (llama3-405b, 16,384 × H100, TP 8 PP 16 v 2) median "
          f"{statistics.median(figures['one_estimate_s']) * 1000:.1f} ms (target ≤ 50 ms); with auto micro-batch "
          f"and virtual stages {statistics.median(figures['one_estimate_auto_s']) * 1000:.1f} ms", flush=True)
    search_s = statistics.median(figures["search_16384_gpus_s"])
    print(f"estimate: full layout search over 16,384 GPUs median {search_s:.2f} s "
          f"(target ≤ 2 s); best TP {best.layout.tp} PP {best.layout.pp} CP {best.layout.cp} "
          f"v {best.layout.virtual_stages} b {best.layout.micro_batch}: {best.step_time_s:.2f} s/step, "
          f"MFU {best.mfu:.1%}", flush=True)
    print(f"estimate: layout search for Mixtral 8x7B (EP too) over 16,384 GPUs median "
          f"{statistics.median(figures['search_moe_16384_gpus_s']):.2f} s (target ≤ 2 s)", flush=True)
    figures["medians"] = {k: statistics.median(v) for k, v in figures.items()}
    out = RESULTS / "estimate-latest.json"
    out.write_text(json.dumps(figures, indent=2))
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
