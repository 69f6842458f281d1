import pytest
import torch
from pydantic import ValidationError

from simulations.scenarios import basics

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("params", [{}, {"in_features": 3, "hidden": 8, "batch": 1, "lr": 0.05, "steps": 4, "seed": 7}])
def test_backward_sgd_and_losses_match_autograd_and_finite_differences(run_scenario, params):
    run = run_scenario("basics", **params)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["hand-written backward equals torch.autograd.grad"].measured <= 1e-9
    assert checks["gradients equal finite differences"].measured <= 1e-8
    assert checks["every SGD step equals torch.optim.SGD's"].measured <= 1e-9
    assert checks["trained loss equals the reference model's"].measured <= 1e-12
    assert run.summary.figures["losses"][-1] < run.summary.figures["losses"][0]  # it learns, at these settings


def test_frames_walk_forward_loss_backward_sgd_each_step(run_scenario):
    steps = 2
    run = run_scenario("basics", steps=steps, hidden=3, in_features=2)
    phases = [f.phase for f in run.frames]
    one_step = ["forward_hidden", "forward_output", "loss", "backward_output", "backward_hidden", "sgd"]
    assert phases == ["inputs"] + one_step * steps + ["trained"]
    assert all(len(f.ranks) == 1 for f in run.frames)  # one process: no communication at all
    assert not any(f.transfers for f in run.frames)
    first = run.frames[1].extra
    assert first["layers"] == [2, 3, 1]
    assert len(first["activations"]["h"]) == 4 and len(first["activations"]["h"][0]) == 3
    # The loss frame's value is the loss of the forward frame's prediction (real values, not made up).
    loss_frame = run.frames[3].extra
    y_hat, y = torch.tensor(loss_frame["activations"]["y_hat"]), torch.tensor(loss_frame["y"])
    assert loss_frame["loss"] == pytest.approx(float(((y_hat - y) ** 2).mean()), abs=1e-5)
    # The SGD frame's worked example is the real update of one weight.
    ex = run.frames[6].extra["example"]
    assert ex["new"] == ex["w"] - ex["lr"] * ex["g"]
    assert run.frames[-1].extra["losses"] == pytest.approx(run.summary.figures["losses"][:steps])


def test_a_wrong_backward_would_be_caught():
    p = basics.Params(steps=1)
    x, y = basics.data(p)
    w = basics.init_weights(p)
    good = basics.backward(w, x, y, basics.forward(w, x))["grads"]
    picks = [("W1", 0), ("b2", 0)]
    numeric = basics.finite_differences(p, w, picks)
    assert numeric[0] == pytest.approx(float(good["W1"].flatten()[0]), abs=1e-8)
    # Forgetting tanh' (a classic bug) changes dL/dW1 by far more than the check's tolerance.
    acts = basics.forward(w, x)
    d_h = (2 * (acts["y_hat"] - y) / y.numel()) @ w["W2"]
    assert abs(float((d_h.T @ x).flatten()[0]) - numeric[0]) > 1e-4


def test_params_bounds():
    for bad in ({"hidden": 9}, {"in_features": 0}, {"steps": 11}, {"lr": 0}):
        with pytest.raises(ValidationError):
            basics.Params(**bad)
    assert basics.SCENARIO.world_size(basics.Params()) == 1
