"""Failures: a rank dies, the job restarts from its last DCP checkpoint (resharded) and ends where a run
that never failed ends; the checks, the story's frames, the checkpoint reader and the bounds."""

import os

import pytest
import torch
import torch.distributed.checkpoint as dcp
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from app.settings import Settings
from simulations.scenarios import failures

slow = pytest.mark.slow  # the tests that run ranks

CHECKS = {
    "weights right after the restart equal a run that never failed, at the checkpoint's step",
    "final weights equal a run that never failed",
    "steps lost = steps since the last checkpoint, at most the interval",
    "every checkpoint on the schedule was written, complete",
    "the restart resumed the checkpoint's weights bit for bit",
    "every surviving rank saw the failure",
}


@slow
def test_defaults_fail_restart_resharded_and_end_like_a_run_that_never_failed(run_scenario):
    run = run_scenario("failures")
    checks = {c.name: c for c in run.summary.checks}
    assert set(checks) == CHECKS
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    figures = run.summary.figures
    # Saves after steps 3 and 6; rank 3 dies in step 8: steps 7 and 8 run again, on 3 ranks.
    assert figures["resumed_from_step"] == 6 and figures["replayed"] == [7, 8] and figures["steps_lost"] == 2
    assert [f.phase for f in run.frames] == [
        "start", "train", "train", "train", "checkpoint", "train", "train", "train", "checkpoint", "train",
        "failure", "restart", "load", "replay", "replay", "train", "checkpoint"]
    assert len(run.frames) <= 19  # with the prediction, at most 20 presses
    failure = next(f for f in run.frames if f.phase == "failure")
    assert [r.status for r in failure.ranks] == ["collective failed"] * 3 + ["died"]
    assert all(r.extra["detected_s"] > 0 for r in failure.ranks[:3])
    # Every rank of the attempt wrote its own shards: bytes measured on disk, about a quarter each.
    first_save = figures["checkpoint_bytes_per_rank"][3]
    assert len(first_save) == 4 and min(first_save) > 0.8 * max(first_save)
    # After the restart, 3 ranks hold the resharded state; rank 3 is out.
    load = next(f for f in run.frames if f.phase == "load")
    assert [r.extra["member"] for r in load.ranks] == [True, True, True, False]
    assert figures["checkpoint_bytes_per_rank"][9][3] == 0


@slow
@pytest.mark.parametrize("config", [
    dict(world_size=2, restart_world_size=4, steps=6, checkpoint_every=2, fail_at_step=5),  # grow on restart
    dict(world_size=3, restart_world_size=3, steps=5, checkpoint_every=1, fail_at_step=5, seed=3),
])
def test_other_world_sizes_and_intervals_pass(run_scenario, config):
    run = run_scenario("failures", **config)
    assert run.summary.passed, [c for c in run.summary.checks if not c.passed]
    p = failures.Params(**config)
    resume = failures.last_checkpoint(p, p.fail_at_step)
    assert run.summary.figures["replayed"] == list(range(resume + 1, p.fail_at_step + 1))


def test_the_last_checkpoint_before_a_failure_by_counting():
    for every in range(1, 6):
        for failed in range(every + 1, 21):
            p = failures.Params(steps=20, checkpoint_every=every, fail_at_step=failed)
            saved = [s for s in range(1, failed) if s % every == 0]
            assert failures.last_checkpoint(p, failed) == saved[-1]
            assert 1 <= failed - saved[-1] <= every


def test_the_checkpoint_reader_finds_a_missing_or_cut_shard(tmp_path):
    """inspect_checkpoints reads a real DCP checkpoint (one process, no_dist) and names what is missing."""
    path = tmp_path / "step-0003"
    dcp.save({"w": torch.arange(12.0).reshape(3, 4), "step": 3}, checkpoint_id=str(path), no_dist=True)
    assert failures.inspect_checkpoints(str(tmp_path))["step-0003"]["missing"] == []
    shard = next(f for f in os.listdir(path) if f.endswith(".distcp"))
    with open(path / shard, "r+b") as f:
        f.truncate(os.path.getsize(path / shard) - 8)
    assert any("lacks bytes" in m for m in failures.inspect_checkpoints(str(tmp_path))["step-0003"]["missing"])
    os.unlink(path / shard)
    os.unlink(path / ".metadata")
    assert failures.inspect_checkpoints(str(tmp_path))["step-0003"]["metadata"] is False


@pytest.mark.parametrize("values, words", [
    (dict(fail_at_step=10, steps=9), "fail_at_step must be at most steps (9)"),
    (dict(fail_at_step=3, checkpoint_every=3), "fail_at_step must be more than checkpoint_every (3)"),
    (dict(world_size=1), "greater than or equal to 2"),
    (dict(restart_world_size=9), "less than or equal to 8"),
])
def test_bounds_are_refused_naming_the_field(values, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        failures.Params(**values)
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/failures/frames", params=values)
    assert response.status_code == 422 and words in response.text and "Traceback" not in response.text
    result = CliRunner().invoke(cli, ["simulate", "failures", *sum((["--set", f"{k}={v}"] for k, v in values.items()), [])])
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
