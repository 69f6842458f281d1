"""A finished run made without a pool, and a gzip body read as a browser reads it: for the tests of how
finished runs are delivered (issue 32)."""

from __future__ import annotations

import random
import zlib

from simulations.frames import Check, Frame, Meta, RankState, RunFile, Summary
from simulations.runtime import Run


def finished_run(frames: int = 40, seed: int = 0) -> Run:
    """A finished run of `frames` frames of about 1.5 KB of events each, as varied as a run's memory figures
    (the delivery does not look inside them)."""
    rng = random.Random(seed)
    meta = Meta(scenario="ddp", title="DDP", params={"world_size": 2}, world_size=2, backend="gloo", views=["ranks"])
    frame_list = [Frame(index=i, phase="forward", caption=f"step {i}: all-reduce of the gradients",
                        ranks=[RankState(rank=r, memory={"params": rng.randrange(10**9), "grads": rng.randrange(10**9)},
                                         extra={"values": [round(rng.uniform(-1, 1), 4) for _ in range(60)]})
                               for r in range(2)])
                  for i in range(frames)]
    summary = Summary(checks=[Check(name="matches the single-process reference", passed=True)])
    return Run.from_file(RunFile(meta=meta, frames=frame_list, summary=summary), "recorded:test.json")


def gunzip_one_member(body: bytes) -> bytes:
    """What a browser reads of a gzip body: its first member (Chromium drops anything after it)."""
    member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    plain = member.decompress(body)
    assert member.eof and member.unused_data == b"", "one gzip member, nothing after it"
    return plain


def run_async(func, *args):
    """`anyio.run(func, *args)` in a thread of its own: a session's Playwright (sync API) keeps an event loop
    in the main thread, where anyio.run refuses to start a second one."""
    import anyio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, func, *args).result()
