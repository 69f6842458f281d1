"""The OpenAPI schema, with each scenario's parameters declared.

The frames, trace and widget routes take the scenario's parameters from the query string and validate
them with the scenario's own pydantic model, so FastAPI alone sees only `name`. Here each of those
operations also gets one concrete path per scenario (`/api/simulations/ddp/frames`, ...) whose query
parameters are that scenario's fields with their bounds: what an API client or a schema-driven fuzzer
needs. The templated path stays, for any name (an unknown one is a 404).
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

from simulations import scenarios

# Templated operations whose query string is the scenario's params, and the words for one scenario.
SCENARIO_OPERATIONS = {
    "/api/simulations/{name}/frames": "Stream a {title} run as Server-Sent Events",
    "/api/simulations/{name}/trace": "A {title} run as a Chrome trace (Perfetto)",
    "/embed/{name}": "{title} as an embeddable widget",
}


WIDGET_PARAMETERS = [
    {"name": "controls", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The parameters the widget offers as controls, comma-separated"},
    {"name": "views", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The views to draw, comma-separated (ranks, timeline, memory, ...)"},
]


def query_parameters(scenario: scenarios.Scenario) -> list[dict[str, Any]]:
    """The scenario's fields as OpenAPI query parameters: type, bounds, enum, default, description."""
    schema = scenario.params.model_json_schema()
    parameters = []
    for field, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        parameter = {"name": field, "in": "query", "required": False, "schema": prop}
        if "description" in prop:
            parameter["description"] = prop["description"]
        parameters.append(parameter)
    return parameters


def add_scenario_operations(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for template, summary in SCENARIO_OPERATIONS.items():
        if template not in paths:
            continue
        operation = paths[template]["get"]
        fixed = [p for p in operation.get("parameters", []) if p["name"] != "name"]
        for name, scenario in scenarios.all_scenarios().items():
            concrete = copy.deepcopy(operation)
            concrete["operationId"] = f"{operation['operationId']}_{name}"
            concrete["summary"] = summary.format(title=scenario.title)
            concrete["parameters"] = fixed + query_parameters(scenario)
            if template.startswith("/embed/"):
                concrete["parameters"] += WIDGET_PARAMETERS
            concrete["responses"].pop("404", None)  # a known scenario
            paths[template.replace("{name}", name)] = {"get": concrete}


def install(app: FastAPI) -> None:
    """Serve the schema with the scenario operations added (built once, on first request)."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            add_scenario_operations(default())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
