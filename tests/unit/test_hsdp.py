"""HSDP: a replicas × shards mesh trains the same model as one process, with exact bytes per mesh dimension."""

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations.frames import Frame, RankState, Transfer
from simulations.scenarios import hsdp

slow = pytest.mark.slow  # the tests that run ranks


def padded_model_bytes(p: hsdp.Params) -> int:
    """The MLP 4 -> width (-> width)* -> 2, each Linear's weight and bias padded to a multiple of shards, fp32."""
    sizes = [4, *[p.width] * p.depth, 2]
    units = [fan_in * fan_out + fan_out for fan_in, fan_out in zip(sizes, sizes[1:])]
    return 4 * sum(-(-u // p.shards) * p.shards for u in units)


@slow
@pytest.mark.parametrize("config", [
    dict(replicas=2, shards=2),
    dict(replicas=2, shards=4, width=8, depth=1, steps=2, seed=7),
    dict(replicas=4, shards=2, micro_batch=3),
    dict(replicas=3, shards=1),  # plain DDP: nothing to shard
])
def test_hsdp_trains_like_one_process_and_sends_the_formula_bytes(run_scenario, config):
    run = run_scenario("hsdp", **config)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["parameters after the step(s) equal plain single-process training"].measured <= 1e-6
    assert checks["equals torch HSDP (fully_shard on the 2-D mesh)"].measured <= 1e-6
    p = hsdp.Params(**config)
    r, s, model = p.replicas, p.shards, padded_model_bytes(p)
    sent = run.summary.figures["bytes_per_rank_per_step"]
    # Inside a group: gather (forward), gather (backward), reduce-scatter: 3·(S−1)/S of the model.
    assert sent["shard"] == [3 * (s - 1) * model / s] * (r * s)
    # Across groups: a ring all-reduce of this rank's 1/S of the gradients.
    assert sent["replicate"] == [2 * (r - 1) / r * model / s] * (r * s)


@slow
def test_collectives_run_on_their_mesh_dimension(run_scenario):
    r, s = 2, 4
    run = run_scenario("hsdp", replicas=r, shards=s)
    ops = {}
    for frame in run.frames:
        for t in frame.transfers:
            ops.setdefault(t.group, set()).add(t.op)
    assert ops == {"shard": {"all_gather", "reduce_scatter"}, "replicate": {"all_reduce"}}
    # Rank = replica·shards + shard: the mesh view's coordinates say so.
    assert [state.extra["coord"] for state in run.frames[0].ranks] == \
        [{"dp": k // s, "pp": 0, "tp": k % s} for k in range(r * s)]
    # Each all-reduce carries one gradient shard: 1/S of the unit's padded gradient.
    reduce = next(f for f in run.frames if f.phase == "reduce_scatter")
    all_reduce = run.frames[reduce.index + 1]
    assert all_reduce.phase == "all_reduce"
    assert [t.bytes * s for t in all_reduce.transfers] == [t.bytes for t in reduce.transfers]
    # Between nodes HSDP sends 2(R−1)/R·Ψ/S: under 1/S of the 2(W−1)/W·Ψ of DDP over every rank.
    figures = run.summary.figures
    assert figures["cross_node_bytes_hsdp"] < figures["cross_node_bytes_ddp_formula"] / s * 1.01


def _perfect(p: hsdp.Params):
    """What a correct run would hand summarize: the reference's shards on every rank, and its collectives."""
    ref = hsdp.reference(p)
    units = [layer for layer in hsdp.linears(hsdp.mlp(p))]
    world = p.replicas * p.shards
    params, grads = [], []
    offset = 0
    for layer in units:
        numel = layer.weight.numel() + layer.bias.numel()
        padded = -(-numel // p.shards) * p.shards
        for flat_all, out in ((ref["params"], params), (ref["grads"], grads)):
            piece = torch.nn.functional.pad(flat_all[offset: offset + numel].float(), (0, padded - numel))
            out.append(piece.chunk(p.shards))
        offset += numel
    results = [{"coord": divmod(k, p.shards), "loss": 0.0,
                "shards": [u[k % p.shards].clone() for u in params], "grads": [u[k % p.shards].clone() for u in grads],
                "fsdp2": ref["params"].clone()} for k in range(world)]
    model = padded_model_bytes(p)
    transfers = [Transfer(op=op, src=k, bytes=b, group=g) for k in range(world) for op, b, g in (
        ("all_gather", model // p.shards, "shard"), ("all_gather", model // p.shards, "shard"),
        ("reduce_scatter", model, "shard"), ("all_reduce", model // p.shards, "replicate"))]
    frames = [Frame(index=0, phase="step", caption="", ranks=[RankState(rank=k) for k in range(world)],
                    transfers=transfers)]
    return results, frames


def test_each_check_fails_when_its_quantity_is_wrong():
    p = hsdp.Params()
    results, frames = _perfect(p)
    assert hsdp.summarize(p, results, frames).passed, [c for c in hsdp.summarize(p, results, frames).checks if not c.passed]
    # Replica 1 never all-reduced: its gradient is its own group's, not the mean over every rank.
    for k in (2, 3):
        results[k]["grads"][0][0] += 1e-3
        results[k]["shards"][0][0] -= 1e-4
    failed = {c.name for c in hsdp.summarize(p, results, frames).checks if not c.passed}
    assert failed == {"gradients equal plain single-process training", "replicas identical",
                      "parameters after the step(s) equal plain single-process training",
                      "equals torch HSDP (fully_shard on the 2-D mesh)"}
    results, frames = _perfect(p)
    frames[0].transfers = [t for t in frames[0].transfers if not (t.src == 0 and t.op == "all_reduce")]
    failed = {c.name for c in hsdp.summarize(p, results, frames).checks if not c.passed}
    assert failed == {"replicate bytes sent per rank per step = formula"}


def test_params_name_the_constraint():
    with pytest.raises(ValueError, match=r"replicas·shards = 4·4 = 16 must be between 2 and 8"):
        hsdp.Params(replicas=4, shards=4)
    with pytest.raises(ValueError, match=r"= 1 must be between 2 and 8"):
        hsdp.Params(replicas=1, shards=1)


@pytest.mark.parametrize("query, words", [
    ({"replicas": 4, "shards": 4}, "replicas·shards = 4·4 = 16 must be between 2 and 8"),
    ({"shards": 0}, "greater than or equal to 1"),
    ({"width": 1000}, "less than or equal to 128"),
])
def test_api_answers_422_naming_the_field_and_bound(query, words):
    client = TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)
    response = client.get("/api/simulations/hsdp/frames", params=query)
    assert response.status_code == 422
    assert words in response.text and "Traceback" not in response.text
