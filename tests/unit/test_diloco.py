import pytest
from pydantic import ValidationError

from simulations.scenarios import diloco

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("params", [
    {"world_size": 4, "inner_steps": 5, "outer_steps": 3},
    {"world_size": 2, "inner_steps": 3, "outer_steps": 2, "inner_optimizer": "sgd", "inner_lr": 0.05,
     "outer_momentum": 0.0, "width": 8, "depth": 1},
])
def test_diloco_and_ddp_match_their_single_process_references(run_scenario, params):
    run = run_scenario("diloco", **params)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["outer updates equal the N workers simulated in one process"].measured <= 1e-6
    assert checks["DDP baseline equals one process on the global batch: weights"].measured <= 1e-6
    assert checks["DDP baseline equals one process on the global batch: losses"].measured <= 1e-6
    assert checks["every worker holds the same θ after each sync"].measured == 0.0


def test_diloco_communicates_h_times_less_than_ddp(run_scenario):
    n, H, T, width, depth = 3, 4, 2, 8, 2
    run = run_scenario("diloco", world_size=n, inner_steps=H, outer_steps=T, width=width, depth=depth)
    psi = 4 * width + width + (width * width + width) * (depth - 1) + width * 2 + 2
    figures = run.summary.figures
    assert figures["psi"] == psi
    assert figures["diloco_bytes_per_worker"] == T * psi * 4
    assert figures["ddp_bytes_per_worker"] == T * H * psi * 4
    assert figures["ratio"] == H
    assert figures["diloco_ring_wire_bytes_per_worker"] == pytest.approx(2 * (n - 1) / n * T * psi * 4)
    # Read from the frames: DiLoCo's all-reduces happen only at the syncs, on the "outer" link;
    # the baseline's at every inner step, on its own "ddp" group.
    for frame in run.frames:
        groups = {t.group for t in frame.transfers}
        assert groups == ({"outer"} if frame.phase == "outer_sync" else {"ddp"} if frame.phase == "inner" else set())
        assert all(t.op == "all_reduce" and t.bytes == psi * 4 for t in frame.transfers)
    assert sum(1 for f in run.frames if f.phase == "outer_sync") == T


def test_frames_carry_both_loss_curves(run_scenario):
    n, H, T = 2, 3, 2
    run = run_scenario("diloco", world_size=n, inner_steps=H, outer_steps=T)
    phases = [f.phase for f in run.frames]
    assert phases == ["setup"] + (["inner"] * H + ["pseudo_gradient", "outer_sync", "outer_step"]) * T + ["done"]
    inner = [f for f in run.frames if f.phase == "inner"]
    assert [f.extra["step"] for f in inner] == list(range(1, H * T + 1))
    mean = lambda f, key: sum(r.extra[key] for r in f.ranks) / n  # noqa: E731
    assert [mean(f, "loss") for f in inner] == pytest.approx(run.summary.figures["diloco_loss"])
    assert [mean(f, "ddp_loss") for f in inner] == pytest.approx(run.summary.figures["ddp_loss"])
    # Workers train on different shards: their local losses and drifts differ between syncs.
    assert inner[1].ranks[0].extra["loss"] != inner[1].ranks[1].extra["loss"]
    assert inner[0].ranks[0].extra["drift"] > 0
    # Cumulative bytes so far, as the chart shows them, end at the summary's totals.
    assert run.frames[-1].extra["bytes"] == {"diloco": run.summary.figures["diloco_bytes_per_worker"],
                                             "ddp": run.summary.figures["ddp_bytes_per_worker"]}
    assert len(run.frames[-1].extra["eval"]) == T


def test_params_bounds():
    for bad in ({"world_size": 1}, {"world_size": 9}, {"inner_steps": 0}, {"inner_steps": 51},
                {"inner_optimizer": "adam"}, {"outer_momentum": 1.0}):
        with pytest.raises(ValidationError):
            diloco.Params(**bad)


def test_references_share_no_algorithm_code_with_the_run(monkeypatch):
    import torch

    from simulations.scenarios import diloco as dl

    p = dl.Params(world_size=2, inner_steps=2, outer_steps=2, width=8)
    before = dl.reference_diloco(p)["globals"][-1], dl.reference_ddp(p)["weights"]

    def broken(*args, **kwargs):
        raise AssertionError("the reference called the run's code")

    for name in ("inner_optimizer", "outer_optimizer", "train_step", "_all_reduce_mean", "_split_like"):
        monkeypatch.setattr(dl, name, broken)
    after = dl.reference_diloco(p)["globals"][-1], dl.reference_ddp(p)["weights"]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
