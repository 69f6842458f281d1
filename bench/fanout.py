"""Fan-out: many viewers of one cached run (a room of phones on one slide, a conference opening one link).

A real server (`distdeck serve`, its own process, an 8-rank pool) is asked once for the pipeline run of
issue 32 (8 stages, 32 micro-batches: 80 frames) so that it is cached; then one viewer, and then VIEWERS
viewers at once, stream it to the end. Every viewer asks for gzip as every browser does, and its body,
decoded, must be the very bytes an uncompressed request gets: every frame to every viewer.

Figures, each the median over ROUNDS rounds:
- the server's CPU time (user + system, from /proc) per frame per viewer: the figure to compare across
  changes, since it does not depend on what else runs on the machine (target, issue 32: ≤ 10 µs);
- p50 / p99 time from a viewer's request to its last byte, and one viewer alone for scale (issue 14's
  target was p99 ≤ 5× one viewer's with 200 viewers);
- the server's resident memory before the crowd and its peak while the crowd is served.

The viewers are plain asyncio sockets (HTTP/1.1, `Connection: close`) that only read while the crowd is
served and decode afterwards, so the client side costs little next to the server it measures (both share
the machine).

    python -m bench.fanout [--viewers 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
RUN = "/api/simulations/pipeline/frames?stages=8&microbatches=32"
POOL_SIZE = 8  # the run's 8 stages are 8 ranks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _view(port: int, path: str, encoding: str) -> tuple[float, bytes]:
    """(seconds from the request to the last byte, the whole response as received) for one viewer."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n"
                 f"Accept-Encoding: {encoding}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    received = await reader.read()  # to the end: the server closes after the response
    elapsed = time.perf_counter() - start
    writer.close()
    return elapsed, received


def decoded_body(response: bytes) -> bytes:
    """An HTTP/1.1 response's body, de-chunked and decompressed as its headers say."""
    head, _, body = response.partition(b"\r\n\r\n")
    headers = {k.strip().lower(): v.strip().lower()
               for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    if headers.get(b"transfer-encoding") == b"chunked":
        chunks, at = [], 0
        while True:
            line_end = body.index(b"\r\n", at)
            size = int(body[at:line_end].split(b";")[0], 16)
            if size == 0:
                break
            chunks.append(body[line_end + 2:line_end + 2 + size])
            at = line_end + 2 + size + 2
        body = b"".join(chunks)
    encoding = headers.get(b"content-encoding")
    if encoding == b"gzip":  # possibly several members back to back (RFC 1952 §2.2)
        plain, rest = [], body
        while rest:
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            plain.append(member.decompress(rest))
            rest = member.unused_data
        return b"".join(plain)
    assert encoding is None, f"unexpected Content-Encoding {encoding!r}"
    return body


async def _crowd(port: int, viewers: int, encoding: str) -> list[tuple[float, bytes]]:
    return await asyncio.gather(*[_view(port, RUN, encoding) for _ in range(viewers)])


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used: the server's cost, whatever else loads the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The process's largest resident size while the `with` block runs, sampled every 10 ms."""

    def __init__(self, pid: int):
        self.pid, self.peak_mb, self._done = pid, _rss_mb(pid), threading.Event()

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self.peak_mb = max(self.peak_mb, _rss_mb(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, _rss_mb(self.pid))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _serve(port: int) -> subprocess.Popen:
    env = {**os.environ, "DISTDECK_POOL_SIZE": str(POOL_SIZE), "DISTDECK_START_POOL_ON_STARTUP": "true"}
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=os.getcwd(),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()["simulator"] == "ready":
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    server.terminate()
    raise RuntimeError("the server's pool did not start in 180 s")


def fanout(viewers: int = 1000, rounds: int = 3, singles: int = 7, encoding: str = "gzip") -> dict:
    port = _free_port()
    server = _serve(port)
    try:
        with httpx.Client(timeout=120) as client:  # run it once: from now on it is cached
            plain = client.get(f"http://127.0.0.1:{port}{RUN}", headers={"Accept-Encoding": "identity"}).content
        frames = plain.count(b"event: frame")
        one = [asyncio.run(_crowd(port, 1, encoding))[0][0] for _ in range(singles)]
        p50s, p99s, cpu_us, rss_mb, wire_kb, complete = [], [], [], [], [], True
        rss_before = _rss_mb(server.pid)
        for _ in range(rounds):
            cpu = _cpu_s(server.pid)
            with PeakRss(server.pid) as peak:
                results = asyncio.run(_crowd(port, viewers, encoding))
            cpu_us.append((_cpu_s(server.pid) - cpu) * 1e6 / (viewers * frames))
            rss_mb.append(peak.peak_mb)
            wire_kb.append(statistics.median(len(r) for _, r in results) / 1024)
            complete &= all(decoded_body(response) == plain for _, response in results)
            times = [t for t, _ in results]
            p50s.append(_percentile(times, 0.5))
            p99s.append(_percentile(times, 0.99))
    finally:
        server.terminate()
        server.wait(30)
    figures = {"fanout_frames": frames, "fanout_viewers": viewers, "fanout_encoding": encoding,
               "fanout_one_viewer_s": one, "fanout_p50_s": p50s, "fanout_p99_s": p99s,
               "fanout_server_cpu_us_per_frame_per_viewer": cpu_us, "fanout_server_rss_mb_before": rss_before,
               "fanout_server_rss_mb_peak": rss_mb, "fanout_wire_kb_per_viewer": wire_kb,
               "fanout_every_frame_to_every_viewer": complete}
    cpu = statistics.median(cpu_us)
    print(f"fan-out of a cached {frames}-frame run ({len(plain) / 1024:.0f} KiB of events, "
          f"{statistics.median(wire_kb):.0f} KiB as sent with {encoding}): one viewer "
          f"{statistics.median(one) * 1000:.1f} ms; {viewers} viewers p50 {statistics.median(p50s) * 1000:.0f} ms, "
          f"p99 {statistics.median(p99s) * 1000:.0f} ms; server CPU {cpu:.1f} µs per frame per viewer "
          f"(target ≤ 10), {cpu * frames * viewers / 1e6:.2f} s for the crowd; server RSS {rss_before:.0f} MB before, "
          f"peak {statistics.median(rss_mb):.0f} MB; every frame to every viewer: {complete}", flush=True)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--encoding", default="gzip", help="the viewers' Accept-Encoding")
    args = parser.parse_args()
    fanout(args.viewers, args.rounds, encoding=args.encoding)
