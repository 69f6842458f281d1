"""The estimator against published runs of stacks it was not built on: PyTorch FSDP (not Megatron).

The tables of test_estimate_validation.py and test_estimate_heldout.py are all Megatron-family stacks. These
are MosaicML's LLM Foundry throughput benchmarks (Composer on PyTorch FSDP, no tensor or pipeline parallelism),
mosaicml/llm-foundry, scripts/train/benchmarking/README.md (file at commit 8c8dd48; tables added by
b2a43a1, Oct 2023, and before), one table per GPU:

- "A100 80GB with 1600 Gbps node-node interconnect (RoCE)": 61 rows, 125M-70B, sequence 512-65,536, 8-64 GPUs;
- "A100 40GB with 1600 Gbps node-node interconnect (RoCE)": 78 rows, 8-128 GPUs;
- "H100 80GB BF16": 52 rows, 8-64 GPUs, and "H100 80GB BF16 (Large Scale, >= 128 GPUs)": 18 rows, 128-512 GPUs;
- "H100 80GB FP8": 7 rows, 1B and 3B on 8 GPUs, amp_fp8 (TransformerEngine v0.10's te.Linear for every linear,
  `fc_type: te`), attention by the same Triton kernel as the BF16 rows: submit_benchmarks.py at b2a43a1 (the
  commit that added the FP8 table) sets `attn_impl` from `--attn_impl`, default `triton`, for every run, and
  sweep.sh there runs the FP8 and BF16 sweeps by the same lines (`for PRECISION in fp8 bf16`) with no
  `--attn_impl`; the `pip install flash-attn==1.0.7` it adds for H100 FP8 runs ("Required for flash-attn and FP8
  training") changes an installed package, not MPT's choice of kernel, which is `attn_impl` alone
  (llmfoundry/models/layers/attention.py at v0.3.0, the branch it installs). Entered before as flash-attn 1.0.7
  ("fa1"), which nothing in the sweep selects.

The large-scale table is not from the sweep of the others: it came with commit 5e85bd62d ("Shashank/new
benchmarks", 2024-01-06), which also added its sweep, scripts/train/benchmarking/sweep.py, whose settings are the
table's (1B and 3B SHARD_GRAD_OP, micro-batch 12 and 8; 7B FULL_SHARD, 6, no checkpointing; 13B 16, 30B 8, 70B 8
with checkpointing), run from llm-foundry `main` installed `.[gpu-flash2]` (setup.py at 5e85bd62d: flash-attn 2.4.2).
Its attention is per model: "--attn_impl flash" for 1B, 3B, 7B and 70B, so FlashAttention-2 (fa2), and
"--attn_impl triton" for 13B and 30B (triton_fa1). Its `--fsdp_config_mixed_precision PURE` is not passed on by
submit_benchmarks.py at 5e85bd62d (run_config calls mod_parameters without it, so Composer's DEFAULT), which is
what the table's "MP Mode" column prints: DEFAULT is entered.

The published throughput agrees with the published MFU under the README's own FLOP count (2·N per token forward, N
as its "NumParams" column, plus attention 4·n_layers·d_model·seq per token, times 3; peak 312 TFLOP/s on A100, 989
on H100, 1,979 in FP8): e.g. the A100 40 GB 70B row on 64 GPUs, 276 tokens/s per GPU × 405 GFLOP = 111.9 TFLOP/s,
35.9 % as printed; H100 13B at 2,048 tokens without checkpointing, 4,792 × 82.1 GFLOP = 393 TFLOP/s, 39.8 %
("Model TFLOP" 393); FP8 3B at 2,048, 30,587 × 17.9 GFLOP = 548 TFLOP/s = 27.7 % of FP8's 1,979.

Each row is entered as a user would with `distdeck estimate` (simulations.estimate.build, the CLI's and the
API's path): the MPT model of the row's size (scripts/train/yamls/pretrain/mpt-<size>.yaml at 8c8dd48:
d_model, n_heads, n_layers, expansion_ratio 4 with GeLU, vocabulary 50,368, no dropout; head dimension 128
from 760M up, 64 for 125M and 350M), the loss by flash-attn's fused cross entropy (MPT's default `loss_fn`), attention by the Triton FlashAttention the
benchmarks ran
(submit_benchmarks.py at b2a43a1: `--attn_impl` default `triton`), TP = PP = 1, ZeRO-3 for FULL_SHARD and ZeRO-2 for
SHARD_GRAD_OP, the row's micro-batch and global batch, full recomputation where "Activation Checkpointing" is
True, none otherwise; gradients reduced in fp32 under Composer's DEFAULT mixed precision (bf16 parameters,
fp32 reduction) and in bf16 under PURE. Published: tokens per second of the whole cluster (the "Throughput
(T/s)" column), divided by the GPUs; the error is the predicted throughput over the published one, minus one
("+": the estimator is too fast). Nothing here is fitted: the rows are only compared against.
"""

from __future__ import annotations

import statistics

import pytest

from simulations.estimate import build, estimate
from tests.unit.test_estimate_validation import _report

# d_model, n_heads, n_layers of the MPT yamls
MPT = {"125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
       "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48),
       "70b": (8192, 64, 80)}
MPT_VOCAB = 50368

# model, sequence, GPUs, micro-batch, global batch, ZeRO stage (3: FULL_SHARD, 2: SHARD_GRAD_OP),
# activation checkpointing, FSDP mixed precision (DEFAULT: fp32 gradient reduction; PURE: bf16), published tokens/s
FOUNDRY_H100_LARGE = [  # "H100 80GB BF16 (Large Scale, >= 128 GPUs)", 18 rows
    ("70b", 2048, 512, 8, 4096, 3, True, "DEFAULT", 515636),
    ("70b", 2048, 256, 8, 2048, 3, True, "DEFAULT", 265149),
    ("70b", 2048, 128, 8, 1024, 3, True, "DEFAULT", 135490),
    ("30b", 2048, 512, 8, 4096, 3, True, "DEFAULT", 1083366),
    ("30b", 2048, 256, 8, 2048, 3, True, "DEFAULT", 550022),
    ("30b", 2048, 128, 8, 1024, 3, True, "DEFAULT", 281491),
    ("13b", 2048, 512, 16, 8192, 3, True, "DEFAULT", 2535811),
    ("13b", 2048, 256, 16, 4096, 3, True, "DEFAULT", 1277214),
    ("13b", 2048, 128, 16, 2048, 3, True, "DEFAULT", 650264),
    ("7b", 2048, 512, 6, 3072, 3, False, "DEFAULT", 4951479),
    ("7b", 2048, 256, 6, 1536, 3, False, "DEFAULT", 2590548),
    ("7b", 2048, 128, 6, 768, 3, False, "DEFAULT", 1340830),
    ("3b", 2048, 512, 8, 4096, 2, False, "DEFAULT", 11092218),
    ("3b", 2048, 256, 8, 2048, 2, False, "DEFAULT", 5829686),
    ("3b", 2048, 128, 8, 1024, 2, False, "DEFAULT", 2998098),
    ("1b", 2048, 512, 12, 6144, 2, False, "DEFAULT", 20396905),
    ("1b", 2048, 256, 12, 3072, 2, False, "DEFAULT", 10894207),
    ("1b", 2048, 128, 12, 1536, 2, False, "DEFAULT", 5647854),
]

FOUNDRY_H100 = [  # "H100 80GB BF16", 52 rows
    ("70b", 2048, 64, 8, 2048, 3, True, "DEFAULT", 66523),
    ("70b", 2048, 32, 2, 1024, 3, True, "DEFAULT", 28242),
    ("30b", 8192, 8, 1, 168, 3, True, "DEFAULT", 11072),
    ("30b", 4096, 8, 1, 168, 3, True, "DEFAULT", 14419),
    ("30b", 2048, 32, 14, 1344, 3, True, "DEFAULT", 73860),
    ("30b", 2048, 16, 10, 480, 3, True, "DEFAULT", 36209),
    ("30b", 2048, 8, 3, 504, 3, True, "DEFAULT", 16022),
    ("30b", 1024, 8, 6, 1008, 3, True, "DEFAULT", 16672),
    ("13b", 32768, 8, 1, 24, 3, True, "DEFAULT", 15812),
    ("13b", 16384, 8, 3, 72, 3, True, "DEFAULT", 23881),
    ("13b", 4096, 8, 10, 240, 3, True, "DEFAULT", 37740),
    ("13b", 2048, 64, 2, 128, 3, False, "DEFAULT", 307209),
    ("13b", 2048, 32, 2, 64, 3, False, "DEFAULT", 153960),
    ("13b", 2048, 16, 2, 32, 3, False, "DEFAULT", 76280),
    ("13b", 2048, 8, 2, 16, 3, False, "DEFAULT", 38336),
    ("13b", 1024, 8, 40, 960, 3, True, "DEFAULT", 44019),
    ("7b", 65536, 8, 1, 16, 3, True, "DEFAULT", 15654),
    ("7b", 32768, 8, 2, 32, 3, True, "DEFAULT", 26550),
    ("7b", 8192, 8, 8, 128, 3, True, "DEFAULT", 55481),
    ("7b", 4096, 8, 16, 256, 3, True, "DEFAULT", 68893),
    ("7b", 2048, 8, 6, 48, 3, False, "DEFAULT", 85144),
    ("7b", 1024, 8, 64, 1024, 3, True, "DEFAULT", 81628),
    ("3b", 65536, 8, 1, 16, 3, True, "DEFAULT", 26099),
    ("3b", 32768, 8, 3, 144, 3, True, "DEFAULT", 46984),
    ("3b", 16384, 8, 1, 48, 3, False, "DEFAULT", 89223),
    ("3b", 8192, 8, 3, 144, 3, False, "DEFAULT", 132626),
    ("3b", 4096, 8, 5, 240, 3, False, "DEFAULT", 167712),
    ("3b", 2048, 64, 6, 1152, 3, False, "DEFAULT", 1441663),
    ("3b", 2048, 32, 6, 576, 3, False, "DEFAULT", 736701),
    ("3b", 2048, 16, 10, 480, 3, False, "DEFAULT", 386285),
    ("3b", 1024, 8, 20, 960, 3, False, "DEFAULT", 216369),
    ("3b", 512, 8, 40, 1920, 3, False, "DEFAULT", 223721),
    ("1b", 65536, 8, 1, 16, 3, True, "DEFAULT", 44050),
    ("1b", 32768, 8, 1, 32, 3, False, "DEFAULT", 96203),
    ("1b", 16384, 8, 2, 64, 3, False, "DEFAULT", 157194),
    ("1b", 8192, 8, 3, 96, 3, False, "DEFAULT", 233256),
    ("1b", 4096, 8, 7, 224, 3, False, "DEFAULT", 308282),
    ("1b", 2048, 64, 20, 1280, 3, False, "DEFAULT", 2841754),
    ("1b", 2048, 32, 20, 640, 3, False, "DEFAULT", 1444183),
    ("1b", 2048, 16, 20, 320, 3, False, "DEFAULT", 736596),
    ("1b", 2048, 8, 14, 112, 3, False, "DEFAULT", 363645),
    ("1b", 1024, 8, 18, 576, 3, False, "DEFAULT", 391287),
    ("1b", 512, 8, 56, 1792, 3, False, "DEFAULT", 418201),
    ("760m", 32768, 8, 1, 16, 3, False, "DEFAULT", 130333),
    ("760m", 16384, 8, 3, 48, 3, False, "DEFAULT", 222521),
    ("760m", 8192, 8, 6, 96, 3, False, "DEFAULT", 334602),
    ("760m", 4096, 8, 12, 192, 3, False, "DEFAULT", 443674),
    ("760m", 2048, 32, 24, 768, 3, False, "DEFAULT", 2175091),
    ("760m", 2048, 16, 24, 384, 3, False, "DEFAULT", 1096819),
    ("760m", 2048, 8, 24, 384, 3, False, "DEFAULT", 505177),
    ("760m", 1024, 8, 48, 768, 3, False, "DEFAULT", 628648),
    ("760m", 512, 8, 96, 1536, 3, False, "DEFAULT", 669998),
]

FOUNDRY_H100_FP8 = [  # "H100 80GB FP8", 7 rows
    ("3b", 32768, 8, 3, 144, 3, True, "DEFAULT", 46853),
    ("3b", 8192, 8, 3, 144, 3, False, "DEFAULT", 153174),
    ("3b", 2048, 8, 10, 480, 3, False, "DEFAULT", 244692),
    ("3b", 512, 8, 40, 1920, 3, False, "DEFAULT", 292217),
    ("1b", 32768, 8, 1, 32, 3, False, "DEFAULT", 100643),
    ("1b", 8192, 8, 2, 64, 3, False, "DEFAULT", 256087),
    ("1b", 512, 8, 56, 1792, 3, False, "DEFAULT", 562523),
]

FOUNDRY_A100_80GB = [  # "A100 80GB with 1600 Gbps node-node interconnect (RoCE)", 61 rows
    ("70b", 2048, 64, 8, 2048, 3, True, "PURE", 26274),
    ("70b", 2048, 32, 2, 1024, 3, True, "PURE", 11962),
    ("30b", 8192, 8, 1, 168, 3, True, "DEFAULT", 4594),
    ("30b", 4096, 8, 1, 168, 3, True, "DEFAULT", 6513),
    ("30b", 2048, 8, 3, 504, 3, True, "DEFAULT", 7330),
    ("30b", 1024, 8, 6, 1008, 3, True, "DEFAULT", 7571),
    ("30b", 512, 8, 12, 2016, 3, True, "DEFAULT", 7739),
    ("13b", 32768, 8, 1, 24, 3, True, "DEFAULT", 8134),
    ("13b", 16384, 8, 3, 72, 3, True, "DEFAULT", 11454),
    ("13b", 8192, 8, 5, 120, 3, True, "DEFAULT", 14362),
    ("13b", 4096, 8, 10, 240, 3, True, "DEFAULT", 16482),
    ("13b", 2048, 8, 2, 48, 3, False, "DEFAULT", 18097),
    ("13b", 1024, 8, 40, 960, 3, True, "DEFAULT", 18647),
    ("7b", 65536, 8, 1, 16, 3, True, "DEFAULT", 8108),
    ("7b", 32768, 8, 2, 32, 3, True, "DEFAULT", 13382),
    ("7b", 16384, 8, 4, 64, 3, True, "DEFAULT", 19629),
    ("7b", 8192, 8, 8, 128, 3, True, "DEFAULT", 25655),
    ("7b", 4096, 8, 16, 256, 3, True, "DEFAULT", 29472),
    ("7b", 2048, 8, 6, 96, 3, False, "DEFAULT", 37130),
    ("7b", 1024, 8, 64, 1024, 3, True, "DEFAULT", 34857),
    ("3b", 65536, 8, 1, 16, 3, True, "DEFAULT", 14137),
    ("3b", 32768, 8, 3, 144, 3, True, "DEFAULT", 24235),
    ("3b", 16384, 8, 1, 48, 3, False, "DEFAULT", 44233),
    ("3b", 8192, 8, 3, 144, 3, False, "DEFAULT", 61567),
    ("3b", 4096, 8, 5, 240, 3, False, "DEFAULT", 75658),
    ("3b", 2048, 8, 10, 160, 3, False, "DEFAULT", 86491),
    ("3b", 1024, 8, 20, 960, 3, False, "DEFAULT", 92643),
    ("3b", 512, 8, 40, 1920, 3, False, "DEFAULT", 97019),
    ("1b", 65536, 8, 1, 16, 3, True, "DEFAULT", 24353),
    ("1b", 32768, 8, 1, 32, 3, False, "DEFAULT", 50207),
    ("1b", 16384, 8, 2, 64, 3, False, "DEFAULT", 79650),
    ("1b", 8192, 8, 3, 96, 3, False, "DEFAULT", 110516),
    ("1b", 4096, 8, 7, 224, 3, False, "DEFAULT", 142457),
    ("1b", 2048, 8, 14, 448, 3, False, "DEFAULT", 164109),
    ("1b", 1024, 8, 18, 576, 3, False, "DEFAULT", 176898),
    ("1b", 512, 8, 56, 1792, 3, False, "DEFAULT", 185186),
    ("760m", 65536, 8, 1, 16, 3, True, "DEFAULT", 33150),
    ("760m", 32768, 8, 1, 16, 3, False, "DEFAULT", 70417),
    ("760m", 16384, 8, 3, 48, 3, False, "DEFAULT", 114198),
    ("760m", 8192, 8, 6, 96, 3, False, "DEFAULT", 167471),
    ("760m", 4096, 8, 12, 192, 3, False, "DEFAULT", 218808),
    ("760m", 2048, 8, 24, 384, 3, False, "DEFAULT", 259472),
    ("760m", 1024, 8, 48, 768, 3, False, "DEFAULT", 238122),
    ("760m", 512, 8, 96, 1536, 3, False, "DEFAULT", 235571),
    ("350m", 65536, 8, 1, 16, 3, False, "DEFAULT", 60195),
    ("350m", 32768, 8, 2, 32, 3, False, "DEFAULT", 109222),
    ("350m", 16384, 8, 4, 64, 3, False, "DEFAULT", 188478),
    ("350m", 8192, 8, 8, 128, 3, False, "DEFAULT", 292559),
    ("350m", 4096, 8, 16, 256, 3, False, "DEFAULT", 396442),
    ("350m", 2048, 8, 32, 512, 3, False, "DEFAULT", 470263),
    ("350m", 1024, 8, 64, 1024, 3, False, "DEFAULT", 518504),
    ("350m", 512, 8, 128, 2048, 3, False, "DEFAULT", 554643),
    ("125m", 65536, 8, 1, 16, 3, False, "DEFAULT", 162946),
    ("125m", 32768, 8, 2, 32, 3, False, "DEFAULT", 291256),
    ("125m", 16384, 8, 4, 64, 3, False, "DEFAULT", 480322),
    ("125m", 8192, 8, 8, 128, 3, False, "DEFAULT", 723142),
    ("125m", 4096, 8, 16, 256, 3, False, "DEFAULT", 947172),
    ("125m", 2048, 8, 40, 640, 3, False, "DEFAULT", 1142641),
    ("125m", 2048, 8, 32, 512, 3, False, "DEFAULT", 1133901),
    ("125m", 1024, 8, 64, 1024, 3, False, "DEFAULT", 1251751),
    ("125m", 512, 8, 128, 2048, 3, False, "DEFAULT", 1325455),
]

FOUNDRY_A100_40GB = [  # "A100 40GB with 1600 Gbps node-node interconnect (RoCE)", 78 rows
    ("70b", 2048, 128, 4, 512, 3, True, "PURE", 48194),
    # re-read (h21rows): "| 70b | 2048 | 64 | a100_40gb | 35.87 | 47.82 | 111 | 2 | 1 | 128 | 8 | 17672 | 276 |": micro-batch
    # 2, no accumulation, global 128, 276 tokens/s per GPU = 111 TFLOP/s = 35.9 % MFU as printed. It stands as
    # published: one micro-batch of 4,096 tokens a step against two all-gathers and a reduce-scatter of 130 GB of
    # bf16 weights (FULL_SHARD, PURE), a network-bound step the estimator predicts too fast
    ("70b", 2048, 64, 2, 128, 3, True, "PURE", 17672),
    ("30b", 2048, 128, 6, 768, 3, True, "PURE", 110803),
    ("30b", 2048, 32, 4, 128, 3, True, "PURE", 27431),
    ("13b", 8192, 8, 1, 128, 3, True, "PURE", 11258),
    ("13b", 4096, 8, 2, 256, 3, True, "PURE", 12830),
    ("13b", 2048, 128, 16, 2048, 3, True, "PURE", 252444),
    ("13b", 2048, 64, 16, 1024, 3, True, "PURE", 126479),
    ("13b", 2048, 32, 14, 448, 3, True, "PURE", 63946),
    ("13b", 2048, 16, 10, 160, 3, True, "PURE", 31900),
    ("13b", 2048, 8, 4, 512, 3, True, "PURE", 13347),
    ("13b", 1024, 8, 8, 1024, 3, True, "PURE", 13817),
    ("13b", 512, 8, 16, 2048, 3, True, "PURE", 14108),
    ("7b", 16384, 8, 1, 32, 3, True, "PURE", 17998),
    ("7b", 8192, 8, 3, 96, 3, True, "PURE", 23098),
    ("7b", 4096, 8, 6, 192, 3, True, "PURE", 26930),
    ("7b", 2048, 128, 18, 2304, 3, True, "PURE", 463749),
    ("7b", 2048, 64, 18, 1152, 3, True, "PURE", 234614),
    ("7b", 2048, 32, 18, 576, 3, True, "PURE", 119202),
    ("7b", 2048, 16, 16, 256, 3, True, "PURE", 58322),
    ("7b", 2048, 8, 12, 384, 3, True, "PURE", 29436),
    ("7b", 1024, 8, 24, 768, 3, True, "PURE", 30833),
    ("7b", 512, 8, 48, 1536, 3, True, "PURE", 31167),
    ("3b", 32768, 8, 1, 32, 3, True, "PURE", 23640),
    ("3b", 16384, 8, 2, 128, 3, True, "PURE", 35726),
    ("3b", 8192, 8, 1, 64, 3, False, "PURE", 57193),
    ("3b", 4096, 8, 2, 128, 3, False, "PURE", 70223),
    ("3b", 2048, 128, 6, 768, 3, False, "PURE", 1220885),
    ("3b", 2048, 64, 6, 384, 3, False, "PURE", 623167),
    ("3b", 2048, 32, 6, 192, 3, False, "PURE", 317261),
    ("3b", 2048, 16, 5, 80, 3, False, "PURE", 156013),
    ("3b", 2048, 8, 5, 320, 3, False, "PURE", 80520),
    ("3b", 1024, 8, 10, 640, 3, False, "PURE", 85854),
    ("3b", 512, 8, 20, 1280, 3, False, "PURE", 90596),
    ("1b", 32768, 8, 1, 32, 3, True, "PURE", 40762),
    ("1b", 16384, 8, 1, 64, 3, False, "PURE", 77723),
    ("1b", 8192, 8, 2, 128, 3, False, "PURE", 107799),
    ("1b", 4096, 8, 4, 256, 3, False, "PURE", 134851),
    ("1b", 2048, 128, 10, 1280, 3, False, "PURE", 2386897),
    ("1b", 2048, 64, 10, 640, 3, False, "PURE", 1216104),
    ("1b", 2048, 32, 10, 320, 3, False, "PURE", 497782),
    ("1b", 2048, 16, 8, 128, 3, False, "PURE", 305372),
    ("1b", 2048, 8, 8, 512, 3, False, "PURE", 154171),
    ("1b", 1024, 8, 16, 1024, 3, False, "PURE", 167677),
    ("1b", 512, 8, 32, 2048, 3, False, "PURE", 174256),
    ("760m", 32768, 8, 1, 32, 3, True, "PURE", 57464),
    ("760m", 16384, 8, 1, 32, 3, False, "PURE", 111316),
    ("760m", 8192, 8, 3, 96, 3, False, "PURE", 160853),
    ("760m", 4096, 8, 6, 192, 3, False, "PURE", 206909),
    ("760m", 2048, 128, 12, 1536, 3, False, "PURE", 3704382),
    ("760m", 2048, 64, 12, 768, 3, False, "PURE", 1878030),
    ("760m", 2048, 32, 12, 384, 3, False, "PURE", 948745),
    ("760m", 2048, 16, 12, 192, 3, False, "PURE", 473723),
    ("760m", 2048, 8, 12, 384, 3, False, "PURE", 241389),
    ("760m", 1024, 8, 24, 768, 3, False, "PURE", 267376),
    ("760m", 512, 8, 48, 1536, 3, False, "PURE", 279504),
    ("350m", 32768, 8, 1, 32, 3, False, "PURE", 107329),
    ("350m", 16384, 8, 2, 64, 3, False, "PURE", 183175),
    ("350m", 8192, 8, 4, 128, 3, False, "PURE", 279466),
    ("350m", 4096, 8, 8, 256, 3, False, "PURE", 374670),
    ("350m", 2048, 128, 18, 2304, 3, False, "PURE", 6647647),
    ("350m", 2048, 64, 18, 1152, 3, False, "PURE", 3372118),
    ("350m", 2048, 32, 18, 576, 3, False, "PURE", 1721978),
    ("350m", 2048, 16, 18, 288, 3, False, "PURE", 886622),
    ("350m", 2048, 8, 16, 512, 3, False, "PURE", 447963),
    ("350m", 1024, 8, 32, 1024, 3, False, "PURE", 500184),
    ("350m", 512, 8, 64, 2048, 3, False, "PURE", 530277),
    ("125m", 32768, 8, 1, 32, 3, False, "PURE", 261208),
    ("125m", 16384, 8, 2, 48, 3, False, "PURE", 443876),
    ("125m", 8192, 8, 5, 120, 3, False, "PURE", 694868),
    ("125m", 4096, 8, 13, 312, 3, False, "PURE", 921297),
    ("125m", 2048, 128, 26, 3328, 3, False, "PURE", 15863837),
    ("125m", 2048, 64, 26, 1664, 3, False, "PURE", 8015010),
    ("125m", 2048, 32, 26, 832, 3, False, "PURE", 4067922),
    ("125m", 2048, 16, 26, 416, 3, False, "PURE", 2088560),
    ("125m", 2048, 8, 26, 624, 3, False, "PURE", 1090678),
    ("125m", 1024, 8, 52, 1248, 3, False, "PURE", 1186314),
    ("125m", 512, 8, 104, 2496, 3, False, "PURE", 1253886),
]

TABLES = {"a100-80gb": ("a100-80gb", FOUNDRY_A100_80GB), "a100-40gb": ("a100-40gb", FOUNDRY_A100_40GB),
          "h100": ("h100-80gb", FOUNDRY_H100), "h100-large": ("h100-80gb", FOUNDRY_H100_LARGE),
          "h100-fp8": ("h100-80gb", FOUNDRY_H100_FP8)}


def foundry_estimate(gpu: str, size: str, seq: int, gpus: int, micro_batch: int, global_batch: int, zero: int,
                     checkpointing: bool, mixed_precision: str, **software):
    hidden, heads, layers = MPT[size]
    model, hw, layout = build("custom", layers=layers, hidden=hidden, heads=heads, vocab=MPT_VOCAB, seq_len=seq,
                              gpu=gpu, gpus=gpus, tp=1, pp=1, zero_stage=zero, micro_batch=micro_batch,
                              global_batch=global_batch, recompute="full" if checkpointing else "none",
                              grad_reduce_dtype="fp32" if mixed_precision == "DEFAULT" else "bf16",
                              # the loss: flash-attn's fused cross entropy, ComposerMPTCausalLM's default loss_fn
                              # (llm-foundry, llmfoundry/models/mpt/modeling_mpt.py: "fused_crossentropy")
                              cross_entropy="fused",
                              # Composer wraps the model in torch's FullyShardedDataParallel (FSDP1)
                              fsdp="fsdp1", **{"attention_kernel": "triton_fa1", **software})
    return estimate(model, hw, layout)


# the large-scale table's attention by model (sweep.py at 5e85bd62d: "--attn_impl flash" with flash-attn 2.4.2,
# "--attn_impl triton" for 13b and 30b); the other tables ran submit_benchmarks.py's default, triton
# What is left (h21small, measured with scripts/estimate_breakdown.py, not modelled): the large-scale table's FA2 rows
# publish what the 8-64 GPU table's Triton rows of the same model do (1B 44.1k vs 44.4k tokens/s a GPU, 3B 23.4k vs
# 22.5k, 7B 10.5k vs 10.6k) although FA2 is predicted 9-20 % faster there; their 1B and 3B (SHARD_GRAD_OP) rows stay
# 18-31 % too fast with every collective exposed, so their gap is compute, not the network; and the H100 / A100
# ratio at 512 tokens, where attention is a few per cent (1B: 2.26 published, 2.6 predicted; 3B: 2.31 vs 2.57), says
# the 2023 stack's H100 matmuls ran ~12 % below the sustained rate taken from 2026 software (hardware.py).
LARGE_SCALE_ATTENTION = {"1b": "fa2", "3b": "fa2", "7b": "fa2", "13b": "triton_fa1", "30b": "triton_fa1",
                         "70b": "fa2"}


def foundry_rows(table: str):
    gpu, rows = TABLES[table]
    # the FP8 rows ran TransformerEngine's FP8 linears (fc_type te) with the Triton attention of the BF16 rows
    software = {"precision": "fp8"} if table == "h100-fp8" else {}
    out = []
    for size, seq, gpus, mb, batch, zero, ckpt, mp, published in rows:
        if table == "h100-large":
            software = {"attention_kernel": LARGE_SCALE_ATTENTION[size]}
        e = foundry_estimate(gpu, size, seq, gpus, mb, batch, zero, ckpt, mp, **software)
        predicted = e.tokens_per_s / gpus
        out.append((f"{size} s{seq}{' ac' if ckpt else ''}", gpus, published / gpus, predicted,
                    predicted / (published / gpus) - 1, e))
    return out


def summary(table: str) -> tuple[int, float, float]:
    errors = [abs(r[4]) for r in foundry_rows(table)]
    return len(errors), statistics.median(errors), max(errors)


# Median and worst |error| measured with compute slowed while a collective holds its SMs beside it (traffic.contention;
# see the report with -s); before it (GEMM waves with a per-tile cost, eager execution, the straggler allowance):
# 10.0 / 24.9 %, 5.2 / 40.5 %, 8.9 / 35.6 %, 9.8 / 26.3 %, 13.8 / 28.8 %; before those (the kernels' attention
# rates): 8.2 / 28.3 %, 5.2 / 42.9 %,
# 11.9 / 42.7 %, 15.0 / 31.8 %, 14.6 / 26.9 %; before those (one attention rate, 0.6 of peak): 17.1 / 58.4 %,
# 20.2 / 61.5 %, 50.5 / 149.1 %, 35.6 / 70.9 % (FP8: no input).
# The large-scale and FP8 tables re-entered with the attention they ran (h21rows, see the docstring): large scale
# 9.8 / 26.3 % with Triton everywhere -> 20.7 / 40.9 % with FlashAttention-2 for 1B, 3B, 7B and 70B (the rows that ran
# flash are the ones predicted too fast: the estimator's, not the entry's); FP8 13.8 / 28.8 % with fa1 -> 10.4 / 14.6 %.
# Both (the re-entered attention and the contention): the figures below.
# With ZeRO-3's fill and drain (cost.zero3_fill_and_drain): 10.1/23.6 -> 10.4/23.2 % (the rows predicted too slow
# slower), 5.4/35.9 -> 5.3/35.4 %, 8.2/29.6 -> 7.8/29.0 %, 18.7/39.3 -> 18.5/39.2 %, 9.5/14.0 -> 8.6/14.1 %.
# The loss's passes by its kernel (compute.LOSS_BYTES: flash-attn's fused cross entropy moves 8 bytes a logit, not
# the 26 counted before for every loss): a100-80gb 10.1/23.6 -> 9.8/25.3 %, a100-40gb 5.4/35.9 -> 4.5/35.9 %, h100
# 8.2/29.6 -> 9.0/29.6 %, h100-large 18.7/39.3 -> 19.3/41.7 %, h100-fp8 9.5/14.0 -> 10.7/15.1 % (too fast, all of it). Both: below.
# A100 attention from the FA2 paper's Figure 4 (kernels.A100_FWD_BWD: FA2 forward + backward by length, head dim and
# mask, in place of the H100 curve scaled to its best point; Triton still FA2 / 1.9): a100-80gb 10.1/24.9 -> 9.2/26.5 %
# (long rows 1 point less slow, 760m s512 +24.9 -> +26.5 %), a100-40gb 4.6/35.4 %, H100 tables unchanged.
# Tried and not kept (see kernels.py's docstring): the Triton kernel per length, as FlashAttention v1 (its source:
# "slightly slower than CUDA") or as Figure 4's Triton bars (OpenAI's kernel; on H100 at its A100 fraction of FA2):
# a100-80gb 11.9/28.9 or 15.2/31.1 %, a100-40gb 5.8/33.8 or 6.2/33.6 %, h100 10.3/34.7 or 9.9/33.9 %, h100-fp8
# 14.3/29.9 or 13.8/29.1 %: the long rows predicted slower still (350m s65536 is 90 % attention in the estimate).
# FSDP's gradient passes before each reduce-scatter (compute.fsdp_reduce_input_bytes: FSDP1's flat-gradient
# concatenation, cast to DEFAULT's fp32 reduction and pre-divide, 18 bytes a parameter every micro-batch): a100-80gb
# 10.1/24.9 -> 10.8/24.2 % (its rows, mostly too slow, slower), a100-40gb 4.6/35.4 -> 4.8/30.7 %, h100 7.9/29.1 ->
# 6.7/24.1 % (13B at 2,048 without checkpointing +20.5..24.6 -> +8.4..11.6 %), h100-large 19.1/41.7 -> 15.0/39.3 %,
# h100-fp8 9.8/14.0 -> 7.3/14.0 %. Both (Figure 4's attention and these passes): below.
MEASURED = {"a100-80gb": (0.107, 0.258), "a100-40gb": (0.048, 0.307), "h100": (0.067, 0.241),
            "h100-large": (0.150, 0.393), "h100-fp8": (0.073, 0.140)}


@pytest.mark.parametrize("table", list(TABLES))
def test_llm_foundry_fsdp_throughput(table):
    """No worse than measured (a point of median, two of worst, for rounding); the issue's target (median 10 %,
    every row 25 %) is reported as an xfail where it is not met."""
    rows = foundry_rows(table)
    errors = _report(f"LLM Foundry FSDP, {table} (tokens/s per GPU)", rows, "tok/s")
    median, worst = statistics.median(errors), max(errors)
    assert median <= MEASURED[table][0] + 0.01 and worst <= MEASURED[table][1] + 0.02, (median, worst)
    if not (median <= 0.10 and worst <= 0.25):
        pytest.xfail(f"{table}: median {median:.1%}, worst {worst:.1%} (target 10 % / 25 %)")
