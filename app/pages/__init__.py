"""The page layer: every HTML page of the site, built from the talk's content, for two clients that both call
it, the HTTP routers (app.routers) and the static export (app.export).

    assets.py   what every page links: entry script, optional scripts and styles, import map, preloads
    deck.py     a talk's deck (whole or a track; embedded, printed, a receiver), server or export
    widget.py   one live simulation's widget page (live, or replaying a recorded run)
    runs.py     the list of recorded runs
    errors.py   the error page

A page function takes values (settings, a Talk, a scenario, a run) and returns HTML; nothing here reads a
request. Imports app.content, app.delivery (fingerprints), app.settings and simulations; never app.routers
or app.export.
"""
