"""A real `distdeck serve` in a subprocess, for the tests that need the whole server: signals, process trees."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served_with_warm_pool(pool_size: int = 2, ready_within_s: float = 90) -> Iterator[tuple[subprocess.Popen, int, dict]]:
    """`distdeck serve` on a free port with a pool of `pool_size` ranks started at once; yields the process, its
    port and its /healthz once the simulator is ready (whatever it said last, if it never was), and kills the
    server afterwards if the test has not stopped it."""
    port = free_port()
    env = {**os.environ, "DISTDECK_START_POOL_ON_STARTUP": "true", "DISTDECK_POOL_SIZE": str(pool_size)}
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + ready_within_s
        health: dict = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
                if health["simulator"] == "ready":
                    break
            time.sleep(0.3)
        yield server, port, health
    finally:
        if server.poll() is None:
            server.kill()
