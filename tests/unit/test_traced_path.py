"""What tracing costs a rank on its critical path, and that the parent still gets the same frames.

A traced send records a one-op snapshot of its payload and a list; the rounding into values and the
Transfer and Span dicts are made later (the values in one pass when the batch leaves the rank, the dicts
by the parent). A tensor view unchanged since the rank's previous fragment is validated once."""

import struct

import pytest
import torch

from simulations import comm, trace
from simulations.frames import Frame, TensorView
from simulations.runtime.worker import FragmentBatcher


def _bits(values):
    return [struct.pack("d", v) for v in values]


@pytest.fixture
def rounds(monkeypatch):
    """Counts round() calls made by simulations.trace and simulations.comm (module globals shadow the builtin)."""
    count = [0]

    def counted(*args):
        count[0] += 1
        return round(*args)

    monkeypatch.setattr(trace, "round", counted, raising=False)
    monkeypatch.setattr(comm, "round", counted, raising=False)
    return count


def test_a_traced_send_rounds_nothing_and_builds_no_dict_on_the_ops_path(rounds):
    tracer = trace.Tracer(rank=2, t0=0.0, sink=None)
    payload = torch.tensor([0.1234567, -2.5, 0.0, 3.0])
    comm._record_send(tracer, payload, 3, None, 1, "bucket0", comm._values(tracer, payload, True), 0.5)
    payload.add_(1.0)  # the caller may reuse its buffer once the send returned
    assert rounds[0] == 0
    [record] = tracer._transfers
    assert isinstance(record, list) and tracer._spans == [record]  # one record stands for the transfer and its span
    assert record[trace._VALUES].tolist() == torch.tensor([0.1234567, -2.5, 0.0, 3.0]).tolist()  # a snapshot


def test_the_parent_gets_the_transfer_span_and_values_the_rank_used_to_send():
    sent = []
    batcher = FragmentBatcher(sent.append, interval_s=3600)
    tracer = trace.Tracer(rank=1, t0=0.0, sink=batcher)
    payload = torch.tensor([[0.1234567, -1e-9], [2.0 ** -7, 7.0]], dtype=torch.bfloat16)
    with tracer.span("forward", step=0):
        pass
    tracer.transfer("send", 8, dst=2, chunk=0, tensor="x", values=trace.snapshot(payload), start=1.0, end=2.0)
    tracer.transfer("all_reduce", 16, group="dp", start=2.0, end=3.0)
    tracer.frame("p", "caption")
    [[fragment]] = sent  # the first fragment leaves at once, its values read on the way out
    decoded = trace.FragmentDecoder().decode(fragment)
    assert decoded["transfers"] == [
        {"op": "send", "src": 1, "dst": 2, "bytes": 8, "group": "world", "chunk": 0, "tensor": "x",
         "values": trace.values_of(payload), "start": 1.0, "end": 2.0},
        {"op": "all_reduce", "src": 1, "dst": None, "bytes": 16, "group": "dp", "chunk": None, "tensor": None,
         "values": None, "start": 2.0, "end": 3.0}]
    assert _bits(decoded["transfers"][0]["values"]) == _bits(trace.values_of(payload))
    assert [s["name"] for s in decoded["spans"]] == ["forward", "send→2", "all_reduce"]
    assert decoded["spans"][1] == {"rank": 1, "name": "send→2", "kind": "comm", "start": 1.0, "end": 2.0,
                                   "args": {"bytes": 8, "group": "world"}}
    Frame.model_validate(trace.merge_fragments([decoded]).model_dump())


def test_values_read_in_one_pass_are_round_to_six_places_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(20000, generator=g) * scale for scale in (1e-6, 1e-3, 1.0, 1e3, 1e9)]
    k = torch.arange(1, 200001, dtype=torch.float64)
    halfway = ((2 * k + 1) / 2e6).float()  # float32 values whose product with 10⁶ ends in exactly .5
    parts.append(halfway[halfway.double() * 1e6 % 1 == 0.5])
    assert parts[-1].numel() > 5
    parts.append(torch.tensor([0.0, -0.0, -1e-9, 4.9e-7, -5e-7, float("inf"), -float("inf"), 3.4e38, 1.4e-45]))
    for part in parts:
        chunks = part.split(64)
        fragment = {"transfers": [[None] * 6 + [trace.snapshot(c)] + [0.0, 0.0] for c in chunks]}
        trace.resolve_values([fragment])
        got = [v for record in fragment["transfers"] for v in record[trace._VALUES]]
        assert _bits(got) == _bits([v for c in chunks for v in trace.values_of(c)])


def test_a_view_unchanged_since_the_ranks_previous_fragment_is_validated_once(monkeypatch):
    validated = []
    original = TensorView.model_validate.__func__

    def counting(cls, obj, *args, **kwargs):
        validated.append(obj["name"])
        return original(cls, obj, *args, **kwargs)

    monkeypatch.setattr(TensorView, "model_validate", classmethod(counting))
    decoder = trace.FragmentDecoder()

    def fragment(index, chunks):
        views = [trace.tensor_view(f"c{i}", "gradients", c) for i, c in enumerate(chunks)]
        state = {"rank": 0, "tensors": views, "memory": {}, "status": None, "extra": {}}
        return decoder.decode({"index": index, "rank": 0, "phase": "p", "caption": "c", "state": state,
                               "transfers": [], "spans": [], "extra": {}})

    chunks = [torch.tensor([1.0, 0.0]), torch.tensor([2.0, 0.0]), torch.tensor([3.0])]
    first = fragment(0, chunks)
    second = fragment(1, [chunks[0], torch.tensor([2.0, 5.0]), chunks[2]])
    assert validated == ["c0", "c1", "c2", "c1"]
    assert second["state"]["tensors"][0] is first["state"]["tensors"][0]
    # -0.0 == 0.0, but the frame shows "-0.0": a zero that changed its sign is a changed view
    third = fragment(2, [torch.tensor([1.0, -0.0]), torch.tensor([2.0, 5.0]), chunks[2]])
    assert validated[4:] == ["c0"]
    assert "-0.0" in third["state"]["tensors"][0].model_dump_json()
