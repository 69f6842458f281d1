import pytest

from simulations.scenarios import ddp

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
def test_ddp_matches_single_process_reference(run_scenario, world_size):
    run = run_scenario("ddp", world_size=world_size, steps=2)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["gradients equal the single-process full-batch gradients"].measured <= 1e-6
    assert checks["weights identical on every rank"].measured == 0.0


def test_ring_moves_exactly_two_n_minus_one_over_n_of_the_gradients(run_scenario):
    run = run_scenario("ddp", world_size=4, width=8, depth=2)
    grad_bytes = run.summary.figures["gradient_bytes"]
    sent = run.summary.figures["bytes_sent_per_rank"]
    assert sum(sent) == 2 * 3 * grad_bytes  # over all ranks, exact whatever the chunking
    assert run.summary.figures["buckets"] >= 2  # small buckets: the hook fires more than once


def test_frames_tell_the_ring_story_in_order(run_scenario):
    n = 4
    run = run_scenario("ddp", world_size=n, steps=1)
    phases = [f.phase for f in run.frames]
    assert phases[0] == "shard" and phases[-1] == "identical"
    buckets = run.summary.figures["buckets"]
    assert phases.count("bucket_ready") == buckets
    assert phases.count("reduce_scatter") == phases.count("all_gather") == buckets * (n - 1)
    # Every ring step moves one chunk from each rank to its right neighbour, never to "GPU 0" alone.
    for frame in run.frames:
        if frame.phase in ("reduce_scatter", "all_gather"):
            assert sorted((t.src, t.dst) for t in frame.transfers) == [(r, (r + 1) % n) for r in range(n)]
            assert all(t.bytes > 0 and t.values for t in frame.transfers)
    assert [f.index for f in run.frames] == list(range(len(run.frames)))


def test_memory_is_measured_by_role(run_scenario):
    run = run_scenario("ddp", world_size=2, width=16, depth=2)
    forward = next(f for f in run.frames if f.phase == "forward")
    memory = forward.ranks[0].memory
    params = 4 * (4 * 16 + 16 + 16 * 16 + 16 + 16 * 2 + 2)
    assert memory["parameters"] == params
    assert memory["activations"] > 0
    optimizer_frame = next(f for f in run.frames if f.phase == "optimizer")
    assert optimizer_frame.ranks[0].memory["optimizer"] == params  # SGD momentum: one buffer per parameter


def test_params_bounds():
    with pytest.raises(ValueError, match="world_size"):
        ddp.Params(world_size=0)
    with pytest.raises(ValueError, match="world_size"):
        ddp.Params(world_size=9)
