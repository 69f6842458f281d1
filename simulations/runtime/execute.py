"""Run one scenario on one rank: the part shared by the warm pool and by torchrun."""

from __future__ import annotations

import platform
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import torch
import torch.distributed as dist

from simulations import scenarios, trace
from simulations.frames import Provenance
from simulations.scenarios import RankContext
from simulations.words import counted


class NotEnoughGPUs(ValueError):
    """NCCL was asked for more ranks on one machine than it has GPUs (NCCL would fail with ncclInvalidUsage)."""

    def __init__(self, ranks: int, gpus: int):
        self.ranks, self.gpus = ranks, gpus
        super().__init__(f"--backend nccl needs a GPU for each rank: {counted(ranks, 'rank')} asked on this "
                         f"machine, {counted(gpus, 'GPU')} visible")

    def advice(self, fewer: str) -> str:
        """The message and what to do: gloo, or, where there is a GPU, fewer ranks; `fewer` says how to ask for
        them, with {gpus} for the most that fit ("--nproc-per-node {gpus}")."""
        remedy = "use --backend gloo (or auto, which picks gloo here)"
        if self.gpus:
            remedy += f", or at most {counted(self.gpus, 'rank')} ({fewer.format(gpus=self.gpus)})"
        return f"{self}; {remedy}"


def gpus_visible() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pick_backend(requested: str, local_ranks: int) -> str:
    """The backend for `local_ranks` ranks on this machine. "auto": NCCL when every rank can have its own
    CUDA device, else gloo. "nccl" with fewer GPUs than ranks raises NotEnoughGPUs, before any rank starts."""
    if requested == "nccl" and local_ranks > gpus_visible():
        raise NotEnoughGPUs(local_ranks, gpus_visible())
    if requested != "auto":
        return requested
    if gpus_visible() and gpus_visible() >= local_ranks:
        return "nccl"
    return "gloo"


def device_for(backend: str, rank: int) -> torch.device:
    if backend == "nccl":
        return torch.device("cuda", rank % torch.cuda.device_count())
    return torch.device("cpu")


def start_clock(device: torch.device, group) -> float:
    """Set the rank up, then agree on the time origin of every rank's spans (rank 0's clock).

    Start-up is not part of a step: CUDA makes its context on a device's first use and cuBLAS its handle on
    the first matmul, and NCCL sets up a group's communicator on its first collective. Timed from before them,
    an H200 run's first forward started 3 s in (issue 32); here they happen before the clock starts."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
        probe = torch.ones(1, 1, device=device)
        probe @ probe  # noqa: B018 - cuBLAS's handle is made here, not in the first step
    first = torch.zeros(1, dtype=torch.float64, device=device)
    dist.all_reduce(first, group=group)  # the group's first collective: its communicator is set up here
    origin = torch.tensor([time.time()], dtype=torch.float64, device=device)
    dist.broadcast(origin, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return float(origin.item())  # .item() waits for the device


def run_on_rank(name: str, params: dict, *, rank: int, world_size: int, group, backend: str,
                sink: Callable[[dict], None] | None, traced: bool = True) -> dict:
    """Validate params, run the scenario's per-rank program under a tracer, return its result
    (with where it ran, under "_where", for the run's provenance)."""
    scenario = scenarios.get(name)
    p = scenario.params.model_validate(params)
    device = device_for(backend, rank)
    t0 = start_clock(device, group)
    ctx = RankContext(rank=rank, world_size=world_size, group=group, device=device, backend=backend)
    tracer = trace.Tracer(rank=rank, t0=t0, sink=sink, enabled=traced, device=device)
    with trace.using(tracer):
        start = time.perf_counter()
        result = scenario.run(ctx, p) or {}
        result["_run_s"] = time.perf_counter() - start
        result["_sent"] = dict(tracer.sent)
        result["_frames"] = tracer.index
    result["_where"] = where_this_rank_ran(device)
    return result


def where_this_rank_ran(device: torch.device) -> dict:
    """This rank's host and device: the GPU's name, or the CPU's model."""
    if device.type == "cuda":
        return {"host": socket.gethostname(), "device": torch.cuda.get_device_name(device), "device_type": "cuda"}
    return {"host": socket.gethostname(), "device": cpu_model(), "device_type": "cpu"}


def cpu_model() -> str:
    """The CPU's model name as Linux reports it ("AMD EPYC 7B13"), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "an unknown CPU"


def provenance(backend: str, results: list[dict]) -> Provenance:
    """Where and when a run was measured, from its ranks' results (run_on_rank's "_where")."""
    wheres = [r["_where"] for r in results]
    devices: dict[str, int] = {}
    for where in wheres:
        devices[where["device"]] = devices.get(where["device"], 0) + 1
    nccl = None
    if backend == "nccl":
        major, minor, patch, *suffix = torch.cuda.nccl.version()  # a suffix only when the build has one
        nccl = f"{major}.{minor}.{patch}{''.join(suffix)}"
    return Provenance(hosts=sorted({w["host"] for w in wheres}), devices=devices,
                      device_type=wheres[0]["device_type"], backend=backend, torch=torch.__version__,
                      cuda=torch.version.cuda, nccl=nccl,
                      date=datetime.now(UTC).isoformat(timespec="seconds"))
