"""The wire contract: what a run sends to the browser, and what a run file holds.

A frame is a declarative scene, not drawing commands: the ranks and what each
holds, the transfers between them, the timeline spans and memory by role, and a
caption. A few renderers (ranks, timeline, memory) draw every scenario.
Bump SCHEMA_VERSION on any change a replayed run file would notice.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1

View = Literal["ranks", "timeline", "memory", "pipeline", "tokens", "ring", "mesh", "network", "losses", "failures"]
SpanKind = Literal["compute", "comm", "idle"]


class TensorView(BaseModel):
    """A tensor or shard a rank holds: its role, shape and bytes, and its values when small."""

    name: str
    role: str  # "parameters", "gradients", "optimizer", "activations", "batch", "buffer", ...
    shape: list[int]
    bytes: int
    values: list[float] | None = None  # flattened, only for small tensors
    shard: tuple[int, int] | None = None  # (index, of): which shard of the whole this is
    note: str | None = None


class Transfer(BaseModel):
    """Bytes that really moved: a point-to-point message, or one rank's part in a collective."""

    op: str  # "send", "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", ...
    src: int
    dst: int | None = None  # None for a collective seen from src's side
    bytes: int
    group: str = "world"
    chunk: int | None = None
    tensor: str | None = None
    values: list[float] | None = None  # the real payload, when small (e.g. a ring chunk's partial sums)
    start: float = 0.0  # seconds since the run started (on the sending rank's clock)
    end: float = 0.0


class Span(BaseModel):
    """A stretch of one rank's timeline."""

    rank: int
    name: str
    kind: SpanKind
    start: float
    end: float
    step: int | None = None
    args: dict[str, Any] = Field(default_factory=dict)


class RankState(BaseModel):
    rank: int
    tensors: list[TensorView] = Field(default_factory=list)
    memory: dict[str, int] = Field(default_factory=dict)  # role -> bytes of live tensors
    status: str | None = None  # short label: "forward", "idle", "F3", ...
    extra: dict[str, Any] = Field(default_factory=dict)  # scenario-specific facts (measured)


class Frame(BaseModel):
    index: int
    phase: str  # machine-readable step kind: "shard", "forward", "ring", "optimizer", ...
    caption: str
    ranks: list[RankState]
    transfers: list[Transfer] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


class Provenance(BaseModel):
    """Where and when a run was measured: the player of a replayed run names it. Run files recorded before it
    existed have none (Meta.provenance is None) and still load."""

    hosts: list[str]  # the machines the ranks ran on, by host name
    devices: dict[str, int]  # what the ranks ran on -> how many ranks: {"NVIDIA H200": 1}, {"AMD EPYC 7B13": 2}
    device_type: Literal["cuda", "cpu"]
    backend: str
    torch: str  # torch.__version__
    cuda: str | None = None  # torch.version.cuda: None for a CPU build
    nccl: str | None = None  # the NCCL version, on the NCCL backend
    date: str  # when the run finished, ISO 8601, UTC


class Meta(BaseModel):
    schema_version: int = SCHEMA_VERSION
    scenario: str
    title: str
    params: dict[str, Any]
    world_size: int
    backend: str
    views: list[View]
    source: str = "live"  # "live", or "recorded:<file>" for a replayed run file
    provenance: Provenance | None = None  # set when the run finishes (a live run's meta event has none)
    # CPU cores the ranks of a live gloo run shared: with fewer than world_size, the ranks took turns on them,
    # and every wall time of the run includes those turns (the player says so). None where unknown.
    cores: int | None = None


class Check(BaseModel):
    """One self-check: a measurement against what it should be."""

    name: str
    passed: bool
    measured: Any = None
    expected: Any = None
    detail: str = ""


class Summary(BaseModel):
    checks: list[Check]
    figures: dict[str, Any] = Field(default_factory=dict)  # measured-vs-formula numbers
    timings: dict[str, float] = Field(default_factory=dict)  # seconds

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


class RunFile(BaseModel):
    """A whole run on disk: written by `simulations.record` (torchrun) or the export, replayed by the server."""

    schema_version: int = SCHEMA_VERSION
    meta: Meta
    frames: list[Frame]
    summary: Summary
