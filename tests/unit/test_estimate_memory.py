"""The estimator's memory per GPU (simulations/estimate/memory.py) against what stacks publish they hold, and against
runs that ran: every published run fits in the model, and layouts that cannot run do not.

Published bytes a parameter: Megatron-LM's distributed optimizer (docs/source/api-guide/distrib_optimizer.md, its
table of bytes per parameter, d = data-parallel size): bf16 parameters with fp32 gradients 18 without and 6 + 12/d
with the distributed optimizer. Its fp16-gradient row (20; 4 + 16/d) adds an fp32 copy of the gradients that the
fp16 optimizer makes in the optimizer step, once the activations are freed, so not at the step's peak.

Published runs of a stack the estimator was not built on, torchtitan (pytorch/torchtitan, docs/performance.md at
0413364): FSDP2 on 64 A100 80 GB, local batch 1 or 2, Llama 2 (sequence 4,096) and Llama 3 (8,192), torchtitan's
defaults: bf16 parameters, fp32 gradient reduction (mixed_precision_reduce float32), the loss in fp32
(cross_entropy on pred.float()). The runs it reports ran: Llama 3 8B at batch 1 with one layer in two checkpointed
("selective layer"), Llama 3 70B at batch 1 with full checkpointing, Llama 2 13B at batch 2 without checkpointing,
Llama 2 70B at batch 2 with full checkpointing. (Its "selective op" runs keep less than no checkpointing and more
than full; the estimator has no mode for them, so they are left out.)
Shapes: Llama 2 13B 40 layers, d 5,120, 40 heads, FFN 13,824; 70B 80 layers, d 8,192, 64 heads, 8 key/value heads,
FFN 28,672; vocabulary 32,000 (Touvron et al. 2023, arXiv:2307.09288, Table 1 and the released configs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulations.estimate import MODELS, Layout, Model, cluster, estimate, memory
from simulations.hardware import ALLOCATOR_FRAGMENTATION
from tests.unit.test_estimate_other_stacks import TABLES, foundry_rows

LLAMA2_13B = Model("llama2-13b", layers=40, hidden=5120, heads=40, kv_heads=40, ffn_hidden=13824, vocab=32000,
                   seq_len=4096, gated_mlp=True, dropout=False)
LLAMA2_70B = Model("llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=32000,
                   seq_len=4096, gated_mlp=True, dropout=False)
LLAMA3_8B = replace(MODELS["llama3-8b"], vocab=128256)
LLAMA3_70B = replace(MODELS["llama3-70b"], vocab=128256)

# model, local batch, recompute, recompute every n-th layer: torchtitan's runs on 64 A100 80 GB that ran
TORCHTITAN_A100 = [(LLAMA3_8B, 1, "full", 2), (LLAMA3_70B, 1, "full", 1), (LLAMA2_13B, 2, "none", 1),
                   (LLAMA2_70B, 2, "full", 1)]


def _states_per_parameter(layout: Layout, dp: int) -> float:
    """Model-state bytes a parameter on one GPU of a one-stage layout (no TP), from memory.model_states."""
    model = MODELS["llama3-8b"]
    states = memory.model_states(model, layout, 0, dp)
    return sum(states.values()) / memory.stage_params(model, layout, 0)


@pytest.mark.parametrize("d", [1, 8, 64])
def test_megatron_distributed_optimizer_bytes_per_parameter(d):
    fp32_grads = Layout(zero_stage=1, grad_reduce_bytes=4)
    assert _states_per_parameter(replace(fp32_grads, zero_stage=0), d) == pytest.approx(18)
    assert _states_per_parameter(fp32_grads, d) == pytest.approx(6 + 12 / d)
    # gradients reduced (and so kept) in bf16, NeMo's grad_sync_dtype: bf16
    assert _states_per_parameter(Layout(zero_stage=1), d) == pytest.approx(4 + 12 / d)
    # Apex's distributed Adam with its state in bf16: a bf16 parameter shard, m and v
    assert _states_per_parameter(Layout(zero_stage=1, optimizer_dtype="bf16"), d) == pytest.approx(4 + 6 / d)


def test_fsdp_holds_fp32_shards_and_one_units_gradient_in_both_dtypes():
    """ZeRO-3 as FSDP runs it with fp32 reduction: 16/N bytes a parameter of shards (fp32 master, m, v, fp32
    gradient), two gathered bf16 layers, and in backward one layer's bf16 gradient and its fp32 copy."""
    model, n = MODELS["llama3-8b"], 64
    layout = Layout(zero_stage=3, grad_reduce_bytes=4)
    states = memory.model_states(model, layout, 0, n)
    psi, unit = memory.stage_params(model, layout, 0), memory.layer_params_local(model, layout)
    embeddings = 2 * model.vocab * model.hidden
    assert states["optimizer"] == pytest.approx(12 * psi / n)
    assert states["gradients"] == pytest.approx(4 * psi / n + (2 + 4) * unit)
    assert states["parameters"] == pytest.approx(2 * 2 * unit + 2 * embeddings * (n - 1) / n)


def test_a_fused_cross_entropy_keeps_four_bytes_a_logit_instead_of_six():
    model = MODELS["llama3-8b"]
    hw = cluster("h100-80gb", 8)
    base = Layout(tp=2, zero_stage=1, micro_batch=2, global_batch=8, recompute="full")
    fp32, fused = (estimate(model, hw, replace(base, cross_entropy=loss)) for loss in ("fp32", "fused"))
    logits = 2 * model.seq_len * model.vocab / 2  # micro-batch 2, this rank's half of the vocabulary
    saved = fp32.memory_per_gpu_bytes["activations"] - fused.memory_per_gpu_bytes["activations"]
    assert saved == pytest.approx(logits * (6 - 4))


def test_sequence_parallel_splits_a_llama_layer_over_tp():
    """A Llama 3 405B layer at 8,192 tokens, TP 8 with SP, no recomputation, counted tensor by tensor: the two
    norms' inputs and outputs, Q, the attention output (h each), K and V (8 key/value heads of 128: one a rank), the
    gate, up and their product (f each), 2 bytes an element, and FlashAttention's fp32 log-sum-exp of each of the
    128 heads, all split over the 8 ranks."""
    model = MODELS["llama3-405b"]
    h, f, kv = model.hidden, model.ffn_hidden, 8 * 128
    by_hand = 8192 * (2 * (6 * h + 2 * kv + 3 * f) + 4 * 128) / 8
    layout = Layout(tp=8, sequence_parallel=True)
    assert memory.layer_activation_bytes(model, layout, 1, "none") == pytest.approx(by_hand)


@pytest.mark.parametrize("table", list(TABLES))
def test_every_llm_foundry_run_fits(table):
    """Every row of LLM Foundry's tables ran on its GPUs, so each must fit in the model."""
    too_big = [(r[0], r[1], round(r[5].memory_per_gpu_bytes["total"] / 1e9, 1)) for r in foundry_rows(table)
               if not r[5].fits]
    assert not too_big


@pytest.mark.parametrize("model,batch,recompute,every", TORCHTITAN_A100,
                         ids=[f"{m.name}-b{b}-{r}{e}" for m, b, r, e in TORCHTITAN_A100])
def test_torchtitan_published_runs_fit(model, batch, recompute, every):
    layout = Layout(zero_stage=3, micro_batch=batch, global_batch=64 * batch, recompute=recompute,
                    recompute_every=every, grad_reduce_bytes=4, attention_kernel="fa2")
    e = estimate(model, cluster("a100-80gb", 64), layout)
    assert e.fits, {k: round(v / 1e9, 1) for k, v in e.memory_per_gpu_bytes.items()}


@pytest.mark.parametrize("name,model,gpu,gpus,layout", [
    # 70B's model states alone, 16 bytes a parameter with only the optimizer sharded over 8: 2 + 2 + 12/8 bytes
    ("70b-dp-only", LLAMA3_70B, "h100-80gb", 8, Layout(tp=1, zero_stage=1, micro_batch=1, global_batch=8,
                                                         recompute="full")),
    # fully sharded over 8 (16/8 bytes a parameter, 140 GB) but every layer's activations at 8,192 tokens kept
    ("70b-zero3-no-recompute", LLAMA3_70B, "h100-80gb", 8, Layout(tp=1, zero_stage=3, micro_batch=1,
                                                                    global_batch=8, recompute="none")),
    # GPT-3 175B split 8 ways by TP on one A100 node: 22 B parameters a GPU, 16 bytes each
    ("gpt3-tp8", MODELS["gpt3-175b"], "a100-80gb", 8, Layout(tp=8, zero_stage=0, micro_batch=1, global_batch=8,
                                                              recompute="full")),
])
def test_layouts_that_cannot_run_do_not_fit(name, model, gpu, gpus, layout):
    e = estimate(model, cluster(gpu, gpus), layout)
    assert not e.fits, name
    usable = e.cluster.gpu.usable_bytes / (1 + ALLOCATOR_FRAGMENTATION)
    assert e.memory_per_gpu_bytes["total"] > 1.5 * usable, name  # not a near miss: clearly too big



# -- pipeline schedules: what each stage keeps in flight ----------------------------------------------------------

@pytest.mark.parametrize("p,v,m,stage,warmup", [
    # Megatron-LM get_pp_rank_microbatches: (p − stage − 1)·2 + (v − 1)·p, at most m·v (worked by hand)
    (4, 2, 8, 0, 10), (4, 2, 8, 3, 4), (4, 2, 4, 0, 8),  # 6 + 4 = 10 > 4·2: every forward first
    (16, 8, 16, 0, 128), (16, 8, 16, 1, 128), (16, 8, 16, 15, 112),  # Llama 3 405B at 16 micro-batches
    (16, 8, 32, 1, 140), (16, 8, 32, 15, 112), (8, 12, 64, 0, 102),
])
def test_interleaved_warmup_is_megatrons(p, v, m, stage, warmup):
    assert memory.interleaved_warmup(p, v, m, stage) == warmup


def test_interleaved_chunk_order_is_megatrons_schedule_table():
    """schedules.py's own example of its tunable table: PP 2, N 3, M 5, VP 2 -> chunks 0 0 0 1 1 1 0 0 1 1; with
    N = p (the default) and M = 2p, the 2021 order: p forwards of chunk 0, p of chunk 1, again."""
    assert memory.interleaved_chunk_order(5, 2, 3) == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]
    assert memory.interleaved_chunk_order(4, 2, 2) == [0, 0, 1, 1, 0, 0, 1, 1]


def test_interleaved_first_stage_peak_is_korthikantis():
    """Traced by hand, p 2, v 2, 4 micro-batches, one layer a chunk: the first stage runs 4 forwards (warm-up), then
    forward, backward, ... holding 5 at each forward: L·(1 + (p − 1)/(p·v)) = 4·(1 + 1/4) (Korthikanti et al. sec.
    4.2.3); the last stage 2 forwards of warm-up, so 3."""
    chunks = memory.chunk_layers(4, 2, 2)
    assert [memory.interleaved_layers_in_flight(chunks, 2, 2, 4, s) for s in (0, 1)] == [5, 3]


@pytest.mark.parametrize("m,in_flight", [(8, [4, 3, 2, 1]), (2, [2, 2, 2, 1])])
def test_1f1b_keeps_p_minus_stage_micro_batches(m, in_flight):
    """Megatron's 1F1B without interleaving: p − stage − 1 warm-up forwards, then one forward before each backward."""
    assert [memory.pipeline_micro_batches_in_flight(4, m, s) for s in range(4)] == in_flight


def test_llama3_placement_first_and_last_stage_hold_one_layer_fewer():
    """Llama 3 405B, PP 16, V 8 (Dubey et al. sec. 3.3.2): the first stage holds the embedding and 7 layers (its first
    chunk is the embedding's), the last 7 layers and the output layer, the others 8 layers."""
    model, layout = replace(MODELS["llama3-405b"], vocab=128256), Layout(tp=8, pp=16, schedule="interleaved_1f1b")
    layer, table = memory.layer_params_local(model, layout), model.vocab * model.hidden / 8
    assert memory.stage_params(model, layout, 0, 8) == pytest.approx(7 * layer + table)
    assert memory.stage_params(model, layout, 1, 8) == pytest.approx(8 * layer)
    assert memory.stage_params(model, layout, 15, 8) == pytest.approx(7 * layer + table)
    # without the virtual stages: ceil(126/16) = 8 layers, the busiest stage of an uneven split
    assert memory.stage_params(model, layout, 0) == pytest.approx(8 * layer + table)


def test_gpipe_holds_every_micro_batch_on_the_last_stage_too():
    """GPipe (Huang et al. 2019) runs every forward before any backward on every stage, the last one included, which
    also keeps the loss's logits (bf16 and the fp32 softmax, 6 bytes each); 1F1B's last stage holds one micro-batch."""
    model, hw = MODELS["llama3-8b"], cluster("h100-80gb", 16)
    base = Layout(tp=1, pp=2, zero_stage=1, micro_batch=1, global_batch=8, recompute="none")
    per_layer, layers = memory.layer_activation_bytes(model, base, 1, "none"), model.layers // 2
    logits = model.seq_len * model.vocab * 6
    gpipe = memory.memory(model, replace(base, schedule="gpipe"), hw, 1, 8, 1)
    assert gpipe["activations"] == pytest.approx(per_layer * layers * 8 + logits)
    # 1F1B: the first stage's 2 micro-batches in flight outweigh the last stage's one and its logits
    assert memory.memory(model, base, hw, 1, 8, 1)["activations"] == pytest.approx(per_layer * layers * 2)


# torchtitan's loss, as its train.py runs it (9dec370): torch's cross_entropy on an fp32 copy of the bf16 logits,
# the logits dropped before backward. What the loss holds at once is read from torch's own record of its CPU
# allocator (the profiler's memory events, every allocation and free in order): the peak of their running sum, a
# logit at a time. Not the process's resident memory: under a loaded machine the kernel evicts and faults back
# library pages, which moved an RSS-based reading by 3 bytes a logit.
_PEAK_HELD = """
def peak_held(run):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    held = peak = 0
    for e in events:  # nbytes: + allocated, - freed
        held += e.nbytes()
        peak = max(peak, held)
    return peak
"""

_TORCH_LOSS_PEAK = _PEAK_HELD + """
import torch
import torch.nn.functional as F
tokens, vocab = 2048, 16384
leaf = torch.randn(tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
labels = torch.randint(vocab, (tokens,))

def loss_step():
    pred = leaf * 1  # the output layer's bf16 logits (not a leaf, so dropping them frees them)
    loss = F.cross_entropy(pred.float(), labels)
    del pred
    loss.backward()

print(peak_held(loss_step) / (tokens * vocab))
"""


def _measured(script: str, **env: str) -> float:
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, **env})
    return float(out.stdout.strip().splitlines()[-1])


# Besides the logits' tensors the losses allocate only per-token vectors (labels' gradients, row maxima: a few
# bytes a token, so a few thousandths of a byte a logit at 16,384 logits a token) and scalars.
ALLOCATOR_SLACK = 0.01


def test_torch_cross_entropy_holds_what_torch_holds():
    """memory.LOGIT_BYTES["torch"] (12: the fp32 log-softmax, nll_loss's gradient and log_softmax's backward output,
    read from the autograd formulas) against torch itself: the most its allocator held at once, a logit at a time,
    measured in a fresh process."""
    measured = _measured(_TORCH_LOSS_PEAK)
    assert abs(measured - memory.LOGIT_BYTES["torch"]) <= ALLOCATOR_SLACK, measured


_LOSS_PARALLEL_PEAK = _PEAK_HELD + """
import os, torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import loss_parallel
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29533"))
dist.init_process_group("gloo", rank=0, world_size=1)
tokens, vocab = 2048, 16384
leaf = distribute_tensor(torch.randn(tokens, vocab, dtype=torch.bfloat16), init_device_mesh("cpu", (1,)),
                         [Shard(-1)]).requires_grad_()
labels = torch.randint(vocab, (tokens,))

def loss_step():
    pred = leaf * 1
    with loss_parallel():
        loss = F.cross_entropy(pred.float(), labels)
        del pred
        loss.backward()

print(peak_held(loss_step) / (tokens * vocab))
dist.destroy_process_group()
"""


def test_loss_parallel_holds_what_torch_holds():
    """memory.LOGIT_BYTES["loss_parallel"] (16, read from torch/distributed/tensor/parallel/loss.py) against torch's
    loss_parallel itself on a one-rank gloo mesh (the same handlers, so the same tensors), measured as above."""
    from tests.served import free_port

    measured = _measured(_LOSS_PARALLEL_PEAK, PORT=str(free_port()))  # a free port for the one-rank process group
    assert abs(measured - memory.LOGIT_BYTES["loss_parallel"]) <= ALLOCATOR_SLACK, measured
