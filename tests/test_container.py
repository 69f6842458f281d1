"""The container image, built and run for real (issue 23): `make image` builds it with docker or podman
(.ci/run installs podman, runc and debootstrap where there is no engine), then the container answers
/healthz, streams a live DDP run whose self-checks pass, serves the deck with its vendored front end, and
stops on SIGTERM within 10 s, having shut its rank pool down itself.

The tests share one container and run in file order: the last one stops it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.image_build import this_runs_build
from tests.served import free_port
from tests.sse import read_events

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "distdeck"
POOL_SIZE = 2  # a setting handed in as a container user would (-e DISTDECK_POOL_SIZE): a light pool
FRAME_ANCESTOR = "https://blog.example"

# A cold build (Debian's base, Node, torch) takes minutes; a cached one seconds.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


class Engine:
    """docker or podman, as scripts/image.sh picked it, with the environment it needs on this host."""

    def __init__(self) -> None:
        lines = run([str(ROOT / "scripts" / "image.sh"), "engine"], env=os.environ).stdout.split()
        settings = dict(line.split("=", 1) for line in lines)
        self.command = settings.pop("ENGINE")
        self.env = {**os.environ, **settings}
        # podman's default network adds a bridge with an address to the host (podman0, 10.88.0.1) when a
        # container starts: Chromium, driven by the browser tests of the session beside this one
        # (scripts/test_side_by_side.py), then fails the loads in flight with ERR_NETWORK_CHANGED. slirp4netns
        # gives the container a network of its own, no host interface, and publishes ports all the same.
        self.network = ["--network", "slirp4netns"] if self.command == "podman" and shutil.which("slirp4netns") else []

    def __call__(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        return run([self.command, *args], env=self.env, timeout=timeout, check=check)


def run(argv: list[str], env: dict, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done


@pytest.fixture(scope="module")
def engine() -> Engine:
    # `make image`, which the suite started in the background as soon as it collected these tests.
    build = this_runs_build()
    if not build.started():  # a run whose conftest did not start it
        build.start()
    status, log = build.wait(timeout_s=1700)
    if status != 0:
        pytest.fail(f"make image exited {status}:\n{log}")
    return Engine()


class Container:
    def __init__(self, engine: Engine, name: str, port: int, started: float) -> None:
        self.engine, self.name, self.url, self.started = engine, name, f"http://127.0.0.1:{port}", started

    def host_pid(self) -> int:
        return int(self.engine("inspect", "--format", "{{.State.Pid}}", self.name).stdout)


@pytest.fixture(scope="module")
def container(engine: Engine) -> Iterator[Container]:
    name, port = f"distdeck-test-{os.getpid()}", free_port()
    started = time.monotonic()
    engine("run", "--detach", "--name", name, *engine.network, "--publish", f"127.0.0.1:{port}:8000",
           "--env", f"DISTDECK_POOL_SIZE={POOL_SIZE}", "--env", f'DISTDECK_FRAME_ANCESTORS=["{FRAME_ANCESTOR}"]',
           IMAGE)
    try:
        yield Container(engine, name, port, started)
    finally:
        engine("rm", "--force", name, check=False)


def wait_for_health(url: str, within_s: float) -> dict:
    deadline, health = time.monotonic() + within_s, {}
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            response = httpx.get(f"{url}/healthz", timeout=2)
            if response.status_code == 200:
                health = response.json()
                if health["simulator"] == "ready":
                    return health
        time.sleep(0.3)
    pytest.fail(f"no ready /healthz within {within_s} s (last: {health or 'no answer'})")


def descendants(pid: int) -> dict[int, int]:
    """The processes under host pid `pid`, itself included: {host pid: pid inside the container}."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            nspid = next(line for line in (Path("/proc") / str(current) / "status").read_text().splitlines()
                         if line.startswith("NSpid:"))
            found[current] = int(nspid.split()[-1])  # the last one is the pid in the innermost namespace
            todo += children.get(current, [])
    return found


def test_the_container_answers_healthz_with_its_rank_pool_ready(container):
    health = wait_for_health(container.url, within_s=180)
    print(f"run -> /healthz ready: {time.monotonic() - container.started:.1f} s")
    assert health["status"] == "ok" and len(health["ranks"]) == POOL_SIZE, health


def test_the_image_health_check_passes_inside_the_container(container):
    healthcheck = container.engine("inspect", "--format", "{{json .Config.Healthcheck.Test}}", container.name).stdout
    test = json.loads(healthcheck)
    assert test[0] == "CMD" and any("/healthz" in part for part in test), test
    container.engine("exec", container.name, *test[1:], timeout=30)  # the command the engine itself runs


def test_a_live_ddp_run_streams_over_sse_and_passes_its_self_checks(container):
    wait_for_health(container.url, within_s=180)
    with httpx.stream("GET", f"{container.url}/api/simulations/ddp/frames?world_size={POOL_SIZE}", timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = list(read_events(r.iter_lines()))
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "meta" and "frame" in kinds and kinds[-2:] == ["summary", "done"], kinds
    checks = events[-2][2]["checks"]
    assert checks and all(check["passed"] for check in checks), [c for c in checks if not c["passed"]]


def test_the_deck_is_served_with_its_vendored_front_end_and_the_containers_settings(container):
    deck = httpx.get(f"{container.url}/", timeout=30)
    assert deck.status_code == 200 and deck.text.count("<section") > 10
    assert f"frame-ancestors {FRAME_ANCESTOR}" in deck.headers["content-security-policy"]
    for asset in ("reveal.js/reveal.js", "katex/katex.min.js", "d3/d3.min.js"):  # from the Node stage
        assert httpx.get(f"{container.url}/static/vendor/{asset}", timeout=30).status_code == 200, asset


def test_sigterm_stops_the_container_within_10_s_with_its_rank_pool_shut_down(container):
    health = wait_for_health(container.url, within_s=180)
    processes = descendants(container.host_pid())
    assert set(health["ranks"]) <= set(processes.values()), (health["ranks"], processes)  # the ranks are there
    signalled = time.monotonic()
    container.engine("kill", "--signal", "TERM", container.name)
    try:
        exit_code = container.engine("wait", container.name, timeout=10).stdout.strip()
    except subprocess.TimeoutExpired:
        pytest.fail("still running 10 s after SIGTERM: PID 1 did not pass the signal on, or the shutdown hung")
    print(f"SIGTERM -> exit: {time.monotonic() - signalled:.1f} s")
    # uvicorn shuts down, then raises the SIGTERM it caught again, so its status is SIGTERM's (143 through
    # tini); the engine's own SIGKILL would be 137. Its log says the shutdown ran to the end.
    assert exit_code in ("0", "143"), exit_code
    logs = container.engine("logs", container.name)
    logs = logs.stdout + logs.stderr
    assert "Application shutdown complete" in logs, logs[-2000:]  # the lifespan's end, which closes the pool
    assert not [pid for pid in processes if Path(f"/proc/{pid}").exists()], "processes left after exit"
