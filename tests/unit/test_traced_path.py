"""What tracing costs a rank on its critical path, and that the parent still gets the same frames.

A traced send keeps a copy of its payload and records a list; a ring step's views are one copy of the bucket.
When the batch leaves the rank, every copy's values are read in one vectorized pass (no round() per
element), the Transfer, Span and view dicts are made, and the fragment's parts written as JSON. The parent splices the ranks' parts into each frame's JSON without decoding or
validating them (Run.frames validates on read): the same bytes as the validated model's. An untraced run
does none of the traced work."""

import json
import struct
import subprocess
import sys
import textwrap

import pytest
import torch

from simulations import comm, trace
from simulations.frames import Frame
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


def test_a_traced_send_keeps_a_copy_of_its_payload_and_builds_no_dict_on_the_ops_path(rounds):
    made = []
    tracer = trace.Tracer(rank=2, t0=0.0, sink=made.append)
    payload = torch.tensor([0.1234567, -2.5, 0.0, 3.0])
    comm._record_send(tracer, payload, 3, None, 1, "bucket0", comm._values(tracer, payload, True), 0.5, 0.75)
    payload.add_(1.0)  # the caller may reuse its buffer once the send returned
    [record] = tracer._transfers
    assert isinstance(record, list) and tracer._spans == [record]  # one record stands for the transfer and its span
    assert isinstance(record[trace._VALUES], trace.Snapshot) and record[-2:] == [0.5, 0.75]  # not read yet
    tracer.frame("p", "caption")
    trace.seal(made)  # read when the fragment leaves the rank: the payload as it was sent
    assert record[trace._VALUES] == [0.123457, -2.5, 0.0, 3.0]
    assert rounds[0] == 0


def test_the_parent_gets_the_transfer_span_and_values_the_rank_used_to_send():
    sent, made = [], []
    batcher = FragmentBatcher(lambda batch: sent.append(trace.seal(batch)), interval_s=3600)  # as the worker's
    tracer = trace.Tracer(rank=0, t0=0.0, sink=lambda fragment: (made.append(fragment), batcher(fragment)))
    payload = torch.tensor([[0.1234567, -1e-9], [2.0 ** -7, 7.0]], dtype=torch.bfloat16)
    with tracer.span("forward", step=0):
        pass
    tracer.transfer("send", 8, dst=2, chunk=0, tensor="x", values=trace.values_of(payload), start=1.0, end=2.0)
    tracer.transfer("all_reduce", 16, group="dp", start=2.0, end=3.0)
    tracer.frame("p", "caption")
    [[sealed]] = sent  # the first fragment leaves at once, as JSON, its values read on the way out
    assert all(isinstance(sealed[part], bytes) for part in ("head", "state", "transfers", "spans", "extra"))
    decoded = json.loads(trace.encode_frame([sealed]))
    assert decoded["transfers"] == [
        {"op": "send", "src": 0, "dst": 2, "bytes": 8, "group": "world", "chunk": 0, "tensor": "x",
         "values": trace.values_of(payload), "start": 1.0, "end": 2.0},
        {"op": "all_reduce", "src": 0, "dst": None, "bytes": 16, "group": "dp", "chunk": None, "tensor": None,
         "values": None, "start": 2.0, "end": 3.0}]
    assert _bits(decoded["transfers"][0]["values"]) == _bits(trace.values_of(payload))
    assert [s["name"] for s in decoded["spans"]] == ["forward", "send→2", "all_reduce"]
    assert decoded["spans"][1] == {"rank": 0, "name": "send→2", "kind": "comm", "start": 1.0, "end": 2.0,
                                   "step": None, "args": {"bytes": 8, "group": "world"}}
    assert trace.encode_frame([sealed]) == trace.merge_fragments(made).model_dump_json().encode()


def _fragment(rank: int, transfers: bool, spans: bool, index: int = 3) -> dict:
    tracer = trace.Tracer(rank=rank, t0=0.0, sink=None)
    made = []
    tracer.sink, tracer.index = made.append, index
    if spans:
        with tracer.span("forward", step=0, layer=rank):
            pass
    if transfers:
        tracer.transfer("send", 4 * (rank + 1), dst=(rank + 1) % 3, chunk=rank, tensor="g",
                        values=trace.values_of(torch.arange(rank + 1.0)), start=0.5, end=0.75)
    tracer.frame("ring", f"said by rank {rank}", tensors=[trace.tensor_view("w", "parameters", torch.ones(2) * rank)],
                 memory={"parameters": 8 * rank}, status=f"rank {rank}", extra={"who": rank},
                 rank_extra={"parts": [rank]})
    return made[0]


def test_ranks_sealed_parts_splice_into_the_validated_frames_json():
    """Ranks with and without transfers or spans, in any order: the spliced JSON is the model's, rank 0 speaking."""
    for shapes in [((True, True), (False, False), (True, False)), ((False, False),) * 3, ((False, True),) * 2]:
        fragments = [_fragment(rank, *shape) for rank, shape in enumerate(shapes)]
        sealed = [s for f in reversed(fragments) for s in trace.seal([f])]  # arrival order is not rank order
        assert trace.encode_frame(sealed) == trace.merge_fragments(fragments).model_dump_json().encode()


def test_only_rank_0_writes_the_caption_and_a_frame_without_it_says_so():
    fragments = [_fragment(rank, True, True) for rank in range(3)]
    sealed = trace.seal(fragments)
    assert ["head" in s for s in sealed] == [True, False, False]
    with pytest.raises(ValueError, match="no part of rank 0"):
        trace.encode_frame(sealed[1:])


def test_values_read_in_one_pass_are_round_to_six_places_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(20000, generator=g) * scale for scale in (1e-6, 1e-3, 1.0, 1e3, 1e9)]
    k = torch.arange(1, 200001, dtype=torch.float64)
    halfway = ((2 * k + 1) / 2e6).float()  # float32 values whose product with 10⁶ ends in exactly .5
    parts.append(halfway[halfway.double() * 1e6 % 1 == 0.5])
    assert parts[-1].numel() > 5
    parts.append(torch.tensor([0.0, -0.0, -1e-9, 4.9e-7, -5e-7, float("inf"), -float("inf"), 3.4e38, 1.4e-45]))
    parts.append(torch.tensor([0.1234567, -1e-9, 2.0 ** -7, 7.0], dtype=torch.bfloat16))  # read as fp32
    for part in parts:
        for chunk in part.split(64):
            expected = [round(v, 6) for v in chunk.float().tolist()]  # Python's own, one value at a time
            assert _bits(trace.values_of(chunk)) == _bits(expected)


def _read(views: list) -> list[dict]:
    """Views as a sealed fragment carries them."""
    fragment = {"state": {"tensors": views}, "transfers": []}
    trace.read_fragments([fragment])
    return fragment["state"]["tensors"]


def test_snapshots_keep_any_tensors_values_across_buffers(monkeypatch):
    """Transposed, bf16, requiring grad, empty: each snapshot reads back as the tensor was, also when the
    buffers fill up between the snapshots of one batch."""
    monkeypatch.setattr(trace._Buffers, "SIZE", 10)
    monkeypatch.setattr(trace, "_buffers", trace._Buffers())
    g = torch.Generator().manual_seed(1)
    tensors = [torch.randn(3, 4, generator=g).t(), torch.randn(5, generator=g).bfloat16(),
               torch.randn(2, 3, generator=g, requires_grad=True), torch.randn(0), torch.randn(12, generator=g),
               torch.randn(4, generator=g)[::2]]
    expected = [[round(v, 6) for v in t.detach().float().reshape(-1).tolist()] for t in tensors]
    kept = [trace.snapshot(t) for t in tensors]
    for t in tensors:
        t.data.zero_()  # changed after the op: the snapshots hold what was
    assert len({id(k.buffer) for k in kept}) > 1
    assert [_bits(v) for v in trace.read_values(kept)] == [_bits(v) for v in expected]


def test_one_pass_over_a_bucket_reads_every_chunk_as_its_own_view_would():
    for numel, n in [(7, 3), (64, 8), (130, 8), (513, 8), (520, 8), (600, 8), (5, 1), (0, 3), (2, 4)]:
        whole = torch.randn(numel, generator=torch.Generator().manual_seed(numel))
        notes = [f"part {i}" for i in range(n)] if n != 8 else None
        with trace.using(trace.Tracer(rank=0, t0=0.0)):
            views = trace.shard_views("bucket", "gradients", whole, n, notes=notes)
            each = [trace.tensor_view(f"bucket[{i}]", "gradients", piece, shard=(i, n), note=notes and notes[i])
                    for i, piece in enumerate(whole.tensor_split(n))]
        original = whole.clone()
        whole.add_(1.0)  # the next ring step changes the bucket: the views show it as it was
        views, each = _read(views), _read(each)
        assert views == each
        for view, piece in zip(views, original.tensor_split(n), strict=True):
            small = piece.numel() <= trace.MAX_VALUES
            assert view["values"] == ([round(v, 6) for v in piece.tolist()] if small else None)


def test_a_frame_that_json_cannot_write_as_pydantic_does_takes_the_models_path():
    fragment = {"index": 0, "rank": 0, "phase": "p", "caption": "c", "transfers": [], "spans": [], "extra": {},
                "state": {"rank": 0, "tensors": [{"name": "x", "role": "r", "shape": [2], "bytes": 8,
                                                  "values": [float("inf"), 1.0], "shard": None, "note": None}],
                          "memory": {}, "status": None, "extra": {}}}
    assert trace.encode_frame(trace.seal([fragment])) == trace.merge_fragments([fragment]).model_dump_json().encode()
    fragment["extra"] = {"tensor": torch.ones(1)}  # neither writes an object: the model's error says what is wrong
    with pytest.raises(Exception, match="[Ss]erializ"):
        trace.seal([fragment])


@pytest.mark.slow
@pytest.mark.parametrize("name, params", [("ddp", {"world_size": 4, "steps": 2}),
                                          ("pipeline", {"stages": 4, "microbatches": 4})])
def test_the_parents_unvalidated_json_is_the_validated_frames_json(pool, name, params):
    """Every frame of real runs, written without validation, is byte for byte the validated model's JSON."""
    from simulations import scenarios
    p = scenarios.get(name).params.model_validate(params)
    fragments: list[dict] = []
    pool.run(name, p.model_dump(mode="json"), scenarios.get(name).world_size(p), fragments.append)
    by_index: dict[int, list[dict]] = {}
    for fragment in fragments:
        by_index.setdefault(fragment["index"], []).append(fragment)
    assert len(by_index) > 10
    for parts in by_index.values():  # sealed by the ranks: the spliced JSON, read back by the model, is the same bytes
        encoded = trace.encode_frame(parts)
        assert encoded == Frame.model_validate_json(encoded).model_dump_json().encode()


# A one-rank world in a fresh interpreter runs DDP's rank program untraced, then traced, counting the traced work.
_COUNT_TRACED_WORK = textwrap.dedent("""
    import json, tempfile, torch.distributed as dist
    from simulations import comm, trace
    from simulations.runtime.execute import run_on_rank
    counts = {}
    def counting(owner, name):
        original = getattr(owner, name)
        def counted(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)
        setattr(owner, name, counted)
    for name in ("snapshot", "tensor_bytes", "shard_views"):
        counting(trace, name)
    counting(trace.Tracer, "transfer")
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    seen = {}
    for traced in (False, True):
        counts.clear()
        fragments = []
        run_on_rank("ddp", {"world_size": 1, "steps": 2}, rank=0, world_size=1, group=None, backend="gloo",
                    sink=fragments.append, traced=traced)
        seen[str(traced)] = {**counts, "fragments": len(fragments)}
    dist.destroy_process_group()
    print(json.dumps(seen))
""")


@pytest.mark.slow
def test_an_untraced_run_does_none_of_the_traced_work():
    """Counts, not time: an untraced rank copies no value, measures no memory and builds no
    fragment (views included); the same rank traced does all of them (so the counting sees them)."""
    done = subprocess.run([sys.executable, "-c", _COUNT_TRACED_WORK], capture_output=True, text=True, timeout=300,
                          check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    untraced, traced = seen["False"], seen["True"]
    work = ("snapshot", "tensor_bytes", "fragments")
    assert {key: untraced.get(key, 0) for key in work} == dict.fromkeys(work, 0), untraced
    assert all(traced.get(key, 0) > 0 for key in work), traced


def test_reading_a_tensors_values_leaves_it_as_it_was():
    """A numpy view of the tensor itself would make its storage unresizable for good: an all-gather into that
    buffer later failed (HSDP, "Trying to resize storage that is not resizable")."""
    buffer = torch.randn(8)
    trace.values_of(buffer)
    comm._values(trace.Tracer(rank=0, t0=0.0), buffer, True)
    buffer.resize_(16)  # raises if the storage was pinned
    assert buffer.numel() == 16
