"""What every page links: its entry script, the optional scripts and styles, the import map and the module
preloads, all as fingerprinted URLs under the page's root ("/" on the server, relative in an export).

Owns: page_assets and the names of the pages' scripts; after_paint (a slide's module scripts made inert until
the first paint). Imports app.delivery (the static files' fingerprints) and app.settings.
"""

import re
from pathlib import Path

from app.delivery import fingerprints
from app.settings import Settings

# Front-end parts other code owns (the live player); linked only once they exist.
OPTIONAL_JS = ("js/player/index.js",)
OPTIONAL_CSS = ("css/player.css",)
# Loaded first on a static export's pages: answers the pages' API calls from the recorded runs.
STATIC_SITE_JS = "js/static-site.js"
# A page's entry script: the whole deck's (formulas, speaker view, print), or a widget's (one live slide only).
BOOT_JS = "js/deck/boot.js"
WIDGET_JS = "js/deck/widget.js"
# A slide's own module script (inline, or with a src): inert in the page (a type no browser runs), started by
# deck.html.j2's loader once the first view has painted, in document order, as the parser would have run it;
# fetched while the page is parsed, it and its imports would hold back the first paint on a phone's network.
SLIDE_MODULE = re.compile(r"<script\s+type=([\"'])module\1")
AFTER_PAINT = "distdeck/after-paint"


def after_paint(html: str) -> str:
    """A slide's module scripts made inert, for the loader to start after the first paint."""
    return SLIDE_MODULE.sub(f'<script type="{AFTER_PAINT}"', html)


def page_assets(settings: Settings, root: str, static_site: bool, views: list[str] | tuple[str, ...] = (),
                entry: str = BOOT_JS) -> dict:
    """The page's entry script (`entry`: BOOT_JS, or WIDGET_JS for a widget) and the optional scripts and
    styles, as fingerprinted URLs under `root` ("/" on the server, relative in an export); `asset(path)` for
    any other static file, the import map that fingerprints the imports, and the modules to preload: every
    one the page's scripts import, and the player's `views` (a widget's), so the browser fetches them
    together instead of one level of imports per round trip."""
    static = Path(settings.static_dir)
    prints = fingerprints(static)
    scripts = [STATIC_SITE_JS] * static_site + [entry] + [p for p in OPTIONAL_JS if (static / p).is_file()]
    imported = prints.static_imports(scripts)
    imported += [p for p in prints.static_imports([f"js/player/views/{view}.js" for view in views]) if p not in imported]
    return {
        "root": root,
        "asset": lambda path: prints.url(root, path),
        "inline_css": lambda paths: prints.inline_css(root, paths),
        "import_map": prints.import_map(root),
        "module_preloads": [prints.url(root, p) for p in imported if p not in scripts],
        "static_site_js": prints.url(root, STATIC_SITE_JS) if static_site else None,
        "entry_js": prints.url(root, entry),
        "after_paint_type": AFTER_PAINT,
        "extra_js": [prints.url(root, p) for p in OPTIONAL_JS if (static / p).is_file()],
        "extra_css": [p for p in OPTIONAL_CSS if (static / p).is_file()],
    }
