import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations.scenarios import expert_parallel as ep

slow = pytest.mark.slow  # the tests that run ranks


@slow
@pytest.mark.parametrize("config", [
    dict(world_size=4, experts=8, top_k=2, capacity_factor=1.0, tokens=8),  # tight capacity: drops happen
    dict(world_size=3, experts=6, top_k=1, capacity_factor=2.0, tokens=5, hidden=6, seed=3),  # Switch-style top-1
])
def test_output_equals_single_process_moe_layer(run_scenario, config):
    run = run_scenario("expert_parallel", **config)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["output equals the single-process MoE layer"].measured <= 1e-5
    figures = run.summary.figures
    p = ep.Params(**config)
    # Every kept assignment was processed by exactly one expert.
    assert sum(figures["tokens_per_expert"]) == figures["assignments"] - figures["dropped_assignments"]
    assert all(c <= p.world_size * ep.capacity(p) for c in figures["tokens_per_expert"])
    if config["capacity_factor"] == 1.0:
        assert figures["dropped_assignments"] > 0  # the config is meant to show drops


@slow
def test_no_drops_with_generous_capacity(run_scenario):
    run = run_scenario("expert_parallel", world_size=2, experts=4, top_k=2, capacity_factor=4.0, tokens=6)
    assert run.summary.passed
    assert run.summary.figures["dropped_assignments"] == 0
    assert sum(run.summary.figures["tokens_per_expert"]) == 2 * 6 * 2


@slow
def test_frames_show_routes_counts_and_all_to_all_bytes(run_scenario):
    n, tokens = 4, 8
    run = run_scenario("expert_parallel", world_size=n, experts=8, top_k=2, capacity_factor=1.0, tokens=tokens)
    phases = [f.phase for f in run.frames]
    assert phases == ["tokens", "route", "counts", "dispatch", "experts", "combine", "output"]
    route = run.frames[1]
    routes = [t for r in route.ranks for t in r.extra["routes"]]
    assert sorted(t["token"] for t in routes) == list(range(n * tokens))
    dropped = sum(not k for t in routes for k in t["kept"])
    assert dropped == run.summary.figures["dropped_assignments"]
    dispatch = run.frames[3]
    # What rank i sends to rank j is what rank j receives from rank i.
    send = [r.extra["send_bytes"] for r in dispatch.ranks]
    recv = [r.extra["recv_bytes"] for r in dispatch.ranks]
    assert all(send[i][j] == recv[j][i] for i in range(n) for j in range(n))
    assert [t.op for t in dispatch.transfers] == ["all_to_all"] * n
    assert [t.bytes for t in dispatch.transfers] == [sum(s) for s in send]
    # Off-rank bytes are what the splits say, next to the uniform-routing formula (N-1)/N * S.
    figures = run.summary.figures
    assert figures["off_rank_bytes_per_rank"] == [
        sum(send[i]) - send[i][i] + sum(recv[i]) - recv[i][i] for i in range(n)]
    experts_frame = run.frames[4]
    assert [c for r in experts_frame.ranks for c in r.extra["tokens_per_expert"]] == figures["tokens_per_expert"]


def test_validation_names_the_constraint():
    with pytest.raises(ValueError, match="top_k .* must be at most experts"):
        ep.Params(world_size=2, experts=4, top_k=5)
    with pytest.raises(ValueError, match="multiple of world_size"):
        ep.Params(world_size=4, experts=6)
    with pytest.raises(ValueError, match="world_size"):
        ep.Params(world_size=9, experts=9)


def test_api_answers_422_naming_the_constraint():
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/expert_parallel/frames", params={"experts": 4, "top_k": 5, "world_size": 2})
    assert response.status_code == 422
    assert "top_k (5) must be at most experts (4)" in response.text
    response = client.get("/api/simulations/expert_parallel/frames", params={"experts": 6, "world_size": 4})
    assert response.status_code == 422 and "multiple of world_size" in response.text


def test_reference_routes_without_the_runs_router(monkeypatch):
    import torch

    p = ep.Params(world_size=4, experts=8, top_k=2, capacity_factor=1.0, tokens=8)
    before = ep.reference(p)

    def broken(*args, **kwargs):
        raise AssertionError("the reference called the run's code")

    for name in ("route", "capacity", "expert_mlp"):
        monkeypatch.setattr(ep, name, broken)
    after = ep.reference(p)
    assert torch.equal(before["y"], after["y"]) and torch.equal(before["kept"], after["kept"])
    assert (~after["kept"]).sum() > 0  # this configuration drops: the capacity rule is exercised
    # Every assignment is counted once: kept ones arrive at an expert, on some rank.
    assert sum(after["counts"]) == int(after["kept"].sum()) == sum(map(sum, after["sends"]))
