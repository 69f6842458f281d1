"""A schema-driven fuzzer over the whole OpenAPI schema (issue 14, item 9): every operation, each
scenario's own parameters, bounded to a fixed number of examples per operation. No response may be
a 5xx, and each must be one the schema declares, with the declared content type and shape."""

from __future__ import annotations

import pytest
import schemathesis
from schemathesis.checks import positive_data_acceptance
from hypothesis import HealthCheck, Phase, settings

from app.main import create_app
from app.settings import Settings
from simulations.runtime import RankPool
from tests.api.test_serving import live_server

pytestmark = pytest.mark.slow

schema = schemathesis.openapi.from_dict(create_app(Settings()).openapi())
# Cross-field rules (experts a multiple of world_size, ...) are the scenarios' own validators, which
# JSON Schema cannot say: a schema-valid request may rightly be a 422 naming them.
EXCLUDED = [positive_data_acceptance]
RUNS = r"^/api/simulations/[a-z0-9_]+/(frames|trace)$"  # the operations that start a real run
FUZZ = {"deadline": None, "derandomize": True, "database": None, "phases": [Phase.explicit, Phase.generate],
        "suppress_health_check": list(HealthCheck)}


@pytest.fixture(scope="module")
def url():
    # Bounded time: a pool of 2 ranks (a run for more is a 422 at once), and a fuzzed run past 2 s is
    # stopped as too large (an `error` event; a 422 for a trace).
    pool = RankPool(size=2, backend="gloo", job_timeout_s=30)
    pool.start(background=False)
    app = create_app(Settings(max_run_s=2, runs_per_client=100, max_queued_runs=100), pool=pool)
    try:
        with live_server(app) as url:
            yield url
    finally:
        pool.close()


@schema.exclude(path_regex=RUNS).parametrize()
@settings(max_examples=8, **FUZZ)
def test_pages_and_api_answer_as_the_schema_says(case, url):
    case.call_and_validate(base_url=url, timeout=30, excluded_checks=EXCLUDED)


@schema.include(path_regex=RUNS).parametrize()
@settings(max_examples=2, **FUZZ)
def test_runs_answer_as_the_schema_says(case, url):
    case.call_and_validate(base_url=url, timeout=30, excluded_checks=EXCLUDED)
