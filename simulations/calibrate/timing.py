"""Timing one call on a device: the median of repeated calls after warm-up, with the device's own clock.

CUDA: CUDA events around the call (the GPU's time, the host's launch hidden when it runs ahead), or, for what the
host costs (`wall`), the host's clock with a synchronisation after each call. CPU: the host's clock, which is the
device's.
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


def wall(fn: Callable[[], object], device: torch.device, warm: int = 2, reps: int = 5) -> float:
    """Median seconds of one call on the host's clock, the device synchronised after it: `reps` calls, more for a
    short one (MIN_TOTAL_S)."""
    for _ in range(warm):
        fn()
    synchronize(device)
    times: list[float] = []
    while len(times) < reps or (sum(times) < MIN_TOTAL_S and len(times) < MAX_REPS):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def device_time(fn: Callable[[], object], device: torch.device, warm: int = 2, reps: int = 5) -> float:
    """Median seconds of one call on the device: CUDA events on a GPU, the host's clock on a CPU."""
    if device.type != "cuda":
        return wall(fn, device, warm, reps)
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
