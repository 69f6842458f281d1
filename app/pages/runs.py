"""The recorded runs page: what a server started with `--runs DIR` replays, each a link to its widget page.

Owns: render_runs. Imports app.content.markup (the page templates' environment) and app.settings.
"""

from pathlib import Path

from app.content.markup import jinja_env
from app.settings import Settings
from simulations.runtime import Run


def render_runs(settings: Settings, runs: dict[str, Run]) -> str:
    env = jinja_env(Path(settings.slides_dir).resolve())
    return env.get_template("runs.html.j2").render(runs=runs, runs_dir=settings.runs_dir)
