import pytest
from pydantic import ValidationError

from simulations.scenarios import tensor_parallel

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("tp,sequence_parallel", [(2, False), (4, True)])
def test_tensor_parallel_layer_equals_the_dense_layer(run_scenario, tp, sequence_parallel):
    run = run_scenario("tensor_parallel", tp=tp, sequence_parallel=sequence_parallel, hidden=16, heads=8, seq_len=4)
    checks = {c.name: c for c in run.summary.checks}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert checks["output equals the dense layer"].measured <= 1e-5
    assert checks["parameter gradients equal the dense layer"].measured <= 1e-5
    assert checks["input gradient equals the dense layer"].measured <= 1e-5


def test_all_reduces_and_their_bytes_match_megatron(run_scenario):
    tp, s, b, h = 4, 4, 1, 16
    run = run_scenario("tensor_parallel", tp=tp, hidden=h, heads=8, seq_len=s, batch=b)
    sbh = s * b * h * 4
    for rank in range(tp):
        mine = [(f.phase, t.op, t.bytes) for f in run.frames for t in f.transfers if t.src == rank]
        assert sorted(mine) == sorted([("g_forward", "all_reduce", sbh)] * 2 + [("f_backward", "all_reduce", sbh)] * 2)
        assert all(t.group == "tp" for f in run.frames for t in f.transfers)
    assert run.summary.figures["wire_bytes_per_rank"] == [4 * 2 * (tp - 1) / tp * sbh] * tp
    # Each rank holds a quarter of every weight matrix: the partial outputs differ between ranks.
    partial = next(f for f in run.frames if f.phase == "partial")
    assert len({tuple(r.tensors[0].values) for r in partial.ranks}) == tp


def test_sequence_parallel_moves_the_same_volume(run_scenario):
    tp, s, h = 2, 4, 16
    plain = run_scenario("tensor_parallel", tp=tp, hidden=h, heads=8, seq_len=s)
    sp = run_scenario("tensor_parallel", tp=tp, hidden=h, heads=8, seq_len=s, sequence_parallel=True)
    ops = sorted(t.op for f in sp.frames if f.phase != "sp_param_grads" for t in f.transfers if t.src == 0)
    assert ops == ["all_gather"] * 4 + ["reduce_scatter"] * 4
    assert sp.summary.figures["wire_bytes_per_rank"] == plain.summary.figures["wire_bytes_per_rank"]
    assert sp.summary.figures["sp_param_grad_all_reduce_bytes"] == 4 * (4 * h + 2 * h)


def test_validation_errors_name_the_bound():
    with pytest.raises(ValidationError, match="tp"):
        tensor_parallel.Params(tp=1000)
    with pytest.raises(ValidationError, match="heads"):
        tensor_parallel.Params(tp=3, heads=8)
    with pytest.raises(ValidationError, match="seq_len"):
        tensor_parallel.Params(tp=4, seq_len=6, sequence_parallel=True)


def test_reference_shares_no_algorithm_code_with_the_run(monkeypatch):
    """Break every function the run computes with: the reference's answer must not change."""
    import torch

    p = tensor_parallel.Params(tp=2, hidden=8, heads=2, seq_len=4)
    before = tensor_parallel.reference(p)

    def broken(*args, **kwargs):
        raise AssertionError("the reference called the run's code")

    for name in ("attend", "block_forward", "enter_tp", "leave_tp", "take_shard"):
        monkeypatch.setattr(tensor_parallel, name, broken)
    after = tensor_parallel.reference(p)
    assert torch.equal(before["out"], after["out"]) and before["loss"] == after["loss"]
