import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations.scenarios import ring_attention as ra

slow = pytest.mark.slow  # the tests that run ranks


@slow
@pytest.mark.parametrize("config", [
    dict(world_size=4, seq_len=16, heads=2, head_dim=4, causal=True, zigzag=True),
    dict(world_size=3, seq_len=12, heads=1, head_dim=8, causal=False, zigzag=False, seed=5),
])
def test_output_and_gradients_equal_full_attention(run_scenario, config):
    run = run_scenario("ring_attention", **config)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["output equals full attention"].measured <= 1e-5
    assert all(checks[f"gradients equal full attention's ({g})"].measured <= 1e-5 for g in ("dq", "dk", "dv"))
    n, figures = config["world_size"], run.summary.figures
    # K+V of one block: 2 tensors of heads x (seq/N) x head_dim fp32, sent N-1 times in forward.
    block = 2 * config["heads"] * config["seq_len"] // n * config["head_dim"] * 4
    assert figures["kv_block_bytes"] == block
    assert figures["forward_bytes_per_rank"] == [(n - 1) * block] * n
    assert figures["backward_dkv_bytes_per_rank"] == [n * block] * n


@slow
def test_each_step_computes_with_the_block_from_rank_minus_step(run_scenario):
    n = 4
    run = run_scenario("ring_attention", world_size=n, seq_len=8, causal=True, zigzag=False)
    steps = [f for f in run.frames if f.phase == "forward_step"]
    assert len(steps) == n
    for s, frame in enumerate(steps):
        assert [r.extra["holds"] for r in frame.ranks] == [(r - s) % n for r in range(n)]
        # Contiguous causal: a block from a later rank is masked out entirely and skipped.
        for r, state in enumerate(frame.ranks):
            kinds = [t["kind"] for t in state.extra["tiles"]]
            assert kinds == ["diagonal" if s == 0 else ("full" if (r - s) % n < r else "skip")]
        sends = sorted((t.src, t.dst) for t in frame.transfers)
        assert sends == ([(r, (r + 1) % n) for r in range(n)] if s < n - 1 else [])
    # Rank 0 computes only its own block, the last rank every block: the imbalance zig-zag removes.
    work = run.summary.figures["scores_computed_per_rank"]
    assert work[0] < work[-1] and run.summary.figures["work_imbalance"] > 1.5


@slow
def test_zigzag_balances_causal_work(run_scenario):
    run = run_scenario("ring_attention", world_size=4, seq_len=16, causal=True, zigzag=True)
    figures = run.summary.figures
    assert len(set(figures["scores_computed_per_rank"])) == 1
    assert figures["work_imbalance"] == 1.0
    checks = {c.name: c for c in run.summary.checks}
    assert checks["work per rank and step = the layout's tile count (zig-zag: equal on every rank)"].passed
    assert checks["backward K/V bytes per rank = (N−1)·(K+V block bytes)"].passed
    # Every step after the first does exactly half of a block's tiles on every rank.
    for frame in (f for f in run.frames if f.phase == "forward_step" and f.extra["step"] > 0):
        for state in frame.ranks:
            kinds = [t["kind"] for t in state.extra["tiles"]]
            assert kinds.count("full") == 2 and kinds.count("skip") == 2
    # The next block is in flight during the compute: the transfer's span covers the compute span.
    assert figures["kv_transfer_overlapped_s"] > 0


def test_bad_seq_len_is_rejected_naming_the_constraint():
    with pytest.raises(ValueError, match=r"divisible by 2·world_size = 8 with zigzag"):
        ra.Params(world_size=4, seq_len=12, zigzag=True)
    with pytest.raises(ValueError, match=r"divisible by world_size = 4"):
        ra.Params(world_size=4, seq_len=10, zigzag=False)
    assert ra.Params(world_size=4, seq_len=12, zigzag=False).seq_len == 12


def test_api_answers_422_for_a_bad_seq_len():
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/ring_attention/frames",
                          params={"world_size": 4, "seq_len": 12, "zigzag": "true"})
    assert response.status_code == 422
    assert "divisible by 2·world_size = 8 with zigzag" in response.text
