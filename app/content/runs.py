"""The runs a talk asks for: every live slide's default run, the widgets' (each used scenario's defaults), the
runs slide scripts fetch themselves, and, for a static copy, a small grid around each (variants="grid").

The grid varies one control at a time, from the slide's controls and the scenario's JSON Schema (enums and
booleans every value; small integer ranges 2, 4 and 8; other numbers half and double the default). Past a
budget, each live simulation keeps fewer grid variants, never its default.

Owns: plan_runs, Wanted, RunPlanError. Read by the export (what to record) and the server (the runs worth
finishing when no one watches). Imports app.content's live and talk modules, and simulations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from app.content.live import Variants, canonical, defaults, run_id, variant_requests
from app.content.talk import Talk
from simulations import scenarios


class RunPlanError(ValueError):
    """A slide's own run cannot be had (its params are rejected, or it needs more ranks than the pool has)."""


@dataclass
class Wanted:
    """One run to have in the export, and the requests (slide params over defaults) that ask for it."""

    scenario: str
    params: BaseModel
    requests: list[dict[str, Any]] = field(default_factory=list)
    where: list[str] = field(default_factory=list)  # slides / widgets that ask for it

    @property
    def id(self) -> str:
        return run_id(self.scenario, self.params)


def plan_runs(talk: Talk, variants: Variants, pool_size: int,
              budget: int | None = None) -> tuple[list[Wanted], list[str], int]:
    """(runs to have, skipped variants with why, number of live sims) for the talk and the widgets. Past
    `budget` runs (None: no limit), each live sim keeps fewer grid variants (never its default)."""
    slides_html = talk.live_slides_html()
    cap = None
    while True:
        wanted, skipped, sims = _plan(talk, slides_html, variants, pool_size, cap)
        if budget is None or len(wanted) <= budget or cap == 0:
            if cap is not None:
                skipped.append(f"over the budget of {budget} runs: at most {cap} grid variant(s) per live simulation")
            return wanted, skipped, sims
        cap = 12 if cap is None else cap - 1


def _plan(talk: Talk, slides_html: list[str], variants: Variants, pool_size: int,
          cap: int | None) -> tuple[list[Wanted], list[str], int]:
    sims = talk.live_sims(slides_html)
    asks: list[tuple[str, str, dict[str, Any], bool]] = []  # (where, scenario, request, is_default)
    for sim in sims:
        scenario = scenarios.get(sim.scenario)
        for i, request in enumerate(variant_requests(scenario, sim.params, sim.controls, variants)[:_cut(cap)]):
            asks.append((f"slide {sim.slide}", sim.scenario, request, i == 0))
    for slide, name, params in talk.scripted_runs(slides_html):
        asks.append((f"slide {slide}", name, {**defaults(scenarios.get(name)), **params}, True))
    used = sorted({sim.scenario for sim in sims})
    for name in used:  # the widget pages the export writes: each scenario's defaults and its controls' grid
        scenario = scenarios.get(name)
        for i, request in enumerate(variant_requests(scenario, {}, list(scenario.controls), variants)[:_cut(cap)]):
            asks.append((f"widget {name}", name, request, i == 0))

    wanted: dict[tuple[str, str], Wanted] = {}
    skipped: list[str] = []
    for where, name, request, is_default in asks:
        scenario = scenarios.get(name)
        try:
            params = scenario.params.model_validate(request)
            ranks = scenario.world_size(params)
        except ValidationError as exc:
            if is_default:
                raise RunPlanError(f"{where}: {name} rejects its own params {request}: {exc}") from None
            skipped.append(f"{where}: {name} {differences(scenario, request)}: {exc.errors()[0]['msg']}")
            continue
        if ranks > pool_size:
            if is_default:
                raise RunPlanError(f"{where}: {name} needs {ranks} ranks, the pool has {pool_size}")
            skipped.append(f"{where}: {name} {differences(scenario, request)}: needs {ranks} ranks")
            continue
        key = (name, canonical(params))
        entry = wanted.setdefault(key, Wanted(name, params))
        if request not in entry.requests:
            entry.requests.append(request)
        if where not in entry.where:
            entry.where.append(where)
    return list(wanted.values()), skipped, len(sims)


def _cut(cap: int | None) -> int | None:
    return None if cap is None else cap + 1  # the default, then `cap` variants


def differences(scenario: scenarios.Scenario, request: dict[str, Any]) -> str:
    """The request's params that differ from the scenario's defaults, as `name=value, ...`."""
    base = defaults(scenario)
    return ", ".join(f"{k}={v}" for k, v in request.items() if base.get(k) != v) or "defaults"
