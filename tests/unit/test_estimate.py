"""The cluster estimator's cost model against hand-computed cases, and its bytes against live runs."""

from __future__ import annotations

import math

import subprocess
import sys
from pathlib import Path

import pytest

from simulations import formulas
from simulations.estimate import Layout, LayoutError, build, cluster, estimate, gpt, schedule
from simulations.estimate.collectives import all_gather, all_reduce, place
from simulations.estimate.traffic import data_parallel_traffic, wire_bytes
from simulations.scenarios.pipeline_schedules import bubble_formula

ROOT = Path(__file__).resolve().parents[2]

# The figures the hand computations use, as hardware.py cites them (scaling book gpus.md; NCCL tuning.cc).
NVLINK_H100 = 450e9 * 370 / 450  # measured all-reduce bus bandwidth in an 8 × H100 node
NODE_EGRESS_H100 = 400e9 * 370 / 450  # 8 × 400 Gb/s NICs, same fraction of line rate
HALF_AT_450 = 58e6 * (370 / 150 - 1)


def _ramped(bandwidth: float, size: float) -> float:
    half = HALF_AT_450 * bandwidth / 450e9
    return bandwidth * size / (size + half)


def test_the_estimator_imports_and_runs_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"  # any `import torch` now raises ImportError
            "from simulations.estimate import MODELS, Layout, cluster, estimate, search\n"
            "e = estimate(MODELS['llama3-8b'], cluster('h100-80gb', 64), Layout(tp=2, global_batch=64))\n"
            "assert e.step_time_s > 0\n"
            "assert 'torch' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_ring_all_reduce_inside_one_node_by_hand():
    h100 = cluster("h100-80gb", gpus=8)
    size = 1e9
    group = place(8, 1, 8)
    assert (group.size, group.per_node, group.crosses_nodes) == (8, 8, False)
    by_hand = 2 * 7 / 8 * size / _ramped(NVLINK_H100, size) + (8.4 + 2 * 7 * 3.4) * 1e-6  # NCCL: 3.4 µs a step
    assert all_reduce(size, group, h100) == pytest.approx(by_hand, rel=1e-12)
    # about 5 ms for 1 GB: 1.75 GB at about 340 GB/s
    assert 4.5e-3 < by_hand < 6e-3


def test_ring_across_nodes_is_set_by_node_egress_not_one_gpu_link():
    """A data-parallel ring over 16 whole nodes: only the hops between nodes cross the network, so
    its time is the node's egress (8 NICs), not one GPU's 50 GB/s link (the deck's old 8x error)."""
    h100 = cluster("h100-80gb", gpus=128)
    size = 2e9
    whole_nodes = place(128, 1, 8)  # pure DP: all 8 GPUs of each node in the ring
    assert (whole_nodes.per_node, whole_nodes.nodes) == (8, 16)
    by_hand = (2 * 127 / 128 * size / _ramped(NODE_EGRESS_H100, size)
               + (8.4 + 2 * (7 * 4.0 + 4 * 14.0)) * 1e-6)  # the tree's 4 levels beat 254 ring steps
    assert all_reduce(size, whole_nodes, h100) == pytest.approx(by_hand, rel=1e-12)
    one_link = 2 * 127 / 128 * size / (50e9 * 370 / 450)  # every byte charged to one 400 Gb/s NIC
    assert one_link / by_hand == pytest.approx(8, rel=0.1)
    # with TP = 8 inside the node, each DP ring has one GPU per node: the 8 rings share the egress
    one_per_node = place(16, 8, 8)
    assert one_per_node.per_node == 1
    shared = all_reduce(size, one_per_node, h100)
    assert shared == pytest.approx(2 * 15 / 16 * size / _ramped(NODE_EGRESS_H100 / 8, size)
                                   + (8.4 + 2 * 4 * 14.0) * 1e-6, rel=1e-12)  # the tree beats 30 network steps


def test_all_gather_is_half_an_all_reduce_in_bytes():
    h100 = cluster("h100-80gb", gpus=8)
    group = place(8, 1, 8)
    size = 4e9
    bandwidth_part = all_reduce(size, group, h100) - (8.4 + 14 * 3.4) * 1e-6
    assert all_gather(size, group, h100) - (8.4 + 7 * 3.4) * 1e-6 == pytest.approx(bandwidth_part / 2)


def test_all_gather_across_nodes_has_no_tree_in_nccl():
    """NCCL runs all-gathers and reduce-scatters as rings (or PAT with one GPU per node), never as trees, so
    their latency grows with the ranks: 511 network steps of 14 µs for a ring of 64 whole nodes."""
    h100 = cluster("h100-80gb", gpus=512)
    size = 1e6  # latency-bound
    whole_nodes = place(512, 1, 8)  # 8 per node: no PAT
    moving = 511 / 512 * size / _ramped(NODE_EGRESS_H100, size)
    assert all_gather(size, whole_nodes, h100) == pytest.approx(
        moving + (8.4 + (511 - 63) * 3.4 + 63 * 14.0) * 1e-6, rel=1e-12)
    one_per_node = place(64, 8, 8)  # TP 8 inside each node: PAT's log-depth part and 2.8 µs a rank
    moving = 63 / 64 * size / _ramped(NODE_EGRESS_H100 / 8, size)
    ring = moving + (8.4 + 63 * 14.0) * 1e-6
    pat = moving / 0.75 + (8.0 + 6 * 14.0 / 3.5 + 64 * 2.8) * 1e-6
    assert pat < ring
    assert all_gather(size, one_per_node, h100) == pytest.approx(pat, rel=1e-12)
    assert all_reduce(size, one_per_node, h100) < 2 * all_gather(size, one_per_node, h100)  # the tree


@pytest.mark.parametrize("kind,v", [("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 4),
                                    ("zero_bubble", 1)])
def test_timed_schedule_bubble_equals_the_formula_for_equal_actions(kind, v):
    """With every F, B (and W) one second and free hops, the timed schedule's idle share is
    REFERENCE.md's bubble: (p−1)/(m+p−1), (p−1)/(v·m+p−1), ZB-H1 (p−1)/(3m+p−1)."""
    p, m = 4, 8
    stages = p * v
    timed = schedule.run(kind, p, m, v, {k: [1.0] * stages for k in "FBW"}, hop=0.0)
    num, den = bubble_formula(kind, p, m, v)
    assert timed.bubble_fraction == pytest.approx(num / den)


def test_pipeline_makespans_by_hand():
    p, m, f, b = 4, 8, 1.0, 2.0
    durations = {"F": [f] * p, "B": [b] * p, "W": [0.0] * p}
    for kind in ("gpipe", "1f1b"):
        assert schedule.run(kind, p, m, 1, durations, hop=0.0).makespan == pytest.approx((m + p - 1) * (f + b))
    # GPipe pays each hop once on the way down and once on the way back: 2(p−1) hops
    gpipe = schedule.run("gpipe", p, m, 1, durations, hop=0.25).makespan
    assert gpipe == pytest.approx((m + p - 1) * (f + b) + 2 * (p - 1) * 0.25)
    # strict 1F1B has no slack: a backward waits for the round trip through the later stages, so
    # hops also land in the steady state
    assert schedule.run("1f1b", p, m, 1, durations, hop=0.25).makespan > gpipe


def test_zero3_gathers_parameters_twice_and_scatters_gradients_once():
    psi, n = 1e9, 64
    traffic = data_parallel_traffic(psi, 3, n, grad_accumulation=1, grad_bytes=2, param_bytes=2)
    # ZeRO paper: 3Ψ elements per step, counting a gather as its whole and a scatter as its input
    assert (n * traffic["all_gather"] + traffic["reduce_scatter"]) / 2 == formulas.zero_comm_elements(psi, 3)
    # on the wire each rank sends (N−1)/N of the whole three times: 3 · 63/64 · 2 GB
    assert wire_bytes(traffic, n) == pytest.approx(3 * 63 / 64 * 2 * psi)
    with_accumulation = data_parallel_traffic(psi, 3, n, grad_accumulation=4)
    assert wire_bytes(with_accumulation, n) == pytest.approx(4 * wire_bytes(traffic, n))
    ddp = data_parallel_traffic(psi, 0, n)
    assert wire_bytes(ddp, n) == pytest.approx(formulas.ring_all_reduce_bytes(2 * psi, n))


def test_memory_per_gpu_is_formulas_model_states_plus_activations():
    model = gpt(24, 2048, 16)
    c = cluster("a100-80gb", gpus=8)
    e = estimate(model, c, Layout(tp=1, pp=1, zero_stage=3, micro_batch=1, global_batch=8, recompute="selective"))
    psi = model.params()
    states = formulas.model_state_bytes(psi, "bf16", 3, 8)
    mem = e.memory_per_gpu_bytes
    assert mem["optimizer"] == pytest.approx(states["optimizer"])
    # FSDP: fp32 gradient shards (the shards' own dtype), and one layer's unsharded bf16 gradient in backward
    assert mem["gradients"] == pytest.approx(4 * psi / 8 + 2 * model.layer_params())
    # no bf16 shard (the fp32 master is the shard): the gathered layer and the one prefetched, and the root unit's
    # embedding and output layer, gathered but for the GPU's own eighth
    embeddings = 2 * model.vocab * model.hidden
    assert mem["parameters"] == pytest.approx(2 * 2 * model.layer_params() + 2 * embeddings * 7 / 8)
    act = formulas.activation_bytes_per_layer(2048, 1, 2048, 16, 1, "selective") * 24
    logits = 2048 * model.vocab * 6
    assert mem["activations"] == pytest.approx(act + logits)
    assert mem["total"] == pytest.approx(sum(v for k, v in mem.items() if k != "total"))


def test_dp_gradient_reduction_hides_behind_backward_only_when_overlapped():
    model, c, layout = build("llama3-8b", gpus=64, tp=1, zero_stage=0, micro_batch=1, global_batch=64)
    overlapped = estimate(model, c, layout)
    serial = estimate(model, c, Layout(**{**layout.__dict__, "overlap_grad_reduce": False}))
    assert serial.exposed_by_kind["dp"] == pytest.approx(serial.comm_total_s["dp"])
    assert overlapped.exposed_by_kind["dp"] < serial.exposed_by_kind["dp"]
    assert serial.step_time_s - overlapped.step_time_s == pytest.approx(
        serial.exposed_by_kind["dp"] - overlapped.exposed_by_kind["dp"])


def test_tensor_parallel_across_nodes_is_slower_than_inside_one():
    """The same TP = 8 layout, its group inside a node or spread one GPU per node."""
    model = MODEL_70B = build("llama3-70b", gpus=64, tp=8, micro_batch=1, global_batch=64)[0]
    layout = Layout(tp=8, micro_batch=1, global_batch=64)
    inside = estimate(MODEL_70B, cluster("h100-80gb", 64, gpus_per_node=8), layout)
    spread = estimate(model, cluster("h100-80gb", 64, gpus_per_node=1), layout)
    assert spread.exposed_by_kind["tp"] > 3 * inside.exposed_by_kind["tp"]


@pytest.mark.parametrize("kwargs,field", [
    ({"tp": 3, "gpus": 96}, "tp"),
    ({"gpus": 1000, "tp": 8, "pp": 2}, "gpus"),
    ({"pp": 4, "schedule": "1f1b", "virtual_stages": 2}, "virtual_stages"),
    ({"pp": 4, "schedule": "interleaved_1f1b", "micro_batch": 1, "global_batch": 96, "gpus": 512}, "micro_batch"),
    ({"ep": 2}, "ep"),
    ({"model": "custom", "layers": 4}, "hidden"),
    ({"micro_batch": "many"}, "micro_batch"),
])
def test_invalid_layouts_name_the_field(kwargs, field):
    with pytest.raises(LayoutError) as info:
        build(**kwargs)
    assert info.value.field == field


def test_auto_picks_the_fastest_micro_batch_that_fits():
    model, c, layout = build("llama3-70b", gpus=256, tp=8, pp=4, schedule="interleaved_1f1b", global_batch=256)
    chosen = estimate(model, c, layout)
    assert chosen.fits
    for b in (1, 2, 4, 8):
        for v in (1, 2, 4, 5):
            trial = Layout(**{**layout.__dict__, "micro_batch": b, "virtual_stages": v})
            try:
                other = estimate(model, c, trial)
            except LayoutError:
                continue
            if other.fits:
                assert chosen.step_time_s <= other.step_time_s + 1e-12


@pytest.mark.parametrize("stage", [0, 3])
def test_data_parallel_bytes_agree_with_a_live_zero_run(run_scenario, stage):
    """The live `zero` scenario traces what each rank hands its collectives; the estimator's traffic
    for the same Ψ, ranks and stage is the same, byte for byte (fp32 run: 4 bytes per element)."""
    run = run_scenario("zero", stage=stage, world_size=4, width=16, depth=1, steps=1)
    figures = run.summary.figures
    psi = figures["psi_padded"]
    expected = data_parallel_traffic(psi, stage, 4, 1, grad_bytes=4, param_bytes=4)
    for sent in figures["bytes_sent_per_rank"]:
        assert {k: v for k, v in sent.items() if v} == pytest.approx(expected)


def test_expert_parallel_splits_the_experts_and_pays_all_to_alls():
    dense = build("llama3-8b", gpus=64, tp=1, micro_batch=1, global_batch=256, experts=8, top_k=2)
    split = build("llama3-8b", gpus=64, tp=1, ep=8, micro_batch=1, global_batch=256, experts=8, top_k=2)
    one, eight = estimate(*dense), estimate(*split)
    assert one.exposed_by_kind["ep"] == 0 and eight.exposed_by_kind["ep"] > 0
    # the expert FFNs, 3·h·f each, now live 1/8 on each GPU
    model = dense[0]
    experts_bytes = 2 * model.layers * model.experts * 3 * model.hidden * model.ffn_hidden
    saved = one.memory_per_gpu_bytes["parameters"] - eight.memory_per_gpu_bytes["parameters"]
    assert saved == pytest.approx(experts_bytes * 7 / 8)


def test_unfused_gradient_accumulation_costs_one_memory_pass_per_weight_per_micro_batch():
    """Megatron-LM's DDP hook (param.main_grad.add_(param.grad)) reads the bf16 gradient and reads and
    writes the accumulator: 2 + 2·2 bytes per weight per micro-batch at the achievable HBM bandwidth."""
    from simulations.estimate.memory import layer_params_local
    from simulations.hardware import HBM_EFFICIENCY
    model, c = gpt(8, 2048, 16), cluster("a100-80gb", 8)
    base = Layout(tp=2, pp=2, schedule="1f1b", micro_batch=1, global_batch=8, zero_stage=0)
    fused = estimate(model, c, base)
    unfused = estimate(model, c, replace_layout(base, grad_accumulation_fusion=False))
    per_layer = layer_params_local(model, base) * (2 + 2 * 2) / (2039e9 * HBM_EFFICIENCY)
    layers_per_stage = 8 // 2
    added = unfused.stage_times["backward"] - fused.stage_times["backward"]
    assert added == pytest.approx(layers_per_stage * per_layer, rel=1e-9)


def test_blocking_pipeline_sends_stall_the_sender_for_every_hop():
    """Megatron-LM before overlap_p2p_comm waited for each send and receive (torch.cuda.synchronize()):
    the last stage's m backwards each pay one hop on its own stream; all but the last were hidden in the
    overlapped schedule's slack, so the step grows by at least m − 1 hops."""
    model, c = gpt(8, 2048, 16), cluster("a100-80gb", 16)
    base = Layout(tp=8, pp=2, schedule="1f1b", micro_batch=1, global_batch=8, zero_stage=0)
    overlapped = estimate(model, c, base)
    blocking = estimate(model, c, replace_layout(base, overlap_p2p_comm=False))
    hop = overlapped.stage_times["hop"]
    assert hop > 0
    assert blocking.pipeline_s - overlapped.pipeline_s >= 7 * hop * (1 - 1e-9)


def replace_layout(layout, **changes):
    from dataclasses import replace
    return replace(layout, **changes)


def _layer_timeline(**layout):
    model = layout.pop("model", "llama3-70b")
    spec, c, lay = build(model, micro_batch=1, **layout)
    return estimate(spec, c, lay, keep_spans=True)


def test_layer_timeline_ends_at_the_estimated_step_time():
    """Without pipeline stages the timeline is layer by layer; its last span (the optimizer step) ends where
    the estimate's step ends: exactly when nothing is exposed but TP and the last bucket, within 0.5 % with
    ZeRO-3 (both pay each micro-batch's first gathers and last reduce-scatters, cost.zero3_fill_and_drain; the
    estimate's per-layer overlap is a sum, the timeline's a clock)."""
    for kwargs, tolerance in ((dict(tp=8, zero_stage=1, gpus=32, global_batch=8), 1e-9),
                              (dict(tp=4, zero_stage=0, gpus=4, global_batch=1), 1e-9),
                              (dict(tp=8, zero_stage=2, gpus=32, global_batch=16), 1e-9),
                              (dict(tp=8, zero_stage=3, gpus=32, global_batch=16), 0.005),
                              (dict(model="llama3-8b", tp=1, zero_stage=3, gpus=16, global_batch=16, zero_shards=8),
                               0.005)):
        e = _layer_timeline(**kwargs)
        assert max(s["end"] for s in e.spans) == pytest.approx(e.step_time_s, rel=tolerance), kwargs


def test_layer_timeline_zero3_prefetches_one_layer_ahead():
    e = _layer_timeline(tp=8, zero_stage=3, gpus=32, global_batch=8)
    forward = {s["layer"]: s for s in e.spans if s["kind"] == "F" and s["mb"] == 0}
    gathers = [s for s in e.spans if s["kind"] == "zero3" and s["mb"] == 0]
    layers = e.model.layers
    first_gather = {}
    for g in gathers:
        first_gather.setdefault(g["layer"], g)  # the forward's gather comes first
    # the root unit (embedding, output layer: `layers`) gathered first, and reduce-scattered last (-1)
    assert set(first_gather) == set(range(-1, layers + 1))
    assert first_gather[0]["start"] == pytest.approx(first_gather[layers]["end"])  # one stream: root, then layer 0
    assert max(g["end"] for g in gathers) == first_gather[-1]["end"]
    for layer in range(1, layers):  # layer l + 1's weights are fetched while layer l computes
        assert first_gather[layer]["start"] == pytest.approx(forward[layer - 1]["start"])
        assert first_gather[layer]["end"] <= forward[layer]["start"] + 1e-12
    # gathers in forward and backward, a reduce-scatter after each layer's backward: 3 per layer; the root's 2
    assert len(gathers) == 3 * layers + 2


def test_zero3_fill_and_drain_by_hand():
    """Forward: the root's gather (1 s) then the first layer's (2 s) before any compute; backward: the last layer's
    gather (2 s) beside the output layer's backward (0.5 s), 1.5 s left; the end: the first layer's reduce-scatter
    (3 s) beside the embedding's backward (1 s), 2 s left, then the root's (4 s)."""
    from simulations.estimate.cost import zero3_fill_and_drain
    assert zero3_fill_and_drain(2.0, 3.0, 1.0, 4.0, 0.5, 1.0) == (3.0, 1.5, 6.0)
    assert zero3_fill_and_drain(2.0, 3.0, 0.0, 0.0, 5.0, 5.0) == (2.0, 0.0, 0.0)  # hidden behind the ends' compute
    # in a step: the root's gather and reduce-scatter are charged, a step slower than with the layers' overlap alone
    e = _layer_timeline(model="llama3-8b", tp=1, zero_stage=3, gpus=64, global_batch=64)
    root = [s for s in e.spans if s["kind"] == "zero3" and s["layer"] in (-1, e.model.layers)]
    assert len(root) == 2 and e.exposed_by_kind["zero3"] >= sum(s["end"] - s["start"] for s in root)


def test_layer_timeline_tp_forward_collectives_are_exposed_and_backward_ones_overlap():
    e = _layer_timeline(tp=4, zero_stage=0, gpus=4, global_batch=1, sequence_parallel=False)
    tp = [s for s in e.spans if s["kind"] == "tp"]
    forward = sorted((s for s in e.spans if s["kind"] == "F" and s["layer"] < e.model.layers),
                     key=lambda s: s["start"])
    assert len(tp) == 2 * e.model.layers + 1  # and the embedding's all-reduce of its partial outputs
    for a, b in zip(forward, forward[1:]):  # compute waits for the layer's TP collectives in forward
        gap = b["start"] - a["end"]
        collective = next(s for s in tp if s["start"] == pytest.approx(a["end"]))
        assert gap == pytest.approx(collective["end"] - collective["start"])
    weights = {s["layer"]: s for s in e.spans if s["kind"] == "W"}
    for s in tp:
        if s["start"] > forward[-1]["end"]:  # backward: beside the weight gradients of the same layer
            assert s["start"] == pytest.approx(weights[s["layer"]]["start"])
    # exposed: the forward's collectives, what outlasts the weight gradients in backward, and the output
    # layer's input-gradient all-reduce inside its backward
    head = all_reduce(8192 * 8192 * 2, place(4, 1, 8), e.cluster)
    in_forward = sum(s["end"] - s["start"] for s in tp if s["start"] <= forward[-1]["end"] + 1e-12)
    past_weights = sum(max(0.0, s["end"] - weights[s["layer"]]["end"]) for s in tp if s["start"] > forward[-1]["end"])
    assert in_forward + past_weights + head == pytest.approx(e.exposed_by_kind["tp"])


def test_layer_timeline_ddp_reduces_bucket_by_bucket_and_the_last_waits():
    e = _layer_timeline(tp=8, zero_stage=0, gpus=32, global_batch=4)
    buckets = sorted((s for s in e.spans if s["kind"] == "dp"), key=lambda s: s["start"])
    backward = [s for s in e.spans if s["kind"] in ("B", "W")]
    assert len(buckets) == e.model.layers
    assert buckets[0]["start"] < max(s["end"] for s in backward)  # overlaps backward
    assert buckets[-1]["end"] > max(s["end"] for s in backward)  # the last bucket is exposed
    assert sum(s["end"] - s["start"] for s in buckets) == pytest.approx(e.comm_total_s["dp"])


def test_the_input_embedding_backward_writes_and_accumulates_a_dense_table_gradient():
    """No GEMM: torch's embedding backward writes a dense bf16 [V/t, h] gradient (2 bytes an entry), and the
    accumulator hook reads it (2) and reads and writes the bf16 accumulator (2 + 2), on the first stage."""
    from simulations.estimate import gpt as shape
    from simulations.hardware import HBM_EFFICIENCY
    c = cluster("h100-80gb", 16)
    base = Layout(tp=8, pp=2, schedule="zero_bubble", micro_batch=1, global_batch=8, zero_stage=0)
    small = estimate(shape(8, 4096, 32, vocab=32000), c, base)
    large = estimate(shape(8, 4096, 32, vocab=64000), c, base)
    table = 32000 / 8 * 4096
    assert large.stage_times["weight"] - small.stage_times["weight"] == pytest.approx(
        table * (2 + 2 + 2 * 2) / (3350e9 * HBM_EFFICIENCY), rel=1e-9)


def test_ring_attention_merges_each_steps_partial_results_by_hand():
    """Llama 3 70B, TP 4, CP 2, one sequence of 8,192: 4,096 queries per rank, 2 steps, 6 bytes an element."""
    from simulations.estimate import MODELS
    from simulations.estimate.compute import ring_merge_bytes
    forward, backward = ring_merge_bytes(MODELS["llama3-70b"], 4096, 4, 2)
    assert forward == 2 * 6 * 4096 * 8192 / 4
    assert backward == 2 * 6 * 4096 * (8192 + 2 * 8 * 128) / 4


def _moe_shares(model, layers_on_gpu: int, ep: int) -> tuple[float, float]:
    """By hand from the shape: (dense, expert) parameters on one GPU with TP 1 and no pipeline stages."""
    h, kv = model.hidden, model.kv_heads * model.head_dim
    attention = h * (h + 2 * kv) + h * h + 4 * h  # Q, K, V, O and the norms
    dense = layers_on_gpu * attention + 2 * model.vocab * h  # and the input and output embeddings
    expert = layers_on_gpu * model.experts * 3 * h * model.ffn_hidden / ep  # SwiGLU experts, 1/ep of them here
    return dense, expert


@pytest.mark.parametrize("zero_stage", [0, 1])
def test_moe_expert_gradients_reduce_over_the_expert_data_parallel_group(zero_stage):
    """Llama 3 8B's shape with 8 experts on 64 GPUs, TP 1, EP 8: the dense weights have 64 replicas, each
    expert only 64/8 = 8 (Megatron-core's expert-data-parallel group, ranks TP·EP = 8 apart: one per node).
    Ring volumes by hand: dense 2·63/64·2Ψ_d, experts 2·7/8·2Ψ_e (an all-reduce, or a reduce-scatter of the
    gradients and an all-gather of the parameters: the same bytes)."""
    spec, c, layout = build("llama3-8b", gpus=64, tp=1, ep=8, zero_stage=zero_stage, micro_batch=1,
                            global_batch=64, experts=8, top_k=2)
    e = estimate(spec, c, layout)
    dense, expert = _moe_shares(spec, 32, 8)
    assert e.comm_bytes_per_gpu["dp"] == pytest.approx(2 * 63 / 64 * 2 * dense + 2 * 7 / 8 * 2 * expert, rel=1e-12)
    dense_group, expert_group = place(64, 1, 8), place(8, 8, 8)
    assert (dense_group.per_node, expert_group.per_node, expert_group.nodes) == (8, 1, 8)
    def in_buckets(collective, psi, group):  # Megatron-core: buckets of max(40M, 1M × DP) parameters, a call each
        calls = math.ceil(psi / max(40e6, 1e6 * group.size))
        return calls * collective(2 * psi / calls, group, c)

    if zero_stage == 0:
        by_hand = in_buckets(all_reduce, dense, dense_group) + in_buckets(all_reduce, expert, expert_group)
    else:
        by_hand = sum(in_buckets(f, psi, group) for f in (all_gather, all_gather)  # a reduce-scatter costs a gather
                      for psi, group in ((dense, dense_group), (expert, expert_group)))
    assert e.comm_total_s["dp"] == pytest.approx(by_hand, rel=1e-12)
    mem = e.memory_per_gpu_bytes
    assert mem["parameters"] == pytest.approx(2 * (dense + expert))
    assert mem["optimizer"] == pytest.approx(12 * (dense / 64 + expert / 8) if zero_stage else 12 * (dense + expert))


def test_moe_zero3_shards_experts_over_their_replicas_only():
    spec, c, layout = build("llama3-8b", gpus=64, tp=1, ep=8, zero_stage=3, micro_batch=1, global_batch=64,
                            experts=8, top_k=2)
    e = estimate(spec, c, layout)
    dense, expert = _moe_shares(spec, 32, 8)
    layer_dense, layer_expert = _moe_shares(spec, 1, 8)
    layer_dense -= 2 * spec.vocab * spec.hidden
    mem = e.memory_per_gpu_bytes
    # the gathered layer with the one prefetched (the GPU's own experts only), and the embeddings but for the GPU's
    # own 64th of them (the dense weights' shard group); the shards are the fp32 master weights, in the optimizer's
    embeddings = 2 * spec.vocab * spec.hidden
    assert mem["parameters"] == pytest.approx(2 * 2 * (layer_dense + layer_expert) + 2 * embeddings * 63 / 64)
    # fp32 gradient shards, and one layer's unsharded bf16 gradient
    assert mem["gradients"] == pytest.approx(4 * (dense / 64 + expert / 8) + 2 * (layer_dense + layer_expert))
    assert e.comm_bytes_per_gpu["zero3"] == pytest.approx(3 * 63 / 64 * 2 * dense + 3 * 7 / 8 * 2 * expert, rel=1e-12)
    gather = all_gather(2 * layer_dense, place(64, 1, 8), c) + all_gather(2 * layer_expert, place(8, 8, 8), c)
    # and the root unit's (the embeddings: dense), gathered once a micro-batch and reduce-scattered (bf16: as a gather)
    root = all_gather(2 * embeddings, place(64, 1, 8), c)
    assert e.comm_total_s["zero3"] == pytest.approx((3 * gather * 32 + 2 * root) * e.micro_batches, rel=1e-12)


def _cp_layout(cp_comm: str, **kwargs) -> Layout:
    return Layout(**{"tp": 8, "cp": 4, "cp_comm": cp_comm, "zero_stage": 1, "micro_batch": 1, "global_batch": 1,
                     **kwargs})


def test_ulysses_all_to_alls_by_hand_and_on_the_critical_path():
    """Llama 3 70B, TP 8, CP 4 (each CP rank a node): a TP rank holds 8 query heads and 1 K/V head, repeated to
    4 so that each CP rank gets one. Per layer, forward: Q, K, V (8 + 4 + 4 heads of 2,048 tokens) in one
    all-to-all and O (8 heads) in another; backward the same two, mirrored. Compute waits for all of them."""
    from simulations.estimate import MODELS
    from simulations.estimate.collectives import all_to_all
    model, c = MODELS["llama3-70b"], cluster("h100-80gb", 32)
    e = estimate(model, c, _cp_layout("all_to_all"), keep_spans=True)
    tokens, head = 8192 // 4, 128 * 2
    group = place(4, 8, 8)
    assert (group.per_node, group.crosses_nodes) == (1, True)
    per_direction = all_to_all(tokens * (8 + 4 + 4) * head, group, c) + all_to_all(tokens * 8 * head, group, c)
    assert e.comm_total_s["cp"] == pytest.approx(2 * per_direction * 80, rel=1e-12)
    assert e.exposed_by_kind["cp"] == pytest.approx(e.comm_total_s["cp"], rel=1e-12)
    # bytes: (N−1)/N of each all-to-all's input, 8 + 4 + 4 + 8 = 24 heads' worth a layer each way
    assert e.comm_bytes_per_gpu["cp"] == pytest.approx(2 * 3 / 4 * tokens * 24 * head * 80, rel=1e-12)
    forward = {s["layer"]: s for s in e.spans if s["kind"] == "F" and 0 <= s["layer"] < 80}
    cp = [s for s in e.spans if s["kind"] == "cp"]
    assert len(cp) == 2 * 80
    for s in cp[:80]:  # the forward's: the next layer starts only when its all-to-alls are done
        assert s["start"] == pytest.approx(forward[s["layer"]]["end"])
        if s["layer"] + 1 < 80:
            assert forward[s["layer"] + 1]["start"] >= s["end"] - 1e-12
    ring = estimate(model, c, _cp_layout("ring"), keep_spans=True)
    ring_forward = {s["layer"]: s for s in ring.spans if s["kind"] == "F" and 0 <= s["layer"] < 80}
    for s in [s for s in ring.spans if s["kind"] == "cp"][:80]:  # the ring's hops run beside attention
        assert s["start"] == pytest.approx(ring_forward[s["layer"]]["start"])


def test_all_gather_kv_by_hand_exposed_and_its_gathered_kv_kept():
    from simulations.estimate import MODELS
    model, c = MODELS["llama3-70b"], cluster("h100-80gb", 32)
    e = estimate(model, c, _cp_layout("all_gather"))
    ring = estimate(model, c, _cp_layout("ring"))
    tokens, kv = 8192 // 4, 2 * 1 * 128 * 2  # K and V of the TP rank's one K/V head, bf16
    group = place(4, 8, 8)
    per_layer = all_gather(4 * tokens * kv, group, c) + all_gather(4 * tokens * kv, group, c)  # + reduce-scatter
    assert e.comm_total_s["cp"] == pytest.approx(per_layer * 80, rel=1e-12)
    assert e.exposed_by_kind["cp"] == pytest.approx(e.comm_total_s["cp"], rel=1e-12)
    assert e.comm_bytes_per_gpu["cp"] == pytest.approx(2 * 3 * tokens * kv * 80, rel=1e-12)  # (N−1)·shard twice
    # the other three ranks' K and V of every layer stay in memory for the backward
    assert e.memory_per_gpu_bytes["activations"] - ring.memory_per_gpu_bytes["activations"] == pytest.approx(
        3 * tokens * kv * 80)


@pytest.mark.parametrize("kwargs,words", [
    (dict(model="llama3-70b", tp=8, cp=16, gpus=128), "divide the attention heads per TP rank (8)"),
    (dict(model="custom", layers=2, hidden=1536, heads=24, kv_heads=6, vocab=1000, seq_len=4096, tp=1, cp=4,
          gpus=4), "key/value heads per TP rank (6)"),
])
def test_ulysses_needs_cp_to_divide_the_heads(kwargs, words):
    spec = build(**kwargs, check_layout=False)[0]
    with pytest.raises(LayoutError) as info:
        estimate(spec, cluster("h100-80gb", kwargs["gpus"]), _cp_layout("all_to_all", tp=kwargs["tp"], cp=kwargs["cp"]))
    assert info.value.field == "cp" and words in info.value.message
    estimate(spec, cluster("h100-80gb", kwargs["gpus"]), _cp_layout("all_gather", tp=kwargs["tp"], cp=kwargs["cp"]))


@pytest.mark.parametrize("method,cp_comm", [("all_to_all", "all_to_all"), ("all_gather_kv", "all_gather")])
def test_context_parallel_bytes_agree_with_a_live_ulysses_run(run_scenario, method, cp_comm):
    """The live `ulysses` scenario traces the buffers each rank hands its collectives (fp32, 4 bytes an element):
    the estimator's traffic for the same shape is the same, byte for byte; and a whole estimate of a one-layer
    model of that shape sends the live run's bytes per rank, halved for bf16 (2 bytes an element)."""
    from simulations.estimate import Model
    from simulations.estimate.traffic import context_parallel_traffic
    n, heads, seq, head_dim = 4, 4, 16, 4
    run = run_scenario("ulysses", world_size=n, method=method, seq_len=seq, heads=heads, head_dim=head_dim)
    figures = run.summary.figures
    traffic = context_parallel_traffic(cp_comm, seq // n, heads, heads, head_dim, n, element=4)
    handed = {}
    for direction in ("forward", "backward"):
        for op, size in traffic[direction].items():
            handed[op] = handed.get(op, 0) + size
    assert figures["collective_buffers_per_rank"] == {op: [size] * n for op, size in handed.items()}
    model = Model("live", layers=1, hidden=heads * head_dim, heads=heads, kv_heads=heads, ffn_hidden=64, vocab=32,
                  seq_len=seq)
    e = estimate(model, cluster("h100-80gb", n), Layout(tp=1, cp=n, cp_comm=cp_comm, zero_stage=0, micro_batch=1,
                                                      global_batch=1))
    for sent in figures["total_bytes_per_rank"]:
        assert e.comm_bytes_per_gpu["cp"] == pytest.approx(sent * 2 / 4, rel=1e-12)


def test_hsdp_shards_inside_a_node_and_all_reduces_the_shard_across_nodes():
    """Llama 3 8B on 8 nodes, TP 1, ZeRO-3 hybrid sharded over the 8 GPUs of a node (NVLink), replicated over
    the 8 nodes: per layer, two all-gathers and a reduce-scatter inside the node; per step an all-reduce of each
    GPU's 1/8 gradient shard across the nodes (one GPU per node: the node's egress shared by 8 rings)."""
    from simulations.estimate.collectives import all_reduce
    spec, c, layout = build("llama3-8b", gpus=64, tp=1, zero_stage=3, micro_batch=1, global_batch=64)
    hybrid = estimate(spec, c, replace_layout(layout, zero_shards=8), keep_spans=True)
    h, f, kv = spec.hidden, spec.ffn_hidden, spec.kv_heads * spec.head_dim
    layer = h * (h + 2 * kv) + h * h + 4 * h + 3 * h * f
    stage = 32 * layer + 2 * spec.vocab * h
    node, across = place(8, 1, 8), place(8, 8, 8)
    assert (node.crosses_nodes, across.per_node, across.nodes) == (False, 1, 8)
    # and the root unit's (embeddings) gather and reduce-scatter (bf16: as a gather), once a micro-batch
    root = all_gather(2 * 2 * spec.vocab * h, node, c)
    assert hybrid.comm_total_s["zero3"] == pytest.approx(3 * all_gather(2 * layer, node, c) * 32 + 2 * root, rel=1e-12)
    # one all-reduce per layer (FSDP's unit), each of a layer's shard
    assert hybrid.comm_total_s["dp"] == pytest.approx(32 * all_reduce(2 * stage / 8 / 32, across, c), rel=1e-12)
    assert hybrid.comm_bytes_per_gpu["zero3"] == pytest.approx(3 * 7 / 8 * 2 * stage, rel=1e-12)
    assert hybrid.comm_bytes_per_gpu["dp"] == pytest.approx(2 * 7 / 8 * 2 * stage / 8, rel=1e-12)
    mem = hybrid.memory_per_gpu_bytes
    assert mem["optimizer"] == pytest.approx(12 * stage / 8)
    # the gathered layer and the one prefetched, and the embeddings gathered inside the shard group of 8
    assert mem["parameters"] == pytest.approx(2 * 2 * layer + 2 * 2 * spec.vocab * h * 7 / 8)
    # each layer's shard goes across the nodes once its reduce-scatter is done, while backward goes on
    scatters = {s["layer"]: s for s in hybrid.spans if s["kind"] == "zero3"}  # the last per layer: the scatter
    buckets = [s for s in hybrid.spans if s["kind"] == "dp"]
    assert len(buckets) == 32
    assert all(s["start"] >= scatters[s["layer"]]["end"] - 1e-12 for s in buckets if s["layer"] > 0)
    # sharding over all 64 GPUs instead crosses nodes with every gather (whole nodes in the ring: the node's
    # egress is about its NVLink share, so the gathers are slower, by their network latency, not 8 times)
    full = estimate(spec, c, layout)
    assert full.comm_total_s["zero3"] > hybrid.comm_total_s["zero3"] and full.comm_total_s["dp"] == 0


@pytest.mark.parametrize("changes,words", [
    (dict(zero_stage=1, zero_shards=8), "needs zero_stage 3"),
    (dict(zero_stage=3, zero_shards=3), "must divide dp·cp (64), got 3"),
])
def test_hsdp_rules_name_zero_shards(changes, words):
    spec, c, layout = build("llama3-8b", gpus=64, tp=1, micro_batch=1, global_batch=64)
    with pytest.raises(LayoutError) as info:
        estimate(spec, c, replace_layout(layout, **changes))
    assert info.value.field == "zero_shards" and words in info.value.message


def test_hsdp_bytes_agree_with_a_live_hsdp_run(run_scenario):
    """The live `hsdp` scenario traces each mesh dimension's collectives (fp32); the estimator's traffic for its
    padded Ψ, shards and replicas sends the same bytes per rank, dimension by dimension."""
    from simulations.estimate.traffic import sharded_traffic
    run = run_scenario("hsdp", replicas=2, shards=2, width=16, depth=1, steps=1)
    figures = run.summary.figures
    traffic = sharded_traffic(figures["psi_padded"], 3, 2, 2, grad_accumulation=1, grad_bytes=4, param_bytes=4)
    for dim in ("shard", "replicate"):
        for sent in figures["bytes_per_rank_per_step"][dim]:
            assert wire_bytes(traffic[dim], 2) == pytest.approx(sent, rel=1e-12)


def test_diloco_round_sends_the_fp32_pseudo_gradient_once_and_keeps_the_outer_state():
    """4 workers of one node each (TP 8), H = 10: per round each GPU sends 2·3/4 of its eighth of the model in
    fp32 (the ring all-reduce of Δ), against DDP's 10 all-reduces of bf16 gradients; and keeps the global θ
    and the outer momentum, 4 + 4 bytes per parameter it holds."""
    from dataclasses import replace

    from simulations.estimate import MODELS, outer_round
    model = MODELS["llama3-8b"]
    spec, c, layout = build("llama3-8b", gpus=32, tp=8, zero_stage=0, micro_batch=1, global_batch=8)
    e = outer_round(spec, c, replace(layout, global_batch=2), workers=4, inner_steps=10)
    share = model.params() / 8
    assert e.comm_bytes_per_gpu["outer"] == pytest.approx(2 * 3 / 4 * 4 * share, rel=1e-12)
    assert e.comm_bytes_per_gpu["dp_baseline"] == pytest.approx(10 * 2 * 3 / 4 * 2 * share, rel=1e-12)
    assert e.memory_per_gpu_bytes["outer"] == pytest.approx(8 * share)
    assert [s["kind"] for s in e.spans] == ["step"] * 10 + ["outer", "opt"]
    assert e.spans[-1]["end"] == pytest.approx(e.step_time_s)
    assert e.comm_total_s["dp"] == 0 and e.exposed_by_kind["outer"] == pytest.approx(
        all_reduce(4 * share, place(4, 8, 8), c), rel=1e-12)
    with pytest.raises(LayoutError) as info:
        outer_round(spec, c, layout, workers=3, inner_steps=10)
    assert info.value.field == "workers"


def test_hsdp_of_a_mixture_of_experts_without_ep_shards_the_experts_with_the_rest():
    """With ep = 1 every expert is replicated on every data-parallel rank, as the dense weights are: hybrid
    sharding shards them over the same 8-GPU groups (and with ep > 1 it is refused, naming zero_shards)."""
    spec, c, layout = build("llama3-8b", gpus=64, tp=1, zero_stage=3, micro_batch=1, global_batch=64, experts=8,
                            top_k=2)
    e = estimate(spec, c, replace_layout(layout, zero_shards=8))
    dense, expert = _moe_shares(spec, 32, 1)
    assert e.memory_per_gpu_bytes["optimizer"] == pytest.approx(12 * (dense + expert) / 8)
    with pytest.raises(LayoutError) as info:
        estimate(spec, c, replace_layout(layout, zero_shards=8, ep=8))
    assert info.value.field == "zero_shards"


def test_an_overlapped_reduction_is_never_charged_more_than_it_lasts():
    """Buckets handed over as backward goes: the reduction starts with the first bucket and the last bucket
    waits for backward's end. One bucket: all of it exposed, once (it was counted twice past the backward)."""
    from simulations.estimate.traffic import overlapped_tail

    assert overlapped_tail(3.0, 2.0, 1) == pytest.approx(3.0)
    assert overlapped_tail(1.0, 8.0, 4) == pytest.approx(0.25)  # hidden but for the last bucket
    assert overlapped_tail(8.0, 4.0, 4) == pytest.approx(8.0 - 4.0 * 3 / 4)  # starts after the first layer
    # a whole step with one layer a chunk (v = layers / pp) and the all-reduce longer than a chunk's backward
    spec, c, layout = build("custom", layers=72, hidden=10240, heads=80, vocab=131072, seq_len=4096, gpus=1024,
                            tp=8, pp=8, schedule="interleaved_1f1b", virtual_stages=9, micro_batch=1,
                            global_batch=1152, zero_stage=0)
    e = estimate(spec, c, layout)
    assert 0 < e.exposed_by_kind["dp"] <= e.comm_total_s["dp"] + 1e-12  # was 0.29 s exposed of 0.15 s


def test_interleaving_keeps_more_micro_batches_in_flight_on_the_first_stage():
    """Narayanan et al. 2021 (sec. 2.2.2): with v chunks per rank, the first stage holds the activations of
    p micro-batches times (1 + (p − 1)/(p·v)) of its layers, against p for plain 1F1B."""
    p, v = 4, 2
    common = dict(gpus=32, tp=8, pp=p, zero_stage=1, micro_batch=1, global_batch=8)
    one = estimate(*build("llama3-70b", schedule="1f1b", virtual_stages=1, **common))
    interleaved = estimate(*build("llama3-70b", schedule="interleaved_1f1b", virtual_stages=v, **common))
    ratio = interleaved.memory_per_gpu_bytes["activations"] / one.memory_per_gpu_bytes["activations"]
    assert ratio == pytest.approx(1 + (p - 1) / (p * v))


def test_ring_attention_backward_takes_the_hops_its_bytes_count():
    """Ring attention by hand (Liu et al. 2023): forward passes each K, V block on c − 1 hops; backward passes
    them again and carries the dK, dV accumulators c hops, home. Time follows the same hop count as the bytes."""
    from simulations.estimate.collectives import send
    from simulations.estimate.traffic import groups
    from simulations.estimate.compute import layer_time

    spec, c, _ = build("llama3-70b", gpus=32, tp=8, cp=4, zero_stage=1, micro_batch=1, global_batch=1)
    layout = _cp_layout("ring")
    g = groups(c, layout)
    lt = layer_time(spec, layout, c, 1, g["tp"], g["cp"], g["ep"])
    block = 2 * (8192 / 4) * 1 * 128 * 2  # K and V of 2,048 tokens, one K/V head per TP rank, head dim 128, bf16
    hop = send(block, True, c)
    assert lt.cp_forward == pytest.approx(3 * hop, rel=1e-12)
    assert lt.cp_backward == pytest.approx((3 + 4) * hop, rel=1e-12)


@pytest.mark.parametrize("kind,v", [("1f1b", 1), ("interleaved_1f1b", 2), ("zero_bubble", 1)])
def test_a_timed_schedule_without_spans_keeps_the_same_clock(kind, v):
    """The layout search times schedules without keeping spans: the same makespan and busy time as with them,
    and the spans kept agree with it (each action's end is its start plus its length)."""
    p, m = 4, 8
    durations = {k: [0.5 + 0.25 * s + (k == "B") for s in range(p * v)] for k in "FBW"}
    kept = schedule.run(kind, p, m, v, durations, hop=0.125, keep_spans=True)
    bare = schedule.run(kind, p, m, v, durations, hop=0.125)
    assert (bare.makespan, bare.busy, bare.spans) == (kept.makespan, kept.busy, [])
    assert len(kept.spans) == p * m * v * (3 if kind == "zero_bubble" else 2)
    assert max(end for *_, end in kept.spans) == kept.makespan
    assert all(end == pytest.approx(start + durations[a.kind][a.stage]) for _, a, start, end in kept.spans)
