"""Shared fixtures: one warm rank pool for the whole session (starting ranks is the slow part)."""

from __future__ import annotations

import os

import pytest

# Apps made in tests start no rank pool of their own unless a test asks: they share `pool`.
os.environ.setdefault("DISTDECK_START_POOL_ON_STARTUP", "false")

from simulations.runtime import RankPool, simulate


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
