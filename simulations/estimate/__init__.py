"""Time at scale: a torch-free estimator of one training step on a modelled GPU cluster.

    from simulations.estimate import Layout, cluster, estimate, MODELS
    e = estimate(MODELS["llama3-70b"], cluster("h100-80gb", gpus=1024), Layout(tp=8, pp=4, global_batch=512))
    e.step_time_s, e.mfu, e.memory_per_gpu_bytes

Pure Python: it imports simulations.formulas (memory, bytes), the pipeline schedules of
simulations.scenarios.pipeline_schedules and the project's one GPU catalog, simulations.hardware (figures and
their sources), never torch. The modules, each citing its sources:
- cost.py puts one step together: a layer's time (compute.py: matmuls, attention from kernels.py, memory-bound
  passes, the layer's TP/CP/EP collectives), the bytes each parallelism sends (traffic.py) timed on its links
  (collectives.py), the pipeline on a clock (schedule.py) and what a GPU holds (memory.py);
- layout.py validates a layout, models.py and simulations.hardware describe the model and the cluster;
- search.py is the layout chooser; diloco.py DiLoCo's outer round; trust.py the error on published runs of the
  same kind, from validation.json, which the validation tests (tests/unit/test_estimate_*.py) write.
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
