"""The catalog of scenarios: one module per parallelism, each defining `SCENARIO`."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulations.scenarios.base import RankContext, Scenario

__all__ = ["RankContext", "Scenario", "all_scenarios", "get", "UnknownScenario"]


def __getattr__(name: str):
    # RankContext and Scenario load torch: imported on first use, so that torch-free modules of this
    # package (pipeline_schedules, used by simulations.estimate) import without it.
    if name in ("RankContext", "Scenario"):
        from simulations.scenarios import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownScenario(KeyError):
    pass


@cache
def all_scenarios() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_") or module.name == "base":
            continue
        scenario = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SCENARIO", None)
        if scenario is not None:
            found[scenario.name] = scenario
    return dict(sorted(found.items()))


def get(name: str) -> Scenario:
    try:
        return all_scenarios()[name]
    except KeyError:
        raise UnknownScenario(name) from None
