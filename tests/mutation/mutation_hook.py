"""Load a scenario with one planted bug, without touching the file on disk.

A mutant names a module of `simulations.scenarios`, an exact snippet of its source and its
replacement. `build(id)` reads the real source, replaces the snippet (it must occur exactly
once), and executes the result as a fresh module under its own name; when the patched module
is a helper of the scenario (pipeline_schedules for pipeline, tensor_parallel for parallel_3d),
the scenario's module is executed again with the patched helper in place of the real one.

Importing this module makes `simulations.scenarios.get("mutant:<id>")` return the mutant's
scenario. The mutation runner lists it in the forkserver's preload, so every rank process
can look a mutant up by name, exactly as it looks up a real scenario.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from simulations import scenarios

from mutation_list import BY_ID

PREFIX = "mutant:"
_built: dict[str, object] = {}
_real_get = scenarios.get


def _source(dotted: str) -> tuple[str, str]:
    origin = importlib.util.find_spec(dotted).origin
    return origin, Path(origin).read_text()


def _execute(dotted: str, source: str, origin: str, tag: str) -> types.ModuleType:
    name = f"{dotted}__{tag}"
    module = types.ModuleType(name)
    module.__file__ = origin
    sys.modules[name] = module  # pydantic and dataclasses look their module up by name
    exec(compile(source, f"{origin} [{tag}]", "exec"), module.__dict__)
    return module


def patched_source(mutant_id: str) -> str:
    m = BY_ID[mutant_id]
    _, source = _source(f"simulations.scenarios.{m.module}")
    found = source.count(m.old)
    if found != 1:
        raise ValueError(f"mutant {mutant_id}: the snippet occurs {found} times in {m.module}.py, not once")
    return source.replace(m.old, m.new)


def build(mutant_id: str):
    """The SCENARIO of `mutant_id`'s patched code (built once per process)."""
    if mutant_id in _built:
        return _built[mutant_id]
    m = BY_ID[mutant_id]
    tag = "mutant_" + mutant_id.replace("-", "_")
    target = f"simulations.scenarios.{m.module}"
    origin, _ = _source(target)
    patched = _execute(target, patched_source(mutant_id), origin, tag)
    if m.module != m.scenario:
        real = sys.modules[target]
        sys.modules[target] = patched  # the scenario's `from ... import` binds the patched helper
        try:
            origin, source = _source(f"simulations.scenarios.{m.scenario}")
            patched = _execute(f"simulations.scenarios.{m.scenario}", source, origin, tag)
        finally:
            sys.modules[target] = real
    _built[mutant_id] = patched.SCENARIO
    return patched.SCENARIO


def get(name: str):
    if name.startswith(PREFIX):
        return build(name[len(PREFIX):])
    return _real_get(name)


scenarios.get = get
