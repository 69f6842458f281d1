"""The pipeline's replay: measured action durations laid out in each rank's order, one processor per rank.

Torch-free and fast. With equal durations the replay is the formula, exactly; with durations spread over
[lo, hi] the GPipe and 1F1B bubble stays inside `replay_bounds`, whose derivation is in its docstring."""

import random
from fractions import Fraction

import pytest

from simulations.scenarios.pipeline_schedules import bubble_formula, rank_orders, replay, replay_bounds

P = 4


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2), ("zero_bubble", 1)])
@pytest.mark.parametrize("m", [4, 8, 16, 32])
def test_equal_durations_replay_to_the_formula(schedule, v, m):
    orders = rank_orders(schedule, P, m, v)
    replayed = replay(orders, {a: 1.0 for order in orders for a in order}, P * v)
    num, den = bubble_formula(schedule, P, m, v)
    assert Fraction(replayed.bubble).limit_denominator(1000) == Fraction(num, den)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("m", [1, 4, 8, 32])
def test_spread_durations_keep_the_bubble_inside_the_derived_bounds(schedule, m):
    if schedule == "1f1b" and m < P:
        pytest.skip("1F1B needs m >= p")
    rng = random.Random(m)
    orders = rank_orders(schedule, P, m)
    for spread in (1.1, 1.5, 3.0):
        for _ in range(20):
            durations = {a: (1.0 if a.kind == "F" else 2.0) * rng.uniform(1.0, spread) for o in orders for a in o}
            low, high = replay_bounds(schedule, P, m, [d for a, d in durations.items() if a.kind == "F"],
                                      [d for a, d in durations.items() if a.kind == "B"])
            bubble = replay(orders, durations, P).bubble
            assert low - 1e-12 <= bubble <= high + 1e-12, (spread, low, bubble, high)


def test_a_replay_that_runs_the_stages_one_after_another_is_outside_the_bounds():
    """What the check catches: stages run one after another (each waiting for the whole of the one before)
    take p·m·(t_f + t_b), a bubble of (p − 1)/p, outside the range even for durations 50 % apart."""
    m = 32
    orders = rank_orders("gpipe", P, m)
    chain = [a for order in orders for a in order]  # every action after the one before, on whichever rank
    durations = {a: 1.0 if a.kind == "F" else 1.5 for a in chain}
    serial = sum(durations.values())
    busy = [sum(durations[a] for a in order) for order in orders]
    bubble = 1 - sum(busy) / (P * serial)
    low, high = replay_bounds("gpipe", P, m, [1.0, 1.5], [1.5, 2.25])
    assert bubble == pytest.approx((P - 1) / P) and not low <= bubble <= high


def test_a_schedule_that_waits_for_what_never_runs_is_refused():
    orders = rank_orders("gpipe", P, 4)
    orders[1] = orders[1][1:]  # rank 1 never runs F0 of its stage: rank 2's F0 would wait forever
    with pytest.raises(RuntimeError, match="deadlocks"):
        replay(orders, {a: 1.0 for order in orders for a in order} | {o: 1.0 for o in rank_orders("gpipe", P, 4)[1]}, P)
