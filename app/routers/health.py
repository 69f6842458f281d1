from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok"]
    # The deck serves at once; live simulations wait until the rank pool has started.
    simulator: Literal["ready", "starting", "off"]
    ranks: list[int]  # rank process ids, so an operator (or a test) can see what the server owns


@router.get("/healthz", response_model=Health)
def healthz(request: Request) -> Health:
    simulator = getattr(request.app.state, "simulator", None)
    if simulator is None:
        return Health(status="ok", simulator="off", ranks=[])
    pool = simulator.pool
    return Health(status="ok", simulator="ready" if pool.ready else "starting", ranks=pool.pids())
