"""The estimator against torchtitan's multi-dimensional runs on Meta's Grand Teton H100s (96 GB HBM2e, 500 W): Llama
3.1 70B on FSDP × TP and 405B on FSDP × TP × PP (× CP), a stack (PyTorch FSDP2, DTensor TP,
torch.distributed.pipelining, torch.compile, torchao Float8) the estimator was not built on.

Each row is entered as a user would with `distdeck estimate` (simulations.estimate.build, the CLI's and the API's
path), on the catalog's gpu "h100-96gb-500w" and its node network (8 × 400 Gb/s RDMA, as both sources publish: "400
Gb/s per GPU"), with what the sources say the runs ran; where a detail is not published, the comment beside it says
what is assumed. Published: tokens per second per GPU (torchtitan's train.py divides the tokens of its data-parallel
rank by the step time and by cp·tp·pp, parallel_dims.non_data_parallel_size: tokens of the whole job per GPU) and,
for the 2024 tables, memory in GiB (train.py logs `max_reserved_gib`, the caching allocator's reserved peak, "the
maximum across all GPUs" for PP, the benchmark's footnote 1). The error is predicted over published, minus one ("+":
the estimator is too fast / holds too much). Nothing here is fitted: the rows are only compared against.

Sources. (1) pytorch/torchtitan, benchmarks/llama3_h100_202412_torchtitan.md (torchtitan 9dec370, 2024-12-26; torch
1963fc8, torchao eab345c, 2024-12-23), Table 4: 70B, 256 GPUs, FSDP 32 × TP 8, torch.compile + Float8, local batch 16,
global 512, full activation checkpointing, "2D" and "2D + AsyncTP"; Table 5: 405B, 512 GPUs, FSDP 8 × TP 8 × PP 8,
compile + Float8 + AsyncTP, local batch 32, global 256, full AC, schedules 1F1B and Interleaved 1F1B; Table 6: 405B,
512 GPUs, TP 8, PP 8, 1F1B, compile + Float8 + AsyncTP, local batch 8, full AC, FSDP × CP = 8 with CP 1, 2, 4, 8 at
sequence 32,768 × CP. (2) benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (added in 2887250, torchtitan
820504e, torch 38410cf, June 2025): "Llama3 70b on 256 H100s with FSDP=32, TP=8, torch.compile, full AC, local batch
size 16", "None (bfloat16)" and "float8 tensorwise", vanilla and async TP (tokens/s only; no memory published).

What the rows ran, read from torchtitan at those commits:
- Model: torchtitan/models/llama/__init__.py (9dec370): 70B dim 8,192, 80 layers, 64 heads, 8 KV heads,
  ffn_dim_multiplier 1.3, multiple_of 4,096 -> FeedForward's hidden int(1.3 · int(2 · 4 · 8,192 / 3)) rounded up to
  4,096: 28,672; 405B dim 16,384, 126 layers, 128 heads, 8 KV heads, multiplier 1.2 -> 53,248: the presets' shapes;
  the vocabulary is torchtitan's tokenizer's 128,256 (the presets' 128,000 is the paper's round figure), entered.
  Sequence 8,192 (train_configs/llama3_70b.toml and llama3_405b.toml at both commits).
- Activation checkpointing "full": checkpoint_wrapper around every TransformerBlock (parallelize_llama.py,
  _apply_ac_to_transformer_block): recompute "full".
- Attention: F.scaled_dot_product_attention(is_causal=True) (models/llama/model.py at 9dec370; at 820504e
  models/attention.py lists FLASH_ATTENTION first), whose flash backend is FlashAttention-2 and which on H100 does not
  pick cuDNN since pytorch#138522 (2024-10-22, "Make CuDNN Attention Opt in"; pytorch#142132, Dec. 2024 nightly:
  "SDPA is not automatically choosing CUDNN"): attention_kernel "fa2".
- TP: apply_tp's plan (parallelize_llama.py): wq/wk/wv/w1/w3 colwise, wo/w2 rowwise with Shard(1) outputs and
  SequenceParallel norms: sequence_parallel; loss parallel (the output layer's logits stay vocabulary-sharded).
- Float8: torchtitan/float8.py (9dec370): torchao Float8Linear, dynamic tensorwise scaling (the only scaling it then
  supported), the output layer filtered out: precision "fp8". llama3_405b.toml sets enable_fsdp_float8_all_gather
  (and precompute_float8_dynamic_scale_for_fsdp): fp8_param_gather. Table 4's 70B rows say only "Float8"; they are
  taken to have run the same float8 options as the 405B config and docs/float8.md's command at 9dec370
  (--float8.enable_fsdp_float8_all_gather --float8.precompute_float8_dynamic_scale_for_fsdp), as are the 2025 "float8
  tensorwise" rows (torchao's tensorwise recipe; its float8 README of the same author, pytorch/ao#1793, runs
  tensorwise "with float8 all-gather"). Assumption; with it off the 70B rows move by 0.2 % (the gathers are hidden).
- Execution "compiled": compile applied per TransformerBlock (apply_compile). Gradients reduced in fp32
  (config_manager.py: mixed_precision_reduce "float32", the only choice), FSDP2 (fully_shard): fsdp "fsdp2".
- FSDP without PP (the 70B rows): fully_shard per block over the 32-rank dp_shard mesh, reshard_after_forward True
  but for the last block: ZeRO-3 (zero_stage 3). No gradient accumulation existed (a local batch is one step's
  micro-batch): micro_batch 16, global 512.
- FSDP with PP (the 405B rows): apply_fsdp sets reshard_after_forward False for every block with PP ("to avoid
  per-microbatch all-gathers"), and torch.distributed.pipelining's stage (backward_maybe_with_nosync, since
  pytorch#134052, Aug. 2024) runs every backward with set_reshard_after_backward(False) and
  set_requires_gradient_sync(False), then calls each FSDP group's post_backward after the stage's last micro-batch
  (as pytorch#144535, Jan. 2025, describes the code it fixed: "FSDP's hooks are manually disabled before invoking
  either type of backward, and then the hooks are manually triggered").
  So a stage's weights are gathered once a step (the first micro-batch's forward) and held unsharded, the gradients
  accumulated unsharded (FSDP2 upcasts them to the fp32 reduce dtype, to_accumulated_grad_if_needed) and
  reduce-scattered once, after the last backward: ZeRO-1 in time and memory (PR pytorch#124319 calls exactly this
  pattern "ZeRO-1"), entered as zero_stage 1 over the FSDP mesh; overlap_grad_reduce False (the reduce-scatters are
  issued after the stage's last backward, nothing computes beside them on the first stage); grad_accumulation_fusion
  False (each micro-batch's bf16 gradient is added into the fp32 accumulator by a pass of its own). Entered as
  zero_stage 3 instead the estimator would gather every micro-batch and hold 34 GiB against the published 83 and 73.
- PP: pipeline_llama.py / pipelining_utils.py (9dec370): pipeline_parallel_microbatches defaults to the PP degree, 8,
  so the micro-batch is the local batch / 8 (4 in Table 5, 1 in Table 6); "1F1B" is torch's Schedule1F1B (schedule
  "1f1b"), "Interleaved 1F1B" its ScheduleInterleaved1F1B, a PipelineScheduleMulti, for which generate_split_points
  makes 2 stages a rank: schedule "interleaved_1f1b", virtual_stages 2. Its split gives the first and last stage one
  layer fewer ([15, 16 × 6, 15] over 8 stages, [7, 8 × 14, 7] over 16); the estimator gives every stage the busiest
  count (16 or 8) with the embedding and the output layer on top, a few per cent slow on the end stages.
- CP (Table 6): torch's context_parallel with torchtitan's default context_parallel_rotate_method "allgather"
  ("all-gather all kv shards on ranks after the first sub-SDPA computation"): cp_comm "all_gather". torchtitan's mesh
  order (parallel_dims.build_mesh: pp, dp_shard, cp, tp, the last fastest) is the estimator's (TP, CP, DP, PP). The
  global batch is local batch 8 × dp_shard (FSDP 8 / CP): 64, 32, 16, 8 sequences.
- TP, vanilla against async (overlap_tp_comm). The estimator's overlap_tp_comm is Megatron's: TP's backward collectives
  run beside the weight-gradient GEMMs; its forward TP collectives are always on the critical path. Vanilla TP in
  torchtitan issues DTensor's redistributions in program order: in the compiled backward the input gradient's
  reduce-scatter follows the matmul node (MmBackward) that computes both gradients, and Inductor's comm/compute
  reordering (reorder_for_compute_comm_overlap) is off by default, so nothing runs beside the collectives:
  overlap_tp_comm False. Async TP (torch's micro-pipeline TP, Inductor's _micro_pipeline_tp pass over symmetric
  memory) splits the all-gather before Q/K/V and the FFN up-projection, and the reduce-scatter after O and the FFN
  down-projection, into chunks overlapped with those very matmuls, in forward and in backward: entered as
  overlap_tp_comm True, which hides the backward collectives; the forward overlap is not an input of the estimator,
  so async rows keep their forward TP time and should come out too slow by up to it (the bf16/fp8 async rows:
  -11 %/-16 % against the vanilla rows' -8 %/-9 %). Table 5 and 6 ran async TP.
- Also not inputs (left as the estimator has them): torchao's Float8ColwiseParallel all-gathers the layer inputs in
  float8 (docs/float8.md at 9dec370: "we cast sharded input into float8 and perform float8 all-gather"), where the
  estimator moves bf16 (a quarter of its forward TP bytes too many on the fp8 rows); dynamic scaling's amax passes
  (the estimator's FP8 casts assume delayed scaling); torchtitan's optimizer is torch's foreach AdamW
  (optimizer.fused False), where "compiled" charges a fused Adam (under 0.1 % of these steps).

Left out: the "float8 rowwise" row of the 2025 table: row-wise (and block-) scaled FP8 is not an input of the
estimator (its fp8 is per-tensor), and that row's own note says its vanilla TP baseline was slow for a reason being
fixed (torchtitan#1207). The 8B rows of both documents are helper h21tt8's table.

Memory (Tables 4-6; the estimator's total without the allocator's fragmentation, against the reserved peak):
predicted too low, most on the 70B rows. The PP rows hold what ZeRO-1 holds (bf16 stage weights, fp32 accumulated
gradients, sharded Adam); torchao's float8 all-gather leaves FSDP's unsharded weights in float8, 1 byte where the
estimator's ZeRO-1 keeps 2, which would make them lower still. The loss: at 9dec370 (Tables 4-6) it is not compiled,
and with TP torchtitan's cross entropy runs under loss_parallel, DTensor's op-by-op log-softmax and its fused backward
(torch/distributed/tensor/parallel/loss.py): 16 bytes a logit at the backward's start (14 in the forward), entered as
cross_entropy "loss_parallel" (memory.LOGIT_BYTES, measured against torch in test_estimate_memory.py); at 820504e (the
June 2025 rows, no memory published) the loss is compiled with the model and is entered as "fp32", as T7. Entered with
Megatron's 6 bytes a logit, memory read 19.1/42.5 % (70B -42.5 and -38.8 %); with the loss as it ran, 15.1/24.0 %
(70B -15.2 and -9.9 %), still below every reading: the rest is the allocator's reserve over what tensors hold, and
the PP rows' last stage also keeps the stage's bf16 output through its backward (no `del pred` inside the schedule),
2 bytes a logit more, not an input.
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

TABLE = "torchtitan Llama 3.1 H100 500W 2D-4D"
GPU = "h100-96gb-500w"
VOCAB = 128256  # torchtitan's Llama 3 tokenizer
SEQ = 8192  # train_configs/llama3_70b.toml, llama3_405b.toml

# name, precision, async TP, published tokens/s per GPU, published GiB (None: not published)
LLAMA_70B_2D = [  # 256 GPUs, FSDP 32 × TP 8, compile, full AC, local batch 16, global 512
    ("70b fp8 tp", "fp8", False, 829, 71.9),  # Table 4 "2D" (Dec. 2024)
    ("70b fp8 async-tp", "fp8", True, 876, 67.6),  # Table 4 "2D + AsyncTP"
    ("70b bf16 tp '25", "bf16", False, 597.3, None),  # asyncTP benchmark (June 2025), "None (bfloat16)"
    ("70b bf16 async-tp '25", "bf16", True, 652.4, None),
    ("70b fp8 tp '25", "fp8", False, 809.8, None),  # "float8 tensorwise"
    ("70b fp8 async-tp '25", "fp8", True, 942.4, None),
]
# name, schedule, stages a rank, CP, sequence, local batch, published tokens/s per GPU, published GiB
LLAMA_405B_3D_4D = [  # 512 GPUs, TP 8 × PP 8, FSDP × CP = 8, compile, Float8, async TP, full AC
    ("405b pp 1f1b", "1f1b", 1, 1, SEQ, 32, 100, 82.5),  # Table 5, FSDP 8, global 256
    ("405b pp interleaved", "interleaved_1f1b", 2, 1, SEQ, 32, 128, 72.7),
    ("405b cp1 32k", "1f1b", 1, 1, 32768, 8, 76, 75.3),  # Table 6, FSDP 8 / CP
    ("405b cp2 64k", "1f1b", 1, 2, 65536, 8, 47, 75.9),
    ("405b cp4 128k", "1f1b", 1, 4, 131072, 8, 31, 77.1),
    ("405b cp8 256k", "1f1b", 1, 8, 262144, 8, 16, 84.9),
]
PP = 8  # pipeline_parallel_degree; pipeline_parallel_microbatches defaults to it (pipelining_utils.py)
FSDP_CP = 8  # FSDP × CP of the 405B runs


def torchtitan_70b(precision: str, async_tp: bool, loss: str = "fp32"):
    """A 70B row: FSDP2 ZeRO-3 over 32 ranks × TP 8 (the module docstring says why each input)."""
    spec, hw, layout = build("llama3-70b", vocab=VOCAB, seq_len=SEQ, gpu=GPU, gpus=256, tp=8, pp=1, zero_stage=3,
                             micro_batch=16, global_batch=16 * 32, recompute="full", sequence_parallel=True,
                             attention_kernel="fa2", precision=precision, fp8_param_gather=precision == "fp8",
                             execution="compiled", fsdp="fsdp2", grad_reduce_dtype="fp32", overlap_tp_comm=async_tp,
                             cross_entropy=loss)
    return estimate(spec, hw, layout)


def torchtitan_405b(schedule: str, virtual: int, cp: int, seq: int, local_batch: int):
    """A 405B row: TP 8 × PP 8 (× CP), FSDP2 over each stage's FSDP mesh, which under PP holds the stage gathered from
    the first micro-batch to the last backward (ZeRO-1), async TP."""
    dp = FSDP_CP // cp
    spec, hw, layout = build("llama3-405b", vocab=VOCAB, seq_len=seq, gpu=GPU, gpus=512, tp=8, pp=PP, cp=cp,
                             cp_comm="all_gather", zero_stage=1, schedule=schedule, virtual_stages=virtual,
                             micro_batch=local_batch // PP, global_batch=local_batch * dp, recompute="full",
                             sequence_parallel=True, attention_kernel="fa2", precision="fp8", fp8_param_gather=True,
                             execution="compiled", fsdp="fsdp2", grad_reduce_dtype="fp32", overlap_tp_comm=True,
                             overlap_grad_reduce=False, grad_accumulation_fusion=False, cross_entropy="loss_parallel")
    return estimate(spec, hw, layout)


def _row(name: str, gpus: int, published: float, e):
    predicted = e.tokens_per_s / gpus
    return name, gpus, published, predicted, predicted / published - 1, e


@cache
def table_rows():
    """Every row, entered: (name, GPUs, published tokens/s per GPU, predicted, error, Estimate), as
    test_estimate_more_stacks.table_rows gives them (the shape trust.py's tables are registered from)."""
    # Table 4 ran 9dec370, whose loss is eager under loss_parallel; the June 2025 rows ran 820504e, which compiles it
    rows = [_row(name, 256, published, torchtitan_70b(precision, async_tp,
                                                      "fp32" if name.endswith("'25") else "loss_parallel"))
            for name, precision, async_tp, published, _ in LLAMA_70B_2D]
    rows += [_row(name, 512, published, torchtitan_405b(schedule, virtual, cp, seq, batch))
             for name, schedule, virtual, cp, seq, batch, published, _ in LLAMA_405B_3D_4D]
    return rows


def memory_rows():
    """The rows with published memory: (name, published GiB, predicted GiB, error)."""
    published = {name: gib for name, *_, gib in LLAMA_70B_2D + LLAMA_405B_3D_4D if gib is not None}
    out = []
    for name, *_, e in table_rows():
        if name in published:
            predicted = e.memory_per_gpu_bytes["total"] / 2**30
            out.append((name, published[name], predicted, predicted / published[name] - 1))
    return out


# Median and worst |error| of throughput and of memory. `-s` prints the rows. A change that makes either worse than this
# fails; one that makes it better moves these down. When the table was entered (on 476d3ae): 8.7/15.5 % and memory
# 19.1/42.5 % (70B -42.5 and -38.8 %), all of it below the readings, with every loss charged Megatron's 6 bytes a
# logit; the Dec. 2024 rows' loss as it ran, eager under loss_parallel (16 bytes a logit, memory.LOGIT_BYTES): memory
# 15.1/24.0 % (70B -15.2 and -9.9 %), throughput unchanged to a tenth of a point.
MEASURED = (0.087, 0.155)
MEMORY_MEASURED = (0.151, 0.240)
# Rows beyond the per-row target (25 %), as measured; the xfail is not strict.
OVER_25: dict[str, str] = {}
MEMORY_OVER_25: dict[str, str] = {}


@pytest.mark.parametrize("name", [r[0] for r in LLAMA_70B_2D + LLAMA_405B_3D_4D])
def test_each_published_nd_run_within_25_percent_and_fits(name, request):
    """The issue's per-row target: every row within 25 %, and a run that ran is predicted to fit (the published
    layouts are all accepted: none raises LayoutError)."""
    if name in OVER_25:
        request.applymarker(pytest.mark.xfail(reason=f"measured {OVER_25[name]} (target 25 %)", strict=False))
    row = next(r for r in table_rows() if r[0] == name)
    held = row[5].memory_per_gpu_bytes["total"] / 2**30
    assert row[5].fits, f"{name} ran but is predicted not to fit: {held:.1f} GiB"
    assert abs(row[4]) <= 0.25, f"{name}: {row[4]:+.1%}"


def test_published_nd_throughput():
    """No worse than measured (a point of median, two of worst, for rounding); the issue's target (median 10 %,
    every row 25 %) reported as an xfail where it is not met."""
    errors = _report(f"{TABLE} (tokens/s per GPU)", table_rows(), "tok/s")
    median, worst = statistics.median(errors), max(errors)
    assert median <= MEASURED[0] + 0.01 and worst <= MEASURED[1] + 0.02, (median, worst)
    if not (median <= 0.10 and worst <= 0.25):
        pytest.xfail(f"{TABLE}: median {median:.1%}, worst {worst:.1%} (target 10 % / 25 %)")


def test_published_nd_memory():
    """Predicted against published memory (GiB, torchtitan's max reserved) of Tables 4-6: no further off than measured
    when the table was entered (the module docstring says where the estimator is short)."""
    rows = memory_rows()
    print(f"\n{TABLE} (memory, GiB)")
    for name, published, predicted, error in rows:
        print(f"{name:>22} {published:>8.1f} {predicted:>8.1f} {error:>+7.1%}")
    errors = [abs(r[3]) for r in rows]
    median, worst = statistics.median(errors), max(errors)
    print(f"median |error| {median:.1%}, worst {worst:.1%}")
    assert len(rows) == 8
    assert median <= MEMORY_MEASURED[0] + 0.01 and worst <= MEMORY_MEASURED[1] + 0.02, (median, worst)


@pytest.mark.parametrize("name", [r[0] for r in LLAMA_70B_2D + LLAMA_405B_3D_4D if r[-1] is not None])
def test_each_published_nd_memory_within_25_percent(name, request):
    if name in MEMORY_OVER_25:
        request.applymarker(pytest.mark.xfail(reason=f"measured {MEMORY_OVER_25[name]} (target 25 %)", strict=False))
    _, published, predicted, error = next(r for r in memory_rows() if r[0] == name)
    assert abs(error) <= 0.25, f"{name}: {predicted:.1f} GiB against {published} ({error:+.1%})"


def test_interleaving_gains_what_torchtitan_measured():
    """Table 5's Interleaved 1F1B (two stages a rank) against 1F1B, 8 micro-batches on 8 stages: the bubble, p − 1
    micro-batches' time, halves (7/15 of the step against 3.5/11.5); published 128 against 100 tokens/s, the estimator
    within a tenth of that ratio, and faster for the same reason (its bubble fraction lower)."""
    rows = {r[0]: r for r in table_rows()}
    one, two = rows["405b pp 1f1b"], rows["405b pp interleaved"]
    assert two[5].bubble_fraction < one[5].bubble_fraction
    assert two[3] / one[3] == pytest.approx(two[2] / one[2], rel=0.1)


def test_async_tp_rows_faster_but_no_faster_than_hiding_all_tp():
    """Async TP entered as overlap_tp_comm: each async row is faster than its vanilla row, and by no more than the
    vanilla row's exposed TP time (what hiding every TP collective could give); published async speedups 1.06-1.16."""
    rows = {r[0]: r for r in table_rows()}
    for vanilla, overlapped in (("70b fp8 tp", "70b fp8 async-tp"), ("70b bf16 tp '25", "70b bf16 async-tp '25"),
                                ("70b fp8 tp '25", "70b fp8 async-tp '25")):
        slow, fast = rows[vanilla][5], rows[overlapped][5]
        assert fast.step_time_s < slow.step_time_s
        assert slow.step_time_s - fast.step_time_s <= slow.exposed_by_kind["tp"]


def test_fsdp_under_pipeline_holds_the_stage_as_zero_1():
    """The PP rows' FSDP entered as ZeRO-1 (module docstring): a GPU holds its stage's weights in bf16 and their fp32
    accumulated gradients whole, and 1/8 of Adam's 12 bytes; as ZeRO-3 it would hold two layers and, against the
    published 82.5 and 72.7 GiB, under half of it."""
    e = next(r for r in table_rows() if r[0] == "405b pp 1f1b")[5]
    mem, params = e.memory_per_gpu_bytes, e.model.layer_params() / 8 * 16  # the busiest stage's 16 layers, TP 8
    assert mem["gradients"] >= 4 * params and mem["parameters"] >= 2 * params
    assert mem["optimizer"] == pytest.approx(12 * (params + e.model.vocab * e.model.hidden / 8) / 8, rel=0.01)


def test_a_pipelined_row_typed_into_distdeck_estimate_is_the_rows_estimate():
    """The rows go in through the CLI's path: Table 5's Interleaved 1F1B row typed as a user would gives the same
    throughput, with every software input the row sets."""
    flags = ["estimate", "--model", "llama3-405b", "--vocab", "128256", "--seq-len", "8192", "--gpu", GPU, "--gpus",
             "512", "--tp", "8", "--pp", "8", "--zero-stage", "1", "--schedule", "interleaved_1f1b",
             "--virtual-stages", "2", "--micro-batch", "4", "--global-batch", "256", "--recompute", "full",
             "--attention-kernel", "fa2", "--precision", "fp8", "--fp8-param-gather", "--execution", "compiled",
             "--fsdp", "fsdp2", "--grad-reduce-dtype", "fp32", "--overlap-tp-comm", "--no-overlap-grad-reduce",
             "--no-grad-accumulation-fusion", "--cross-entropy", "loss_parallel", "--json"]
    typed = CliRunner().invoke(cli, flags)
    assert typed.exit_code == 0, typed.output
    row = next(r for r in table_rows() if r[0] == "405b pp interleaved")
    assert json.loads(typed.output)["tokens_per_s"] / 512 == pytest.approx(row[3], rel=1e-9)
