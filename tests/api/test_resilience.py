"""A run that loses a rank or hangs ends with an error event, and the server keeps serving."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.served import served_with_warm_pool
from tests.sse import read_events

pytestmark = pytest.mark.slow


def test_a_rank_killed_mid_run_ends_in_an_error_event_then_the_next_run_succeeds(small_pool):
    with TestClient(create_app(Settings(), pool=small_pool)) as client:
        victim = small_pool.pids()[1]
        with client.stream("GET", "/api/simulations/ddp/frames?world_size=2&steps=10&width=256&depth=8") as r:
            events = []
            for event in read_events(r.iter_lines()):
                events.append(event)
                if event[0] == "frame" and event[1] == "0":
                    os.kill(victim, signal.SIGKILL)
        assert events[-1][0] == "error"
        assert "rank 1 died" in events[-1][2]["message"]
        assert "Traceback" not in events[-1][2]["message"]

        with client.stream("GET", "/api/simulations/ddp/frames?world_size=2") as r:
            after = list(read_events(r.iter_lines()))
        assert after[-1][0] == "done"
        assert victim not in small_pool.pids()  # the pool was rebuilt with fresh ranks


def test_a_run_past_its_timeout_is_ended_and_the_pool_recovers(small_pool):
    small_pool.job_timeout_s = 0.05
    with TestClient(create_app(Settings(), pool=small_pool)) as client:
        with client.stream("GET", "/api/simulations/ddp/frames?world_size=2&steps=10&width=256&depth=8") as r:
            events = list(read_events(r.iter_lines()))
        assert events[-1][0] == "error" and "timed out" in events[-1][2]["message"]
        small_pool.job_timeout_s = 30
        with client.stream("GET", "/api/simulations/ddp/frames?world_size=1") as r:
            assert list(read_events(r.iter_lines()))[-1][0] == "done"


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_server_leaves_no_orphan_processes(stop):
    with served_with_warm_pool() as (server, port, health):
        assert health.get("simulator") == "ready", health
        with httpx.stream("GET", f"http://127.0.0.1:{port}/api/simulations/ddp/frames?world_size=2", timeout=60) as r:
            assert list(read_events(r.iter_lines()))[-1][0] == "done"
        owned = _descendants(server.pid)
        assert set(health["ranks"]) <= owned and len(health["ranks"]) == 2
        server.send_signal(stop)
        assert server.wait(timeout=30) is not None
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in owned) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in owned if _alive(p)]
