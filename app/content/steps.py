"""The player's steps: how a finished run's frames are grouped into presses of the → key.

A port of groupFrames in static/js/player/player.js, which is authoritative (the same names, line for line;
tests/browser/test_tracks_in_the_browser.py checks that the two agree on every recorded run), so that a
slide's time budget (app.content.pacing) counts the presses the player will take.

Owns: group_frames and its constants, and the compact form live_steps.json stores phases in (expand,
compress). Imports nothing of app/.
"""

from __future__ import annotations

# The player's grouping of a run's frames into presses (static/js/player/player.js, the same names):
# at most MAX_STEPS presses (one fewer after a "predict, then run" question, itself a press); a run of
# fewer than FEW_PHASES phases cut into about SPLIT_TARGET; phases that continue the one before them.
MAX_STEPS = 20
SPLIT_TARGET = 16
FEW_PHASES = 6
JOINS = {  # a unit's all-gather is a press of its own: the step rests on the gathered parameters
    "reduce_scatter": {"free"},
    "pseudo_gradient": {"outer_sync", "outer_step"},
    "outer_sync": {"outer_step"},
}


def group_frames(phases: list[str], max_steps: int = MAX_STEPS) -> list[tuple[int, int]]:
    """Steps of a finished run, as (first frame, last frame) pairs, from its frames' phases: the player's
    groupFrames, line for line (a frame each up to max_steps; else runs of one phase with the phases that
    join them, a few long runs cut into pieces, too many groups merged evenly)."""
    n = len(phases)
    if n <= max_steps:
        return [(i, i) for i in range(n)]
    groups: list[list[int]] = []
    for i in range(n):
        joins = i > 0 and (phases[i] == phases[i - 1] or phases[i] in JOINS.get(phases[i - 1], ()))
        if groups and joins:
            groups[-1][1] = i
        else:
            groups.append([i, i])
    if len(groups) < FEW_PHASES:
        pieces = [1] * len(groups)

        def size(g: int) -> float:
            return (groups[g][1] - groups[g][0] + 1) / pieces[g]

        for _ in range(len(groups), SPLIT_TARGET):
            best = 0
            for g in range(1, len(groups)):
                if size(g) > size(best):
                    best = g
            if size(best) <= 1:
                break
            pieces[best] += 1
        groups = [[a + js_round(k * (b - a + 1) / pieces[g]), a + js_round((k + 1) * (b - a + 1) / pieces[g]) - 1]
                  for g, (a, b) in enumerate(groups) for k in range(pieces[g])]
    if len(groups) > max_steps:
        per = -(-len(groups) // max_steps)
        groups = [[groups[g][0], groups[min(g + per, len(groups)) - 1][1]] for g in range(0, len(groups), per)]
    return [(a, b) for a, b in groups]


def js_round(x: float) -> int:
    """JavaScript's Math.round: halves up (Python's round() rounds halves to even)."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def expand(runs: list[list]) -> list[str]:
    """[[phase, count], ...] (how live_steps.json stores a run's phases) -> one phase per frame."""
    return [phase for phase, count in runs for _ in range(count)]


def compress(phases: list[str]) -> list[list]:
    out: list[list] = []
    for phase in phases:
        if out and out[-1][0] == phase:
            out[-1][1] += 1
        else:
            out.append([phase, 1])
    return out
