"""Per-rank instrumentation: what a rank sent, what it computed when, and what it holds.

Scenario code stays the algorithm. It calls the traced collectives in
`simulations.comm`, wraps compute in `trace.span(...)`, and marks the points of
its story with `trace.frame(...)`. Every rank marks the same points (SPMD), so
the parent can merge the N fragments of point k into frame k.

With tracing disabled (the benchmark's baseline, or a plain torchrun) every call
here returns at once, so the same code runs untraced.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from simulations.frames import Frame, TensorView

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


def values_of(t: torch.Tensor, limit: int = MAX_VALUES) -> list[float] | None:
    if t.numel() > limit:
        return None
    t = t.detach()
    if t.dtype != torch.float32:  # no conversions (they cost) when the tensor is already fp32 on the CPU
        t = t.float()
    if t.device.type != "cpu":
        t = t.cpu()
    return [round(v, 6) for v in t.reshape(-1).tolist()]


def snapshot(t: torch.Tensor, limit: int = MAX_VALUES) -> torch.Tensor | None:
    """A copy of a small tensor's values, to be read later by `resolve_values`: one tensor op, where
    `values_of` costs several plus a round() per element, on the rank's critical path."""
    if t.numel() > limit:
        return None
    return t.detach().to("cpu", torch.float32, copy=True)


# A transfer as a rank records it: one list, in the fragment's transfers and (as its comm span) in its spans.
# The parent makes the Transfer and the Span of it (FragmentDecoder): nothing on the op's path but an append.
_VALUES = 6  # [op, bytes, dst, group, chunk, tensor, values, start, end]


def resolve_values(fragments: list[dict]) -> list[dict]:
    """Turn the snapshots (`snapshot`) in these fragments' transfers into value lists, all in one pass.

    Equal to `values_of` of each: a float32 times 10⁶ is exact in float64 (24 + 14 significand bits),
    so rounding that product half to even and dividing by 10⁶ is Python's round(v, 6), bit for bit."""
    pending = [t for f in fragments for t in f.get("transfers", ())
               if isinstance(t, list) and isinstance(t[_VALUES], torch.Tensor)]
    if not pending:
        return fragments
    flat = torch.cat([t[_VALUES].reshape(-1) for t in pending]).double()
    values = flat.mul_(1e6).round_().div_(1e6).tolist()
    start = 0
    for t in pending:
        end = start + t[_VALUES].numel()
        t[_VALUES], start = values[start:end], end
    return fragments


# On the ranks, frame parts are plain dicts and lists (cheap to build and to pickle); the parent
# validates each merged frame once against the schema in simulations.frames.

def tensor_view(name: str, role: str, t: torch.Tensor, *, shard: tuple[int, int] | None = None,
                note: str | None = None, limit: int = MAX_VALUES) -> dict:
    """A TensorView (simulations.frames) of `t`: role, shape, bytes, and its values when small."""
    return {"name": name, "role": role, "shape": list(t.shape), "bytes": t.numel() * t.element_size(),
            "values": values_of(t, limit), "shard": shard, "note": note}


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
                 values: list[float] | torch.Tensor | None = None, start: float = 0.0, end: float = 0.0) -> None:
        """One message or collective part. `values` may be a `snapshot`, read when the fragment leaves the
        rank (`resolve_values`), off the op's path."""
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


def _repeats(view: dict, previous: dict) -> bool:
    """The same view: equal, and no zero changed its sign (-0.0 == 0.0, but the frame shows "-0.0")."""
    if not isinstance(view, dict) or view != previous:
        return False
    values = view.get("values")
    return not values or 0.0 not in values or all(
        math.copysign(1.0, a) == math.copysign(1.0, b) for a, b in zip(values, previous["values"]) if a == 0.0)


def _transfer(rank: int, record: list) -> dict:
    op, nbytes, dst, group, chunk, tensor, values, start, end = record
    return {"op": op, "src": rank, "dst": dst, "bytes": nbytes, "group": group, "chunk": chunk, "tensor": tensor,
            "values": values, "start": start, "end": end}


def _comm_span(rank: int, record: list) -> dict:
    op, nbytes, dst, group, _chunk, _tensor, _values, start, end = record
    return {"rank": rank, "name": op if dst is None else f"{op}→{dst}", "kind": "comm", "start": start, "end": end,
            "args": {"bytes": nbytes, "group": group}}


class FragmentDecoder:
    """The parent's side of a rank's fragments: the work the rank left out of its critical path.

    `decode(fragment)` makes the Transfer and the comm Span of each transfer record, and validates the
    fragment's tensor views, each once: a view equal to the one at the same place in the rank's previous
    fragment is that one, already validated (a ring step changes one chunk of N; validating the other N − 1
    again was most of the parent's work at 8 ranks). Fragments of one rank must come in the order it made them."""

    def __init__(self) -> None:
        self._views: dict[int, tuple[list[dict], list[TensorView]]] = {}  # rank -> last views, as sent and valid

    def decode(self, fragment: dict) -> dict:
        resolve_values([fragment])  # a sink that kept its fragments on the rank (simulations.record)
        rank, state = fragment["rank"], fragment["state"]
        sent = list(state["tensors"])
        last_sent, last_valid = self._views.get(rank, ((), ()))
        views = [last_valid[i] if i < len(last_sent) and _repeats(view, last_sent[i])
                 else TensorView.model_validate(view) for i, view in enumerate(sent)]
        self._views[rank] = (sent, views)
        return {**fragment, "state": {**state, "tensors": views},
                "transfers": [_transfer(rank, t) if isinstance(t, list) else t for t in fragment["transfers"]],
                "spans": [_comm_span(rank, s) if isinstance(s, list) else s for s in fragment["spans"]]}


def merge_fragments(fragments: list[dict]) -> Frame:
    """N ranks' fragments of one story point -> one frame. Rank 0 speaks for the caption."""
    fragments = sorted(fragments, key=lambda f: f["rank"])
    lead = fragments[0]
    return Frame.model_validate({
        "index": lead["index"], "phase": lead["phase"], "caption": lead["caption"],
        "ranks": [f["state"] for f in fragments],
        "transfers": [t for f in fragments for t in f["transfers"]],
        "spans": [s for f in fragments for s in f["spans"]],
        "extra": lead["extra"],
    })


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
