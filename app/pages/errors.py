"""The error page: a heading, what went wrong, and the path asked for (if it says one), in the site's look.

Owns: render_error. Imports app.content.markup (the page templates' environment) and app.settings.
"""

from pathlib import Path

from app.content.markup import jinja_env
from app.settings import Settings


def render_error(settings: Settings, status_code: int, heading: str, message: str, path: str | None = None) -> str:
    return jinja_env(Path(settings.slides_dir).resolve()).get_template("error.html.j2").render(
        status_code=status_code, heading=heading, message=message, path=path)
