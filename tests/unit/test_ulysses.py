"""Ulysses (all-to-all) and all-gather K/V context parallelism: equal to full attention, exact bytes."""

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations import formulas
from simulations.frames import Frame, RankState, Transfer
from simulations.scenarios import ulysses as ul

slow = pytest.mark.slow  # the tests that run ranks


def _checks(run):
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    return checks


@slow
@pytest.mark.parametrize("config", [
    dict(world_size=4, seq_len=16, heads=4, head_dim=4, causal=True),
    dict(world_size=2, seq_len=6, heads=6, head_dim=8, causal=False, seed=3),
    dict(world_size=8, seq_len=32, heads=8, head_dim=2, causal=True, seed=1),
])
def test_ulysses_equals_full_attention_and_sends_the_formula_bytes(run_scenario, config):
    run = run_scenario("ulysses", **config)
    checks = _checks(run)
    assert checks["output equals full attention (SDPA)"].measured <= 1e-5
    assert all(checks[f"gradients equal full attention's (SDPA autograd, {g})"].measured <= 1e-5 for g in ("dq", "dk", "dv"))
    n, h, length, d = config["world_size"], config["heads"], config["seq_len"], config["head_dim"]
    block = h * (length // n) * d * 4  # one of Q, K, V, O: this rank's tokens, every head, fp32
    figures = run.summary.figures
    # Forward: Q, K, V out and O back; backward: dO out and dQ, dK, dV back. Each all-to-all keeps 1/N.
    assert figures["collective_buffers_per_rank"] == {"all_to_all": [8 * block] * n}
    assert figures["forward_bytes_per_rank"] == [3 * block * (n - 1) / n + block * (n - 1) / n] * n
    assert figures["backward_bytes_per_rank"] == figures["forward_bytes_per_rank"]


@slow
def test_the_all_to_all_trades_a_sequence_shard_for_a_head_shard(run_scenario):
    n, h, length, d = 4, 4, 16, 4  # 64 values per tensor: small enough to travel with the frames
    run = run_scenario("ulysses", world_size=n, heads=h, seq_len=length, head_dim=d)
    by_phase = {f.phase: f for f in run.frames}
    for state in by_phase["shard"].ranks:  # my tokens, every head
        assert [t.shape for t in state.tensors] == [[h, length // n, d]] * 3
    for r, state in enumerate(by_phase["qkv_to_heads"].ranks):  # every token, my heads
        assert [t.shape for t in state.tensors] == [[h // n, length, d]] * 3
        assert state.extra["heads"] == [r * h // n, (r + 1) * h // n]
    # The values moved too: rank 1 now holds head 1's Q for every token, as the full Q has it.
    q = ul.make_inputs(ul.Params(world_size=n, heads=h, seq_len=length, head_dim=d))["q"]
    held = torch.tensor(by_phase["qkv_to_heads"].ranks[1].tensors[0].values).view(h // n, length, d)
    assert torch.allclose(held, q[1:2], atol=1e-6)
    assert [t.op for t in by_phase["qkv_to_heads"].transfers] == ["all_to_all"] * n


@slow
@pytest.mark.parametrize("causal", [True, False])
def test_all_gather_kv_equals_full_attention_and_its_bytes_do_not_shrink(run_scenario, causal):
    n, h, length, d = 4, 3, 16, 4  # heads need not divide N when K/V are gathered whole
    run = run_scenario("ulysses", world_size=n, method="all_gather_kv", heads=h, seq_len=length, head_dim=d,
                       causal=causal)
    _checks(run)
    block = h * (length // n) * d * 4
    figures = run.summary.figures
    assert figures["collective_buffers_per_rank"] == {"all_gather": [2 * block] * n, "reduce_scatter": [2 * block * n] * n}
    assert figures["forward_bytes_per_rank"] == [(n - 1) * 2 * block] * n  # K and V of every other rank
    assert figures["backward_bytes_per_rank"] == [(n - 1) * 2 * block] * n


def test_bytes_per_rank_against_n_ring_and_all_gather_flat_ulysses_falls():
    """A fixed sequence: the all-to-all's bytes per rank fall as 1/N, the ring's and all-gather's do not."""
    def total(method, n):
        return formulas.context_parallel_bytes(method, seq=64, heads=8, head_dim=16, ranks=n)["total"]
    kv_whole = 2 * 8 * 64 * 16 * 4  # K and V of the whole sequence
    for n in (2, 4, 8):
        assert total("all_gather_kv", n) == pytest.approx(2 * (n - 1) / n * kv_whole)
        assert total("all_to_all", n) == pytest.approx(2 * (n - 1) / n * 4 * kv_whole / 2 / n)
        assert total("ring", n) == pytest.approx((n - 1) / n * kv_whole * 2 + kv_whole)
    assert total("all_to_all", 8) < total("all_to_all", 4) < total("all_to_all", 2)  # (N−1)/N²: 1/4, 3/16, 7/64
    assert total("all_to_all", 8) < total("all_to_all", 2) / 2
    assert total("all_gather_kv", 8) > total("all_gather_kv", 2)


def _perfect(p: ul.Params):
    """What a correct run would hand summarize: the reference's rows per rank, and its collectives."""
    ref, n = ul.reference(p), p.world_size
    results = [{name: ref[name].chunk(n, dim=1)[r].clone() for name in ("out", "dq", "dk", "dv")} for r in range(n)]
    block = p.heads * (p.seq_len // n) * p.head_dim * 4
    frames = [Frame(index=i, phase=phase, caption="", ranks=[RankState(rank=r) for r in range(n)],
                    transfers=[Transfer(op="all_to_all", src=r, bytes=b) for r in range(n)])
              for i, (phase, b) in enumerate([("qkv_to_heads", 3 * block), ("out_to_seq", block),
                                               ("grad_to_heads", block), ("grads_home", 3 * block)])]
    return results, frames


def test_each_check_fails_when_its_quantity_is_wrong():
    p = ul.Params()
    results, frames = _perfect(p)
    assert ul.summarize(p, results, frames).passed
    results[2]["out"][1, 0, 0] += 1e-4  # one output value off by far more than fp32 round-off
    results[0]["dk"][0, 3, 1] -= 1e-4
    failed = {c.name for c in ul.summarize(p, results, frames).checks if not c.passed}
    assert failed == {"output equals full attention (SDPA)", "gradients equal full attention's (SDPA autograd, dk)"}
    results, frames = _perfect(p)
    frames[2].transfers[1].bytes *= 2  # rank 1 sends dO's whole buffer twice
    failed = {c.name for c in ul.summarize(p, results, frames).checks if not c.passed}
    assert failed == {"buffers handed to the collectives per rank = the configuration's",
                      "backward bytes sent per rank = formula"}


def test_params_name_the_constraint():
    with pytest.raises(ValueError, match=r"heads \(6\) must be divisible by world_size \(4\) with all_to_all"):
        ul.Params(world_size=4, heads=6)
    with pytest.raises(ValueError, match=r"seq_len \(10\) must be divisible by world_size \(4\)"):
        ul.Params(world_size=4, seq_len=10)
    assert ul.Params(world_size=4, heads=6, method="all_gather_kv").heads == 6


@pytest.mark.parametrize("query, words", [
    ({"world_size": 4, "heads": 6}, "heads (6) must be divisible by world_size (4) with all_to_all"),
    ({"world_size": 9}, "less than or equal to 8"),
    ({"method": "ring"}, "'all_to_all' or 'all_gather_kv'"),
])
def test_api_answers_422_naming_the_field_and_bound(query, words):
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/ulysses/frames", params=query)
    assert response.status_code == 422
    assert words in response.text and "Traceback" not in response.text
