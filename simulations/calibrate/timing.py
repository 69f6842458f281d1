"""Timing one call on a device: the median of repeated calls after warm-up, with the device's own clock.

CUDA: CUDA events around the call (the GPU's time, the host's launch hidden when it runs ahead), or, for what the
host costs (`wall`), the host's clock with a synchronisation after each call. CPU: the host's clock, which is the
device's; or, on a machine other work keeps busy, this process's CPU time (`clock="cpu"`, with torch on one thread:
then it is the time the work itself took, whatever else the cores ran meanwhile; a short call runs inside one slice
of the scheduler and a long one over many, so on a busy machine wall-clock rates of short and long work disagree).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# A call shorter than this is repeated until its times add up to it (at most MAX_REPS calls): one slice of a busy
# machine's scheduler (a few milliseconds) would otherwise be the median of a handful of microsecond calls.
MIN_TOTAL_S = 0.05
MAX_REPS = 200


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def wall(fn: Callable[[], object], device: torch.device, warm: int = 2, reps: int = 5, clock: str = "wall",
         min_total_s: float = MIN_TOTAL_S) -> float:
    """Median seconds of one call on the host's clock (or this process's CPU time, `clock="cpu"`), the device
    synchronised after it: `reps` calls, more for a short one (`min_total_s`; 0 for a collective, whose ranks must
    make the same number of calls)."""
    now = CLOCKS[clock]
    for _ in range(warm):
        fn()
    synchronize(device)
    times: list[float] = []
    while len(times) < reps or (sum(times) < min_total_s and len(times) < MAX_REPS):
        start = now()
        fn()
        synchronize(device)
        times.append(now() - start)
    return statistics.median(times)


def device_time(fn: Callable[[], object], device: torch.device, warm: int = 2, reps: int = 5,
                clock: str = "wall") -> float:
    """Median seconds of one call on the device: CUDA events on a GPU, `clock` on a CPU."""
    if device.type != "cuda":
        return wall(fn, device, warm, reps, clock)
    for _ in range(warm):
        fn()
    torch.cuda.synchronize(device)
    times: list[float] = []
    while len(times) < reps or (sum(times) < MIN_TOTAL_S and len(times) < MAX_REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)
