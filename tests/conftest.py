"""Shared fixtures: one warm rank pool for the whole session (starting ranks is the slow part); and the
container image built in the background while the other tests run (tests/image_build.py)."""

from __future__ import annotations

import os
import shutil

import pytest

# Apps made in tests start no rank pool of their own unless a test asks: they share `pool`.
os.environ.setdefault("DISTDECK_START_POOL_ON_STARTUP", "false")

from simulations.runtime import RankPool, simulate
from tests.image_build import FOLDER_VARIABLE, ImageBuild, new_folder, wants_the_image

_image_build: ImageBuild | None = None  # in the outermost pytest only


def pytest_configure(config):
    """The outermost pytest owns the build; a pytest that a test starts (the estimator's mutants) inherits the
    folder's name in its environment and leaves the build alone."""
    global _image_build
    if FOLDER_VARIABLE not in os.environ:
        _image_build = ImageBuild(new_folder())


def pytest_collection_modifyitems(items):
    # The container tests last (a stable sort keeps their file order): their image has the whole run to build.
    items.sort(key=lambda item: wants_the_image([item.nodeid]))


_started_in_background: list = []  # what test modules started at collection, stopped at the session's end


def pytest_collection_finish(session):
    """Work independent of every other test starts now, beside the tests before it: the container image, and
    any test module's own runs (a module with `start_in_background(its items)`, returning what to stop)."""
    if session.config.option.collectonly or hasattr(session.config, "workerinput"):  # xdist: every worker collects all
        return
    if _image_build is not None and wants_the_image(item.nodeid for item in session.items):
        _image_build.start()
    by_module: dict = {}
    for item in session.items:
        module = getattr(item, "module", None)
        if hasattr(module, "start_in_background"):
            by_module.setdefault(module, []).append(item)
    for module, items in by_module.items():
        _started_in_background.append(module.start_in_background(items))


def pytest_unconfigure(config):
    while _started_in_background:
        started = _started_in_background.pop()
        if started is not None:
            started.stop()
    if _image_build is not None:
        _image_build.stop()
        shutil.rmtree(_image_build.folder, ignore_errors=True)
        os.environ.pop(FOLDER_VARIABLE, None)


@pytest.fixture(scope="session")
def pool():
    pool = RankPool(size=8, backend="gloo", job_timeout_s=60)
    pool.start(background=False)
    yield pool
    pool.close()


@pytest.fixture
def small_pool():
    """A pool of its own, two ranks, for tests that kill ranks or stop the server."""
    pool = RankPool(size=2, backend="gloo", job_timeout_s=30)
    pool.start(background=False)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def run_scenario(pool):
    """run_scenario("ddp", world_size=4, ...) -> a finished Run (frames, summary) that must have succeeded."""

    def run(name: str, **params):
        result = simulate(pool, name, params)
        assert result.error is None, result.error
        return result

    return run
