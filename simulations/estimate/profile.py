"""A hardware profile: what `distdeck calibrate` measured on one machine, and the GPU-like entry the estimator
runs on in place of the catalog's datasheet figures (`distdeck estimate --hardware-profile FILE`, POST /api/estimate).

Torch-free, like the rest of the estimator: the measuring is simulations.calibrate's (torch); this module reads,
checks and writes the JSON it produces, and turns it into a simulations.hardware.GPU. The format follows the
shared H100/H200 measurements (../shared/measurements/gpu-kernels.json): each figure with its shape and the time
it took, and a note saying how it was taken.

    {"format": "distdeck-hardware-profile/1", "date": ..., "about": ...,
     "device": {"type": "cuda" | "cpu", "name", "memory_bytes", "compute_units", "driver", "dtype"},
     "software": {"torch", "cuda", "cudnn", "threads"}, "host": {"cpu", "cores"},
     "gemm": {"note", "rows": [{"m", "k", "n", "dtype", "seconds", "flops_per_s"}], "dtype_probe": {...}},
     "attention": {"note", "available", "default_kernel", "rows": [{"b", "heads", "s", "d", "kernel",
                   "forward_s", "forward_backward_s", "forward_flops_per_s", "backward_flops_per_s"}]},
     "memory_copy": {"note", "bytes_moved", "seconds", "bytes_per_s"},
     "eager_op": {"note", "ops", "seconds_per_op"},
     "elementwise": {"note", "rows": {name: {"shape", "seconds", "bytes_moved", "bytes_per_s"}}},
     "optimizer": {"note", "params", "tensors", "rows": {"foreach" | "fused": {"seconds", "seconds_per_param"}}},
     "interconnect": null | {"note", "backend", "ranks", "bytes", "seconds", "bus_bytes_per_s", "small_bytes",
                             "small_seconds"}}

How a profile becomes a GPU (to_gpu), each choice because the estimator's formulas divide by these fields:
- its matmul rates (peak, burst and sustained alike) are the best GEMM rate measured: the machine as it ran, with no
  datasheet peak to compare against, so MFU reads against that best rate; `mamf_shape` is the shape that reached it,
  and compute.matmul_time's waves of tiles start from it as they do from the catalog's MAMF shape;
- HBM bandwidth is the copy's bytes read plus written per second over hardware.HBM_EFFICIENCY, so that a
  memory-bound pass (compute.memory_time, which takes that fraction of the datasheet's figure) runs at the
  measured rate;
- capacity is the device's memory as torch reports it (a CPU's: the machine's RAM);
- fused attention runs at the measured fraction of the H100 curve the estimator would time the same kernel with
  (kernels.attention_rate), the geometric mean over the rows and both directions (`attention_vs_h100`);
- the figures the single-GPU stacks read where a GPU has them (hardware.GPU's measured fields: the host's cost of an
  eager op, the copy bandwidth for element-wise passes, AdamW's and clip_grad_norm_'s seconds a parameter, every GEMM
  by shape, SDPA with the kernel torch picked) are the profile's own;
- the interconnect, when measured (two ranks on this machine: NCCL between two GPUs, gloo on a CPU), is the link
  bandwidth, its bus bandwidth over hardware.NVLINK_BUS_EFFICIENCY (as collectives.ring_bandwidth takes that
  fraction back); one machine is one node. Without one, a profile estimates one device only.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulations import hardware
from simulations.estimate import kernels

FORMAT = "distdeck-hardware-profile/1"
# Bounds that keep the estimator's arithmetic finite: every figure (bytes, FLOP/s, seconds) at most LARGEST, and a
# GEMM's dimensions at most LARGEST_DIM (a 16 M-row GEMM is beyond any model's layer).
LARGEST, LARGEST_DIM = 1e18, 2**24
DEVICE_TYPES = ("cuda", "cpu")


class ProfileError(ValueError):
    """A profile that cannot be used; `field` is the JSON path at fault ("gemm.rows[2].seconds")."""

    def __init__(self, field_: str, message: str):
        self.field, self.message = field_, message
        super().__init__(f"{field_}: {message}")


@dataclass(frozen=True)
class GemmRate:
    m: int
    k: int
    n: int
    dtype: str
    seconds: float
    flops_per_s: float


@dataclass(frozen=True)
class AttentionRate:
    b: int
    heads: int
    s: int
    d: int
    kernel: str
    picked_by_torch: bool
    forward_s: float
    forward_backward_s: float
    forward_flops_per_s: float
    backward_flops_per_s: float


@dataclass(frozen=True)
class HardwareProfile:
    device_type: str
    device_name: str
    memory_bytes: float
    compute_units: int  # SMs of a GPU, threads of a CPU
    dtype: str  # what the GEMMs ran in ("bfloat16"; on a CPU the faster of the two)
    date: str
    gemm: tuple[GemmRate, ...]
    copy_bytes_per_s: float
    eager_op_s: float
    attention: tuple[AttentionRate, ...] = ()
    elementwise_bytes_per_s: dict[str, float] = field(default_factory=dict)
    optimizer_s_per_param: dict[str, float] = field(default_factory=dict)
    interconnect_bus_bytes_per_s: float = 0.0
    interconnect_backend: str = ""
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the whole JSON, notes and all

    @property
    def best_gemm(self) -> GemmRate:
        return max(self.gemm, key=lambda g: g.flops_per_s)

    def gemm_rate(self, m: float, n: float, k: float) -> float:
        """FLOP/s of the measured shape nearest to [m, k] × [k, n] (in log space: a GEMM's rate follows its
        dimensions' orders of magnitude, tile counts and cache fits, not their differences)."""
        def distance(g: GemmRate) -> float:
            return sum(math.log(a / b) ** 2 for a, b in ((g.m, m), (g.n, n), (g.k, k)))
        return min(self.gemm, key=distance).flops_per_s

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.device_name.lower()).strip("-")[:40] or self.device_type


def _get(data: dict, path: str, kind: type | tuple[type, ...], positive: bool = False, where: str = "") -> Any:
    """data's value at the dotted `path`, of `kind` (a number is never a bool), > 0 if `positive`; errors name
    `where` + path (`where`: the row's own path, "gemm.rows[2].")."""
    value: Any = data
    path = where + path
    for part in path.removeprefix(where).split("."):
        if not isinstance(value, dict) or part not in value:
            raise ProfileError(path, "missing")
        value = value[part]
    numeric = kind in (float, int, (int, float))
    if numeric:
        kind = (int, float)
    if not isinstance(value, kind) or (numeric and isinstance(value, bool)):
        raise ProfileError(path, f"must be {'a number' if numeric else kind.__name__}, got {value!r}"[:200])
    if positive and not 0 < value <= LARGEST:  # NaN fails both comparisons, infinity the second
        raise ProfileError(path, f"must be a finite number > 0 and at most {LARGEST:.0e}, got {value!r}")
    return value


def _rows(data: dict, path: str) -> list:
    rows = _get(data, path, list)
    if not rows:
        raise ProfileError(path, "must hold at least one measurement")
    return rows


def from_dict(data: Any) -> HardwareProfile:
    """Check a profile's JSON and read it; ProfileError names the first field at fault."""
    if not isinstance(data, dict):
        raise ProfileError("profile", f"must be a JSON object, got {type(data).__name__}")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise ProfileError("format", f"must be {FORMAT!r} (a file written by `distdeck calibrate`), got {fmt!r}"[:200])
    device_type = _get(data, "device.type", str)
    if device_type not in DEVICE_TYPES:
        raise ProfileError("device.type", f"must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}")
    gemm = []
    for i, row in enumerate(_rows(data, "gemm.rows")):
        where = f"gemm.rows[{i}]"
        if not isinstance(row, dict):
            raise ProfileError(where, "must be an object")
        m, k, n = (_get(row, name, int, True, f"{where}.") for name in ("m", "k", "n"))
        for name, dim in (("m", m), ("k", k), ("n", n)):
            if dim > LARGEST_DIM:
                raise ProfileError(f"{where}.{name}", f"must be at most {LARGEST_DIM}, got {dim}")
        seconds = _get(row, "seconds", float, True, f"{where}.")
        rate = _get(row, "flops_per_s", float, True, f"{where}.")
        if not math.isclose(rate, 2 * m * k * n / seconds, rel_tol=1e-3):  # the file's own arithmetic
            raise ProfileError(f"{where}.flops_per_s", f"must be 2·m·k·n / seconds = {2 * m * k * n / seconds:.4g}, "
                                                       f"got {rate:.4g}")
        gemm.append(GemmRate(m, k, n, str(row.get("dtype", "")), seconds, rate))
    attention = []
    attention_rows = data["attention"].get("rows", []) if isinstance(data.get("attention"), dict) else []
    if not isinstance(attention_rows, list):
        raise ProfileError("attention.rows", f"must be a list, got {type(attention_rows).__name__}")
    for i, row in enumerate(attention_rows):
        where = f"attention.rows[{i}]"
        if not isinstance(row, dict):
            raise ProfileError(where, "must be an object")
        attention.append(AttentionRate(
            *(_get(row, name, int, True, f"{where}.") for name in ("b", "heads", "s", "d")), str(row.get("kernel", "")),
            row.get("picked_by_torch") is True,
            *(_get(row, name, float, True, f"{where}.") for name in ("forward_s", "forward_backward_s",
                                                                 "forward_flops_per_s", "backward_flops_per_s"))))
    elementwise = {}
    rows = data.get("elementwise", {}).get("rows", {}) if isinstance(data.get("elementwise"), dict) else {}
    for name in rows if isinstance(rows, dict) else ():
        elementwise[name] = _get(data, f"elementwise.rows.{name}.bytes_per_s", float, positive=True)
    optimizer = {}
    rows = data.get("optimizer", {}).get("rows", {}) if isinstance(data.get("optimizer"), dict) else {}
    for name in rows if isinstance(rows, dict) else ():
        optimizer[name] = _get(data, f"optimizer.rows.{name}.seconds_per_param", float, positive=True)
    link = data.get("interconnect")
    bus = _get(data, "interconnect.bus_bytes_per_s", float, positive=True) if link else 0.0
    return HardwareProfile(
        device_type=device_type, device_name=_get(data, "device.name", str),
        memory_bytes=_get(data, "device.memory_bytes", float, positive=True),
        compute_units=_get(data, "device.compute_units", int, positive=True), dtype=_get(data, "device.dtype", str),
        date=_get(data, "date", str), gemm=tuple(gemm),
        copy_bytes_per_s=_get(data, "memory_copy.bytes_per_s", float, positive=True),
        eager_op_s=_get(data, "eager_op.seconds_per_op", float, positive=True), attention=tuple(attention),
        elementwise_bytes_per_s=elementwise, optimizer_s_per_param=optimizer, interconnect_bus_bytes_per_s=bus,
        interconnect_backend=str(link.get("backend", "")) if link else "", raw=data)


def load(path: str | Path) -> HardwareProfile:
    """Read and check a profile file; ProfileError (field "file" when it cannot be read as JSON)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError("file", f"cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError("file", f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    return from_dict(data)


def attention_vs_h100(profile: HardwareProfile, gpu: hardware.GPU) -> float:
    """The measured attention rates over what the estimator would take for the same kernel, head size, length and
    direction on an H100 (its default kernel's curve, `gpu` at attention_vs_h100 = 1): their geometric mean."""
    if not profile.attention:
        return gpu.attention_vs_h100
    ratios = []
    for row in profile.attention:
        for direction, measured in (("forward", row.forward_flops_per_s), ("backward", row.backward_flops_per_s)):
            ratios.append(measured / kernels.attention_rate(gpu, "auto", row.d, direction, True, row.s))
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def to_gpu(profile: HardwareProfile) -> hardware.GPU:
    """The GPU-like catalog entry of a profile (see the module's docstring for each field)."""
    best = profile.best_gemm
    link = (profile.interconnect_bus_bytes_per_s / hardware.NVLINK_BUS_EFFICIENCY
            if profile.interconnect_bus_bytes_per_s else 0.0)
    picked = [a for a in profile.attention if a.picked_by_torch] or list(profile.attention)
    gpu = hardware.GPU(
        name=f"profile-{profile.slug}", title=f"{profile.device_name} (calibrated {profile.date[:10]})",
        peak_flops=best.flops_per_s, matmul_flops=best.flops_per_s, sustained_flops=best.flops_per_s,
        hbm_bytes=profile.memory_bytes, hbm_bandwidth=profile.copy_bytes_per_s / hardware.HBM_EFFICIENCY,
        nvlink_bandwidth=link, sms=profile.compute_units, node_egress=link, gpus_per_node=1,
        short=profile.device_name, memory_total=profile.memory_bytes + hardware.CUDA_RESERVED_BYTES
        if profile.device_type == "cpu" else profile.memory_bytes,
        mamf_shape=(best.m, best.n, best.k),
        # the measured fields the single-GPU stacks read (simulations/estimate/compute.py: gemm_time, sdpa_time,
        # eager_op_seconds, streaming_time, optimizer_time), each as calibrate measured it
        eager_op_s=profile.eager_op_s, copy_bandwidth=profile.copy_bytes_per_s,
        adamw_s_per_param=tuple(sorted(profile.optimizer_s_per_param.items())),
        gemm_seconds=tuple((g.m, g.k, g.n, g.seconds) for g in profile.gemm),
        sdpa_seconds=tuple((a.b, a.heads, a.s, a.d, a.forward_s, a.forward_backward_s) for a in picked))
    return replace(gpu, attention_vs_h100=attention_vs_h100(profile, gpu))
