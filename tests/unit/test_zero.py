import pytest
from pydantic import ValidationError

from simulations import formulas
from simulations.scenarios import zero

pytestmark = pytest.mark.slow


def checks_of(run):
    return {c.name: c for c in run.summary.checks}


@pytest.mark.parametrize("stage, world_size", [(0, 2), (1, 3), (2, 4), (3, 4)])
def test_every_stage_trains_exactly_like_plain_data_parallel(run_scenario, stage, world_size):
    run = run_scenario("zero", stage=stage, world_size=world_size, steps=2)
    checks = checks_of(run)
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["parameters equal plain single-process training"].measured <= 1e-6
    if stage == 3:
        assert checks["stage 3 equals torch FSDP2 (fully_shard)"].measured <= 1e-6
    else:
        assert checks["replicas identical on every rank"].measured == 0.0
    # 2Ψ for stages 0–2, 3Ψ for stage 3, counted from the traced collectives.
    psi = run.summary.figures["psi_padded"]
    assert run.summary.figures["comm_elements_per_step"] == (3 if stage == 3 else 2) * psi


def test_measured_model_states_match_the_formula(run_scenario):
    n = 4
    run = run_scenario("zero", stage=3, world_size=n, precision="bf16", width=64)
    figures = run.summary.figures
    psi = figures["psi"]
    measured = figures["model_states_measured"]
    expected = formulas.model_state_bytes(psi, "bf16", 3, n)
    assert expected == {"parameters": 2 * psi / n, "gradients": 2 * psi / n, "optimizer": 12 * psi / n}
    for role, value in expected.items():
        assert abs(measured[role] - value) <= 0.05 * value, role
    # Against DDP's 16Ψ per rank, ZeRO-3 holds 16Ψ/N.
    assert sum(measured.values()) < 1.05 * sum(figures["model_states_ddp_formula"].values()) / n
    assert checks_of(run)["model-state bytes per rank match REFERENCE.md"].passed


def test_stage3_gathers_before_use_and_frees_after(run_scenario):
    n = 2
    run = run_scenario("zero", stage=3, world_size=n, depth=1)
    phases = [f.phase for f in run.frames]
    units = 2
    assert phases.count("all_gather") == 2 * units  # forward and again backward
    assert phases.count("reduce_scatter") == units
    shard_bytes = {}
    for frame in run.frames:
        gathered = [r.memory.get("gathered") for r in frame.ranks]
        if frame.phase == "all_gather":
            assert all(g > 0 for g in gathered)
            assert sorted(t.src for t in frame.transfers) == list(range(n))
            assert all(t.op == "all_gather" and t.bytes > 0 for t in frame.transfers)
            shard_bytes.setdefault(frame.extra["unit"], frame.transfers[0].bytes)
        if frame.phase == "free":
            assert gathered == [0] * n  # the buffer really went: its storage is empty
        if frame.phase == "reduce_scatter":
            assert all(t.op == "reduce_scatter" for t in frame.transfers)
            # reduce-scatter takes the whole gradient: N times the shard that was all-gathered
            assert frame.transfers[0].bytes == n * shard_bytes[frame.extra["unit"]]
    assert checks_of(run)["gathered parameters held only while a unit runs"].passed  # every frame, every rank
    # The shards each rank holds are labelled (r, N).
    setup = run.frames[0]
    assert {t.shard for t in setup.ranks[1].tensors if t.role == "parameters"} == {(1, n)}


def test_offload_checkpointing_and_accumulation(run_scenario):
    g, n = 2, 4
    run = run_scenario("zero", stage=2, world_size=n, cpu_offload=True, activation_checkpointing=True,
                       grad_accumulation=g)
    checks = checks_of(run)
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    figures = run.summary.figures
    assert figures["model_states_measured"]["optimizer"] == 0  # nothing of Adam on the device
    assert figures["host_bytes"]["optimizer"] > 0
    # ZeRO-2 reduce-scatters after every micro-batch: (g + 1)Ψ instead of 2Ψ.
    assert figures["comm_elements_per_step"] == (g + 1) * figures["psi_padded"]
    assert figures["activations_measured"] == figures["activations_checkpointed"] < figures["activations_plain"]
    assert run.summary.timings["recompute_s"] > 0
    assert "recompute" in {s.name for f in run.frames for s in f.spans}


@pytest.mark.parametrize("bad, field", [({"stage": 7}, "stage"), ({"world_size": 0}, "world_size"),
                                        ({"world_size": 9}, "world_size"), ({"precision": "fp8"}, "precision"),
                                        ({"grad_accumulation": 0}, "grad_accumulation"), ({"bogus": 1}, "bogus")])
def test_invalid_params_name_the_field(bad, field):
    with pytest.raises(ValidationError) as error:
        zero.Params(**bad)
    assert error.value.errors()[0]["loc"] == (field,)
    if field == "stage":
        assert "less than or equal to 3" in str(error.value)


@pytest.mark.parametrize("params", [{"stage": 1, "world_size": 4}, {"stage": 3, "world_size": 2, "precision": "bf16"}])
def test_the_rank_panels_list_the_optimizer_states_the_memory_bar_counts(run_scenario, params):
    """zero1-live once listed Adam's momentum alone (1.29 kB) beside a bar of both states (2.57 kB): on every
    frame that shows the whole model, a rank's optimizer blocks add up to its bar's optimizer bytes."""
    run = run_scenario("zero", **params)
    whole_model = [f for f in run.frames if f.extra.get("unit") is None and f.phase != "done"]
    assert whole_model
    for frame in whole_model:
        for rank in frame.ranks:
            listed = sum(t.bytes for t in rank.tensors if t.role == "optimizer")
            assert listed == rank.memory["optimizer"] > 0, (frame.phase, rank.rank)
