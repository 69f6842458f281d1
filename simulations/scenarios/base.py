"""What a scenario is: parameters, the per-rank program, and the self-checks.

A scenario module defines one `SCENARIO = Scenario(...)`:
- `params`: a pydantic model; its bounds are the 422s the API gives.
- `run(ctx, params) -> dict`: runs on every rank, SPMD. It calls `simulations.comm`
  for communication, `trace.span` around compute and `trace.frame` at each point
  of the story; it returns a small picklable dict of what it measured.
- `summarize(params, results, frames) -> Summary`: runs once, in one process,
  with every rank's result: it runs the single-process reference and compares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel

from simulations.frames import Frame, Summary, View


@dataclass
class RankContext:
    """What a rank's program gets: who it is, its process group and device."""

    rank: int
    world_size: int
    group: Any  # a torch.distributed ProcessGroup of ranks 0..world_size-1 (None: the default group)
    device: torch.device
    backend: str


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    params: type[BaseModel]
    run: Callable[[RankContext, Any], dict]
    summarize: Callable[[Any, list[dict], list[Frame]], Summary]
    views: list[View] = field(default_factory=lambda: ["ranks", "timeline"])
    world_size: Callable[[Any], int] = lambda p: p.world_size  # noqa: E731
    # Parameters the deck's compact control row offers, in order.
    controls: list[str] = field(default_factory=list)
