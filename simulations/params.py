"""Scenario parameters from the command line (`--set key=value`), with errors a person can act on."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from simulations import scenarios


class ParamError(ValueError):
    """Unknown scenario, malformed key=value, or a value out of bounds: one sentence each."""


def describe(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())


def parse_params(name: str, assignments: list[str], world_size: int | None = None) -> BaseModel:
    """`["bucket_kb=1", ...]` -> the scenario's validated params; `world_size` fills that field if unset."""
    try:
        scenario = scenarios.get(name)
    except scenarios.UnknownScenario:
        raise ParamError(f"unknown scenario {name!r}; choose from {', '.join(scenarios.all_scenarios())}") from None
    values: dict[str, str | int] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamError(f"--set expects key=value, got {item!r}")
        values[key.strip().replace("-", "_")] = value.strip()
    if world_size is not None and "world_size" in scenario.params.model_fields:
        values.setdefault("world_size", world_size)
    try:
        params = scenario.params.model_validate(values)
    except ValidationError as exc:
        raise ParamError(describe(exc)) from None
    if world_size is not None and scenario.world_size(params) != world_size:
        raise ParamError(f"these params need {scenario.world_size(params)} ranks, but torchrun started {world_size}")
    return params
