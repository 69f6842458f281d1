"""Per-rank instrumentation: what a rank sent, what it computed when, and what it holds.

Scenario code stays the algorithm. It calls the traced collectives in
`simulations.comm`, wraps compute in `trace.span(...)`, and marks the points of
its story with `trace.frame(...)`. Every rank marks the same points (SPMD), so
the parent can merge the N fragments of point k into frame k.

With tracing disabled (the benchmark's baseline, or a plain torchrun) every call
here returns at once, so the same code runs untraced.
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy
import pydantic_core
import torch

from simulations.frames import Frame

MAX_VALUES = 64  # tensors up to this many elements travel with their values

_current: Tracer | None = None  # a process-wide global, not a contextvar: DDP hooks run on autograd's threads


def tensor_bytes(tensors: torch.Tensor | Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind these tensors (views are not counted twice)."""
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


class Snapshot:
    """A small tensor's values as they were when a traced op saw them: a range of an fp32 buffer, read when the
    fragment leaves the rank (`read_fragments`)."""

    __slots__ = ("buffer", "start", "end")

    def __init__(self, buffer: numpy.ndarray, start: int, end: int):
        self.buffer, self.start, self.end = buffer, start, end


class _Buffers:
    """Where a process's snapshots go: float32 buffers filled in order, a new one when one is full (a sealed
    batch's ranges are only read, so nothing is ever freed by hand: a buffer goes with its last Snapshot).

    A snapshot is one memmove, on the op's path: no torch op, so no dispatch, allocation or tensor object
    (issue 32: a clone per traced op cost 3 µs warm and five times that in a run, where every rank's caches
    are cold after the others ran); `read_values` then reads a batch's ranges of a buffer in one numpy pass."""

    SIZE = 1 << 16  # floats: 256 KiB, a few hundred ring steps

    def __init__(self) -> None:
        self.buffer = numpy.empty(0, numpy.float32)
        self.address = self.used = 0

    def keep(self, t: torch.Tensor) -> Snapshot:
        if not (t.dtype is torch.float32 and t.is_cpu and t.is_contiguous()):
            t = t.detach().to("cpu", torch.float32).contiguous()  # another dtype, device or layout: a copy first
        n = t.numel()
        if self.used + n > len(self.buffer):
            self.buffer = numpy.empty(max(self.SIZE, n), numpy.float32)
            self.address, self.used = self.buffer.ctypes.data, 0
        start = self.used
        ctypes.memmove(self.address + 4 * start, t.data_ptr(), 4 * n)
        self.used = start + n
        return Snapshot(self.buffer, start, start + n)


_buffers = _Buffers()


def snapshot(t: torch.Tensor, limit: int = MAX_VALUES) -> Snapshot | None:
    """A small tensor's values as they are now, kept to be read when the fragment leaves the rank (`seal`): the
    caller may change the tensor once the op returned. None above `limit`. Reading values (rounding, Python
    floats) and making the views' dicts waits for the batch, where one pass reads them all."""
    if t.numel() > limit:
        return None
    return _buffers.keep(t)


def read_values(snapshots: Sequence[Snapshot]) -> list[list[float]]:
    """Snapshots' values as fp32 rounded to six places: Python's round(v, 6) of each, bit for bit, in one
    vectorized pass per buffer. A float32 times 10⁶ is exact in float64 (24 + 14 significand bits), so rounding
    that product half to even and dividing by 10⁶ is what round(v, 6) does. (numpy's rint: torch's round_ on
    doubles goes element by element on this CPU build, 25x slower; a round() per element, 6x.)"""
    read: dict[int, tuple[int, list[float]]] = {}  # id(buffer) -> (first index read, its values from there)
    for buffer in {id(s.buffer): s.buffer for s in snapshots}.values():
        ranges = [s for s in snapshots if s.buffer is buffer]
        low, high = min(s.start for s in ranges), max(s.end for s in ranges)
        scaled = buffer[low:high].astype(numpy.float64)
        scaled *= 1e6
        numpy.rint(scaled, out=scaled)
        scaled /= 1e6
        read[id(buffer)] = (low, scaled.tolist())
    out = []
    for s in snapshots:
        low, values = read[id(s.buffer)]
        out.append(values[s.start - low:s.end - low])
    return out


def values_of(t: torch.Tensor, limit: int = MAX_VALUES) -> list[float] | None:
    """A small tensor's values now, as `seal` will read its snapshot (None above `limit`)."""
    kept = snapshot(t, limit)
    return None if kept is None else read_values([kept])[0]


# A transfer as a rank records it: one list, in the fragment's transfers and (as its comm span) in its spans.
# Its Transfer and Span are made when the fragment leaves the rank (frame_document): on the op's path, an append.
_VALUES = 6  # [op, bytes, dst, group, chunk, tensor, values, start, end]; values: a snapshot, read at `seal`


# On the ranks, frame parts are plain dicts and lists, written as JSON when they leave the rank (`seal`); the
# parent splices them into each frame's JSON (`encode_frame`), and Run.frames validates it when read.

def tensor_view(name: str, role: str, t: torch.Tensor, *, shard: tuple[int, int] | None = None,
                note: str | None = None, limit: int = MAX_VALUES) -> dict | None:
    """A TensorView (simulations.frames) of `t`: role, shape, bytes, and its values when small (a snapshot
    until the fragment is sealed). In an untraced run there is no frame to show it in: None, at no cost."""
    if _current is not None and not _current.enabled:
        return None
    return {"name": name, "role": role, "shape": list(t.shape), "bytes": t.numel() * t.element_size(),
            "values": snapshot(t, limit), "shard": shard, "note": note}


class _Pieces:
    """Stands for shard_views' n views in a fragment until it is sealed: one snapshot of the whole, cut then."""

    __slots__ = ("name", "role", "values", "numel", "itemsize", "n", "notes", "limit")

    def __init__(self, name: str, role: str, whole: torch.Tensor, n: int, notes: Sequence[str | None] | None,
                 limit: int):
        self.name, self.role, self.n, self.notes, self.limit = name, role, n, notes, limit
        self.numel, self.itemsize = whole.numel(), whole.element_size()
        # the values of all n read in one pass (reading each piece on its own was most of a ring step's cost)
        self.values = snapshot(whole, limit=self.numel) if self.numel // n <= limit else None

    def views(self) -> list[dict]:
        """The n TensorViews, as tensor_view of each piece of whole.tensor_split(n) would make them."""
        values, notes = self.values, self.notes
        return [{**head, "values": values[start:end] if values is not None and read else None, "shard": shard,
                 "note": notes[i] if notes else None}
                for i, (head, start, end, read, shard) in enumerate(
                    _cuts(self.name, self.role, self.numel, self.itemsize, self.n, self.limit))]


@functools.cache
def _cuts(name: str, role: str, numel: int, itemsize: int, n: int, limit: int) -> tuple:
    """What does not change from one ring step to the next: each piece's name, role, shape and bytes, where its
    values start and end in the whole's, whether they travel, its shard. As tensor_split cuts: the first
    numel mod n pieces one element longer."""
    size, longer = divmod(numel, n)
    cuts, start = [], 0
    for i in range(n):
        length = size + (i < longer)
        head = {"name": f"{name}[{i}]", "role": role, "shape": [length], "bytes": length * itemsize}
        cuts.append((head, start, start + length, length <= limit, (i, n)))
        start += length
    return tuple(cuts)


def shard_views(name: str, role: str, whole: torch.Tensor, n: int, *, notes: Sequence[str | None] | None = None,
                limit: int = MAX_VALUES) -> list:
    """`tensor_view` of each piece of the 1-D `whole.tensor_split(n)`, named f"{name}[i]", shard (i, n), for a
    frame's `tensors` (a ring step shows every chunk of its bucket). On the rank's path one snapshot of the whole
    stands for them; the n views are made when the fragment is sealed."""
    if _current is not None and not _current.enabled:
        return [None] * n
    if whole.dim() != 1:
        return [tensor_view(f"{name}[{i}]", role, piece, shard=(i, n), note=notes[i] if notes else None, limit=limit)
                for i, piece in enumerate(whole.tensor_split(n))]
    return [_Pieces(name, role, whole, n, notes, limit)]


def read_fragments(fragments: Iterable[dict]) -> None:
    """Make fragments as the tracer left them plain data, in place: every snapshot's values read in one pass,
    each _Pieces cut into its views. What is already plain stays as it is."""
    fragments = list(fragments)
    kept, owners = [], []
    for fragment in fragments:
        for view in fragment["state"]["tensors"]:
            values = view.values if isinstance(view, _Pieces) else view["values"]
            if isinstance(values, Snapshot):
                kept.append(values)
                owners.append(view)
        for record in fragment["transfers"]:
            if isinstance(record, list) and isinstance(record[_VALUES], Snapshot):
                kept.append(record[_VALUES])
                owners.append(record)
    for owner, values in zip(owners, read_values(kept), strict=True):
        if isinstance(owner, list):
            owner[_VALUES] = values
        elif isinstance(owner, dict):
            owner["values"] = values
        else:
            owner.values = values
    for fragment in fragments:
        state = fragment["state"]
        if any(isinstance(view, _Pieces) for view in state["tensors"]):
            state["tensors"] = [v for view in state["tensors"]
                                for v in (view.views() if isinstance(view, _Pieces) else (view,))]


class Tracer:
    """One rank's recorder for one run. `sink(fragment)` receives each frame fragment as it is made."""

    def __init__(self, rank: int, t0: float, sink: Callable[[dict], None] | None = None, enabled: bool = True,
                 device: torch.device | None = None):
        self.rank = rank
        self.device = device
        self.t0 = t0
        self.sink = sink
        self.enabled = enabled
        self.index = 0
        self.sent: Counter[str] = Counter()  # op -> bytes this rank sent, over the whole run (always kept)
        self._transfers: list[list] = []  # transfer records (see _VALUES), since the last frame
        self._spans: list[dict | list] = []  # Span-shaped, or a transfer record standing for its comm span

    def now(self) -> float:
        return time.time() - self.t0

    @contextmanager
    def span(self, name: str, kind: str = "compute", step: int | None = None, **args: Any) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = self.now()
        try:
            yield
        finally:
            self._spans.append({"rank": self.rank, "name": name, "kind": kind, "start": start,
                                "end": self.now(), "step": step, "args": args})

    def transfer(self, op: str, nbytes: int, *, dst: int | None = None, group: str = "world",
                 chunk: int | None = None, tensor: str | None = None,
                 values: Snapshot | list[float] | None = None, start: float = 0.0, end: float = 0.0) -> None:
        """One message or collective part: its bytes, where it went, when, and its payload's values if small."""
        self.sent[op] += nbytes
        if self.enabled:
            record = [op, nbytes, dst, group, chunk, tensor, values, start, end]
            self._transfers.append(record)
            self._spans.append(record)

    def frame(self, phase: str, caption: str, *, tensors: Iterable[dict] = (),
              memory: dict[str, int | torch.Tensor | Iterable[torch.Tensor]] | None = None,
              status: str | None = None, extra: dict[str, Any] | None = None,
              rank_extra: dict[str, Any] | None = None) -> None:
        """Mark point `index` of the story: this rank's part of frame `index`.

        `memory` maps a role to live tensors (their bytes are measured) or to a byte count.
        `extra` is frame-wide (rank 0's is kept); `rank_extra` is this rank's own.
        """
        if not self.enabled:
            self.index += 1
            return
        measured = {role: (v if isinstance(v, int) else tensor_bytes(v)) for role, v in (memory or {}).items()}
        rank_extra = dict(rank_extra or {})
        if self.device is not None and self.device.type == "cuda":  # the allocator's own count, beside the roles
            rank_extra["cuda_memory_allocated"] = torch.cuda.memory_allocated(self.device)
        fragment = {
            "index": self.index, "rank": self.rank, "phase": phase, "caption": caption,
            "state": {"rank": self.rank, "tensors": list(tensors), "memory": measured, "status": status,
                      "extra": rank_extra},
            "transfers": self._transfers, "spans": self._spans, "extra": extra or {},
        }
        self._transfers, self._spans = [], []
        self.index += 1
        if self.sink is not None:
            self.sink(fragment)


def _transfer(rank: int, record: list) -> dict:
    op, nbytes, dst, group, chunk, tensor, values, start, end = record
    return {"op": op, "src": rank, "dst": dst, "bytes": nbytes, "group": group, "chunk": chunk, "tensor": tensor,
            "values": values, "start": start, "end": end}


def _comm_span(rank: int, record: list) -> dict:
    op, nbytes, dst, group, _chunk, _tensor, _values, start, end = record
    return {"rank": rank, "name": op if dst is None else f"{op}→{dst}", "kind": "comm", "start": start, "end": end,
            "step": None, "args": {"bytes": nbytes, "group": group}}


def frame_document(fragments: list[dict]) -> dict:
    """N ranks' fragments of one story point -> the frame as plain data, in Frame's shape (its fields, in its
    order, defaults included). Rank 0 speaks for the caption. Each transfer record becomes its Transfer and
    its comm Span here, when the fragment leaves the rank (`seal`), off the op's path."""
    read_fragments(fragments)
    return _document(fragments)


def _document(fragments: list[dict]) -> dict:
    """frame_document of fragments already read (`read_fragments`)."""
    fragments = sorted(fragments, key=lambda f: f["rank"])
    lead = fragments[0]
    return {
        "index": lead["index"], "phase": lead["phase"], "caption": lead["caption"],
        "ranks": [f["state"] for f in fragments],
        "transfers": [_transfer(f["rank"], t) if isinstance(t, list) else t for f in fragments for t in f["transfers"]],
        "spans": [_comm_span(f["rank"], s) if isinstance(s, list) else s for f in fragments for s in f["spans"]],
        "extra": lead["extra"],
    }


def merge_fragments(fragments: list[dict]) -> Frame:
    """N ranks' fragments of one story point (as the tracer made them) -> one validated frame."""
    return Frame.model_validate(frame_document(fragments))


def _to_json(value: Any) -> bytes:
    return pydantic_core.to_json(value, inf_nan_mode="null")  # as the model writes floats: inf and NaN as null


def seal(fragments: list[dict]) -> list[dict]:
    """A rank's fragments, on their way out, as the JSON of their parts: the parent splices N ranks' parts
    into the frame's JSON (`encode_frame`) without decoding or re-encoding anything.

    Unpickling fragments as dicts and lists and writing them again as JSON was most of the parent's work in a
    traced run (issue 32), and the parent shares the cores with the ranks whose time it shows. The parts are
    the fragment's own frame document (`frame_document` of it alone), so the spliced frame is that of the
    whole document; only rank 0's head and extra are written, as only rank 0 speaks for them. pydantic's
    serializer writes the plain data as it writes the model; what it cannot write (an object) takes the
    model's path, whose error says what is wrong."""
    read_fragments(fragments)  # the batch's values, in one pass
    sealed = []
    for fragment in fragments:
        document, lead = _document([fragment]), fragment["rank"] == 0
        try:
            parts = _parts(document, lead)
        except pydantic_core.PydanticSerializationError:
            parts = _parts(Frame.model_validate(document).model_dump(mode="json"), lead)
        sealed.append({"index": fragment["index"], "rank": fragment["rank"], **parts})
    return sealed


def _parts(document: dict, lead: bool) -> dict[str, bytes]:
    """One rank's frame document -> the JSON of what `encode_frame` joins: the rank's state, its transfers and
    spans (array items, no brackets), and for the lead (rank 0) the head (`{"index":…,"caption":…` without its
    closing brace) and the extra."""
    parts = {"state": _to_json(document["ranks"][0]), "transfers": _to_json(document["transfers"])[1:-1],
             "spans": _to_json(document["spans"])[1:-1]}
    if lead:
        parts["head"] = _to_json({key: document[key] for key in ("index", "phase", "caption")})[:-1]
        parts["extra"] = _to_json(document["extra"])
    return parts


def encode_frame(sealed: list[dict]) -> bytes:
    """N ranks' sealed fragments of one story point -> the frame's JSON: the bytes of
    `merge_fragments(fragments).model_dump_json()`, joined from the parts without validating on the way
    (a run's frames are validated when read, Run.frames). Rank 0 speaks for the caption and the extra."""
    sealed = sorted(sealed, key=lambda f: f["rank"])
    lead = sealed[0]
    if lead["rank"] != 0:
        raise ValueError(f"frame {lead['index']} has no part of rank 0, which speaks for its caption")
    return b"".join((
        lead["head"], b',"ranks":[', b",".join(f["state"] for f in sealed),
        b'],"transfers":[', b",".join(f["transfers"] for f in sealed if f["transfers"]),
        b'],"spans":[', b",".join(f["spans"] for f in sealed if f["spans"]),
        b'],"extra":', lead["extra"], b"}"))


_untraced = Tracer(rank=0, t0=time.time(), enabled=False)


def current() -> Tracer:
    """The tracer of the run this process is executing (rank processes run one job at a time)."""
    return _current if _current is not None else _untraced


@contextmanager
def using(tracer: Tracer) -> Iterator[Tracer]:
    global _current
    previous, _current = _current, tracer
    try:
        yield tracer
    finally:
        _current = previous


class ActivationMeter:
    """Measures the activations autograd saves for backward: the real bytes, counted as they are saved.

    Use as `with ActivationMeter(model.parameters()) as acts: loss = model(x)`, then `acts.bytes`.
    Tensors that share storage with `exclude` (the weights autograd also saves) are not activations.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self.saved: list[torch.Tensor] = []
        self._excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in self._excluded:
            self.saved.append(t)
        return t

    @property
    def bytes(self) -> int:
        return tensor_bytes(self.saved)

    def release(self) -> None:
        self.saved = []

    def __enter__(self) -> ActivationMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


def span(name: str, kind: str = "compute", step: int | None = None, **args: Any):
    return current().span(name, kind, step, **args)


def frame(phase: str, caption: str, **kwargs: Any) -> None:
    current().frame(phase, caption, **kwargs)
