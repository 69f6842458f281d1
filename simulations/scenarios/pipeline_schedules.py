"""Pipeline schedules: which forward and backward each rank runs, in which order.

A schedule is, for every rank, an ordered list of actions:
- F(stage, mb): forward of one micro-batch through one stage;
- B(stage, mb): backward of it (in the zero-bubble schedule only the input gradient);
- W(stage, mb): the weight gradient, which the zero-bubble schedule splits off B.

A rank runs its list strictly in order. `timetable` then places the lists on a common clock of
logical slots, one action per slot, an action waiting for what it depends on: the forward of the
stage before, the backward of the stage after. Slots where a rank has nothing to do are the bubble.

- GPipe (Huang et al., arXiv:1811.06965): all forwards, then all backwards.
- 1F1B (PipeDream-Flush, Narayanan et al., arXiv:2006.09503): p − 1 − r warm-up forwards on
  rank r, then one forward, one backward, so at most p micro-batches are in flight.
- Interleaved 1F1B (Narayanan et al., arXiv:2104.04473): v smaller stages per rank, placed in a
  loop (stage k·p + r on rank r); the bubble shrinks v times.
- ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", arXiv:2401.10241): 1F1B with backward split
  into B and W; rank r holds back r of its W to fill the slots where 1F1B waits, at 1F1B's memory.
These orders are the ones torch.distributed.pipelining builds (schedules.py), written out plainly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Action(NamedTuple):
    kind: str  # "F", "B" or "W"
    stage: int  # global stage index (with virtual stages: chunk * p + rank)
    mb: int  # micro-batch

    def __str__(self) -> str:
        return f"{self.kind}{self.mb}"


def gpipe(p: int, m: int, rank: int) -> list[Action]:
    """All forwards, then all backwards: every micro-batch's activations wait for the flush."""
    return [Action("F", rank, i) for i in range(m)] + [Action("B", rank, i) for i in range(m)]


def one_f_one_b(p: int, m: int, rank: int) -> list[Action]:
    """Warm up with p − 1 − rank forwards, then alternate one forward, one backward, then drain."""
    warmup = min(p - 1 - rank, m)
    order = [Action("F", rank, i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [Action("F", rank, warmup + i), Action("B", rank, i)]
    order += [Action("B", rank, i) for i in range(m - warmup, m)]
    return order


def zero_bubble_h1(p: int, m: int, rank: int) -> list[Action]:
    """1F1B with B (input gradient) and W (weight gradient) apart; rank r defers its first r W."""
    warmup = min(p - 1 - rank, m)
    order = [Action("F", rank, i) for i in range(warmup)]
    next_w = 0
    for i in range(m):
        if warmup + i < m:
            order.append(Action("F", rank, warmup + i))
        order.append(Action("B", rank, i))
        if i >= rank:  # the deferred W fill the tail of the pipeline, where 1F1B sits idle
            order.append(Action("W", rank, next_w))
            next_w += 1
    order += [Action("W", rank, i) for i in range(next_w, m)]
    return order


def interleaved_1f1b(p: int, m: int, rank: int, v: int) -> list[Action]:
    """1F1B over v chunks per rank, in rounds of p micro-batches (Megatron-LM's order).

    Forwards go chunk 0 for a round of micro-batches, then chunk 1, ...; backwards the other way.
    Warm-up is (v − 1) rounds plus 2 per hop from the last rank, so the first backward is ready.
    """
    rounds = max(1, m // p)
    per_round = m // rounds
    total = v * m
    warmup = min((v - 1) * per_round + 2 * (p - 1 - rank), total)
    forwards, backwards = [], []
    done_f, done_b = [0] * v, [0] * v
    for k in range(total):
        chunk = (k // per_round) % v
        forwards.append(Action("F", chunk * p + rank, done_f[chunk]))
        done_f[chunk] += 1
        chunk = v - 1 - (k // per_round) % v
        backwards.append(Action("B", chunk * p + rank, done_b[chunk]))
        done_b[chunk] += 1
    order = forwards[:warmup]
    for k in range(total - warmup):
        order += [forwards[warmup + k], backwards[k]]
    return order + backwards[total - warmup:]


def rank_orders(schedule: str, p: int, m: int, v: int = 1) -> list[list[Action]]:
    if schedule == "gpipe":
        return [gpipe(p, m, r) for r in range(p)]
    if schedule == "1f1b":
        return [one_f_one_b(p, m, r) for r in range(p)]
    if schedule == "zero_bubble":
        return [zero_bubble_h1(p, m, r) for r in range(p)]
    if schedule == "interleaved_1f1b":
        return [interleaved_1f1b(p, m, r, v) for r in range(p)]
    raise ValueError(f"unknown schedule {schedule!r}")


def depends_on(action: Action, num_stages: int) -> Action | None:
    """What must have run (in an earlier slot) before `action` may start."""
    kind, stage, mb = action
    if kind == "F":
        return Action("F", stage - 1, mb) if stage > 0 else None
    if kind == "B":
        return Action("B", stage + 1, mb) if stage < num_stages - 1 else Action("F", stage, mb)
    return Action("B", stage, mb)  # W needs the output gradients that B computed


def timetable(orders: list[list[Action]], num_stages: int) -> list[list[Action | None]]:
    """Place each rank's ordered actions on a common clock: slot t, each rank runs its next action
    if what it depends on finished in a slot before t, else it idles (a bubble)."""
    finished: dict[Action, int] = {}
    position = [0] * len(orders)
    table: list[list[Action | None]] = [[] for _ in orders]
    slot = 0
    while any(position[r] < len(order) for r, order in enumerate(orders)):
        for r, order in enumerate(orders):
            action = order[position[r]] if position[r] < len(order) else None
            needed = depends_on(action, num_stages) if action else None
            if action and (needed is None or finished.get(needed, slot) < slot):
                table[r].append(action)
                finished[action] = slot
                position[r] += 1
            else:
                table[r].append(None)
        slot += 1
        if slot > 4 * sum(len(o) for o in orders):
            raise RuntimeError("schedule deadlocks: an action waits for one that never runs")
    return table


def bubble_formula(schedule: str, p: int, m: int, v: int = 1) -> tuple[int, int]:
    """REFERENCE.md's bubble fraction, as (numerator, denominator), in slots of one F, B or W.

    GPipe and 1F1B: (p−1)/(m+p−1). Interleaved: (p−1)/(v·m+p−1). ZB-H1 with t_F = t_B = t_W:
    (p−1)/(3m+p−1), a third of 1F1B's (p−1)·3 idle slots.
    """
    if schedule in ("gpipe", "1f1b"):
        return p - 1, m + p - 1
    if schedule == "interleaved_1f1b":
        return p - 1, v * m + p - 1
    if schedule == "zero_bubble":
        return p - 1, 3 * m + p - 1
    raise ValueError(f"unknown schedule {schedule!r}")


class LaidOut(NamedTuple):
    starts: dict[Action, float]  # when each action starts (empty unless asked: `record`)
    ends: dict[Action, float]  # when it ends
    busy: list[float]  # per rank: the sum of its actions' lengths
    laid: list[tuple[int, Action]]  # (rank, action) in the order they were laid out (empty unless asked)


def lay_out(orders: list[list[Action]], num_stages: int, length: Callable[[Action], float],
            hop: Callable[[Action, Action], float] | None = None, record: bool = True) -> LaidOut:
    """Lay the ranks' ordered actions out on one processor per rank: an action starts when its rank is free
    and what it depends on (`depends_on`: the activation from the stage before, the gradient from the stage
    after) has finished, plus `hop(needed, action)`, the time that result takes to reach it (none if not
    given). `length(action)`: how long the action runs. `record`: keep each action's start and the order they
    were laid out in (a makespan needs only the ends: the estimator's layout search times thousands of schedules).

    The live pipeline's replay of its measured durations and the estimator's schedule timing both stand on
    this one clock (`replay`, simulations.estimate.schedule.run)."""
    starts: dict[Action, float] = {}
    ends: dict[Action, float] = {}
    free = [0.0] * len(orders)
    busy = [0.0] * len(orders)
    position = [0] * len(orders)
    laid: list[tuple[int, Action]] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r, order in enumerate(orders):
            while position[r] < len(order):
                action = order[position[r]]
                needed = depends_on(action, num_stages)
                ready = 0.0
                if needed is not None:
                    done = ends.get(needed)
                    if done is None:
                        break  # waits for another rank's action, not yet laid out
                    ready = done + hop(needed, action) if hop is not None else done
                start = max(free[r], ready)
                took = length(action)
                free[r] = ends[action] = start + took
                busy[r] += took
                if record:
                    starts[action] = start
                    laid.append((r, action))
                position[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlocks: an action waits for one that never runs")
    return LaidOut(starts, ends, busy, laid)


class Replayed(NamedTuple):
    makespan: float  # from the first action's start to the last one's end
    busy: list[float]  # per rank: the sum of its actions' durations
    starts: dict[Action, float]  # when each action starts in the replay

    @property
    def bubble(self) -> float:
        """The share of the p processors' time spent idle: 1 − Σ busy / (p × makespan)."""
        return 1 - sum(self.busy) / (len(self.busy) * self.makespan) if self.makespan > 0 else 0.0


def replay(orders: list[list[Action]], durations: dict[Action, float], num_stages: int) -> Replayed:
    """The measured durations laid out (`lay_out`), a message arriving the moment it is sent.

    This is the schedule's time on p processors that do nothing else, from what each action really cost,
    without the waits a shared machine adds (four ranks on two cores take turns)."""
    laid = lay_out(orders, num_stages, durations.__getitem__)
    return Replayed(makespan=max(laid.ends.values(), default=0.0), busy=laid.busy, starts=laid.starts)


def replay_bounds(schedule: str, p: int, m: int, forwards: list[float], backwards: list[float]) -> tuple[float, float]:
    """The replayed bubble's range for GPipe and 1F1B when every forward lasts between min and max of
    `forwards` and every backward between min and max of `backwards`.

    With F = t_f and B = t_b for all, the makespan is (m + p − 1)(t_f + t_b) for every t_f, t_b ≥ 0: no path
    through the schedule holds more than m + p − 1 forwards or m + p − 1 backwards, and one holds both. So
    (m+p−1)(f_lo+b_lo) ≤ makespan ≤ (m+p−1)(f_hi+b_hi), and each rank is busy between m(f_lo+b_lo) and
    m(f_hi+b_hi); with ρ = (f_hi+b_hi)/(f_lo+b_lo), the bubble 1 − Σbusy/(p·makespan) lies in
    [1 − ρ·m/(m+p−1), 1 − m/(ρ·(m+p−1))], which is the formula (p−1)/(m+p−1) when ρ = 1."""
    if schedule not in ("gpipe", "1f1b"):
        raise ValueError(f"bounds are derived for gpipe and 1f1b, not {schedule!r}")
    rho = (max(forwards) + max(backwards)) / (min(forwards) + min(backwards))
    share = m / (m + p - 1)
    return max(0.0, 1 - rho * share), 1 - share / rho
