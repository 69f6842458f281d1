"""The estimator against published end-to-end training measurements, row by row.

Nothing here is fitted: the hardware fractions come from microbenchmarks (simulations/estimate/
hardware.py); the rows below are only compared against.

Table A: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC 2021 (arXiv:2104.04473), Table 1: GPT models on A100 80 GB (Selene: 8 GPUs per node,
8 × 200 Gb/s HDR InfiniBand), sequence 2048, vocabulary 51,200, fp16, full activation recomputation.
Micro-batch sizes, interleaving (layers per virtual stage) and the data-parallel implementation
(torch DDP, which overlaps the gradient all-reduce with backward, for the four smallest; Megatron's
local DDP, reducing after backward, for the others) from the paper's reproduction scripts,
NVIDIA/Megatron-LM examples/sc21/run_table_1.sh. Tensor parallelism's backward all-reduce waits for the
input gradient: overlapping it with the weight gradients came with Korthikanti et al. (2022, sec. 6.2). Published: achieved teraFLOP/s per GPU, counted with
the paper's eq. 3, F = 96·B·s·l·h²·(1 + s/6h + V/16lh) per iteration.

Table B: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023
(arXiv:2205.05198), Table 3 (configurations) and Table 5 (end-to-end iteration time): the same A100
cluster, tensor parallel 8, no data parallelism, interleaving with 3 stages for 175B and 530B;
"full recompute" (no sequence parallelism) and "present work" (sequence parallelism + selective
recomputation). Published: seconds per iteration.

Table C: NVIDIA DGX Cloud benchmarking recipes (NVIDIA/dgxc-benchmarking, llama3.1/README_70b.md and
README_405b.md, NeMo 24.09, BF16): Llama 3.1 70B with TP 4, PP 4, CP 2, VP 5, micro-batch 1, global batch
2 × GPUs, 64 to 2,048 H100s; Llama 3.1 405B with TP 8, PP 9, CP 2, VP 7, micro-batch 1, global batch 252 per
576 GPUs, at the full-model scales (576 to 2,304 H100s); sequence 8,192. Published: seconds per step. The
405B recipe trains with the GPT-2 BPE tokenizer as a proxy (its README): vocabulary 50,257, which
Megatron pads to a multiple of 128 × TP (51,200); the 70B one with Llama 3's 128,256 (padded: 128,512).

The 2021-22 software: Megatron-LM's pipeline sends then blocked both ranks (batched send/recv, wait, then
torch.cuda.synchronize(), p2p_communication._communicate) for tables A and B; table A's code also added each
micro-batch's weight gradients to the accumulator in a backward hook (param.main_grad.add_(param.grad)),
before gradient-accumulation fusion folded that into the GEMM (Megatron-LM 2022, with Korthikanti et al.'s
work, so table B runs fused).

The issue's target is every row within 15 % and the median within 10 %: all three tables meet both (`-s`
prints them). tests/unit/test_estimate_heldout.py holds further published runs the estimator was not built on.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from simulations.estimate import MODELS, Layout, cluster, estimate, gpt

SEQ, VOCAB = 2048, 51200

# params (B), heads, hidden, layers, TP, PP, GPUs, batch, micro-batch, v, DDP overlaps, published TFLOP/s per GPU
NARAYANAN_TABLE_1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 16, 1, True, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 16, 1, True, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 16, 1, True, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 8, 1, True, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 4, 1, False, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 2, 3, False, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 2, 2, False, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 1, 2, False, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 1, 3, False, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 1, 1, False, 163),
]

# name, heads, hidden, layers, TP, PP, GPUs, batch, micro-batch, v, seconds (full recompute), seconds (present work)
KORTHIKANTI_TABLE_5 = [
    ("22B", 64, 6144, 48, 8, 1, 8, 4, 4, 1, 1.42, 1.10),
    ("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 3, 18.13, 13.75),
    ("530B", 128, 20480, 105, 8, 35, 280, 280, 1, 3, 49.05, 37.83),
    ("1T", 160, 25600, 128, 8, 64, 512, 512, 1, 1, 94.42, 71.49),
]


# model, vocabulary (padded), TP, PP, CP, VP, GPUs, global batch, published seconds per step
NEMO_H100_BF16 = [
    ("llama3-70b", 128512, 4, 4, 2, 5, 64, 128, 14.72),
    ("llama3-70b", 128512, 4, 4, 2, 5, 128, 256, 14.73),
    ("llama3-70b", 128512, 4, 4, 2, 5, 256, 512, 14.80),
    ("llama3-70b", 128512, 4, 4, 2, 5, 512, 1024, 14.89),
    ("llama3-70b", 128512, 4, 4, 2, 5, 1024, 2048, 14.92),
    ("llama3-70b", 128512, 4, 4, 2, 5, 2048, 4096, 14.98),
    ("llama3-405b", 51200, 8, 9, 2, 7, 576, 252, 17.20),
    ("llama3-405b", 51200, 8, 9, 2, 7, 1152, 504, 17.52),
    ("llama3-405b", 51200, 8, 9, 2, 7, 2304, 1008, 17.62),
]


def narayanan_rows():
    rows = []
    for params, heads, hidden, layers, tp, pp, gpus, batch, mb, v, overlap, published in NARAYANAN_TABLE_1:
        layout = Layout(tp=tp, pp=pp, zero_stage=0, schedule="interleaved_1f1b" if v > 1 else "1f1b",
                        virtual_stages=v, micro_batch=mb, global_batch=batch, recompute="full",
                        sequence_parallel=False, overlap_grad_reduce=overlap, overlap_tp_comm=False,
                        overlap_p2p_comm=False, grad_accumulation_fusion=False)
        e = estimate(gpt(layers, hidden, heads), cluster("a100-80gb", gpus), layout)
        flops = 96 * batch * SEQ * layers * hidden**2 * (1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))
        predicted = flops / e.step_time_s / gpus / 1e12
        rows.append((f"{params}B", gpus, published, predicted, predicted / published - 1, e))
    return rows


def korthikanti_rows():
    rows = []
    for name, heads, hidden, layers, tp, pp, gpus, batch, mb, v, t_full, t_present in KORTHIKANTI_TABLE_5:
        for recompute, sp, published in (("full", False, t_full), ("selective", True, t_present)):
            layout = Layout(tp=tp, pp=pp, zero_stage=0, schedule="interleaved_1f1b" if v > 1 else "1f1b",
                            virtual_stages=v, micro_batch=mb, global_batch=batch, recompute=recompute,
                            sequence_parallel=sp, overlap_p2p_comm=False)
            e = estimate(gpt(layers, hidden, heads), cluster("a100-80gb", gpus), layout)
            # throughput error: published time / predicted time − 1
            rows.append((f"{name} {recompute}", gpus, published, e.step_time_s, published / e.step_time_s - 1, e))
    return rows


def nemo_rows():
    rows = []
    for name, vocab, tp, pp, cp, v, gpus, batch, published in NEMO_H100_BF16:
        model = replace(MODELS[name], vocab=vocab, seq_len=8192)
        layout = Layout(tp=tp, pp=pp, cp=cp, zero_stage=1, schedule="interleaved_1f1b", virtual_stages=v,
                        micro_batch=1, global_batch=batch, recompute="selective")
        e = estimate(model, cluster("h100-80gb", gpus), layout)
        rows.append((f"{name[7:]} ×{gpus}", gpus, published, e.step_time_s, published / e.step_time_s - 1, e))
    return rows


def _report(title, rows, unit):
    print(f"\n{title}\n{'row':>16} {'GPUs':>6} {'published':>10} {'predicted':>10} {'error':>7}")
    for name, gpus, published, predicted, error, _ in rows:
        print(f"{name:>16} {gpus:>6} {published:>10.2f} {predicted:>10.2f} {error:>+7.1%}  {unit}")
    errors = [abs(r[4]) for r in rows]
    print(f"{'median |error|':>16} {statistics.median(errors):.1%}, worst {max(errors):.1%}")
    return errors


def test_narayanan_table_1_throughput_per_gpu():
    rows = narayanan_rows()
    errors = _report("Narayanan et al. SC'21 Table 1 (TFLOP/s per GPU)", rows, "TFLOP/s")
    assert all(r[5].fits for r in rows)  # every published layout fits in 80 GB in the model too
    assert max(errors) <= 0.15  # the target, met
    assert statistics.median(errors) <= 0.10


def test_korthikanti_table_5_iteration_time():
    rows = korthikanti_rows()
    errors = _report("Korthikanti et al. Table 5 (seconds per iteration; error in throughput)", rows, "s")
    assert max(errors) <= 0.15  # the target, met
    assert statistics.median(errors) <= 0.10
    # the paper's own finding holds in the model: selective + SP beats full recomputation by 25-35 %
    for full, present in zip(rows[::2], rows[1::2]):
        assert 1.2 < full[3] / present[3] < 1.45


def test_nemo_h100_bf16_step_time():
    rows = nemo_rows()
    errors = _report("NVIDIA dgxc-benchmarking, NeMo 24.09 BF16 on H100 (seconds per step; error in throughput)",
                     rows, "s")
    assert all(r[5].fits for r in rows)
    assert max(errors) <= 0.15  # the per-row target, met
    assert statistics.median(errors) <= 0.10  # the median target, met


@pytest.mark.parametrize("rows", [narayanan_rows, korthikanti_rows])
def test_larger_models_keep_the_published_ordering_of_efficiency(rows):
    """Not a fit, a shape: the model's per-GPU efficiency rises from the smallest to the largest model,
    as both papers measured (bigger matmuls)."""
    table = rows()
    first, last = table[0][5], table[-1][5]
    assert last.mfu > first.mfu
