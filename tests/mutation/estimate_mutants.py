"""Planted bugs in the cluster estimator (simulations/estimate/), each of which its tests must catch.

The estimator's checks are the hand-computed cases of tests/unit/test_estimate.py, the invariants of
tests/unit/test_estimate_invariants.py, the memory checks of tests/unit/test_estimate_memory.py, and the published
training runs of tests/unit/test_estimate_validation.py, test_estimate_other_stacks.py and the torchtitan tables
(test_estimate_torchtitan_h100.py, test_estimate_torchtitan_nd.py); none shares the cost model's code. Each
mutant is (module, an exact snippet of it, its replacement). `pytest -p tests.mutation.estimate_mutants`
with DISTDECK_ESTIMATE_MUTANT=<id> runs those tests against the mutated module: the module's source is
re-executed, mutated, in the module's own namespace before the tests import it, so every function that
looks the mutated one up by name gets the mutant. Nothing on disk changes.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EstimatorMutant:
    id: str
    module: str
    old: str
    new: str
    bug: str


MUTANTS = [
    EstimatorMutant("contention-after-compute", "simulations.estimate.traffic",
                    "return (1 - rate) * min(comm, compute / rate)", "return (1 - rate) * comm",
                    "compute charged for the whole collective beside it, even the part after the compute is over"),
    EstimatorMutant("no-weight-gradients", "simulations.estimate.compute",
                    "backward_w += matmul_time(k, n, rows, cluster, fp8)", "backward_w += 0.0",
                    "backward computes the input gradients only (half its matmuls)"),
    EstimatorMutant("full-recompute-free", "simulations.estimate.compute",
                    "        recompute = forward", "        recompute = 0.0",
                    "full activation recomputation replays nothing"),
    EstimatorMutant("tp-forward-hidden", "simulations.estimate.cost",
                    "f_layer = lt.forward + lt.tp_forward +", "f_layer = lt.forward + 0.0 +",
                    "TP's forward collectives hidden, though compute waits for them"),
    EstimatorMutant("dp-reduce-always-hidden", "simulations.estimate.cost",
                    "            reduce_exposed = overlapped(reduce)",
                    "            reduce_exposed = 0.0",
                    "an overlapped DP reduction leaves nothing exposed, not even its last bucket"),
    EstimatorMutant("one-nic-per-ring", "simulations.estimate.collectives",
                    "concurrent = cluster.gpus_per_node / group.per_node", "concurrent = 1",
                    "a ring across nodes gets the whole node's egress, though every GPU's ring shares it"),
    EstimatorMutant("all-reduce-half-the-bytes", "simulations.estimate.collectives",
                    "sent = formulas.ring_all_reduce_bytes(size, group.size)",
                    "sent = formulas.all_gather_bytes(size, group.size)",
                    "an all-reduce charged the bytes of an all-gather"),
    EstimatorMutant("peak-not-sustained", "simulations.hardware",
                    '''"h100-80gb", "H100 SXM 80 GB", peak_flops=989 * TFLOP, matmul_flops=794.5 * TFLOP,
                     sustained_flops=H200_SUSTAINED,''',
                    '''"h100-80gb", "H100 SXM 80 GB", peak_flops=989 * TFLOP, matmul_flops=794.5 * TFLOP,
                     sustained_flops=794.5 * TFLOP,''',
                    "H100 matmuls at the one-GPU burst rate instead of the sustained one"),
    EstimatorMutant("interleaving-holds-no-extra-activations", "simulations.estimate.memory",
                    "acts = per_layer * interleaved_layers_in_flight(chunks, p, v, m, stage)",
                    "acts = per_layer * layers * min(p, m)",
                    "interleaved 1F1B's deeper warm-up keeps no more activations than 1F1B"),
    EstimatorMutant("interleaved-warmup-one-way", "simulations.estimate.memory",
                    "return min(m * v, (p - stage - 1) * 2 + (v - 1) * n)",
                    "return min(m * v, (p - stage - 1) + (v - 1) * n)",
                    "the interleaved warm-up counts the way to the last stage but not the backward's way back"),
    EstimatorMutant("stage-params-ignore-llama3-placement", "simulations.estimate.memory",
                    "        layers = sum(chunk_layers(model.layers, p, v)[stage::p])",
                    "        layers = math.ceil(model.layers / p)",
                    "the first and last stages hold as many layers as the others beside the embedding and output"),
    EstimatorMutant("all-gather-priced-as-its-shard", "simulations.estimate.collectives",
                    "sent = formulas.all_gather_bytes(size, group.size)",
                    "sent = formulas.all_gather_bytes(size / group.size, group.size)",
                    "an all-gather (and a reduce-scatter) charged the bytes of one shard, not of the whole"),
    EstimatorMutant("zero3-gradients-reduced-in-bf16", "simulations.estimate.cost",
                    "collectives.reduce_scatter(layout.grad_reduce_bytes * r.layer, r.group, cluster)",
                    "collectives.reduce_scatter(BF16 * r.layer, r.group, cluster)",
                    "ZeRO-3's gradient reduce-scatter priced in bf16 though the run reduces in fp32"),
    EstimatorMutant("attention-backward-at-forward-rate", "simulations.estimate.kernels",
                    'backward = 2.5 * forward_flops / attention_rate(gpu, kernel, head_dim, "backward", causal, context)',
                    'backward = 2.5 * forward_flops / attention_rate(gpu, kernel, head_dim, "forward", causal, context)',
                    "the attention kernel's backward priced at its forward's rate"),
    EstimatorMutant("attention-ignores-power-cap", "simulations.estimate.kernels",
                    "rate = _interpolate(_curve(base, dim, direction, causal), length) * gpu.attention_vs_h100",
                    "rate = _interpolate(_curve(base, dim, direction, causal), length)",
                    "fused attention on a power-capped H100 timed at the 700 W part's rates"),
    EstimatorMutant("torch-loss-held-as-megatron", "simulations.estimate.memory",
                    '"torch": 4 + 4 + 4,', '"torch": BF16 + 4,',
                    "torch's eager cross entropy charged Megatron's in-place 6 bytes a logit"),
    EstimatorMutant("zero3-holds-no-gathered-unit", "simulations.estimate.memory",
                    'states["parameters"] = 2 * layout.layer_gather_bytes * unit', 'states["parameters"] = 0.0',
                    "ZeRO-3 holds no all-gathered layer, as if it computed on its shards"),
    EstimatorMutant("activations-ignore-sequence-parallel", "simulations.estimate.memory",
                    "                                                    recompute, layout.sequence_parallel)",
                    "                                                    recompute, False)",
                    "a layer's activations kept whole on every TP rank, as without sequence parallelism"),
    EstimatorMutant("optimizer-states-unsharded", "simulations.estimate.memory",
                    'formulas.model_state_bytes(params, "bf16", layout.zero_stage, ranks,',
                    'formulas.model_state_bytes(params, "bf16", layout.zero_stage, 1,',
                    "ZeRO's shards counted whole: optimizer states (and sharded gradients) on one rank"),
    EstimatorMutant("gradients-always-bf16", "simulations.estimate.memory",
                    "grad_bytes=FP32 if fsdp else reduce_bytes,", "grad_bytes=BF16,",
                    "gradients counted in bf16 though the stack accumulates them in fp32 (Megatron's main_grad)"),
    EstimatorMutant("fused-loss-keeps-an-fp32-softmax", "simulations.estimate.memory",
                    '"fused": BF16 + BF16,', '"fused": BF16 + 4,',
                    "a fused cross entropy charged the fp32 softmax it never stores"),
    EstimatorMutant("sequence-parallel-ignored-in-memory-bound-passes", "simulations.estimate.compute",
                    "sp = t if (layout.sequence_parallel and t > 1) else 1", "sp = 1",
                    "sequence parallelism's split of the norms and residual adds over TP ignored"),
    EstimatorMutant("launch-overhead-ignored", "simulations.estimate.compute",
                    'if layout.executes != "compiled":  # the GPU waits', "if False:  # the GPU waits",
                    "eager kernels issued for free: the GPU never waits for the CPU"),
    EstimatorMutant("skinny-gemm-at-big-gemm-rate", "simulations.estimate.compute",
                    "compute = max(waves(m, n, gpu, held) * per_wave,", "compute = max(0.0,",
                    "every GEMM at the sustained rate, whatever its shape (no waves, no per-tile cost)"),
    EstimatorMutant("tile-cost-ignored", "simulations.estimate.compute",
                    "per_wave = 2 * TILE_M * TILE_N * k / (mainloop_flops_per_sm(gpu) * fp8_speedup) + tile_overhead(gpu) * left",
                    "per_wave = 2 * TILE_M * TILE_N * k / (mainloop_flops_per_sm(gpu) * fp8_speedup)",
                    "a wave of tiles pays no fixed cost: a short-K GEMM as efficient as a long one"),
    EstimatorMutant("optimizer-ignores-the-stack", "simulations.estimate.compute",
                    'return FOREACH_ADAMW_BYTES_PER_PARAM if layout.executes == "eager" else ADAM_BYTES_PER_PARAM',
                    "return ADAM_BYTES_PER_PARAM",
                    "eager PyTorch's foreach AdamW and clipping priced as Megatron's fused Adam"),
    EstimatorMutant("residual-adds-at-half-their-bytes", "simulations.estimate.compute",
                    "add = 2 * BF16 + BF16 +", "add = BF16 +",
                    "the residual adds' memory-bound passes read one tensor instead of two"),
    EstimatorMutant("no-stragglers", "simulations.estimate.cost",
                    "straggle = straggler_allowance(compute_s, cluster.gpus)", "straggle = 0.0",
                    "a synchronous step never waits for its slowest GPU"),
    EstimatorMutant("stragglers-within-a-node", "simulations.estimate.cost",
                    "straggle = straggler_allowance(compute_s, cluster.gpus)",
                    "straggle = straggler_allowance(compute_s, cluster.gpus_per_node)",
                    "the slowest GPU sought among one node's, not among every rank that synchronises"),
    EstimatorMutant("fsdp-gradient-passes-free", "simulations.estimate.compute",
                    'return (BF16 + BF16) + (BF16 + reduce if reduce != BF16 else 0) + 2 * reduce', "return 0.0",
                    "FSDP1 concatenates, casts and pre-divides each micro-batch's gradient before its reduce-scatter for free"),
]
BY_ID = {m.id: m for m in MUTANTS}


def mutated_source(mutant: EstimatorMutant) -> str:
    module = importlib.import_module(mutant.module)
    with open(module.__file__, encoding="utf-8") as f:
        source = f.read()
    if source.count(mutant.old) != 1:
        raise ValueError(f"mutant {mutant.id}: its snippet occurs {source.count(mutant.old)} times in {mutant.module}")
    return source.replace(mutant.old, mutant.new)


def pytest_configure(config):
    """With DISTDECK_ESTIMATE_MUTANT set: put that mutant into its module before any test imports it."""
    chosen = os.environ.get("DISTDECK_ESTIMATE_MUTANT")
    if not chosen:
        return
    mutant = BY_ID[chosen]
    module = importlib.import_module(mutant.module)
    exec(compile(mutated_source(mutant), module.__file__, "exec"), module.__dict__)  # noqa: S102


def starts_processes(item) -> bool:
    """A check that starts processes: a live run on the rank pool, or torch measuring a loss in a child process."""
    return "pool" in item.fixturenames or item.name.endswith("_holds_what_torch_holds")


def pytest_collection_modifyitems(items):
    """The checks that only compute first, those that start processes last (a stable sort keeps each group's
    order). A run stops at its first failure (-x), so a mutant that a computed check catches stops before it
    pays for ranks or torch; the outcome is the same in any order, since the run fails if any check does."""
    items.sort(key=starts_processes)
