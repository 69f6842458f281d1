"""The slides' markup: the one Jinja environment slides (and the pages around them) render in, with the
globals slides compute their figures with, and each slide's <section> rendered in deck order.

Owns: jinja_env, render_slides, and what slide templates call (track_choices, estimator_presets).
Imports app.content.manifest, the slides' helpers (app.memory_math, app.estimate_math) and simulations.
"""

from functools import lru_cache
from pathlib import Path

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

from app import estimate_math, memory_math
from app.content.manifest import Deck
from simulations import formulas, hardware
from simulations.estimate import trust
from simulations.estimate.models import MODELS, TITLES

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


def track_query(track: str | None, embed: bool = False) -> str:
    """The query string that opens the deck in `track` (None: the whole deck), keeping an embed an embed."""
    params = ([f"track={track}"] if track else []) + (["embed=1"] if embed else [])
    return "?" + "&".join(params) if params else "?"


def track_choices(deck: Deck, embed: bool = False) -> list[dict]:
    """The choice of talk (title slide, top bar): each track and the whole deck, the current one marked."""
    current = deck.track.name if deck.track else None
    return [{"name": t.name, "label": f"{t.minutes} min", "title": t.title, "slides": len(t.slides),
             "href": track_query(t.name, embed), "current": t.name == current} for t in deck.tracks] + [
        {"name": None, "label": "Full deck", "title": "Every slide", "slides": None,
         "href": track_query(None, embed), "current": current is None}]


def estimator_presets() -> dict[str, list[list[str]]]:
    """The estimator's GPUs and model presets as [id, what screens call it], from their catalogs
    (simulations.hardware, simulations.estimate.models): every page carries them for static/js/presets.js."""
    return {"gpus": [[gpu.name, gpu.short or gpu.title] for gpu in hardware.GPUS.values()],
            "models": [[name, TITLES[name]] for name in MODELS]}


@lru_cache(maxsize=4)
def jinja_env(slides_dir: Path) -> Environment:
    """One environment for page templates (app/templates) and slides (slides/)."""
    env = Environment(
        loader=ChoiceLoader([FileSystemLoader(TEMPLATES_DIR), FileSystemLoader(slides_dir)]),
        autoescape=True,  # every template is HTML; query values must never reach markup raw
        undefined=StrictUndefined,  # a typo in a slide fails the render (and the tests), not silently
        auto_reload=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["mem"] = memory_math
    env.globals["hardware"] = hardware  # simulations.hardware: the one GPU catalog
    env.globals["formulas"] = formulas  # simulations.formulas, for slides that compute figures at render time
    env.globals["scale"] = estimate_math  # simulations.estimate, for the at-scale slides' times
    env.globals["trust"] = trust  # simulations.estimate.trust: the estimator's error on the validation tables
    env.globals["estimator_presets"] = estimator_presets()  # GPU and model names for the pages' scripts
    env.filters["gb"] = memory_math.gb
    env.globals["track_choices"] = track_choices  # the title slide's choice of talk
    return env


def render_slides(deck: Deck, env: Environment, **context) -> list[str]:
    """Each slide's <section> markup, in deck order."""
    rendered = []
    for number, slide in enumerate(deck.slides, start=1):
        template = env.get_template(slide.template_path)
        section = next(s for s in deck.sections if s.slug == slide.section_slug)
        rendered.append(template.render(slide=slide, section=section, deck=deck, number=number, **context))
    return rendered
