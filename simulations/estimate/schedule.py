"""The pipeline schedule on a clock: the live scenario's orders, timed with real durations.

`simulations.scenarios.pipeline_schedules` says, for every rank, which F, B and W it runs in which
order, and what each waits for (`rank_orders`, `depends_on`): the very lists the live pipeline
scenario runs on real ranks. Here each action lasts its estimated duration instead of one slot,
and a dependency between stages on different ranks also waits for the activation (or its
gradient) to arrive. The idle time that is left is the bubble.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulations.scenarios.pipeline_schedules import Action, bubble_formula, lay_out, rank_orders


@dataclass(frozen=True)
class Timed:
    makespan: float
    busy: list[float]  # per rank
    spans: list[tuple[int, Action, float, float]]  # (rank, action, start, end)

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the ranks' time (all ranks end together at the makespan)."""
        if not self.makespan:
            return 0.0
        return 1 - sum(self.busy) / (len(self.busy) * self.makespan)


def run(schedule: str, p: int, m: int, v: int, duration: dict[str, list[float]], hop: float,
        keep_spans: bool = False) -> Timed:
    """Time `schedule` for `p` ranks, `m` micro-batches, `v` stages per rank.

    `duration[kind][stage]`: seconds of F, B or W of one micro-batch on that (global) stage;
    `hop`: seconds for an activation or a gradient to reach the next rank (none within a rank).
    """
    laid = lay_out(rank_orders(schedule, p, m, v), p * v, lambda a: duration[a.kind][a.stage],
                   lambda needed, a: hop if needed.stage % p != a.stage % p else 0.0, record=keep_spans)
    spans = [(r, a, laid.starts[a], laid.ends[a]) for r, a in laid.laid] if keep_spans else []
    return Timed(max(laid.ends.values()), laid.busy, spans)


MAX_TIMED_ACTIONS = 20_000


def pipeline_time(kind: str, p: int, m: int, v: int, dur: dict[str, list[float]], hop: float,
                  keep_spans: bool, fast: bool = False) -> Timed:
    """The schedule on a clock; past MAX_TIMED_ACTIONS actions, the same schedule with fewer micro-batches
    scaled up (its steady state is periodic). `fast` (the layout search): the schedule's bubble formula
    (pipeline_schedules.bubble_formula, exact for uniform stages) plus the hops of warm-up and drain."""
    if p == 1:
        per = dur["F"][0] + dur["B"][0] + (dur["W"][0] if kind == "zero_bubble" else 0.0)
        total = sum(dur["F"]) + sum(dur["B"]) + (sum(dur["W"]) if kind == "zero_bubble" else 0.0)
        spans = []
        if keep_spans:
            for i in range(m):
                spans.append((0, Action("F", 0, i), i * per, i * per + dur["F"][0]))
                spans.append((0, Action("B", 0, i), i * per + dur["F"][0], (i + 1) * per))
        return Timed(total * m, [total * m], spans)
    if fast:
        busy = m * max(sum(dur["F"][r::p]) + sum(dur["B"][r::p])
                       + (sum(dur["W"][r::p]) if kind == "zero_bubble" else 0.0) for r in range(p))
        num, den = bubble_formula(kind, p, m, v)
        idle = busy * num / (den - num) + 2 * (p - 1) * hop
        return Timed(busy + idle, [busy] * p, [])
    actions = p * m * v * (3 if kind == "zero_bubble" else 2)
    if actions <= MAX_TIMED_ACTIONS or keep_spans:
        return run(kind, p, m, v, dur, hop, keep_spans)
    rounds = max(2, MAX_TIMED_ACTIONS // (p * v * 3))
    small_m = max(p, (rounds // p) * p) if kind == "interleaved_1f1b" else rounds
    small_m = min(small_m, m)
    small = run(kind, p, small_m, v, dur, hop)
    per_mb = sum(small.busy) / p / small_m
    idle = small.makespan - per_mb * small_m  # warm-up and drain: independent of m
    makespan = per_mb * m + idle
    return Timed(makespan, [per_mb * m] * p, [])
