from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok"]
    # The deck serves at once; live simulations wait until the rank pool has (re)started.
    simulator: Literal["ready", "starting", "off"]
    ranks: list[int]  # rank process ids, so an operator (or a test) can see what the server owns
    rebuilds: int = 0  # times the pool was rebuilt after losing a rank or a hung run
    last_problem: str | None = None  # what caused the last rebuild, in a sentence
    cached_runs: int = 0
    cached_bytes: int = 0  # bytes of encoded events the run cache holds (bounded by DISTDECK_CACHE_MB)


@router.get("/healthz", response_model=Health)
def healthz(request: Request) -> Health:
    simulator = getattr(request.app.state, "simulator", None)
    if simulator is None:
        return Health(status="ok", simulator="off", ranks=[])
    pool = simulator.pool
    return Health(status="ok", simulator="ready" if pool.ready else "starting", ranks=pool.pids(),
                  rebuilds=pool.rebuilds, last_problem=pool.last_problem, cached_runs=len(simulator.cached()),
                  cached_bytes=simulator.cached_bytes)
