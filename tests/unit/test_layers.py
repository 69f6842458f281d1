"""The web layer's dependencies go one way: routers and the export -> pages -> content -> simulations.

Each module of app/ sits on a layer; it may import its own layer and the ones below, never one above (an
import inside a function counts like any other: it ties the two modules all the same). Read with `ast`,
nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

# Bottom first. A module is on the layer of the longest prefix listed here.
LAYERS = [
    ["app.settings", "app.head", "app.delivery", "app.calculator", "app.memory_math", "app.estimate_math"],
    ["app.content"],  # the talk
    ["app.pages"],  # pages built from it
    ["app.responses"],  # what every HTTP response shares
    ["app.routers", "app.export", "app.simulator"],  # the clients of the pages: HTTP, the static export
    ["app.openapi", "app.main", "app.cli"],  # the app and the command line
]


def layer(module: str) -> int | None:
    best = None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(APP.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from app import pacing` imports the module app.pacing; `from app.x import name`, app.x.
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names
                                      if is_module(f"{node.module}.{alias.name}")}
    return {name for name in found if name.startswith("app.")}


def is_module(name: str) -> bool:
    path = APP.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def upward_imports() -> list[str]:
    wrong = []
    for path in sorted(APP.rglob("*.py")):
        me = module_name(path)
        mine = layer(me)
        for name in sorted(imported(path)):
            theirs = layer(name)
            if theirs is not None and mine is not None and theirs > mine:
                wrong.append(f"{me} (layer {mine}) imports {name} (layer {theirs})")
    return wrong


def test_every_module_of_app_is_on_a_layer():
    unplaced = [module_name(p) for p in sorted(APP.rglob("*.py")) if module_name(p) != "app" and
                layer(module_name(p)) is None]
    assert unplaced == [], "put each in LAYERS"


def test_app_only_imports_downwards():
    assert upward_imports() == []


def test_no_relative_imports_hide_a_dependency():
    relative = [str(p) for p in APP.rglob("*.py")
                if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))]
    assert relative == []
