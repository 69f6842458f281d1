"""Imported once by the pool's forkserver, so every rank process starts with torch and every scenario loaded."""

import torch._dynamo  # noqa: F401  (DDP imports it on first use: 2 s per rank, once, here instead)
import torch.distributed  # noqa: F401
import torch.nn.parallel  # noqa: F401

from simulations import scenarios

scenarios.all_scenarios()
