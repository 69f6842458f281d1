"""Time at scale: a torch-free estimator of one training step on a modelled GPU cluster.

    from simulations.estimate import Layout, cluster, estimate, MODELS
    e = estimate(MODELS["llama3-70b"], cluster("h100-80gb", gpus=1024), Layout(tp=8, pp=4, global_batch=512))
    e.step_time_s, e.mfu, e.memory_per_gpu_bytes

Pure Python: it imports simulations.formulas (memory, bytes), the pipeline schedules of
simulations.scenarios.pipeline_schedules and the project's one GPU catalog, simulations.hardware (figures and
their sources), never torch. The cost model: cost.py; DiLoCo's outer round: diloco.py; validation against published runs:
tests.
"""

from simulations.estimate.cost import Estimate, estimate
from simulations.estimate.diloco import outer_round
from simulations.estimate.layout import SCHEDULES, Layout, LayoutError, validate
from simulations.estimate.models import MODELS, Model, gpt
from simulations.estimate.search import search
from simulations.estimate.spec import build
from simulations.hardware import GPU, GPUS, Cluster, UnknownGPU, cluster

__all__ = ["GPU", "GPUS", "MODELS", "SCHEDULES", "Cluster", "Estimate", "Layout", "LayoutError", "Model", "UnknownGPU",
           "build", "cluster", "estimate", "gpt", "outer_round", "search", "validate"]
