"""The estimator against torchtitan's own Llama 3.1 8B runs on Meta's Grand Teton H100s (96 GB HBM2e, 500 W), a stack
and a GPU it was not built on: FSDP alone, FSDP with context parallelism, FSDP with tensor parallelism (vanilla and
async TP). Each row is entered as a user would with `distdeck estimate` (simulations.estimate.build, the CLI's and the
API's path) on gpu "h100-96gb-500w" (the catalog's Grand Teton H100, simulations/hardware.py), with what the sources say
the run ran; where a detail is not published, the comment beside it says what is assumed. Published: tokens per second
per GPU and, where given, memory; the error is the predicted over the published, minus one ("+": the estimator is too
fast, or holds more). Nothing here is fitted: the rows are only compared against.

Hardware, as both benchmark files state it: 8 H100 a host on NVLink, "96GB HBM2e with 2.4 TB/sec", "backend RDMA network
with 400 Gb/s per GPU" (entered as network_gbps 8 × 400 a node), "the default 500W power limit".

Table H1 (Tables 1 and 3 of pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, "at the end of 2024",
torchtitan 9dec370 of 2024-12-26, torch 1963fc8): Llama 3.1 8B, FSDP over all 8 or 128 GPUs (1D: ZeRO-3, TP = PP = 1),
local batch 2 (global 16 or 256), "Selective activation checkpointing"; rows FSDP, + torch.compile, + torch.compile +
Float8. Table H2 (Table 2 of the same file): FSDP + CP + torch.compile + Float8 on 8 GPUs, local batch 1, "Full
activation checkpointing", sequence 32,768 to 262,144 with CP 1, 2, 4, 8 (FSDP 8, 4, 2, 1). From torchtitan at 9dec370:
- train_configs/llama3_8b.toml: sequence 8,192 (Table 2 sets its own), activation_checkpoint mode "selective" with
  selective_ac_option "op", so the tables' "selective" is per-op SAC: torchtitan/parallelisms/parallelize_llama.py's
  _save_list keeps the outputs of mm (all but every second one), the flash/efficient SDPA ops, reduce_scatter_tensor and
  (for float8) abs and max, and replays everything else: recompute "op". Its "full" wraps each block in
  checkpoint_wrapper: recompute "full";
- parallelize_llama.py: FSDP2 (fully_shard) with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=
  mixed_precision_reduce), config_manager.py's only choice "float32": gradients reduced in fp32; torch.compile per
  TransformerBlock when --training.compile (execution "compiled"), else eager; the FSDP mesh is dp_shard_cp, so under CP
  the parameters are sharded over all 8 GPUs (ZeRO-3 over dp·cp);
- attention: torchtitan/models/llama/model.py calls F.scaled_dot_product_attention(is_causal=True) with torch's own
  backend order; on H100 in December 2024 that is the FlashAttention(-2) backend: pytorch/pytorch#138522 (October 2024,
  "Make CuDNN Attention Opt in") put cuDNN last, and #142132 (a nightly of 2024-12-04 on H100: SDPA not choosing cuDNN)
  was answered "This is expected"; torchtitan turned cuDNN SDPA on only in March 2025 (#1000): fa2;
- Float8: torchtitan/float8.py swaps every nn.Linear but "output" for torchao's Float8Linear with dynamic tensor-wise
  scaling (scaling_type_* "dynamic"): precision "fp8". The table does not say whether FSDP's float8 all-gather was on
  (--float8.enable_fsdp_float8_all_gather, default off); docs/float8.md at 9dec370 launches Float8 with it (and
  precompute_float8_dynamic_scale_for_fsdp), so it is taken as on: fp8_param_gather (assumption; off, the Float8 rows
  are 0.2 % slower in the estimate);
- context parallelism: config_manager.py's --experimental.context_parallel_rotate_method default "allgather", torch's
  context_parallel with the all-gather rotater: cp_comm "all_gather". Not the same thing in every detail, and not an
  input: torch's ring-attention loop still runs cp sub-attentions merged by online softmax (no merge passes are charged
  with "all_gather"), and its backward gathers K and V again and passes the dK, dV accumulators (fp32 by torch's
  convert_to_f32) around the ring where the estimator charges one reduce-scatter; on one NVLink node the estimate's CP
  exchanges are under 0.5 % of the step;
- vocabulary 128,256 (the Llama 3 tokenizer, train.py sets vocab_size = tokenizer.n_words); the loss is
  torch.nn.functional.cross_entropy on pred.float() (train.py), not compiled at 9dec370 ("TODO: compiling loss function
  causes CUDA errors, turning off for now"): cross_entropy "torch" (12 bytes a logit at its peak, memory.LOGIT_BYTES,
  measured against torch in test_estimate_memory.py). At 820504e (the TP rows) components/loss.py compiles the loss
  with the model (build_cross_entropy_loss: torch.compile when training.compile), so those rows keep "fp32", as T7
  (the same code two days earlier) does.
TPS/GPU is torchtitan's tps, tokens per second per device (train.py: tokens / (time × non_data_parallel_size), so per
GPU under CP too), read "at the (arbitrarily determined) 90th iteration". A check of the reading: with train.py's
get_num_flop_per_token (6 × 7.50 B non-embedding parameters + 12·l·h·s = 57.9 GFLOP a token) and H100 SXM's 989
TFLOP/s, 5,762 and 6,667 give 33.7 % and 39.0 % MFU, the file's "33% to 39% MFU" for 8B without Float8. Memory(GiB) is
the one reading train.py prints, "memory: {max_reserved_gib}GiB": torch.cuda.memory_stats' reserved_bytes.all.peak
(torchtitan/metrics.py at 9dec370, get_peak_stats), the caching allocator's peak reservation, so it includes what the
allocator holds cached beyond what tensors occupy; compared with the estimator's total as T7 does
(test_estimate_more_stacks.py).

Table H3 (pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, added by #1299 in June 2025,
torchtitan 820504e, torch 38410cf9): "Llama3 8b on 64 H100s with FSDP=8, TP=8, torch.compile, per op SAC, local batch
size 12": tokens/s per GPU (the PR's table calls it "Average TPS", torchtitan's per-device tps) with vanilla TP and
async TP, in bf16 and "float8 tensorwise". From torchtitan at 820504e: torchtitan/models/llama3/train_configs/
llama3_8b.toml (sequence 8,192; selective, "op"), models/llama3/parallelize_llama.py (apply_tp: SequenceParallel for
the norms, Colwise/Rowwise for the projections: sequence_parallel on; loss parallel on, the default; the same per-op
_save_list; FSDP2 with reduce_dtype float32), models/attention.py (SDPA with FLASH_ATTENTION first, cuDNN only on
compute capability 10: fa2), components/loss.py (the loss compiled with the model). Float8 tensorwise: precision
"fp8"; the FSDP float8 all-gather is taken as on, as docs/float8.md at 820504e launches tensorwise training (the
toml leaves it off: assumption). Global batch 12 × 8 = 96, no accumulation.
How the TP rows map onto the estimator's overlap_tp_comm, which is Megatron's: with it on, TP's backward collectives run
beside the weight-gradient GEMMs and only what outlasts them is exposed; forward's are exposed either way
(cost.py, compute.layer_time). Vanilla TP in torchtitan is DTensor's redistributions, each all-gather or reduce-scatter
waited for by the op that consumes it; torchtitan at 820504e sets no inductor option that would move them beside other
work (of torch._inductor.config it sets only _micro_pipeline_tp, for async TP): overlap_tp_comm off, every TP
collective exposed (assumption: what inductor's default order leaves beside them is not counted). Async TP
(torch._inductor's micro-pipeline TP, enabled by apply_tp with enable_symm_mem_for_group) decomposes
all-gather + matmul and matmul + reduce-scatter into chunks whose copies overlap the matmul, forward and backward. The
estimator cannot express that: the async rows are entered with overlap_tp_comm on, the closest input it has, which hides
backward TP communication behind the weight gradients and leaves forward's exposed; they are the estimator's "vanilla TP
with Megatron's backward overlap", not a model of async TP, and are kept so that the table shows what it predicts for
them. Not inputs either: Float8ColwiseParallel all-gathers its input in FP8 (the estimator moves TP activations in
bf16), and per-op SAC may replay the forward all-gathers (all_gather_into_tensor is not in the _save_list).
Left out: the "float8 rowwise" rows (3,708.5 and 3,914.9): row-wise scaled FP8 (a scale per row, the GEMM run by a
different kernel, TP communication in high precision: docs/float8.md) is not an input; precision "fp8" is per-tensor
scaling. The 70B and 405B tables of the same files are not in this module.

Where the rows land (scripts/estimate_breakdown.py-style reading, recorded when entered): H1 within 9 %, too slow; the
eager rows' compute is 90 % of the step, the exposed ZeRO-3 gathers 1-2 %. H2: the 32k and 64k rows too slow (-12 %,
-21 %), 128k and 256k too fast (+3 %, +6 %), with compute 94-97 % of the estimated step and attention (forward, its
replay, backward: FA2 at 209 TFLOP/s forward on this GPU) 72, 84, 91 and 95 % of a layer's compute. No one attention
rate meets all four: the published step from 64k to 128k (2,540 -> 1,071 tokens/s, x 0.42) is steeper than a step of
attention alone allows (tokens/s per GPU halves when the sequence doubles: x 0.5) and than the estimate's (x 0.55).
H3: within 9 %, too fast; TP communication is 20 % of the vanilla step (0.55 of 2.70 s, bf16). The async/vanilla
ratio comes out 1.11 (bf16) and 1.10 (fp8) against the published 1.10 and 1.10, by a different mechanism (backward
overlap only, against async TP's forward and backward), so the agreement is not evidence that async TP is modelled.
Memory: the estimate is 18-36 % below every published reading. Two parts, neither fitted: (1) the reading is the
allocator's reserved peak, not the tensors' (T7's, the same reading on torchtitan of June 2025, whose loss is compiled
with the model, components/loss.py, is 6-8 % below the estimate);
(2) at 9dec370 the loss was not compiled, and torch's eager cross_entropy on pred.float() peaks in its backward at 12
bytes a logit (the saved fp32 log-softmax, the fp32 gradient coming in, the fp32 gradient it writes), measured with
torch's CPU build (the most its allocator held in F.cross_entropy(pred.float(), labels) forward and backward: 12.0
bytes a logit; test_estimate_memory.py measures it on 2,048 × 16,384 logits), where the estimator's "fp32" charges 6 (Megatron-LM's in-place backward). At 16,384 tokens
that is 11.7 GiB more, at 32,768 (Table 2) 23.5 GiB. The loss is now an input (cross_entropy "torch", the 12 bytes
measured against torch in test_estimate_memory.py) and these rows are entered with it: the compiled rows read 2-4 %
below their readings, the eager ones 10 % (eager held 5.4 GiB more than compiled in the readings; the estimator's
memory does not depend on the execution) and the CP rows 8 %: what is left is the allocator's reserve.
"""

from __future__ import annotations

import statistics
from functools import cache

import pytest

from simulations.estimate import build, estimate
from tests.unit.test_estimate_more_stacks import LLAMA, _row
from tests.unit.test_estimate_validation import _report

GPU = "h100-96gb-500w"
# "Hosts are inter-connected with backend RDMA network with 400 Gb/s per GPU", 8 GPUs a host (both benchmark files)
NETWORK_GBPS = 8 * 400

# GPUs, execution, precision (fp8: torchao Float8Linear, tensor-wise, with FSDP's float8 all-gather), published TPS/GPU,
# published GiB (torchtitan's max reserved); all: Llama 3.1 8B, sequence 8,192, local batch 2, per-op SAC
FSDP_ROWS = [  # H1: Table 1 (8 GPUs) and Table 3 (128 GPUs)
    (8, "eager", "bf16", 5762, 82.4),  # FSDP
    (8, "compiled", "bf16", 6667, 77.0),  # FSDP + torch.compile
    (8, "compiled", "fp8", 8532, 76.8),  # FSDP + torch.compile + Float8
    (128, "eager", "bf16", 5605, 67.0),
    (128, "compiled", "bf16", 6514, 62.0),
    (128, "compiled", "fp8", 8380, 61.8),
]
# CP degree (FSDP = 8 / CP), sequence, published TPS/GPU, published GiB; 8 GPUs, local batch 1, full checkpointing,
# torch.compile + Float8
CP_ROWS = [  # H2: Table 2
    (1, 32768, 3890, 83.9),
    (2, 65536, 2540, 84.2),
    (4, 131072, 1071, 84.0),
    (8, 262144, 548, 84.5),
]
# precision, async TP, published tokens/s per GPU; 64 GPUs, FSDP 8 × TP 8, torch.compile, per-op SAC, local batch 12
TP_ROWS = [  # H3: "Llama3 8b on 64 H100s with FSDP=8, TP=8"
    ("bf16", False, 4378),  # None (bfloat16), vanilla TP
    ("bf16", True, 4809.4),  # async TP
    ("fp8", False, 5078.1),  # float8 tensorwise, vanilla TP
    ("fp8", True, 5570.1),
]


def titan_8b(seq: int, gpus: int, local_batch: int, recompute: str, *, tp: int = 1, cp: int = 1, **software):
    """Llama 3.1 8B as torchtitan builds it, FSDP2 over dp·cp with gradients reduced in fp32, SDPA's flash backend."""
    layers, hidden, heads, kv_heads, ffn, vocab = LLAMA["llama3-8b"]
    precision = software.get("precision", "bf16")
    spec, hw, layout = build("custom", layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn,
                             vocab=vocab, seq_len=seq, gated_mlp=True, gpu=GPU, gpus=gpus, tp=tp, pp=1, cp=cp,
                             zero_stage=3, micro_batch=local_batch, global_batch=local_batch * gpus // (tp * cp),
                             recompute=recompute, attention_kernel="fa2", grad_reduce_dtype="fp32", fsdp="fsdp2",
                             network_gbps=NETWORK_GBPS, fp8_param_gather=precision == "fp8", **software)
    return estimate(spec, hw, layout)


def fsdp_name(gpus: int, execution: str, precision: str) -> str:
    return f"{gpus} fsdp" + (" compile" if execution == "compiled" else "") + (" fp8" if precision == "fp8" else "")


def cp_name(cp: int, seq: int) -> str:
    return f"{seq // 1024}k cp{cp}"


def tp_name(precision: str, async_tp: bool) -> str:
    return f"{precision} {'async tp' if async_tp else 'tp'}"


def fsdp_rows():
    return [_row(fsdp_name(gpus, ex, pr), gpus, tps,
                 titan_8b(8192, gpus, 2, "op", execution=ex, precision=pr, cross_entropy="torch"))
            for gpus, ex, pr, tps, _ in FSDP_ROWS]


def cp_rows():
    return [_row(cp_name(cp, seq), 8, tps,
                 titan_8b(seq, 8, 1, "full", cp=cp, cp_comm="all_gather", execution="compiled", precision="fp8",
                          cross_entropy="torch"))
            for cp, seq, tps, _ in CP_ROWS]


def tp_rows():
    # vanilla TP: every TP collective exposed; async TP: the estimator's nearest, backward TP beside weight gradients
    return [_row(tp_name(pr, async_tp), 64, tps,
                 titan_8b(8192, 64, 12, "op", tp=8, execution="compiled", precision=pr, overlap_tp_comm=async_tp))
            for pr, async_tp, tps in TP_ROWS]


# table -> (its rows, entered; the rows' names, known before anything is estimated; published GiB by row, if any)
TABLES = {
    "torchtitan Llama 3.1 8B H100 500W FSDP": (fsdp_rows, [fsdp_name(g, e, p) for g, e, p, _, _ in FSDP_ROWS],
                                               {fsdp_name(g, e, p): gib for g, e, p, _, gib in FSDP_ROWS}),
    "torchtitan Llama 3.1 8B H100 500W FSDP+CP": (cp_rows, [cp_name(c, s) for c, s, _, _ in CP_ROWS],
                                                  {cp_name(c, s): gib for c, s, _, gib in CP_ROWS}),
    "torchtitan Llama 3.1 8B H100 500W FSDP+TP": (tp_rows, [tp_name(p, a) for p, a, _ in TP_ROWS], {}),
}


@cache
def table_rows(table: str):
    return TABLES[table][0]()


# Median and worst |error| of throughput. A change that makes a table worse than this fails; one that makes it better
# moves these down. When the tables were entered (main's 476d3ae): FSDP 6.5/8.4 %, FSDP+CP 9.0/20.9 %; with the
# uncompiled loss's own passes (cross_entropy "torch", the FSDP and CP rows): the figures below.
MEASURED = {"torchtitan Llama 3.1 8B H100 500W FSDP": (0.064, 0.083),
            "torchtitan Llama 3.1 8B H100 500W FSDP+CP": (0.089, 0.209),
            "torchtitan Llama 3.1 8B H100 500W FSDP+TP": (0.066, 0.083)}
# Rows beyond the per-row target (25 %), as measured: none when entered. The xfail is not strict.
OVER_25: dict[tuple[str, str], str] = {}
# Median and worst |error| of memory (the estimator's total against torchtitan's max reserved GiB). When entered, with
# Megatron's 6 bytes a logit for the loss: FSDP 21.4/27.1 %, FSDP+CP 35.8/36.1 %, every row below the reading; with
# the loss as it ran (cross_entropy "torch", 12 bytes a logit): below, still under the readings (the reserved peak).
MEMORY_MEASURED = {"torchtitan Llama 3.1 8B H100 500W FSDP": (0.035, 0.097),
                   "torchtitan Llama 3.1 8B H100 500W FSDP+CP": (0.078, 0.083)}


def _row_params():
    for table, (_, names, _) in TABLES.items():
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


@pytest.mark.parametrize("table", list(TABLES))
def test_published_throughput_by_table(table):
    """No worse than measured (a point of median, two of worst, for rounding); the issue's target (median 10 %,
    every row 25 %) is reported as an xfail where it is not met."""
    rows = table_rows(table)
    errors = _report(f"{table} (tokens/s per GPU)", rows, "tok/s")
    median, worst = statistics.median(errors), max(errors)
    assert median <= MEASURED[table][0] + 0.01 and worst <= MEASURED[table][1] + 0.02, (median, worst)
    if not (median <= 0.10 and worst <= 0.25):
        pytest.xfail(f"{table}: median {median:.1%}, worst {worst:.1%} (target 10 % / 25 %)")


@pytest.mark.parametrize("table", list(MEMORY_MEASURED))
def test_published_memory_by_table(table):
    """The estimator's total per GPU (GiB) against torchtitan's printed max reserved GiB, no further off than measured
    (a point of median, two of worst); every row is below the reading, as the module docstring explains."""
    published = TABLES[table][2]
    rows = [(name, gpus, published[name], e.memory_per_gpu_bytes["total"] / 2**30,
             e.memory_per_gpu_bytes["total"] / 2**30 / published[name] - 1, e)
            for name, gpus, _, _, _, e in table_rows(table)]
    errors = _report(f"{table} (memory, GiB)", rows, "GiB")
    median, worst = statistics.median(errors), max(errors)
    assert median <= MEMORY_MEASURED[table][0] + 0.01 and worst <= MEMORY_MEASURED[table][1] + 0.02, (median, worst)
    assert all(r[4] < 0 for r in rows), [(r[0], f"{r[4]:+.1%}") for r in rows]


def test_the_rows_run_what_the_sources_say():
    """The entries' inputs, read back from the estimates: FSDP2 over every GPU (dp·cp), fp32 gradient reduction, the
    catalog's Grand Teton H100 on 8 × 400 Gb/s a node, torch.compile and Float8 where the row says so, and the TP rows
    on sequence parallelism with Megatron's backward overlap only for async TP."""
    for table in TABLES:
        for name, gpus, _, _, _, e in table_rows(table):
            assert e.cluster.gpu.name == GPU and e.layout.zero_stage == 3 and e.layout.grad_reduce_bytes == 4
            assert e.as_dict()["network_gbps"] == pytest.approx(NETWORK_GBPS)
            float8 = "CP" in table or "fp8" in name  # every CP row ran Float8
            assert (e.layout.precision == "fp8") == e.layout.fp8_param_gather == float8, name
            assert (e.layout.executes == "compiled") == ("FSDP+" in table or "compile" in name), name
    for name, _, _, _, _, e in table_rows("torchtitan Llama 3.1 8B H100 500W FSDP+TP"):
        assert e.layout.tp == 8 and e.dp == 8 and e.layout.sequence_parallel
        assert e.layout.overlap_tp_comm == ("async" in name)
    for name, _, _, _, _, e in table_rows("torchtitan Llama 3.1 8B H100 500W FSDP+CP"):
        assert e.layout.cp * e.dp == 8 and e.layout.cp_comm == "all_gather" and e.layout.recompute == "full"


def test_async_tp_rows_are_the_vanilla_rows_with_backward_overlap():
    """What the estimator can say about async TP: the same run with TP's backward collectives beside the weight
    gradients, so each async row is predicted faster than its vanilla row by no more than the exposed backward TP
    time (forward TP stays exposed: the estimator has no input for async TP's forward overlap)."""
    rows = {name: e for name, _, _, _, _, e in table_rows("torchtitan Llama 3.1 8B H100 500W FSDP+TP")}
    for precision in ("bf16", "fp8"):
        vanilla, overlapped = rows[tp_name(precision, False)], rows[tp_name(precision, True)]
        assert overlapped.step_time_s < vanilla.step_time_s
        assert vanilla.step_time_s - overlapped.step_time_s <= vanilla.exposed_by_kind["tp"] + 1e-9
        assert overlapped.exposed_by_kind["tp"] > 0  # forward's TP communication is still on the critical path
