"""The live simulations on a talk's slides: which runs each slide's players start, and their neighbours.

A slide asks for a run with a `.live-sim` placeholder (data-scenario, data-params, data-controls; see
slides/macros.html.j2), or, for a script that fetches runs itself, a `data-runs` attribute. Read from the
slides' rendered markup, so whatever a template computes is what is found.

Owns: finding them (find_live_sims, find_scripted_runs), a run's identity (run_id over its validated params),
the grid of variants around a slide's request (variant_requests, control_values), and the hash of a scenario's
source that says when a recorded run is stale (source_hash). Imports simulations only.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from simulations import scenarios
from simulations.frames import SCHEMA_VERSION

Variants = Literal["default", "grid"]


@dataclass
class LiveSim:
    """One `.live-sim` placeholder on a slide."""

    slide: str
    scenario: str
    params: dict[str, Any]
    controls: list[str]


class _LiveSimParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.slide = ""
        self.found: list[LiveSim] = []
        self.scripted: list[tuple[str, str, dict[str, Any]]] = []  # (slide, scenario, params)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section" and "data-slide-id" in a:
            self.slide = a["data-slide-id"]
        if "live-sim" in a.get("class", "").split() and a.get("data-scenario"):
            self.found.append(LiveSim(self.slide, a["data-scenario"], json.loads(a.get("data-params") or "{}"),
                                      json.loads(a.get("data-controls") or "[]")))
        if a.get("data-runs"):  # a slide script that fetches runs itself declares them: [{scenario, params}]
            self.scripted.extend((self.slide, run["scenario"], run["params"]) for run in json.loads(a["data-runs"]))


def _parse(slides_html: list[str]) -> _LiveSimParser:
    parser = _LiveSimParser()
    for html in slides_html:
        parser.feed(html)
    return parser


def find_live_sims(slides_html: list[str]) -> list[LiveSim]:
    return _parse(slides_html).found


def find_scripted_runs(slides_html: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """Runs that slide scripts fetch themselves, declared in `data-runs` attributes."""
    return _parse(slides_html).scripted


def canonical(params: BaseModel) -> str:
    return json.dumps(params.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def run_id(scenario: str, params: BaseModel) -> str:
    return hashlib.sha256(f"{scenario}?{canonical(params)}".encode()).hexdigest()[:16]


def defaults(scenario: scenarios.Scenario) -> dict[str, Any]:
    return scenario.params().model_dump(mode="json")


def default_runs(slide_html: str) -> list[tuple[str, dict[str, Any]]]:
    """The default runs a slide's players start: (scenario, its params over the scenario's defaults), validated."""
    out = []
    for sim in find_live_sims([slide_html]):
        scenario = scenarios.get(sim.scenario)
        request = variant_requests(scenario, sim.params, [], "default")[0]
        out.append((sim.scenario, scenario.params.model_validate(request).model_dump(mode="json")))
    return out


def _field_schema(schema: dict, name: str) -> dict:
    spec = schema.get("properties", {}).get(name, {})
    ref = spec.get("$ref") or (spec.get("allOf") or [{}])[0].get("$ref")
    if ref:
        return {**schema.get("$defs", {}).get(ref.split("/")[-1], {}), **spec}
    return spec


def control_values(spec: dict, default: Any) -> list[Any]:
    """A few values of one control, from its JSON Schema: the grid's axis for it."""
    if "enum" in spec:
        return list(spec["enum"])
    kind = spec.get("type")
    if kind == "boolean":
        return [False, True]
    low, high = spec.get("minimum"), spec.get("maximum")
    inside = (lambda v: (low is None or v >= low) and (high is None or v <= high))  # noqa: E731
    if kind == "integer" and low is not None and high is not None and high <= 8:
        values = {v for v in (2, 4, 8) if inside(v)} | {default}
        if high - low < 4:  # a handful of choices (ZeRO stages 0..3): every one
            values = set(range(low, high + 1))
        return sorted(values)
    if kind == "integer":
        return sorted({v for v in (default // 2, default, default * 2) if inside(v)})
    if kind == "number":
        return sorted({v for v in (default / 2, default, default * 2) if inside(v)})
    return [default]


def variant_requests(scenario: scenarios.Scenario, params: dict[str, Any], controls: list[str],
                     variants: Variants) -> list[dict[str, Any]]:
    """The slide's own request first, then one control changed at a time (variants="grid")."""
    base = {**defaults(scenario), **params}
    requests = [base]
    if variants == "grid":
        schema = scenario.params.model_json_schema()
        axes = [[(name, v) for v in control_values(_field_schema(schema, name), base.get(name)) if v != base.get(name)]
                for name in controls]
        # Round robin over the controls, so that a budget cut keeps some of every control.
        for i in range(max((len(a) for a in axes), default=0)):
            for axis in axes:
                if i < len(axis):
                    request = {**base, axis[i][0]: axis[i][1]}
                    if request not in requests:
                        requests.append(request)
    return requests


def source_hash(name: str) -> str:
    """The scenario's module and the simulations modules it uses: a change to any re-records its runs."""
    scenario = scenarios.get(name)
    module = sys.modules[scenario.run.__module__]
    files = {Path(inspect.getsourcefile(module)).resolve()}
    for value in vars(module).values():
        owner = value if inspect.ismodule(value) else sys.modules.get(getattr(value, "__module__", "") or "")
        if owner is not None and owner.__name__.startswith("simulations.") and getattr(owner, "__file__", None):
            files.add(Path(owner.__file__).resolve())
    digest = hashlib.sha256(f"schema {SCHEMA_VERSION}\n".encode())
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
