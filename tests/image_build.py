"""`make image` started as soon as the suite knows it will run the container tests, so that the build (apt,
npm and pip downloads, layer commits: mostly waiting on the network and the disk) overlaps every other test
instead of coming after them. The tests in tests/test_container.py then wait for it to end.

tests/conftest.py starts the build once the suite is collected; the `engine` fixture of tests/test_container.py
waits in the build's folder, which the environment names, for its exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER_VARIABLE = "DISTDECK_TEST_IMAGE_BUILD"
CONTAINER_TESTS = "tests/test_container.py"
# Below the tests' priority: the build takes the CPU the tests leave idle (a test waiting on a rank, a page,
# a socket), so timing-sensitive tests see the load they saw before.
NICENESS = 10


class ImageBuild:
    """`make image` in the background, its output in log.txt and its exit status in status.txt."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = folder / "log.txt"
        self.status = folder / "status.txt"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.process is not None:
            return
        script = f'make image >"{self.log}" 2>&1; echo $? >"{self.status}.part"; mv "{self.status}.part" "{self.status}"'
        # A session of its own: stopping the suite stops the whole build (make, podman, debootstrap) at once.
        self.process = subprocess.Popen(["nice", "-n", str(NICENESS), "sh", "-c", script], cwd=ROOT,
                                        start_new_session=True, stdin=subprocess.DEVNULL)

    def started(self) -> bool:
        return self.status.exists() or self.log.exists()

    def wait(self, timeout_s: float) -> tuple[int, str]:
        """(exit status, the log's last 4000 characters) once the build has ended; TimeoutError past timeout_s."""
        deadline = time.monotonic() + timeout_s
        while not self.status.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"make image still running after {timeout_s:.0f} s:\n{self.tail()}")
            time.sleep(1)
        return int(self.status.read_text()), self.tail()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def new_folder() -> Path:
    """The run's folder, named in the environment, which any pytest the tests start inherits."""
    folder = tempfile.mkdtemp(prefix="distdeck-image-build-")
    os.environ[FOLDER_VARIABLE] = folder
    return Path(folder)


def this_runs_build() -> ImageBuild:
    return ImageBuild(Path(os.environ[FOLDER_VARIABLE]))


def wants_the_image(node_ids) -> bool:
    return any(node_id.startswith(CONTAINER_TESTS + "::") for node_id in node_ids)
