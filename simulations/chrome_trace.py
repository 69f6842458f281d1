"""A run's spans as Chrome trace-event JSON, which Perfetto and chrome://tracing open: one track per rank."""

from __future__ import annotations

from simulations.frames import Frame, Meta


def chrome_trace(meta: Meta, frames: list[Frame]) -> dict:
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
         "args": {"name": f"distdeck {meta.scenario} ({meta.backend}, {meta.world_size} ranks)"}},
    ]
    for rank in range(meta.world_size):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": rank, "args": {"name": f"rank {rank}"}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": rank, "args": {"sort_index": rank}})
    for frame in frames:
        for span in frame.spans:
            events.append({
                "name": span.name, "cat": span.kind, "ph": "X", "pid": 0, "tid": span.rank,
                "ts": round(span.start * 1e6, 3), "dur": round(max(span.end - span.start, 0.0) * 1e6, 3),
                "args": {"frame": frame.index, "phase": frame.phase, "step": span.step, **span.args},
            })
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"params": meta.params}}
