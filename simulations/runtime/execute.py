"""Run one scenario on one rank: the part shared by the warm pool and by torchrun."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from simulations import scenarios, trace
from simulations.scenarios import RankContext


def pick_backend(requested: str, world_size: int) -> str:
    """"auto": NCCL when every rank can have its own CUDA device, else gloo."""
    if requested != "auto":
        return requested
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


def device_for(backend: str, rank: int) -> torch.device:
    if backend == "nccl":
        return torch.device("cuda", rank % torch.cuda.device_count())
    return torch.device("cpu")


def run_on_rank(name: str, params: dict, *, rank: int, world_size: int, group, backend: str, t0: float,
                sink: Callable[[dict], None] | None, traced: bool = True) -> dict:
    """Validate params, run the scenario's per-rank program under a tracer, return its result."""
    scenario = scenarios.get(name)
    p = scenario.params.model_validate(params)
    device = device_for(backend, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    ctx = RankContext(rank=rank, world_size=world_size, group=group, device=device, backend=backend)
    tracer = trace.Tracer(rank=rank, t0=t0, sink=sink, enabled=traced, device=device)
    with trace.using(tracer):
        start = time.perf_counter()
        result = scenario.run(ctx, p) or {}
        result["_run_s"] = time.perf_counter() - start
        result["_sent"] = dict(tracer.sent)
        result["_frames"] = tracer.index
    return result
