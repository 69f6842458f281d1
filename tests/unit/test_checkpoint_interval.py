"""The checkpoint-interval formulas (simulations.formulas: Young 1974, Daly 2006) and the cited failure record."""

import math

import pytest

from simulations import formulas as f


def test_young_is_the_minimum_of_its_own_cost():
    """√(2δM) minimises δ/τ + τ/(2M): found here by search, not by the formula."""
    delta, mtbf = 30.0, 10_000.0
    best = min((f.checkpoint_overhead(t / 10, delta, mtbf), t / 10) for t in range(1, 100_000))
    assert best[1] == pytest.approx(f.young_interval(delta, mtbf), abs=0.1)
    assert best[0] == pytest.approx(math.sqrt(2 * delta / mtbf), rel=1e-6)


@pytest.mark.parametrize("mtbf_min, expected_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_reproduces_the_papers_own_examples(mtbf_min, expected_min):
    """Daly 2006, figures 3 to 5: δ = 5 min and M = 24 h, 6 h and 15 min give τ_opt = 117, 57 and 9.1 min
    (the captions' values, rounded as printed)."""
    assert f.daly_interval(5, mtbf_min) == pytest.approx(expected_min, abs=0.5 if expected_min > 10 else 0.05)


def test_daly_approaches_young_when_checkpoints_are_cheap_and_caps_at_the_mtbf():
    assert f.daly_interval(1, 1e8) / f.young_interval(1, 1e8) == pytest.approx(1, rel=1e-4)
    assert f.daly_interval(50, 20) == 20  # δ ≥ 2M: checkpoint once per mean time between failures


def test_llama3_figures_give_a_failure_every_2_8_hours():
    """Llama 3 paper, section 3.3.4: 466 interruptions in a 54-day snapshot; 419 unexpected."""
    run = f.LLAMA3_405B
    assert (run.days, run.interruptions, run.unexpected, run.gpus) == (54, 466, 419, 16_384)
    mtbf_h = f.mean_time_between(run.hours, run.interruptions)
    assert mtbf_h == pytest.approx(54 * 24 / 466) and round(mtbf_h, 1) == 2.8
    assert round(f.mean_time_between(run.hours, run.unexpected), 1) == 3.1


def test_the_interval_for_the_llama3_run():
    """12 bytes a parameter (fp32 weights and Adam's two moments) of 405B at 2 TB/s: δ = 2.43 s; with M from the 419
    unexpected interruptions (the planned ones can be timed after a save), M = 54·24·3600/419 s, τ = √(2δM) ≈ 3.9 min
    and about 2.1 % of the time lost, as the checkpoint-interval slide shows."""
    run = f.LLAMA3_405B
    delta = run.parameters * f.bytes_per_parameter()["optimizer"] / run.storage_bytes_per_s
    mtbf_s = f.mean_time_between(run.hours * 3600, run.unexpected)
    assert delta == pytest.approx(405e9 * 12 / 2e12)
    tau = f.young_interval(delta, mtbf_s)
    assert tau == pytest.approx(math.sqrt(2 * 2.43 * 54 * 24 * 3600 / 419), rel=1e-4)
    assert 3.8 < tau / 60 < 3.9 and f.daly_interval(delta, mtbf_s) < tau
    assert f.checkpoint_overhead(tau, delta, mtbf_s) == pytest.approx(math.sqrt(2 * delta / mtbf_s))
    assert round(100 * f.checkpoint_overhead(tau, delta, mtbf_s), 1) == 2.1
