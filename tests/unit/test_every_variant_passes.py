"""No self-check fires on a correct run: every variant the export records, and random valid parameter points.

The export fails on any failed check (issue 19: the published deck could not be built), so the whole grid it
records runs here, on the session's warm pool, with `app.export.plan`'s own enumeration. Then a seeded sample
of each scenario's parameter space (from its pydantic schema, sizes kept small), and the points that once
failed, as regressions.
"""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from app.export import plan
from app.settings import Settings
from simulations import scenarios
from simulations.runtime import simulate
from tests import checked_runs

pytestmark = pytest.mark.slow

# Random points per scenario: 11 scenarios × 3 points, each run a fraction of a second to ~3 s.
POINTS_PER_SCENARIO = 3
SEED = 19

# Points that failed a check on a correct run (issue 19).
REGRESSIONS = [
    ("expert_parallel", {"world_size": 8, "experts": 16, "top_k": 4, "capacity_factor": 1.25, "tokens": 32,
                         "hidden": 16}),
    ("diloco", {"world_size": 7, "inner_optimizer": "adamw", "inner_lr": 0.01, "outer_lr": 0.7,
                "outer_momentum": 0.0885, "width": 55, "depth": 3, "batch_per_worker": 16, "inner_steps": 3,
                "seed": 7131}),
]


def failed_checks(pool, name: str, params) -> list[str]:
    run = simulate(pool, name, params)
    if run.error is not None:
        return [f"the run failed: {run.error}"]
    return [f"{c.name}: measured {c.measured}, expected {c.expected} ({c.detail})"
            for c in run.summary.checks if not c.passed]


def test_every_variant_the_export_records_passes_its_checks(pool):
    wanted, _, _ = plan(Settings(), "grid", pool.size)
    assert len(wanted) > 100  # the whole grid, not a handful
    # A run this session's browser export already recorded passed every check there (the export fails
    # otherwise): not run twice.
    failures = [f"{w.scenario} {w.params.model_dump(mode='json')}: {failed}" for w in wanted
                if not checked_runs.passed(w.scenario, w.params) and (failed := failed_checks(pool, w.scenario, w.params))]
    if failures:
        pytest.fail(f"{len(failures)} of {len(wanted)} variants fail a check:\n" + "\n".join(failures), pytrace=False)


def random_point(scenario: scenarios.Scenario, rng: random.Random, max_ranks: int):
    """A valid parameter point drawn from the scenario's JSON Schema bounds: every enum value and boolean,
    integers in their range (a wide range capped at twice the default, to keep runs small), numbers uniform
    in theirs; seeds anywhere. Points the model's own validators reject are drawn again."""
    schema = scenario.params.model_json_schema()
    defaults = scenario.params().model_dump(mode="json")
    for _ in range(200):
        point = {}
        for name, spec in schema["properties"].items():
            spec = {**schema.get("$defs", {}).get(spec.get("$ref", "").split("/")[-1], {}), **spec}
            low = spec.get("minimum", spec.get("exclusiveMinimum"))
            high = spec.get("maximum", spec.get("exclusiveMaximum"))
            if "enum" in spec:
                point[name] = rng.choice(spec["enum"])
            elif spec.get("type") == "boolean":
                point[name] = rng.random() < 0.5
            elif spec.get("type") == "integer" and name == "seed":
                point[name] = rng.randint(low, high)
            elif spec.get("type") == "integer":
                point[name] = rng.randint(low, high if high <= 8 else max(low, min(high, 2 * defaults[name])))
            elif spec.get("type") == "number":
                point[name] = round(rng.uniform(low, high), 4) or high  # `gt 0` bounds: never 0
        try:
            params = scenario.params.model_validate(point)
        except ValidationError:
            continue
        if scenario.world_size(params) <= max_ranks:
            return params
    raise AssertionError(f"no valid point of {scenario.name} drawn in 200 tries")


def sampled_points(max_ranks: int) -> list[tuple[str, object]]:
    rng = random.Random(SEED)
    return [(name, random_point(scenario, rng, max_ranks)) for name, scenario in scenarios.all_scenarios().items()
            for _ in range(POINTS_PER_SCENARIO)]


def test_random_valid_parameter_points_pass_every_check(pool):
    points = sampled_points(pool.size)
    assert {name for name, _ in points} == set(scenarios.all_scenarios())
    failures = [f"{name} {params.model_dump(mode='json')}: {failed}" for name, params in points
                if (failed := failed_checks(pool, name, params))]
    if failures:
        pytest.fail(f"{len(failures)} of {len(points)} points fail a check:\n" + "\n".join(failures), pytrace=False)


@pytest.mark.parametrize(("name", "params"), REGRESSIONS, ids=[name for name, _ in REGRESSIONS])
def test_points_that_once_failed_a_check_pass(pool, name, params):
    failed = failed_checks(pool, name, scenarios.get(name).params.model_validate(params))
    assert not failed, "\n".join(failed)


def test_a_point_torch_cannot_schedule_is_refused_with_its_rule():
    """Found by the random points: torch's zero-bubble schedule (the pipeline's cross-check) runs in rounds of
    max(1, m // p) micro-batches, so m = 13 on 3 stages raised inside the ranks instead of being refused."""
    with pytest.raises(ValidationError, match=r"zero_bubble needs microbatches to be a multiple of its rounds"):
        scenarios.get("pipeline").params.model_validate({"stages": 3, "microbatches": 13, "schedule": "zero_bubble"})
