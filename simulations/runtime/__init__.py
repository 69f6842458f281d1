"""Running scenarios: a warm pool of rank processes, and the runs it streams.

    RankPool    rank processes that stay up between jobs (gloo on CPU, NCCL on GPUs)
    Simulator   runs on the pool: shares identical runs, caches finished ones (bounded by bytes), bounds
                the queue and each client's share, cancels runs no one watches
    Run         one run's meta, frames, summary or error, followed live or replayed
"""

from simulations.runtime.pool import PoolBroken, RankPool, RunFailed, RunStopped, StopRequest
from simulations.runtime.runs import Overloaded, Run, Simulator, simulate

__all__ = ["RankPool", "PoolBroken", "RunFailed", "RunStopped", "StopRequest", "Run", "Simulator", "Overloaded",
           "simulate"]
