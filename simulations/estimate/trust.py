"""How far to trust an estimate: the estimator's error on published runs of the same kind.

The errors are the validation tests' own (tests/unit/test_estimate_validation.py, test_estimate_heldout.py,
test_estimate_other_stacks.py): every row they compare, its GPU, its kind of layout and its error, written to
validation.json next to this module by `python -m tests.unit.test_estimate_trust --write`, and checked by that
test module to be what the tables give today (so a change to the model that moves an error fails until the
file is regenerated). Nothing here is typed by hand.

"Of the same kind": the same GPU model (A100, H100, ...; the A100's 40 and 80 GB together) and the same kind of
layout, one of three:
- sharded (ZeRO-3, FSDP or HSDP, alone or with TP or CP inside it: LLM Foundry, torchtitan's FSDP and FSDP + TP,
  fms-fsdp, Pax's FSDP): every layer's parameters are gathered before use and its gradients reduce-scattered, so the
  per-layer gathers and the eager stacks' kernels weigh most;
- data-parallel (whole replicas, DDP or ZeRO-1/2, no TP, PP or CP: Narayanan's and Megatron-Core's 1.7B, Pax's DP);
- model-parallel (a layer or the model split by TP, PP or CP without ZeRO-3: Megatron-LM, NeMo, Megatron-DeepSpeed,
  Llama 3's 4D): TP collectives, CP exchanges and the pipeline bubble weigh most.
Failing that, the same kind on any GPU. These are the two things an estimate's inputs say that the errors depend on
most: the GPU sets the kernels' rates, and the layout decides which costs dominate. A ZeRO-3 layout with CP or TP
counts as sharded, not model-parallel: the runs of that kind were FSDP stacks, and the Megatron-family runs, whose
errors are the smallest, would otherwise vouch for it. The training stack itself is not an input, so it cannot pick
the group; model size is not used either, since most groups would then hold a handful of runs.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path

VALIDATION = Path(__file__).with_name("validation.json")


def layout_kind(tp: int, pp: int, cp: int, zero_stage: int) -> str:
    if zero_stage == 3:
        return "sharded"
    return "data-parallel" if tp == pp == cp == 1 else "model-parallel"


def gpu_family(gpu: str) -> str:
    return gpu.split("-")[0]


@cache
def published_rows() -> tuple[dict, ...]:
    return tuple(json.loads(VALIDATION.read_text())["rows"])


def trust(gpu: str, *, tp: int, pp: int, cp: int, zero_stage: int) -> dict:
    """The validation error on published runs like this one: how many, the median and worst |error|, the share
    on which the estimate was too fast, which runs (same GPU and kind, or same kind on any GPU), and all of it in
    one sentence (`summary`, what the CLI, the API and the projected view print)."""
    kind = layout_kind(tp, pp, cp, zero_stage)
    rows = [r for r in published_rows() if r["kind"] == kind and gpu_family(r["gpu"]) == gpu_family(gpu)]
    # a calibrated machine (profile.to_gpu names it "profile-...") is no catalog GPU: no published run was on it
    family = "a calibrated machine" if gpu.startswith("profile-") else gpu_family(gpu).upper()
    scope = f"{kind} runs on {family}"
    if not rows:
        rows = [r for r in published_rows() if r["kind"] == kind]
        scope = f"{kind} runs on other GPUs (none published on {family})"
    errors = [abs(r["error"]) for r in rows]
    found = {"runs": len(rows), "scope": scope, "median_error": statistics.median(errors), "worst_error": max(errors),
             "optimistic_share": sum(r["error"] > 0 for r in rows) / len(rows),
             "tables": sorted({r["table"] for r in rows})}
    return {**found, "summary": sentence(found)}


def sentence(t: dict) -> str:
    return (f"within ±{t['worst_error']:.0%} (median {t['median_error']:.0%}) on {t['runs']} published {t['scope']}; "
            f"too fast on {t['optimistic_share']:.0%} of them")


def overall() -> dict:
    """Every published run the validation tables compare: how many, in how many tables, the median |error|, the
    share too fast, and the worst row (its table, its name and its signed error)."""
    rows = published_rows()
    errors = [abs(r["error"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["error"]))
    return {"runs": len(rows), "tables": len({r["table"] for r in rows}), "median_error": statistics.median(errors),
            "optimistic_share": sum(r["error"] > 0 for r in rows) / len(rows),
            "worst": {"table": worst["table"], "row": worst["row"], "error": worst["error"]}}
