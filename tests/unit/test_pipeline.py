from fractions import Fraction

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.main import create_app
from app.settings import Settings
from simulations.scenarios import pipeline
from simulations.scenarios.pipeline_schedules import bubble_formula, depends_on, rank_orders, timetable

pytestmark = pytest.mark.slow

# Two (p, m) points per schedule; p = 3 runs on 3 of the pool's 8 ranks.
POINTS = [
    ("gpipe", 2, 1), ("gpipe", 4, 6),
    ("1f1b", 3, 3), ("1f1b", 4, 8),
    ("interleaved_1f1b", 2, 4), ("interleaved_1f1b", 3, 6),
    ("zero_bubble", 2, 2), ("zero_bubble", 4, 8),
]


def _checks(run):
    return {c.name: c for c in run.summary.checks}


@pytest.mark.parametrize(("schedule", "p", "m"), POINTS)
def test_schedule_matches_unsplit_model_torch_and_bubble_formula(run_scenario, schedule, p, m):
    run = run_scenario("pipeline", schedule=schedule, stages=p, microbatches=m)
    checks = _checks(run)
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["gradients equal the unsplit model's full-batch gradients"].measured <= 1e-6
    assert checks["loss equals the unsplit model's full-batch loss"].measured <= 1e-6
    # The bubble counted on the frames: idle rank-slots over all rank-slots.
    slots = [f for f in run.frames if f.phase == "slot"]
    idle = sum(r.extra["action"] is None for f in slots for r in f.ranks)
    v = 2 if schedule == "interleaved_1f1b" else 1
    assert Fraction(idle, p * len(slots)) == Fraction(*bubble_formula(schedule, p, m, v))
    busy_per_rank = {"zero_bubble": 3 * m, "interleaved_1f1b": 2 * v * m}.get(schedule, 2 * m)
    assert len(slots) * p - idle == p * busy_per_rank  # every rank did all its work, once
    assert 0.0 <= run.summary.figures["bubble_fraction_wall"] < 1.0


def test_gpipe_holds_all_microbatches_1f1b_at_most_p(run_scenario):
    p, m = 4, 8
    gpipe = run_scenario("pipeline", schedule="gpipe", stages=p, microbatches=m).summary.figures
    one_f_one_b = run_scenario("pipeline", schedule="1f1b", stages=p, microbatches=m).summary.figures
    assert gpipe["peak_in_flight"] == [m] * p
    assert one_f_one_b["peak_in_flight"] == [p - r for r in range(p)]
    at_m_equals_p = run_scenario("pipeline", schedule="1f1b", stages=p, microbatches=p)
    assert at_m_equals_p.summary.figures["peak_in_flight"] == [p - r for r in range(p)]  # not GPipe's [p] * p
    assert _checks(at_m_equals_p)["peak in-flight micro-batches per rank"].expected == [p - r for r in range(p)]
    # Measured bytes follow the counts: rank 0 holds m micro-batches' activations vs p.
    assert gpipe["peak_in_flight_bytes"][0] == one_f_one_b["peak_in_flight_bytes"][0] * m // p


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"])
def test_frames_respect_dependencies_and_sends_precede_receives(run_scenario, schedule):
    p, m = 3, 6
    run = run_scenario("pipeline", schedule=schedule, stages=p, microbatches=m)
    v = 2 if schedule == "interleaved_1f1b" else 1
    slots = [f for f in run.frames if f.phase == "slot"]
    assert [f.extra["slot"] for f in slots] == list(range(len(slots)))
    done: dict[tuple, int] = {}
    sent: dict[str, int] = {}
    for f in slots:
        for rank_state in f.ranks:
            for received in rank_state.extra["received"]:
                assert sent.get(received["name"], f.index) < f.index, f"{received['name']} received before sent"
            a = rank_state.extra["action"]
            if a is None:
                continue
            assert a["stage"] % p == rank_state.rank
            action = (a["kind"], a["stage"], a["mb"])
            needed = depends_on(pipeline.Action(*action), p * v)
            if needed is not None:
                assert done.get(tuple(needed), f.index) < f.index, f"{action} before {tuple(needed)}"
            if a["kind"] == "B":
                assert done[("F", a["stage"], a["mb"])] < f.index  # no B before its own F
            done[action] = f.index
        for t in f.transfers:
            sent[t.tensor] = f.index
            assert t.bytes == pipeline.Params().microbatch_size * pipeline.Params().width * 4
    assert len(done) == p * v * m * (3 if schedule == "zero_bubble" else 2)


@pytest.mark.parametrize(("params", "message"), [
    ({"schedule": "1f1b", "stages": 4, "microbatches": 2}, "1f1b needs microbatches >= stages"),
    ({"schedule": "interleaved_1f1b", "stages": 2, "microbatches": 4, "layers": 6}, "virtual_stages must divide the layers"),
    ({"schedule": "interleaved_1f1b", "stages": 2, "microbatches": 5}, "multiple of its rounds"),
    ({"schedule": "gpipe", "virtual_stages": 2}, "virtual_stages > 1 needs schedule interleaved_1f1b"),
    ({"stages": 9}, "stages"),
    ({"schedule": "pipedream"}, "schedule"),
])
def test_invalid_combinations_name_the_constraint(params, message):
    with pytest.raises(ValidationError, match=message):
        pipeline.Params(**params)


def test_api_gives_422_naming_the_constraint():
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/pipeline/frames", params={"schedule": "1f1b", "stages": 4, "microbatches": 2})
    assert response.status_code == 422
    assert "1f1b needs microbatches >= stages" in response.text
    response = client.get("/api/simulations/pipeline/frames", params={"stages": 9})
    assert response.status_code == 422 and "stages" in response.text


def test_timetable_bubble_equals_formula_over_the_whole_range():
    """The schedule code alone, no ranks: every valid (p, m) up to 8 x 16 meets its formula exactly."""
    for schedule in ["gpipe", "1f1b", "zero_bubble", "interleaved_1f1b"]:
        for p in range(2, 9):
            for m in range(1 if schedule == "gpipe" else p, 17):
                v = 2 if schedule == "interleaved_1f1b" else 1
                if schedule == "interleaved_1f1b" and m % max(1, m // p):
                    continue
                table = timetable(rank_orders(schedule, p, m, v), p * v)
                idle = sum(a is None for row in table for a in row)
                assert Fraction(idle, p * len(table[0])) == Fraction(*bubble_formula(schedule, p, m, v)), (schedule, p, m)
