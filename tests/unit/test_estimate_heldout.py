"""Held-out check: the estimator, unchanged, against published runs it was never compared with.

test_estimate_validation.py holds the tables the estimator was built against; the tables here were
added afterwards, by someone who did not touch simulations/estimate/. What they showed led to three
corrections, each taken from a source and none fitted to these rows: the sustained matmul rate as the
published all-8-GPU microbenchmark gives it (hardware.py), NCCL's own latency model with no tree for
all-gathers and reduce-scatters and Megatron-core's DP buckets (collectives.py, cost.py), and a DP
reduction counted twice when it outlasted the backward (cost.overlapped_tail). Where the issue's target (every row within 15 %, median within 10 %) is not met,
the test says so with an xfail naming the current errors, and `-s` prints the rows and, for the worst
row of each table, the estimate's breakdown.

Table D: NVIDIA DGX Cloud benchmarking recipes (NVIDIA/dgxc-benchmarking, release 24.11.1, commit
35a9aec), BF16 rows on H100 SXM 80 GB (8 GPUs and 8 × 400 Gb/s per node), the same release as
test_estimate_validation.py's table C, other models. Published: seconds per step (the last logged step).
Software settings from the recipe's YAML and launch scripts in the same commit:
- llama3.1/README_8b.md, llama3.1_8b.yaml, configure.sh (NeMo 24.09): Llama 3.1 8B, TP 1, PP 1, CP 2,
  micro-batch 1, global batch 16 × GPUs, sequence 8,192, Llama 3 tokenizer (128,256), no activation
  recomputation, no sequence parallelism, distributed optimizer (ZeRO-1) with overlapped gradient
  reduce-scatter and parameter all-gather, bf16 gradient reduction, cuDNN fused attention.
- nemo_megatron/README_175b.md, gpt3_175b_hydra.yaml, launch.sh (NeMo 24.11): GPT-3 175B, TP 4, PP 8,
  VP 12, micro-batch 1, global batch 2 × GPUs (16 per node), sequence 2,048, GPT-2 BPE (50,257, padded to
  a multiple of 128 × TP: 50,688), dropout 0.1, no recomputation, sequence parallelism, TP overlap
  (userbuffers), overlapped P2P, distributed optimizer, flash attention (NVTE_FUSED_ATTN=0: TransformerEngine's
  FlashAttention-2 backend, entered as attention_kernel="fa2").
- nemotron/README_15b.md, nemotron4-15b-synth.yaml, configure.sh (NeMo 24.11): Nemotron-4 15B (32 layers,
  hidden 6,144, 48 heads, 8 query groups, FFN 24,576 squared-ReLU, vocabulary 256,000), TP 4, PP 1,
  micro-batch 4, global batch 4 × GPUs, sequence 4,096, no recomputation, SP, TP overlap.
- nemotron/README_340b.md, nemotron4-340b-synth.yaml, configure.sh: Nemotron-4 340B (96 layers, hidden
  18,432, 96 heads, 8 query groups, FFN 73,728 squared-ReLU, vocabulary 256,000), TP 8, PP 8, VP 12,
  micro-batch 1, global batch GPUs / 4, sequence 4,096, selective recomputation, SP, TP overlap,
  overlapped P2P; Apex's distributed Adam with its state in bf16 (optim: distributed_fused_adam, dtype: bf16,
  grad_sync_dtype: bf16; nemotron4-340b-synth.yaml, read at commit 8f5cbb3): optimizer_dtype="bf16".

Table E: Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783 (v3), sec. 3.3.2 and Table 4:
Llama 3 405B on H100 SXM 80 GB (Meta's RoCE cluster, 400 Gb/s per GPU), TP/CP/PP/DP, sequence, batch per
DP group as published; published: TFLOPs per GPU (BF16 MFU 43 / 41 / 38 %). v1 of the paper prints DP 4 in
the third row; 16,384 GPUs / (8 · 16 · 16) and 16M tokens / (16 · 131,072) both give 8, as v3 prints.
From the text: FSDP sharding gradients and optimizer states, parameters not resharded after forward
(ZeRO-1/2-like; modelled as ZeRO-1, which reduces once per step as fp32 accumulation over the micro-batches
implies, but keeps full bf16 gradients), gradients reduce-scattered in fp32, no activation checkpointing at
8K, interleaved schedule with asynchronous P2P, CP by all-gathering K and V ("the all-gather communication
latency is exposed in the critical path", sec. 3.3.2: entered as cp_comm="all_gather", which the model keeps on
the critical path), one layer per model chunk and the embedding and the output in chunks of their own, so
V = 8 (see test_llama3_published_virtual_stages_fit; entered as published, not chosen by auto).
What the paper does not name is entered as the PyTorch stack it ran on in 2024, not as Megatron's:
- attention: FlashAttention-2 (attention_kernel="fa2"): PyTorch's SDPA flash backend is FlashAttention-2 from
  torch 2.2 (Jan 2024); FlashAttention-3 (arXiv:2407.08608) appeared in July 2024, after pre-training, and
  cuDNN's fused attention reached PyTorch's SDPA only in torch 2.5 (Oct 2024);
- TP's collectives not overlapped with the matmuls (overlap_tp_comm=False): the paper lists its
  communication optimizations (asynchronous P2P, network-aware ordering [TP, CP, PP, DP], NCCLX) and TP
  overlap is not among them; PyTorch's own overlapped ("async") TP arrived with torch 2.5.
Not published: micro-batch (1 taken: 8K tokens without recomputation), the exact FLOP count: the estimator
counts attention whole (torchtitan's get_num_flop_per_token, Meta's PyTorch convention, does too); counted
causal-halved instead, the 128K row would read 380 TFLOP/s with a third of its attention FLOPs gone, which
the published 41 % → 38 % MFU from 8K to 128K does not show.

Table F: NVIDIA/Megatron-LM README, "Training Speed and Scalability" (commit f2e5db4, July 2024,
images/model_table.png): Megatron-Core r0.8.0 weak scaling on H100, GPT models with vocabulary 131,072,
sequence 4,096, heads/hidden/layers/TP/PP/DP/batch as published, with --overlap-grad-reduce,
--overlap-param-gather (distributed optimizer), --tp-comm-overlap, overlapped P2P. Published: per-GPU
teraFLOP/s, counted by Megatron's num_floating_point_operations (r0.8.0, training.py), which for these
shapes is 72·B·s·l·h²·(1 + s/6h + V/12lh): the estimator's own model FLOPs, so its
model_tflops_per_gpu is compared directly. Not published: micro-batch, virtual stages, recomputation:
the estimator's `auto` picks micro-batch and V; no recomputation (Megatron's default); fp32 gradient
reduction (Megatron forces it with bf16, arguments.py).

Table G: BigScience BLOOM-176B (bigscience-workshop/bigscience, train/tr11-176B-ml): Jean Zay, A100 SXM 80 GB,
8 per node on NVLink, 4 Omni-Path 100 Gb/s links per node (README "Hardware": 50 GB/s of node egress);
tr11-176B-ml.slurm: 70 layers, hidden 14,336, 112 heads, sequence 2,048, vocabulary padded to 250,880,
global batch 2,048, full activation checkpointing, bf16 with DeepSpeed's BF16 optimizer (ZeRO stage 0 in the
config, "it implements its own zero stage 1 equivalent"; fp32 gradient accumulation and reduction, after the
last micro-batch), Megatron-DeepSpeed's pipeline (1F1B, blocking sends), no sequence parallelism, unfused
attention. Published: seconds per iteration from the training logs quoted there: 48 nodes, TP 4, PP 12,
micro-batch 2 (README, "Important checkpoints", iteration 85,376); and the reshaping tests of
reshaping-log.md, taking only layouts logged for two or more steady iterations (the first after a reshape is
slower): 24 nodes TP 4 PP 12 micro-batch 2, 24 nodes TP 4 PP 24 micro-batch 1, 36 nodes TP 2 PP 36
micro-batch 1 (the last logged iteration each).
"""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from simulations.estimate import MODELS, Layout, LayoutError, Model, cluster, estimate, gpt
from tests.unit.test_estimate_validation import _report

H100 = "h100-80gb"

# -- table D: dgxc-benchmarking 24.11.1, BF16, H100 -----------------------------------------------------

LLAMA31_8B = replace(MODELS["llama3-8b"], vocab=128256)
GPT3_175B = replace(gpt(96, 12288, 96, vocab=50688, flash_attention=True), name="gpt3-175b")
NEMOTRON4_15B = Model("nemotron4-15b", layers=32, hidden=6144, heads=48, kv_heads=8, ffn_hidden=24576,
                      vocab=256000, seq_len=4096, dropout=False)
NEMOTRON4_340B = Model("nemotron4-340b", layers=96, hidden=18432, heads=96, kv_heads=8, ffn_hidden=73728,
                       vocab=256000, seq_len=4096, dropout=False)

# GPUs, published seconds per step
NEMO_LLAMA31_8B = [(8, 12.91), (16, 13.00), (32, 13.05), (64, 13.08), (128, 13.10)]
NEMO_GPT3_175B = [(128, 8.91), (256, 8.95), (512, 9.09), (1024, 9.01), (2048, 9.02)]
NEMO_NEMOTRON4_15B = [(16, 2.83), (32, 2.86), (64, 2.86), (128, 2.89), (256, 2.88), (512, 2.92), (1024, 2.92),
                      (2048, 2.96)]
NEMO_NEMOTRON4_340B = [(128, 4.61), (256, 4.67), (512, 4.70), (1024, 4.73), (2048, 4.84)]


def nemo_layout(name: str, gpus: int) -> tuple[Model, Layout]:
    if name == "llama3.1-8b":
        return LLAMA31_8B, Layout(tp=1, pp=1, cp=2, zero_stage=1, micro_batch=1, global_batch=16 * gpus,
                                  recompute="none", sequence_parallel=False, overlap_tp_comm=False)
    if name == "gpt3-175b":
        return GPT3_175B, Layout(tp=4, pp=8, zero_stage=1, schedule="interleaved_1f1b", virtual_stages=12,
                                 micro_batch=1, global_batch=2 * gpus, recompute="none", attention_kernel="fa2")
    if name == "nemotron4-15b":
        return NEMOTRON4_15B, Layout(tp=4, pp=1, zero_stage=1, micro_batch=4, global_batch=4 * gpus,
                                     recompute="none")
    return NEMOTRON4_340B, Layout(tp=8, pp=8, zero_stage=1, schedule="interleaved_1f1b", virtual_stages=12,
                                  micro_batch=1, global_batch=gpus // 4, recompute="selective", optimizer_dtype="bf16")


NEMO_TABLES = {"llama3.1-8b": NEMO_LLAMA31_8B, "gpt3-175b": NEMO_GPT3_175B, "nemotron4-15b": NEMO_NEMOTRON4_15B,
               "nemotron4-340b": NEMO_NEMOTRON4_340B}


def nemo_rows(name: str):
    rows = []
    for gpus, published in NEMO_TABLES[name]:
        model, layout = nemo_layout(name, gpus)
        e = estimate(model, cluster(H100, gpus), layout)
        rows.append((f"{name.split('-')[-1]} ×{gpus}", gpus, published, e.step_time_s,
                     published / e.step_time_s - 1, e))
    return rows


# -- table E: Llama 3 405B, Table 4 --------------------------------------------------------------------

LLAMA3_405B = replace(MODELS["llama3-405b"], vocab=128256)

# GPUs, TP, CP, PP, DP, sequence, batch per DP group, published TFLOPs per GPU
LLAMA3_TABLE_4 = [
    (8192, 8, 1, 16, 64, 8192, 32, 430),
    (16384, 8, 1, 16, 128, 8192, 16, 400),
    (16384, 8, 16, 16, 8, 131072, 16, 380),
]


LLAMA3_VIRTUAL_STAGES = 8  # 126 layers + embedding + output = 16 ranks × 8 one-layer chunks (sec. 3.3.2)


def llama3_layout(tp, cp, pp, dp, batch_per_dp, virtual_stages=LLAMA3_VIRTUAL_STAGES) -> Layout:
    return Layout(tp=tp, pp=pp, cp=cp, zero_stage=1, schedule="interleaved_1f1b", virtual_stages=virtual_stages,
                  micro_batch=1, global_batch=dp * batch_per_dp, recompute="none", grad_reduce_bytes=4,
                  cp_comm="all_gather", attention_kernel="fa2", overlap_tp_comm=False)


def llama3_rows(virtual_stages=LLAMA3_VIRTUAL_STAGES):
    rows = []
    for gpus, tp, cp, pp, dp, seq, per_dp, published in LLAMA3_TABLE_4:
        e = estimate(replace(LLAMA3_405B, seq_len=seq), cluster(H100, gpus),
                     llama3_layout(tp, cp, pp, dp, per_dp, virtual_stages))
        rows.append((f"cp{cp} ×{gpus}", gpus, published, e.model_tflops_per_gpu,
                     e.model_tflops_per_gpu / published - 1, e))
    return rows


# -- table F: Megatron-Core r0.8.0 weak scaling on H100 ----------------------------------------------

# params (B), heads, hidden, layers, TP, PP, GPUs, batch, published TFLOP/s per GPU. Re-read from the image at f2e5db4
# (h21rows): every row as entered; its own columns agree with one another, MFU = TFLOP/s / 989 (1.7B: 408.8 → 41 %,
# printed "41%"; 314B: 474.4 → 48 %) and aggregate = TFLOP/s × GPUs (1.7B: 19.6 PFLOP/s, printed 19.6), and DP =
# GPUs / (TP·PP) = 48 on every row. The 1.7B row's error (too fast) is not an entry's: what it leaves unpublished
# (micro-batch, where `auto` picks 4) is the only freedom, and the estimator's FLOPs are Megatron's formula exactly.
MEGATRON_CORE_H100 = [
    (1.7, 16, 2048, 24, 1, 1, 48, 192, 408.8),
    (7.1, 32, 4096, 30, 2, 1, 96, 192, 465.9),
    (16, 48, 6144, 32, 4, 1, 192, 192, 489.1),
    (32, 56, 7168, 48, 8, 1, 384, 192, 459.6),
    (70, 64, 8192, 84, 8, 2, 768, 384, 419.7),
    (119, 80, 10240, 92, 8, 4, 1536, 768, 420.5),
    (177, 96, 12288, 96, 8, 6, 2304, 1152, 432.8),
    (314, 128, 16384, 96, 8, 8, 3072, 1536, 474.4),
    (462, 144, 18432, 112, 8, 16, 6144, 3072, 459.9),
]


def megatron_rows():
    rows = []
    for params, heads, hidden, layers, tp, pp, gpus, batch, published in MEGATRON_CORE_H100:
        model = gpt(layers, hidden, heads, seq_len=4096, vocab=131072, flash_attention=True)
        layout = Layout(tp=tp, pp=pp, zero_stage=1, schedule="interleaved_1f1b" if pp > 1 else "1f1b",
                        virtual_stages=None if pp > 1 else 1, micro_batch=None, global_batch=batch,
                        recompute="none", grad_reduce_bytes=4)
        e = estimate(model, cluster(H100, gpus), layout)
        rows.append((f"{params}B", gpus, published, e.model_tflops_per_gpu,
                     e.model_tflops_per_gpu / published - 1, e))
    return rows


# -- table G: BLOOM-176B on Jean Zay -------------------------------------------------------------------

BLOOM_176B = gpt(70, 14336, 112, seq_len=2048, vocab=250880, name="bloom-176b")
JEAN_ZAY_EGRESS = 4 * 100e9 / 8  # 4 Omni-Path links of 100 Gb/s per node

# nodes, TP, PP, micro-batch, published seconds per iteration
BLOOM_LOGS = [(48, 4, 12, 2, 104.70), (24, 4, 12, 2, 215.99), (24, 4, 24, 1, 220.30), (36, 2, 36, 1, 141.22)]


def bloom_rows():
    rows = []
    for nodes, tp, pp, mb, published in BLOOM_LOGS:
        layout = Layout(tp=tp, pp=pp, zero_stage=1, micro_batch=mb, global_batch=2048, recompute="full",
                        sequence_parallel=False, overlap_grad_reduce=False, overlap_tp_comm=False,
                        overlap_p2p_comm=False, grad_accumulation_fusion=False, grad_reduce_bytes=4)
        e = estimate(BLOOM_176B, cluster("a100-80gb", nodes * 8, node_egress=JEAN_ZAY_EGRESS), layout)
        rows.append((f"tp{tp} pp{pp} ×{nodes * 8}", nodes * 8, published, e.step_time_s,
                     published / e.step_time_s - 1, e))
    return rows


# -- reporting -------------------------------------------------------------------------------------

def _breakdown(row) -> None:
    """What the estimate spends its step on, for the row printed."""
    name, _, _, _, _, e = row
    d = e.as_dict()
    gb = {k: round(v / 1e9, 1) for k, v in d["memory_per_gpu_bytes"].items()}
    print(f"  worst row {name}: step {e.step_time_s:.3f} s = pipeline {e.pipeline_s:.3f} (compute {e.compute_s:.3f}, "
          f"bubble {e.bubble_fraction:.1%}) + exposed DP {e.exposed_by_kind['dp']:.3f} + optimizer "
          f"{e.optimizer_s:.3f}; MFU {e.mfu:.1%}; micro-batch {e.layout.micro_batch}, v {e.layout.virtual_stages}")
    print(f"    exposed comm by kind (s): { {k: round(v, 3) for k, v in e.exposed_by_kind.items()} }")
    print(f"    stage times (s): { {k: round(v, 4) for k, v in e.stage_times.items()} }; memory (GB): {gb}")


def _table(title, rows, unit):
    errors = _report(title, rows, unit)
    _breakdown(max(rows, key=lambda r: abs(r[4])))
    return errors


def _meets_target(errors) -> bool:
    return max(errors) <= 0.15 and statistics.median(errors) <= 0.10


def _target(name, rows):
    errors = [abs(r[4]) for r in rows]
    if not _meets_target(errors):
        pytest.xfail(f"{name}: the issue's target is not met (median {statistics.median(errors):.1%}, worst "
                     f"{max(errors):.1%}); see the report with -s")


# -- the tests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(NEMO_TABLES))
def test_nemo_h100_bf16_recipes_step_time(name):
    rows = nemo_rows(name)
    _table(f"dgxc-benchmarking 24.11.1, {name} BF16 on H100 (seconds per step; error in throughput)", rows, "s")
    _target(name, rows)


def test_nemotron4_340b_meets_the_target():
    """The one held-out NeMo table that meets the issue's target today: asserted outright."""
    errors = [abs(r[4]) for r in nemo_rows("nemotron4-340b")]
    assert max(errors) <= 0.15 and statistics.median(errors) <= 0.10


@pytest.mark.parametrize("name", list(NEMO_TABLES))
def test_nemo_weak_scaling_is_flat_as_published(name):
    """Weak scaling (batch grows with the GPUs): the published step time grows by 1.5-4.5 % from the smallest
    to the largest cluster; the model's by as little (within 4 points), so its DP cost scales right. Nemotron-4 15B
    (DP 4 -> 512, published +4.6 %) was flat in the model until the step waited for its slowest GPU
    (cost.straggler_allowance)."""
    rows = nemo_rows(name)
    published = rows[-1][2] / rows[0][2] - 1
    predicted = rows[-1][3] / rows[0][3] - 1
    assert abs(predicted - published) <= 0.04, (published, predicted)


@pytest.mark.parametrize("name", list(NEMO_TABLES))
def test_published_nemo_layouts_fit(name):
    """Every published layout ran, so it must fit in 80 GB in the model too. The 340B recipe on 128 GPUs (DP 2, its
    smallest) fits because it is entered with the optimizer it ran: Apex's distributed Adam with its state in bf16
    (optim.dtype: bf16), 6 bytes a parameter sharded over 2 ranks; with fp32 state (12 bytes) it would not (85 GB)."""
    rows = nemo_rows(name)
    assert all(r[5].fits for r in rows)


def test_llama3_table_4_tflops_per_gpu():
    """The published layout (V = 8, CP by all-gather, FlashAttention-2, TP not overlapped: see table E above)
    meets the issue's target outright; whether it fits is test_llama3_published_virtual_stages_fit's."""
    rows = llama3_rows()
    _table("Llama 3 405B, Table 4 (TFLOPs per GPU; V = 8 as published)", rows, "TFLOP/s")
    print("  with V fixed lower (not the published placement; V = 2 and 4 put 8 layers on every rank):")
    for v in (1, 2, 4):
        print(f"  V = {v}: " + ", ".join(
            f"{r[0]} {r[3]:.0f} TFLOP/s ({r[4]:+.1%}, bubble {r[5].bubble_fraction:.0%}, "
            f"{r[5].memory_per_gpu_bytes['total'] / 1e9:.0f} GB)" for r in llama3_rows(v)))
    assert _meets_target([abs(r[4]) for r in rows])
    # the published drop from 8K to 128K tokens at the same GPUs (400 -> 380 TFLOP/s, -5 %) within 5 points:
    # attention counted whole and timed at FlashAttention-2's causal rate; timed at cuDNN's, it reads +15 %
    published, predicted = rows[2][2] / rows[1][2] - 1, rows[2][3] / rows[1][3] - 1
    assert abs(predicted - published) <= 0.05, (published, predicted)


def test_llama3_published_virtual_stages_fit():
    """V is not in Table 4, but the text fixes it: the first model chunk on the first stage holds only the
    embedding and the last chunk only the output layer and loss, after one layer was taken from each end,
    so every chunk is one layer: 126 layers + 2 = 16 ranks × 8 chunks, V = 8; and the paper trains 8K
    sequences without activation checkpointing. So the published layout, V = 8, ran in 80 GB. The estimator
    places it (memory.chunk_layers: pp·v up to the layers + 2, the first chunk the embedding's, the last the
    output's; the first and last stage hold 7 layers and the embedding or the output, memory.stage_param_split) but
    does not find it fitting (the xfail prints the GB). Replayed in Megatron's interleaved order
    (memory.interleaved_layers_in_flight, warm-up memory.interleaved_warmup: (p − r − 1)·2 + (v − 1)·N, at most
    m·v), the busiest rank is the second, whose 8 chunks are all layers: 128 layers in flight at 16 micro-batches
    (every forward first: 140 > 16·8), 141 at 32, 0.533 GB each (8K tokens, TP 8 with SP: 68 and 75 GB), beside the
    model states (bf16 parameters 6.4 GB, kept unsharded from forward to backward as the paper says; the fp32
    gradient accumulation the paper describes, entered as ZeRO-1's buffer held the whole step, 12.8 GB), so 88-96 GB
    against 80.4 usable after 5 % fragmentation; at 128K tokens the gathered K and V kept for backward add 8 GB.
    The first stage holds less: 112 layers in flight, 7 layers and the embedding (78.6 GB at 32 micro-batches).
    Meta's own schedule (Figure 6, N micro-batches per round) cannot hold fewer: N ≥ p, and a larger N only adds
    (v − 1)·(N − p) forwards to the warm-up.

    Re-derived term by term, each against its source; none of them is the error:
    - a layer's 0.533 GB is what Megatron-core's Llama layer with Transformer Engine saves, tensor by tensor, with
      TP 8 and SP: the fused norm + QKV (TE LayerNormLinear) its input and its normalized output, the local
      sequence shard each (gathered again in backward), 2h; the attention (TE DotProductAttention, flash backend)
      Q, K and V after the rotary positions (h + 2·1,024 with 8 KV heads) and its output, h, which is also the
      output projection's saved input (one tensor), and its fp32 log-sum-exp (one fp32 a head and token);
      the norm + FC1 (LayerNormLinear) its input and normalized output, 2h; SwiGLU (bias_swiglu_impl) its input,
      the gate and up halves, 2f, and FC2 its input, f; no dropout masks, the RMSNorm's fp32 rsigma negligible:
      2·(6h + 2·1,024 + 3f) + 4·128 bytes a token, /8, ×8,192 tokens = 0.533 GB, Korthikanti's 34·sbh/t with this
      model's tensors and no dropout (test_llama3_activation_memory_is_not_overcounted);
    - the warm-up is Megatron-core's (schedules.py, get_pp_rank_microbatches: (p − r − 1)·2 +
      (v − 1)·microbatch_group_size_per_vp_stage, capped at m·v; its only extra forward is for
      overlap_moe_expert_parallel_comm, a mixture of experts' option), so the busiest rank holds 128 one-layer
      chunks at 16 micro-batches (every forward first) and 141 at 32;
    - the gradients are the one term a source questions. Sec. 3.3.2 says Meta's FSDP "shards optimizer states
      and gradients" (only the parameters are not resharded after forward) and accumulates them in fp32 over the
      micro-batches, reduce-scattered in fp32. Read as ZeRO-2 (each micro-batch's gradients reduce-scattered into
      an fp32 shard), the 12.8 GB buffer becomes 0.1-0.2 GB plus one layer's unsharded gradient in flight
      (0.4 B parameters a rank: 0.8 GB bf16 and its 1.6 GB fp32 copy): 84.8, 77.4 and 85.5 GB for the three rows,
      so the 16-micro-batch row would fit and the other two still would not. It is not entered: the paper does
      not say when the reduce-scatter runs (every micro-batch, or once after the last, which is what a buffer
      accumulated in fp32 "over multiple micro-batches" also describes), and the estimator's ZeRO-2 prices a
      reduce-scatter every micro-batch at 228, 221 and 281 TFLOP/s against the published 430, 400 and 380.
    What is left, none of it published in enough detail to count:
    - at 32 micro-batches the activations and the bf16 parameters alone are 81.6 GB (75.2 + 6.4), above the 80.4
      usable, whatever the gradients: that row needs a layer to keep less than Megatron-TE's 0.533 GB (Meta's
      own kernels, e.g. a norm whose backward keeps only its output and rsigma, are not published) or the
      allocator less than 5 %;
    - what Meta's deallocation of "the input and output tensors of each pipeline stage" frees beyond Megatron's
      deallocate_pipeline_outputs (a stage's output, already not counted; its input is the first norm's saved
      input, needed for backward)."""
    try:
        rows = llama3_rows(8)
    except LayoutError as error:
        pytest.xfail(f"V = 8 is refused: {error}; V = 2 and 4 fit: "
                     f"{[all(r[5].fits for r in llama3_rows(v)) for v in (2, 4)]}")
    if not all(r[5].fits for r in rows):
        usable = rows[0][5].as_dict()["usable_memory_bytes"]
        held = "; ".join(f"{r[0]} {r[5].memory_per_gpu_bytes['total'] / 1e9:.1f} GB (activations "
                         f"{r[5].memory_per_gpu_bytes['activations'] / 1e9:.1f}, parameters "
                         f"{r[5].memory_per_gpu_bytes['parameters'] / 1e9:.1f}, gradients "
                         f"{r[5].memory_per_gpu_bytes['gradients'] / 1e9:.1f})" for r in rows)
        pytest.xfail(f"V = 8 does not fit in {usable / 1e9:.1f} GB usable: {held}; the second rank's 8 one-layer "
                     f"chunks hold Megatron's warm-up + 1 forwards (128 at 16 micro-batches, 141 at 32), and "
                     f"ZeRO-1's fp32 gradient buffer is held all step")
    assert all(r[5].fits for r in rows)


def llama_layer_activation_bytes(tokens: int, hidden: int, ffn: int, kv_dim: int, tp: int) -> float:
    """Bytes one Llama layer keeps for backward, counted tensor by tensor (bf16, sequence parallel, fused
    attention keeping only Q, K, V and its output, SwiGLU, no dropout, no recomputation), for the
    question whether the estimator refuses V > 1 because it overcounts a layer: the two norms' inputs
    and outputs (4h), Q and the attention output (2h), K and V (2·kv_dim), the gate and up projections
    (2f) and their product (f), 2 bytes each, split over TP."""
    return tokens * 2 * (6 * hidden + 2 * kv_dim + 3 * ffn) / tp


def test_llama3_activation_memory_is_not_overcounted():
    """The estimator's activations on the first rank at V = 1 are 16 micro-batches in flight × 8 layers;
    per layer they come within 10 % of the count above (Korthikanti's 34·sbh/t, with SwiGLU's shape, is
    the estimator's own formula). So V > 1 does not fail on the per-layer bytes but on Megatron's
    interleaved warm-up, L·(1 + (p−1)/(p·v)) layers in flight, and ZeRO-1's unsharded gradients."""
    e = llama3_rows(1)[0][5]
    per_layer = e.memory_per_gpu_bytes["activations"] / (16 * 8)
    counted = llama_layer_activation_bytes(8192, 16384, 53248, 8 * 128, 8)
    print(f"\nLlama 3 405B layer, 8,192 tokens, TP 8: estimator {per_layer / 1e9:.3f} GB, counted "
          f"{counted / 1e9:.3f} GB, Korthikanti 34·sbh/t {34 * 8192 * 16384 / 8 / 1e9:.3f} GB")
    assert abs(per_layer / counted - 1) <= 0.10


def test_megatron_core_h100_weak_scaling():
    rows = megatron_rows()
    _table("Megatron-Core r0.8.0 on H100 (TFLOP/s per GPU; micro-batch and V chosen by auto)", rows, "TFLOP/s")
    assert all(r[5].fits for r in rows)
    _target("megatron-core r0.8.0", rows)


def test_megatron_core_h100_efficiency_rises_with_model_size():
    """Megatron's README: MFU rises from 41 % (1.7B) to 47-48 % (314B, 462B), "because larger GEMMs have
    higher arithmetic intensity". The estimator times matmuls in waves of tiles, each wave paying a fixed cost (so a
    2,048-wide model's short-K GEMMs run below the sustained rate), but still predicts the smallest model fastest."""
    rows = megatron_rows()
    if not rows[-1][3] > rows[0][3]:
        pytest.xfail(f"predicted {rows[0][3]:.0f} TFLOP/s for 1.7B and {rows[-1][3]:.0f} for 462B; "
                     f"published {rows[0][2]} and {rows[-1][2]}")


def test_bloom_176b_iteration_time():
    """A100, held out: the issue's target, met."""
    rows = bloom_rows()
    errors = _table("BLOOM-176B on Jean Zay, A100 80 GB (seconds per iteration; error in throughput)", rows, "s")
    assert all(r[5].fits for r in rows)
    assert max(errors) <= 0.15
    assert statistics.median(errors) <= 0.10
