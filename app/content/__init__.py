"""The talk's content, the bottom layer of the web app: what a talk is, independent of HTTP and of pages.

    manifest.py   slides, sections, tracks: the Deck read from slides/ (section.toml files, tracks.toml)
    markup.py     the Jinja environment slides render in, and each slide's markup
    live.py       the live simulations on the slides: which runs they start, their grid, a run's id
    steps.py      the player's grouping of a run's frames into presses (a port of player.js)
    pacing.py     each slide's time budget (notes, steps, questions), and recording live slides' phases
    talk.py       the Talk: one value holding a deck (or one of its tracks, or a talk file's) and what is derived from it
    talkfile.py   a presenter's own talk from a Markdown file (front matter, own slides, @slide, live blocks)

Imports only downwards: app.settings, the slides' helpers (app.memory_math, app.estimate_math) and
simulations; never app.pages, app.routers or app.export, which are built on it.
"""
