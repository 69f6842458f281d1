"""Fan-out: many viewers of one cached run (a conference audience opening the same link).

A real server (`distdeck serve`, its own process, a 2-rank pool) is asked once for a DDP run so that it is
cached; then one viewer, and then VIEWERS viewers at once, stream it to `done`. Figures: time to `done`
for one viewer, and p50 / p99 over the many, each the median over ROUNDS rounds; every viewer must get
every frame. Target (issue 14): p99 with 200 viewers ≤ 5× one viewer's.

Wall times depend on what else runs on the machine; the server's own CPU time per viewer
(from /proc) does not, and is the figure to compare across changes.

The viewers are plain asyncio sockets reading until `event: done`, so the client side costs little
next to the server it measures (both share the machine).

    python -m bench.fanout [--viewers 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
RUN = "/api/simulations/ddp/frames?world_size=2&steps=9&seed=8080"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _view(port: int, path: str) -> tuple[float, int, bool]:
    """(seconds to `done`, frames received, ended with done) for one viewer."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    received = bytearray()
    while True:  # until the `done` (or `error`) event has arrived whole
        end = max(received.rfind(b"event: done"), received.rfind(b"event: error"))
        if end >= 0 and received.find(b"}\r\n\r\n", end) >= 0:
            break
        chunk = await reader.read(1 << 16)
        if not chunk:
            break
        received += chunk
    elapsed = time.perf_counter() - start
    writer.close()
    return elapsed, received.count(b"event: frame"), b"event: done" in received


async def _crowd(port: int, viewers: int) -> list[tuple[float, int, bool]]:
    return await asyncio.gather(*[_view(port, RUN) for _ in range(viewers)])


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used: the server's cost, whatever else loads the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fanout(viewers: int = 200, rounds: int = 3, singles: int = 7) -> dict:
    port = _free_port()
    env = {**os.environ, "DISTDECK_POOL_SIZE": "2", "DISTDECK_START_POOL_ON_STARTUP": "true",
           "DISTDECK_RUNS_PER_CLIENT": "1000"}
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=os.getcwd(),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()["simulator"] == "ready":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        with httpx.Client(timeout=120) as client:  # run it once: from now on it is cached
            frames = client.get(f"http://127.0.0.1:{port}{RUN}").text.count("event: frame")
        one = [asyncio.run(_crowd(port, 1))[0][0] for _ in range(singles)]
        p50s, p99s, cpu_ms, complete = [], [], [], True
        for _ in range(rounds):
            cpu = _cpu_s(server.pid)
            results = asyncio.run(_crowd(port, viewers))
            cpu_ms.append((_cpu_s(server.pid) - cpu) * 1000 / viewers)
            complete &= all(done and got == frames for _, got, done in results)
            times = [t for t, _, _ in results]
            p50s.append(_percentile(times, 0.5))
            p99s.append(_percentile(times, 0.99))
    finally:
        server.terminate()
        server.wait(30)
    figures = {"fanout_frames": frames, "fanout_viewers": viewers, "fanout_one_viewer_s": one,
               "fanout_p50_s": p50s, "fanout_p99_s": p99s, "fanout_server_cpu_ms_per_viewer": cpu_ms,
               "fanout_every_frame_to_every_viewer": complete}
    ratio = statistics.median(p99s) / statistics.median(one)
    figures["fanout_p99_over_one"] = ratio
    print(f"fan-out of a cached {frames}-frame run: one viewer {statistics.median(one) * 1000:.1f} ms to done; "
          f"{viewers} viewers p50 {statistics.median(p50s) * 1000:.0f} ms, p99 {statistics.median(p99s) * 1000:.0f} ms "
          f"= {ratio:.1f}× one viewer (target ≤ 5×); server CPU {statistics.median(cpu_ms):.2f} ms per viewer; "
          f"every frame to every viewer: {complete}", flush=True)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fanout(args.viewers, args.rounds)
