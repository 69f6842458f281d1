import pytest
from pydantic import ValidationError

from simulations.scenarios import parallel_3d

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dp,pp,tp,layers,microbatches", [(2, 2, 2, 4, 2), (1, 3, 2, 3, 1)])
def test_one_3d_step_equals_the_single_process_step(run_scenario, dp, pp, tp, layers, microbatches):
    # (1, 3, 2) runs on 6 of the pool's 8 ranks: the mesh's groups must be made without the other two.
    run = run_scenario("parallel_3d", dp=dp, pp=pp, tp=tp, layers=layers, microbatches=microbatches)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["gradients equal the single-process step"].measured <= 1e-5
    assert checks["parameters after the step equal the single-process step"].measured <= 1e-5


def test_every_transfer_is_labelled_with_its_mesh_dimension(run_scenario):
    dp, pp, tp, m, h = 2, 2, 2, 2, 8
    run = run_scenario("parallel_3d", dp=dp, pp=pp, tp=tp, layers=2, hidden=h, microbatches=m)
    transfers = [t for f in run.frames for t in f.transfers]
    dp_phases = {f.phase for f in run.frames for t in f.transfers if t.group == "dp"}
    assert dp_phases == {"dp_all_reduce"}  # once per step, after the whole pipeline
    assert {t.group for t in transfers} == {"dp", "pp", "tp"}
    for t in transfers:
        if t.group == "pp":  # point to point between neighbouring stages of the same replica and slice
            assert t.op == "send" and abs(t.dst - t.src) == tp and t.bytes == 2 * h * 4
        elif t.group == "tp":  # inside one stage: ranks (d, s, 0..tp-1) are neighbours
            assert t.op == "all_reduce" and t.bytes == 2 * h * 4
    sent_pp = sum(t.bytes for t in transfers if t.group == "pp")
    assert sent_pp == dp * tp * (pp - 1) * m * 2 * (2 * h * 4)
    assert sum(t.bytes for t in transfers if t.group == "dp") == run.summary.figures["formula_buffer_bytes_per_dim"]["dp"]
    # GPipe: stage 1 idles while stage 0 runs the first forward micro-batch.
    first = next(f for f in run.frames if f.phase == "forward")
    status = {tuple(r.extra["coord"].values()): r.status for r in first.ranks}
    assert status[(0, 0, 0)] == "F0" and status[(0, 1, 0)] == "idle"


def test_validation_names_the_constraint():
    with pytest.raises(ValidationError, match=r"dp·pp·tp"):
        parallel_3d.Params(dp=2, pp=2, tp=4)
    with pytest.raises(ValidationError, match="layers"):
        parallel_3d.Params(dp=1, pp=3, tp=1, layers=4)
    assert parallel_3d.Params(dp=2, pp=2, tp=2).dp == 2


def test_reference_shares_no_algorithm_code_with_the_run(monkeypatch):
    from simulations.scenarios import parallel_3d

    p = parallel_3d.Params(dp=1, pp=2, tp=2, layers=2, hidden=4, microbatches=2)
    before = parallel_3d.reference(p)
    monkeypatch.setattr(parallel_3d, "block", lambda *a, **k: (_ for _ in ()).throw(AssertionError("run code")))
    assert parallel_3d.reference(p)["loss"] == before["loss"]


def test_mesh_coordinates_put_tp_peers_on_neighbouring_ranks():
    from simulations.scenarios import parallel_3d

    p = parallel_3d.Params(dp=2, pp=2, tp=2)
    coords = [parallel_3d.mesh_coordinate(r, p) for r in range(8)]
    assert coords[:4] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
    assert sorted(coords) == coords  # tp fastest, then pp, then dp
