"""The estimator against more published runs of stacks it was not built on: PyTorch FSDP2 (torchtitan), PyTorch FSDP
(IBM's fms-fsdp) and JAX on GPUs (Pax), none of them Megatron or LLM Foundry (test_estimate_other_stacks.py).

Each row is entered as a user would with `distdeck estimate` (simulations.estimate.build, the CLI's and the API's
path), with what the source says the run ran; where a detail is not published, the comment beside it says what is
assumed. Rows whose configuration the estimator cannot take are left out and named below, not approximated. Published:
tokens per second per GPU; the error is the predicted throughput over the published one, minus one ("+": the estimator
is too fast). Nothing here is fitted: the rows are only compared against.

Table T1 and T2: pytorch/torchtitan, docs/performance.md at commit 7e76ecb ("update readme.md and performance.md",
2024-04-22), "LLaMa 3 performance numbers" and "LLaMa 2 performance numbers": FSDP2 (1D: `fully_shard` over all 64
GPUs, so ZeRO-3, TP = PP = 1) on 64 A100 80 GB, local batch 1 (Llama 3) or 2 (Llama 2), global batch = local × 64,
no gradient accumulation. From the repository at that commit:
- train_configs/llama3_8b.toml, llama3_70b.toml: sequence 8,192; llama2_13b.toml, llama2_70b.toml: 4,096;
  `compile = false` (eager);
- torchtitan/parallelisms/parallelize_llama.py: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), so
  gradients are reduced in fp32; attention by torch's scaled_dot_product_attention, whose flash backend on A100 is
  FlashAttention-2 (fa2);
- "selective layer" activation checkpointing is `selective_ac_option` = an integer n, checkpointing every n-th
  layer; the table does not say which n, so the default of config_manager.py at that commit (2, "checkpoint every
  other layer") is taken: recompute "full" with recompute_every 2;
- model shapes: Llama 3 8B / 70B as the presets (vocabulary 128,256 in torchtitan's tokenizer); Llama 2 13B
  (40 layers, hidden 5,120, 40 heads, FFN 13,824) and 70B (80 layers, hidden 8,192, 64 heads, 8 KV heads, FFN
  28,672), vocabulary 32,000 (torchtitan/models/llama/__init__.py at 7e76ecb);
- the loss: torch's cross_entropy, eager, on the fp32 logits the model returns (models/llama/model.py at 7e76ecb:
  `self.output(h).float()`), kept through backward (train.py has no `del pred` yet), so 16 bytes a logit at its peak,
  neither of the estimator's losses; entered as cross_entropy "fp32" (Megatron's 6; its passes, 52 bytes a logit,
  within 4 of torch's 48). These tables publish no memory. T7's loss is compiled with the model (components/loss.py
  at e7c0cae: torch.compile when training.compile) and is entered the same way.
The published WPS is per GPU: with train.py's get_num_flop_per_token (6 × all parameters, embeddings included, +
12·l·h·s) and 312 TFLOP/s it gives the printed MFU: 8B 2,876 × 61.1 GFLOP → 56.3 % (printed 56.3 %), 13B 2,162 ×
88.2 → 61.1 % (61.1 %), Llama 3 70B 323 × 487.7 → 50.5 % (50.5 %). The "selective layer" rows' n is the one default
of the CLI, `--activation_checkpoint.selective_ac_option` "2" ("checkpoint every other layer"); the train_configs'
tomls set 'op', so these rows ran with the option changed, to a value not printed: 2 stands as an assumption.
Not published: the cluster's network. Taken as the catalog's DGX A100 node (8 × 200 Gb/s).
The three "selective op" rows (8B 2,973, 13B 1,904, 70B at local batch 1 355 tokens/s) are entered as recompute "op":
parallelize_llama.py at 7e76ecb saves the outputs of mm, the flash/efficient SDPA ops and reduce_scatter_tensor
("Saves output of all compute ops, except every second mm") and replays everything else; its footnote 2 says the 70B
"with local batch size 2 will cause OOM error when selective activation checkpointing is used", which
test_torchtitan_op_checkpointing_70b_batch_2_does_not_fit checks.

Table T7: pytorch/torchtitan, benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (Trainy on WhiteFiber, June 2025):
Llama 3.1 8B on 4 and 8 nodes of 8 H200 (NVLink; 400 Gb/s CX-7 per GPU, so 3,200 Gb/s a node), torchtitan at
e7c0cae with train_configs/llama3_8b.toml at that commit (sequence 8,192; FSDP over all GPUs; activation checkpointing
"selective" with selective_ac_option "op") and the command's overrides: local batch 2, torch.compile, float8 linears
(torchao, tensorwise dynamic scaling: precision fp8) with FP8 all-gather. Attention: models/attention.py at e7c0cae
puts SDPA's FlashAttention backend first (cuDNN only on compute capability 10): fa2. Gradients reduced in fp32 (the
FSDP MixedPrecisionPolicy's reduce_dtype, config_manager.py's mixed_precision_reduce "float32"). TPS/GPU and memory
(GiB) as published at the 100th step: 10,938 and 47.96 on 32 GPUs, 10,753 and 46.97 on 64. The FP8 all-gather
(--quantize.linear.float8.enable_fsdp_float8_all_gather) is entered as fp8_param_gather.

Table T3 and T4: foundation-model-stack/fms-fsdp, README.md at commit cf6e42c ("update perf numbers",
2024-02-27), "Training throughput benchmarks": IBM's FSDP (FSDP1, `limit_all_gathers`, bfSixteen mixed precision:
bf16 parameters and bf16 gradient reduction, fms_fsdp/policies/mixed_precision.py and main_training.py at cf6e42c),
SDPA FlashAttention-2, eager (config/training.py at cf6e42c: `use_torch_compile: bool = False`, and main_training.py
warns that compile "does not yet work well with llama+ac"; the table's later version ed74fd5 adds a "Compile" column,
all "Y", with higher numbers), batch 2 per GPU, sequence 4,096 (config/training.py),
global batch = 2 × GPUs. Llama 2 7B (HSDP: sharded within each 8-GPU node, replicated across nodes; no
checkpointing), CodeLlama-shaped 34B (48 layers, hidden 8,192, 64 heads, 8 KV heads, FFN 22,016) and Llama 2 70B
(FSDP over all GPUs, full checkpointing) (fms_fsdp/utils/config_utils.py); vocabulary 32,000. On 128 A100 80 GB
and 96 H100 80 GB; the node networks, "400Gbps" for the A100 cluster and "800 Gbps" for the H100 one, are from the
same README's later version (commit ed74fd5, which says the same scripts ran on both), taken as per node; the same
authors' blog of these rows (pytorch.org/blog/maximizing-training, 2024-03-13) says "400Gbps inter-node interconnect"
and "800Gbps inter-node interconnect" ("128 A100 GPUs with 400Gbps network connectivity and GPU direct RDMA") and
publishes no measured collective bandwidth; its H100 profile shows "a 10% gap due to network 'peeking' out", the
rest put down (as a hypothesis) to HBM bandwidth.
The same README's MFU table agrees with these tokens/s (a check of the reading, per GPU, 312 and 989 TFLOP/s peaks):
7B (6N + 12·l·h·s = 46.9 GFLOP a token) 3,650 → 0.55 against its "0.57" and 7,500 → 0.36 against "0.37"; for the
checkpointed 34B and 70B its "MFU" counts the replayed forward (a FLOP counter's count: PyTorch's, as it says), i.e.
HFU: 34B 700 × 295 GFLOP (8N + 16·l·h·s) → 0.66 against "0.64", 1,550 → 0.46 against "0.44"; 70B 370 × 595 → 0.71
against "0.67", 800 → 0.48 against "0.45". The H100/A100 ratios of its MFU column equal those of the tokens/s
(7B: 0.37/0.57 = 0.65 = 7,500·312 / (3,650·989)), so both columns ran the same model and settings ("we use the exact
same scripts and configurations for these GPUs"); the H100 rows are not mis-entered, only predicted too fast.
Left out: the 13B row ("Selective AC" with the fraction of checkpointed blocks unpublished; fms-fsdp's
`selective_checkpointing` takes any fraction) and the later version's rows with torch.compile (ed74fd5): the
estimator has no input for eager against compiled.

Table T5 and T6: NVIDIA/JAX-Toolbox, rosetta/rosetta/projects/pax/README.md at commit df7a5fe ("Update Pax README and
sub file (#345)", 2023-10-26, container nvcr.io/nvidia/jax:23.10-paxml-py3), "A100 Results" and "H100 results": GPT
126M, 5B and 175B on DGX A100 80 GB and DGX H100 nodes, in BF16 (XLA alone), TE BF16 and TE FP8 (Transformer
Engine's layers, FP8 with its per-tensor delayed scaling: precision fp8). Published: "Sequences/Sec" of the whole
run (1,877 sequences/s of 2,048 tokens for 126M on 64 GPUs is 60k tokens/s per GPU, 19 % MFU; read per GPU it would
be 8 × the A100's peak), here divided by the GPUs. The table's own "Est. Walltime (days)" confirms it is the whole
run: MAX_STEPS × global batch / (Sequences/Sec × 86,400) is 600,000 × 256 / 1,877.20 = 0.95 days for 126M (printed
0.95; H100 4,143.21: 0.43, printed 0.43), 75,000 × 2,048 / 465.45 = 3.82 for 5B (printed 3.82) and 75,000 × 1,536 /
18.29 = 72.9 for 175B (printed 72.92); the GPU counts are the meshes' (126M: ICI [8, 1, 1] × DCN [8, 1, 1] = 64).
Not an input of the estimator, so not entered: Pax's GPT embeds tokens and positions by one-hot matmul
(configure_gpt3_task in paxml/tasks/lm/params/c4.py sets the shared softmax's and the position embedding's
`lookup_style` to EMBEDDING_LOOKUP_STYLE = 'matmul'), 2·V·h FLOPs a token forward and as many for its weight
gradient: 0.15 GFLOP a token for 126M, about 16 % on top of its 6N + 12·l·h·s ≈ 0.97 GFLOP (2.5 % for 5B, 0.2 % for
175B), work the published 126M rows did and the estimator does not count. Configuration from google/paxml,
paxml/contrib/gpu/scripts_gpu/configs.py at commit 39694a0 (merged 2023-10-26, the same week): GPT126M (12 layers,
hidden 768, 12 heads, FFN 3,072, vocabulary 50,304) data-parallel over 64 GPUs, no rematerialisation (its layers
are not repeated, so no checkpoint policy applies: paxml/tasks/lm/model_params.py); GPT5B (24 layers, hidden 4,096,
32 heads, FFN 16,384) with policy SAVE_DOT_WITH_NO_BATCH_DIM; GPT175B (96 layers, hidden 12,288, 96 heads, FFN
49,152, vocabulary 50,257) with SAVE_NOTHING (inherited from TransformerLmSpmdAdafactor): full recomputation; both
FSDP over all 256 GPUs (mesh [1, 8, 1] × [1, 32, 1]); sequence 2,048, GELU, batch per GPU 4, 8 and 6, no gradient
accumulation.
GPT5B's policy is praxis' name for jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims, which saves the output
of every dot_general whose dimension numbers have no batch dimensions ("a useful heuristic for transformers",
jax/_src/ad_checkpoint.py): the "batch" is dot_general's batched dimension, not the data batch. So the projections'
and the FFN's matmuls (einsum 'BTD,DNH->BTNH' and the like: contracting only) are saved, and what is replayed is
attention's two batched matmuls (batch B and heads) with its softmax, plus the element-wise ops between the saved
matmuls: Korthikanti's selective recomputation, entered as recompute "selective" (the estimator replays the
unfused attention; the element-wise replay it has no input for). Entered before as "full", reading the batch as the
data batch. This holds for the XLA rows and the TE BF16 rows alike: Transformer Engine's JAX layers without FP8 run
their GEMMs as plain `jax.lax.dot_general(x, kernel, (contracting_dims, ((), ())))` (transformer_engine/jax/dot.py,
type_safe_dot_general, 2023), no batch dimensions, so saved. Its FP8 GEMMs are instead a jax.custom_vjp (_fp8_dot):
what the policy keeps of those is not settled by these sources (JAX's 2021 note on custom_jvp under a policy: "we
always perform full remat"), so the TE FP8 5B row stays as first entered, "full", and is the less certain entry. Pax's attention without Transformer
Engine is a plain dot-product attention that XLA does not fuse into a flash kernel (entered as flash_attention off).
Transformer Engine's attention is not fused either: its JAX layers fuse attention only with NVTE_FUSED_ATTN=1
(transformer_engine/jax/flax/transformer.py of 2023 reads it with default "0"; so does praxis' TE helper), which
nothing in JAX-Toolbox at df7a5fe sets. The estimator has no input for Transformer Engine's other fusions (layer
norm with the GEMM, bias with GELU), so a TE BF16 row is entered as its BF16 row and the two differ only in what was
published. Assumed: gradients reduced in fp32 (Pax keeps fp32 variables and casts to bf16 for the forward,
FPROP_DTYPE); dropout left out (5B drops out only each layer's input, once; 126M and 175B have none).
Communication, checked against the same README (df7a5fe, "XLA Flags", the BASE_XLA_FLAGS that
run_pile_multinode.sh sets by default): --xla_gpu_enable_latency_hiding_scheduler=true and async all-gather,
reduce-scatter and all-reduce on their own stream with --xla_gpu_enable_highest_priority_async_stream=true, so these
runs overlapped their collectives with compute as the estimator's defaults do (overlap_grad_reduce on; ZeRO-3 gathers
one layer ahead); all-reduce combine threshold 33,554,432 bytes for 126M (32 MiB buckets) and 51,200 for 5B/175B.
The clusters' networks are entered as published: DGX A100 nodes with 8 × 200 Gb/s HDR InfiniBand compute ports
(NVIDIA Selene / DGX SuperPOD A100 reference architecture), 1,600 Gb/s a node; DGX H100 nodes with 8 × 400 Gb/s NDR
(NVIDIA EOS / DGX SuperPOD H100), 3,200 Gb/s. Not the gap: with every collective exposed (scripts/estimate_breakdown.py)
the rows over 25 % stay too fast (A100 126M XLA +37 %, 5B XLA +38 %; H100 126M TE +18 %, 5B TE +43 %, 5B FP8 +30 %,
175B FP8 +7 %: that one alone is within reach of communication), so what is left is mostly compute. Two leads, not entered: (1) the XLA-alone rows ran --xla_gpu_enable_triton_softmax_fusion=false (same
flags) and praxis' DotProductAttention casts the s×s logits to fp32 for the softmax ("Attention softmax is always
carried out in fp32", praxis/layers/attentions.py), so XLA's softmax was several fusions rather than the one fused
scale-mask-softmax the estimator prices for unfused attention (Transformer Engine's rows had TE's fused softmax):
the published TE/XLA ratio is 1.34 for 126M and 1.26 for 5B on A100. Counted from the HLO (max, then sum of
exponentials, then the normalisation, each needing the row's reduction before it: three kernels), XLA's softmax
reads the scores three times and writes once forward (4 passes against 2) and its backward 5 passes against 3; tried
on the XLA rows alone that moves 126M +48 -> +32 % and 5B +51 -> +42 % (a third of the TE/XLA gap), not entered for
want of a measured pass count for the 2023 XLA; (2) the H100 TE rows over A100 TE are 1.65 (126M),
1.82 (5B), 2.26 (175B) published against 1.92, 2.51, 2.86 estimated: the 2023 H100 stack reached less of its peak on
these shapes than the estimator's H100 rates give (small/medium models on H100, also seen in other stacks).
"""

from __future__ import annotations

import json
import statistics
from functools import cache

import pytest
from typer.testing import CliRunner

from app.cli import cli
from simulations.estimate import build, estimate
from tests.unit.test_estimate_validation import _report

# layers, hidden, heads, KV heads, FFN hidden, vocabulary (Llama: SwiGLU, FlashAttention-2)
LLAMA = {"llama3-8b": (32, 4096, 32, 8, 14336, 128256), "llama3-70b": (80, 8192, 64, 8, 28672, 128256),
         "llama2-7b": (32, 4096, 32, 32, 11008, 32000), "llama2-13b": (40, 5120, 40, 40, 13824, 32000),
         "llama2-34b": (48, 8192, 64, 8, 22016, 32000), "llama2-70b": (80, 8192, 64, 8, 28672, 32000)}

# model, sequence, GPUs, micro-batch (= local batch), recompute, recompute_every, published tokens/s per GPU
TORCHTITAN_LLAMA3_A100 = [  # T1: "LLaMa 3 performance numbers", 64 A100 80 GB
    ("llama3-8b", 8192, 64, 1, "full", 2, 2876),  # selective layer
    ("llama3-8b", 8192, 64, 1, "op", 1, 2973),  # selective op
    ("llama3-70b", 8192, 64, 1, "full", 1, 323),
]
TORCHTITAN_LLAMA2_A100 = [  # T2: "LLaMa 2 performance numbers", 64 A100 80 GB
    ("llama2-13b", 4096, 64, 2, "none", 1, 2162),
    ("llama2-13b", 4096, 64, 2, "full", 2, 1914),  # selective layer
    ("llama2-13b", 4096, 64, 2, "op", 1, 1904),  # selective op
    ("llama2-70b", 4096, 64, 1, "op", 1, 355),  # selective op, local batch 1 (footnote 2: batch 2 ran out of memory)
    ("llama2-70b", 4096, 64, 2, "full", 1, 353),
]
# model, sequence, GPUs, micro-batch, published tokens/s per GPU, published GiB (torchtitan's max reserved memory)
TORCHTITAN_LLAMA3_H200_FP8 = [  # T7: Trainy on WhiteFiber, 8B, compile, float8, per-op checkpointing
    ("llama3-8b", 8192, 32, 2, 10938, 47.96),
    ("llama3-8b", 8192, 64, 2, 10753, 46.97),
]
# model, sequence, GPUs, micro-batch, recompute, ZeRO-3 shard group (None: all GPUs), published tokens/s per GPU
FMS_FSDP_A100 = [  # T3: "Training throughput, A100 80G 128 GPUs"
    ("llama2-7b", 4096, 128, 2, "none", 8, 3650),
    ("llama2-34b", 4096, 128, 2, "full", None, 700),
    ("llama2-70b", 4096, 128, 2, "full", None, 370),
]
FMS_FSDP_H100 = [  # T4: "Training throughput, H100 96 GPUs"
    ("llama2-7b", 4096, 96, 2, "none", 8, 7500),
    ("llama2-34b", 4096, 96, 2, "full", None, 1550),
    ("llama2-70b", 4096, 96, 2, "full", None, 800),
]
# GPT of Pax: layers, hidden, heads, vocabulary (MHA, FFN 4 × hidden with GELU, unfused attention)
PAX_GPT = {"126m": (12, 768, 12, 50304), "5b": (24, 4096, 32, 50304), "175b": (96, 12288, 96, 50257)}
# model, GPUs, batch per GPU, ZeRO stage (0: data parallel; 3: FSDP), recompute, software ("bf16": XLA alone;
# "te": Transformer Engine in BF16; "te-fp8"), published sequences/s (whole run)
PAX_A100 = [  # T5: "A100 Results"
    ("126m", 64, 4, 0, "none", "bf16", 1877.20),
    ("5b", 256, 8, 3, "selective", "bf16", 465.45),
    ("175b", 256, 6, 3, "full", "bf16", 18.29),
    ("126m", 64, 4, 0, "none", "te", 2512.2),
    ("5b", 256, 8, 3, "selective", "te", 586.82),
    ("175b", 256, 6, 3, "full", "te", 19.47),
]
PAX_H100 = [  # T6: "H100 results"
    ("126m", 64, 4, 0, "none", "te", 4143.21),
    ("5b", 256, 8, 3, "selective", "te", 1066.67),
    ("175b", 256, 6, 3, "full", "te", 44.01),
    ("5b", 256, 8, 3, "full", "te-fp8", 1288.05),
    ("175b", 256, 6, 3, "full", "te-fp8", 65.64),
]


def llama_estimate(model: str, seq: int, gpu: str, gpus: int, micro_batch: int, recompute: str, **software):
    layers, hidden, heads, kv_heads, ffn, vocab = LLAMA[model]
    spec, hw, layout = build("custom", layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn,
                             vocab=vocab, seq_len=seq, gated_mlp=True, gpu=gpu, gpus=gpus, tp=1, pp=1, zero_stage=3,
                             micro_batch=micro_batch, global_batch=micro_batch * gpus, recompute=recompute,
                             attention_kernel="fa2", **software)
    return estimate(spec, hw, layout)


def torchtitan_name(model: str, micro_batch: int, recompute: str, every: int) -> str:
    return f"{model[5:]} b{micro_batch}" + {"none": "", "op": " op",
                                             "full": " ac" if every == 1 else f" ac/{every}"}[recompute]


def fms_fsdp_name(model: str, recompute: str, shards: int | None) -> str:
    return f"{model[7:]}{' hsdp' if shards else ''}{' ac' if recompute == 'full' else ''}"


def _row(name: str, gpus: int, published: float, e):
    predicted = e.tokens_per_s / gpus
    return name, gpus, published, predicted, predicted / published - 1, e


def torchtitan_rows(table):
    out = []
    for model, seq, gpus, mb, recompute, every, published in table:
        e = llama_estimate(model, seq, "a100-80gb", gpus, mb, recompute, recompute_every=every,
                           grad_reduce_dtype="fp32")
        out.append(_row(torchtitan_name(model, mb, recompute, every), gpus, published, e))
    return out


def torchtitan_h200_rows(table):
    out = []
    for model, seq, gpus, mb, published, _ in table:
        e = llama_estimate(model, seq, "h200", gpus, mb, "op", grad_reduce_dtype="fp32", execution="compiled",
                           precision="fp8", fp8_param_gather=True)
        out.append(_row(f"{model[5:]} b{mb} op fp8", gpus, published, e))
    return out


def fms_fsdp_rows(table, gpu: str, network_gbps: float):
    out = []
    for model, seq, gpus, mb, recompute, shards, published in table:
        # fms-fsdp wraps the model in torch's FullyShardedDataParallel (FSDP1; fms_fsdp/utils/train_utils.py)
        e = llama_estimate(model, seq, gpu, gpus, mb, recompute, zero_shards=shards, grad_reduce_dtype="bf16",
                           network_gbps=network_gbps, fsdp="fsdp1")
        out.append(_row(fms_fsdp_name(model, recompute, shards), gpus, published, e))
    return out


# the published clusters' networks, Gb/s a node (module docstring: 8 × 200 Gb/s HDR a DGX A100, 8 × 400 Gb/s NDR a DGX H100)
PAX_NETWORK_GBPS = {"a100-80gb": 8 * 200, "h100-80gb": 8 * 400}


def pax_rows(table, gpu: str):
    out = []
    for model, gpus, mb, zero, recompute, software, sequences in table:
        layers, hidden, heads, vocab = PAX_GPT[model]
        spec, hw, layout = build("custom", layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=2048,
                                 flash_attention=False, gpu=gpu, gpus=gpus, tp=1, pp=1, zero_stage=zero,
                                 micro_batch=mb, global_batch=mb * gpus, recompute=recompute, grad_reduce_dtype="fp32",
                                 precision="fp8" if software == "te-fp8" else "bf16",
                                 network_gbps=PAX_NETWORK_GBPS[gpu])
        out.append(_row(pax_name(model, zero, recompute, software), gpus, sequences * 2048 / gpus,
                        estimate(spec, hw, layout)))
    return out


def pax_name(model: str, zero: int, recompute: str, software: str) -> str:
    remat = {"none": "", "selective": " remat-attn", "full": " remat"}[recompute]
    return f"{model}{' fsdp' if zero == 3 else ' dp'}{remat} {software}"


# table -> (its rows, entered; the rows' names, known before anything is estimated)
TABLES = {
    "torchtitan Llama 3 A100": (lambda: torchtitan_rows(TORCHTITAN_LLAMA3_A100),
                               [torchtitan_name(m, b, r, n) for m, _, _, b, r, n, _ in TORCHTITAN_LLAMA3_A100]),
    "torchtitan Llama 2 A100": (lambda: torchtitan_rows(TORCHTITAN_LLAMA2_A100),
                               [torchtitan_name(m, b, r, n) for m, _, _, b, r, n, _ in TORCHTITAN_LLAMA2_A100]),
    "torchtitan Llama 3 H200 FP8": (lambda: torchtitan_h200_rows(TORCHTITAN_LLAMA3_H200_FP8),
                                    [f"{m[5:]} b{b} op fp8" for m, _, _, b, _, _ in TORCHTITAN_LLAMA3_H200_FP8]),
    "fms-fsdp A100": (lambda: fms_fsdp_rows(FMS_FSDP_A100, "a100-80gb", 400),
                      [fms_fsdp_name(m, r, s) for m, _, _, _, r, s, _ in FMS_FSDP_A100]),
    "fms-fsdp H100": (lambda: fms_fsdp_rows(FMS_FSDP_H100, "h100-80gb", 800),
                      [fms_fsdp_name(m, r, s) for m, _, _, _, r, s, _ in FMS_FSDP_H100]),
    "Pax GPT A100 (JAX)": (lambda: pax_rows(PAX_A100, "a100-80gb"),
                           [pax_name(m, z, r, w) for m, _, _, z, r, w, _ in PAX_A100]),
    "Pax GPT H100 (JAX)": (lambda: pax_rows(PAX_H100, "h100-80gb"),
                           [pax_name(m, z, r, w) for m, _, _, z, r, w, _ in PAX_H100]),
}


@cache
def table_rows(table: str):
    return TABLES[table][0]()


# Median and worst |error| with compute slowed while a collective holds its SMs beside it (traffic.contention; before
# it: torchtitan Llama 3 11.2/14.1 %, Llama 2 12.6/15.7 %, fms-fsdp A100 7.3/23.5 %, H100 36.0/57.1 %, Pax A100
# 12.5/61.0 %, H100 39.7/60.8 %; when the tables were entered, on main's 414c78a: torchtitan Llama 3 13.8/16.0 %,
# Llama 2 15.7/18.8 %, fms-fsdp A100 11.0/27.5 %, H100 39.5/67.3 %, Pax A100 16.1/70.2 %, H100 45.9/73.4 %). `-s`
# prints the rows. A change that makes a table worse than this fails; one that makes it better moves these down.
# Pax's 5B rows re-entered with the recomputation their policy does (h21rows: SAVE_DOT_WITH_NO_BATCH_DIM keeps the
# weight matmuls' outputs, "selective", not "full"): Pax A100 12.5/61.0 % -> 22.0/61.0 % (5B XLA +23.3 -> +55.9 %,
# TE -2.2 -> +23.7 %), H100 39.7/60.8 % -> 41.2/73.0 % (5B TE +39.7 -> +73.0 %): too fast, the estimator's; with the
# contention as well: Pax A100 20.2/59.0 %, H100 40.0/69.3 %. With ZeRO-3's fill and drain (cost.zero3_fill_and_drain:
# the first layer's and the root unit's gathers, the last reduce-scatters, exposed): torchtitan Llama 3 8.9/11.6 % ->
# 7.7/9.7 %, Llama 2 9.9/12.4 -> 9.2/11.6 %, fms-fsdp A100 5.8/16.3 -> 6.4/15.9 % (70B, too slow, -5.8 -> -6.4 %),
# H100 26.6/47.0 -> 24.6/46.1 %, Pax A100 20.2/59.0 -> 19.7/59.0 %, H100 40.0/69.3 -> 40.0/66.9 %.
# The loss's passes by its kernel (compute.LOSS_BYTES: Megatron's fp32 cross entropy moves 52 bytes a logit, not 26)
# and an eager Llama block's unfused RMSNorms, rotary positions and SwiGLU (compute.EAGER_RMSNORM_BYTES and beside
# it), measured on their own: torchtitan Llama 3 8.9/11.6 -> 1.8/2.6 %, Llama 2 9.9/12.4 -> 2.0/3.3 %, fms-fsdp A100
# 5.8/16.3 -> 6.0/10.2 %, H100 26.6/47.0 -> 15.4/27.5 %, Pax A100 20.2/59.0 -> 16.0/52.6 %, H100 40.0/69.3 ->
# 32.2/68.2 %. Both this and the fill and drain above: the figures below.
# A100 FlashAttention-2 from the FA2 paper's Figure 4 (kernels.A100_FWD_BWD, forward + backward by length, head dim
# and mask) in place of the H100 curve scaled to its best point: torchtitan Llama 3 0.8/1.0 -> 0.8/0.9 %, the other
# tables unchanged at a tenth of a point (the scaled curve was already within 1-2 % of the figure at 8k-16k).
# torchtitan's "selective op" rows entered with recompute "op" (models.Model.op_recomputed_matmuls): Llama 3 8B +0.2 %,
# Llama 2 13B +2.3 %, 70B at batch 1 +10.0 %: torchtitan Llama 3 0.8/1.0 -> 0.6/1.0 %, Llama 2 2.2/2.6 -> 2.3/10.0 %;
# the H200 FP8 table (T7) entered at 8.9/10.3 %. Together with the FSDP gradient passes below: the figures below
# (torchtitan Llama 2 70B op +10.0 -> +7.6 %, T7 8.8/9.5 %); T7's FP8 all-gather entered (fp8_param_gather): 9.2/9.9 %.
# FSDP's gradient passes before each reduce-scatter (compute.fsdp_reduce_input_bytes, every micro-batch: FSDP2's copy-in,
# torchtitan and Pax; FSDP1's flat-gradient concatenation, cast and pre-divide, fms-fsdp): torchtitan Llama 3 0.8/1.0 ->
# 0.2/0.3 %, Llama 2 2.2/2.6 -> 1.4/3.2 %, fms-fsdp A100 5.7/10.7 -> 6.8/11.8 % (34B and 70B, too slow, slower), H100
# 13.8/26.8 -> 11.6/24.2 % (7B HSDP +26.8 -> +24.2 %), Pax A100 15.4/51.2 -> 15.1/50.4 %, H100 31.8/65.9 -> 29.1/64.4 %
# (Pax's XLA steps resolve as eager here: h21pax's rows).
MEASURED = {"torchtitan Llama 3 A100": (0.003, 0.007), "torchtitan Llama 2 A100": (0.014, 0.076),
            "torchtitan Llama 3 H200 FP8": (0.092, 0.099),
            "fms-fsdp A100": (0.068, 0.118), "fms-fsdp H100": (0.116, 0.242), "Pax GPT A100 (JAX)": (0.151, 0.504),
            "Pax GPT H100 (JAX)": (0.291, 0.644)}

# Rows beyond the per-row target (25 %), as measured on that model; the xfail is not strict, so a model that
# gets them right passes them.
# (fms-fsdp H100 7B HSDP, +26.8 %, left it with FSDP's gradient passes: +24.2 %; Pax 5B bf16 +51.2 -> +50.4 %, 5B TE
# +65.9 -> +64.4 %, 5B FP8 +53.9 -> +52.4 %, 175B FP8 +31.8 -> +29.1 %)
OVER_25 = {("Pax GPT A100 (JAX)", "126m dp bf16"): "+48.3 %",
           ("Pax GPT A100 (JAX)", "5b fsdp remat-attn bf16"): "+50.4 %",
           ("Pax GPT H100 (JAX)", "126m dp te"): "+29.0 %", ("Pax GPT H100 (JAX)", "5b fsdp remat-attn te"): "+64.4 %",
           ("Pax GPT H100 (JAX)", "5b fsdp remat te-fp8"): "+52.4 %",
           ("Pax GPT H100 (JAX)", "175b fsdp remat te-fp8"): "+29.1 %"}


def _row_params():
    for table, (_, names) in TABLES.items():
        for name in names:
            measured = OVER_25.get((table, name))
            marks = [pytest.mark.xfail(reason=f"measured {measured} (target 25 %)", strict=False)] if measured else []
            yield pytest.param(table, name, marks=marks, id=f"{table}: {name}")


@pytest.mark.parametrize(("table", "name"), list(_row_params()))
def test_each_published_run_within_25_percent_and_fits(table, name):
    """The issue's per-row target: every row within 25 %, and a run that ran is predicted to fit."""
    row = next(r for r in table_rows(table) if r[0] == name)
    assert row[5].fits, f"{name} ran but is predicted not to fit: {row[5].memory_per_gpu_bytes['total'] / 1e9:.1f} GB"
    assert abs(row[4]) <= 0.25, f"{name}: {row[4]:+.1%}"


def test_torchtitan_op_checkpointing_70b_batch_2_does_not_fit():
    """torchtitan's T2, footnote 2: Llama 2 70B "with local batch size 2 will cause OOM error when selective activation
    checkpointing is used" (per-op), so its row is at batch 1; at batch 1 it ran."""
    two, one = (llama_estimate("llama2-70b", 4096, "a100-80gb", 64, mb, "op", grad_reduce_dtype="fp32") for mb in (2, 1))
    assert not two.fits and one.fits, (two.memory_per_gpu_bytes["total"] / 1e9, one.memory_per_gpu_bytes["total"] / 1e9)


def test_op_checkpointing_sits_between_selective_and_full():
    """Per-op checkpointing replays some matmuls, so it is slower than replaying attention's core alone (nothing, under
    FlashAttention) and faster than replaying whole layers; it keeps some matmul outputs, so it holds less than
    selective and more than full."""
    by = {r: llama_estimate("llama3-8b", 8192, "h100-80gb", 8, 1, r) for r in ("selective", "op", "full")}
    assert by["selective"].step_time_s < by["op"].step_time_s < by["full"].step_time_s
    held = {r: e.memory_per_gpu_bytes["activations"] for r, e in by.items()}
    assert held["full"] < held["op"] < held["selective"], held


def test_fp8_param_gather_halves_the_layers_gathers():
    """torchao's FSDP float8 all-gather moves the layers' weights in 1 byte, not 2: ZeRO-3's gathers carry half the
    bytes (the embedding and output layer, gathered once, stay bf16), and the two gathered units held take half."""
    bf16, fp8 = (llama_estimate("llama3-8b", 8192, "h200", 64, 2, "op", precision="fp8", fp8_param_gather=on)
                 for on in (False, True))
    assert fp8.step_time_s <= bf16.step_time_s
    assert fp8.memory_per_gpu_bytes["parameters"] < bf16.memory_per_gpu_bytes["parameters"]
    model = fp8.model
    unit = model.layer_params()
    held = bf16.memory_per_gpu_bytes["parameters"] - fp8.memory_per_gpu_bytes["parameters"]
    assert held == pytest.approx(2 * unit * (2 - 1), rel=1e-9)  # two units, one byte an element less


# Predicted against published memory of T7 (torchtitan's max reserved GiB, which includes the allocator's cache), as
# measured when the table was entered: +7.6 % and +6.0 %. A change that moves either further off fails.
H200_MEMORY_MEASURED = 0.076


def test_torchtitan_h200_memory_with_op_checkpointing():
    for row, (*_, gib) in zip(table_rows("torchtitan Llama 3 H200 FP8"), TORCHTITAN_LLAMA3_H200_FP8):
        predicted = row[5].memory_per_gpu_bytes["total"] / 2**30
        assert abs(predicted / gib - 1) <= H200_MEMORY_MEASURED + 0.01, (row[0], predicted, gib)


@pytest.mark.parametrize("table", list(TABLES))
def test_published_throughput_by_table(table):
    """No worse than measured (a point of median, two of worst, for rounding); the issue's target (median 10 %,
    every row 25 %, every run that ran predicted to fit) is reported as an xfail where it is not met."""
    rows = table_rows(table)
    errors = _report(f"{table} (tokens/s per GPU)", rows, "tok/s")
    median, worst = statistics.median(errors), max(errors)
    assert median <= MEASURED[table][0] + 0.01 and worst <= MEASURED[table][1] + 0.02, (median, worst)
    refused = [r[0] for r in rows if not r[5].fits]
    if not (median <= 0.10 and worst <= 0.25) or refused:
        pytest.xfail(f"{table}: median {median:.1%}, worst {worst:.1%} (target 10 % / 25 %); "
                     f"predicted not to fit: {refused or 'none'}")


def test_a_row_typed_into_distdeck_estimate_is_the_rows_estimate():
    """The rows go in through the CLI's path: torchtitan's Llama 2 13B row (no checkpointing) typed as a user would
    gives the same throughput, and the table says how far to trust it from runs of the same kind (A100, data-parallel),
    these tables among them."""
    flags = ["estimate", "--model", "custom", "--layers", "40", "--hidden", "5120", "--heads", "40", "--ffn-hidden",
             "13824", "--vocab", "32000", "--seq-len", "4096", "--gated-mlp", "--gpu", "a100-80gb", "--gpus", "64",
             "--tp", "1", "--zero-stage", "3", "--micro-batch", "2", "--global-batch", "128", "--recompute", "none",
             "--attention-kernel", "fa2", "--grad-reduce-dtype", "fp32"]
    typed = CliRunner().invoke(cli, [*flags, "--json"])
    assert typed.exit_code == 0, typed.output
    answer = json.loads(typed.output)
    row = next(r for r in table_rows("torchtitan Llama 2 A100") if r[0] == "2-13b b2")
    assert answer["tokens_per_s"] / 64 == pytest.approx(row[3], rel=1e-9)
    assert "torchtitan Llama 2 A100" in answer["validation"]["tables"]
    table = CliRunner().invoke(cli, flags, env={"COLUMNS": "240"})  # rich: one line a row
    assert "how far to trust it" in table.output and answer["validation"]["summary"] in table.output.replace("\n", " ")


@pytest.mark.parametrize("table", ["Pax GPT A100 (JAX)", "Pax GPT H100 (JAX)"])
def test_pax_rows_run_on_the_published_networks_and_their_gap_is_not_communication(table):
    """The Pax rows are priced on the clusters they ran on (8 × 200 Gb/s HDR a DGX A100 node, 8 × 400 Gb/s NDR a DGX
    H100 node), with the collectives overlapped as the README's XLA flags did; and, as the module docstring says,
    a 126M or 5B row over 25 % stays more than 10 % too fast even with every collective exposed, so exposing communication (a
    no-overlap input for these rows) could not bring it in: what remains is compute. When a change to the model
    breaks this, the docstring's account of these rows must be revisited."""
    gpu = "a100-80gb" if "A100" in table else "h100-80gb"
    for name, _gpus, published, predicted, error, e in table_rows(table):
        assert e.as_dict()["network_gbps"] == pytest.approx(PAX_NETWORK_GBPS[gpu])
        if (table, name) not in OVER_25 or name.startswith("175b"):  # 175B FP8: communication could reach it
            continue
        serial = e.step_time_s - e.exposed_comm_s - e.exposed_by_kind.get("pp", 0.0) + sum(
            v for k, v in e.comm_total_s.items() if k != "pp")
        assert predicted * e.step_time_s / serial / published - 1 > 0.10, name
