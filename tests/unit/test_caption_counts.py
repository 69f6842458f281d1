"""Counts in captions and checks agree in number with the count (issue 32: "all 1 ranks" on a one-GPU run)."""

from __future__ import annotations

import re

import pytest

from simulations.runtime import simulate
from simulations.words import counted, each_of, every, once_every, plural

# A count of 1 before a plural noun, or a collective word before "1 <plural>": what the runs below once said.
ONE_PLURAL = re.compile(r"\b(?:all|each of the|the|of|over|to|from|most|every|and) 1 (?!per\b)[A-Za-z-]+s\b"
                        r"|(?<![−-] )\b1 (?:ranks|replicas|replica groups|shards|layers|steps|samples|tokens|heads|syncs|experts)\b"
                        r"|\b1 [a-z-]+ ranks\b")


def test_counts_agree_in_number():
    assert [counted(n, "rank") for n in (0, 1, 2)] == ["0 ranks", "1 rank", "2 ranks"]
    assert [every(n, "rank") for n in (1, 2, 4)] == ["the 1 rank", "both ranks", "all 4 ranks"]
    assert [each_of(n, "sync") for n in (1, 3)] == ["the 1 sync", "each of the 3 syncs"]
    assert [once_every(n, "step") for n in (1, 4)] == ["every step", "every 4 steps"]
    assert plural(2, "replica group", "replica groups") == "replica groups" and plural(1, "GPU") == "GPU"


# Each scenario with its counts at 1 where it takes them (and ddp on 2 ranks: "both").
RUNS = [
    ("ddp", {"world_size": 1}), ("ddp", {"world_size": 2}), ("basics", {"batch": 1}),
    ("tensor_parallel", {"tp": 1}), ("tensor_parallel", {"seq_len": 1}),
    ("failures", {"restart_world_size": 1, "checkpoint_every": 1}),
    ("diloco", {"inner_steps": 1, "outer_steps": 1}), ("expert_parallel", {"tokens": 1, "top_k": 1}),
    ("ring_attention", {"heads": 1}), ("zero", {"micro_batch": 1}),
    ("hsdp", {"replicas": 1, "micro_batch": 1}), ("hsdp", {"shards": 1}), ("parallel_3d", {"dp": 1, "tp": 1}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, params", RUNS, ids=[f"{n}-{'-'.join(f'{k}{v}' for k, v in p.items())}" for n, p in RUNS])
def test_no_caption_or_check_says_1_of_a_plural(pool, name, params):
    run = simulate(pool, name, params)
    assert run.error is None, run.error
    texts = {f.caption for f in run.frames} | {f"{c.name}: {c.detail}" for c in run.summary.checks}
    texts |= {t.note for f in run.frames for r in f.ranks for t in r.tensors if t.note}
    wrong = sorted({t for t in texts if ONE_PLURAL.search(t)})
    assert not wrong, wrong
    if params == {"world_size": 2}:
        assert any("all-reduced: both ranks hold the same averaged gradients" in t for t in texts)
