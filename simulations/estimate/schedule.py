"""The pipeline schedule on a clock: the live scenario's orders, timed with real durations.

`simulations.scenarios.pipeline_schedules` says, for every rank, which F, B and W it runs in which
order, and what each waits for (`rank_orders`, `depends_on`): the very lists the live pipeline
scenario runs on real ranks. Here each action lasts its estimated duration instead of one slot,
and a dependency between stages on different ranks also waits for the activation (or its
gradient) to arrive. The idle time that is left is the bubble.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulations.scenarios.pipeline_schedules import Action, depends_on, rank_orders


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
    `hop`: seconds for an activation or a gradient to reach the next rank.
    """
    orders = rank_orders(schedule, p, m, v)
    stages = p * v
    finished: dict[Action, float] = {}
    position = [0] * p
    clock = [0.0] * p
    busy = [0.0] * p
    spans: list[tuple[int, Action, float, float]] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r, order in enumerate(orders):
            while position[r] < len(order):
                action = order[position[r]]
                needed = depends_on(action, stages)
                ready = 0.0
                if needed is not None:
                    done = finished.get(needed)
                    if done is None:
                        break
                    ready = done + (hop if needed.stage % p != action.stage % p else 0.0)
                start = max(clock[r], ready)
                length = duration[action.kind][action.stage]
                clock[r] = finished[action] = start + length
                busy[r] += length
                if keep_spans:
                    spans.append((r, action, start, start + length))
                position[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlocks: an action waits for one that never runs")
    return Timed(max(clock), busy, spans)
