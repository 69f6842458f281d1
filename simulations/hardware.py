"""The one hardware catalog of the project: what a GPU and a node can do, on paper and in practice.

Everything reads GPUs from here: the estimator (simulations.estimate), the memory formulas and the
calculator (simulations.formulas, app), and the slides (`hardware` in Jinja). Torch-free, and it imports
nothing of the project, so any module can use it.

Spec-sheet figures (peak, HBM, NVLink, NICs) and the fractions of them software reaches, each
read once from a published measurement and never adjusted to the training runs the estimator is
validated against (tests/unit/test_estimate_validation.py).

Spec sheets (NVIDIA datasheets, as the scaling book's gpus.md "Summary of GPU specs" and ml-engineering's
compute/accelerator/README.md tables give them):
- A100 SXM 80 GB: bf16 dense 312 TFLOP/s, HBM2e 2.039 TB/s, 80 GB, NVLink 3 300 GB/s per direction, 108 SMs;
- A100 SXM 40 GB: the same GA100 at the same clocks, HBM2 1.555 TB/s and 40 GB (NVIDIA A100 Tensor Core GPU
  datasheet, "A100 40GB SXM" column: 1,555 GB/s; "A100 80GB SXM": 2,039 GB/s);
- H100 SXM 80 GB: 989 TFLOP/s, HBM3 3.35 TB/s, 80 GB, NVLink 4 450 GB/s per direction, 132 SMs;
- H200 SXM: as H100 with HBM3e 4.8 TB/s and 141 GB;
- B200 SXM: 2250 TFLOP/s, HBM3e 8 TB/s, 180 GB usable (NVIDIA's platform figure), NVLink 5 900 GB/s, 148 SMs.
FP8 dense (datasheets, half the sparse figure): H100 / H200 SXM 1,979 TFLOP/s, B200 4,500; A100 has none.
Nodes: DGX A100 has 8 × 200 Gb/s HDR NICs (200 GB/s of node egress; Korthikanti et al. 2022 sec. 6, Selene);
DGX H100 / H200 / B200 8 × 400 Gb/s NDR (400 GB/s; scaling book gpus.md, node egress table).
Measured:
- largest achievable bf16 matmul (MAMF): A100 SXM 271.2 TFLOP/s (86.9 %), H100 SXM 794.5 (80.3 %):
  S. Bekman, ml-engineering, compute/accelerator/README.md, "Maximum
  Achievable Matmul FLOPS comparison table" (mamf-finder.py);
- sustained matmul (MSMF: the rate a shape holds once the GPU draws its full power and the clock has settled,
  "the number that matches sustained training throughput"), measured with all 8 GPUs of a node busy at once, as
  a training step keeps them (mean of 8 GPUs × 5 rounds): H200 698.6 TFLOP/s (MAMF 823.9 in the same runs),
  B200 1426.4 (MAMF 1751.2); one GPU alone: H200 MAMF 841.9, B200 1770.9: S. Bekman, ml-engineering,
  compute/accelerator/benchmarks/README.md, "What we measured: alone vs all-8 concurrent", and
  compute/accelerator/README.md, MAMF & MSMF table (stas00/ml-engineering, branch fast-mamf, commit 082816f,
  2026-08-10; torch 2.13/2.14 with CUDA 13.0);
- NCCL all-reduce bus bandwidth in an 8 × H100 node: about 370 GB/s of 450 (82 %) for large messages, and
  about 150 GB/s at 58 MB (scaling book gpus.md, "Empirical measurements", SHARP off);
- FlashAttention, cuDNN's fused attention: by kernel, head size, mask, direction and length in
  simulations/estimate/kernels.py, from the FlashAttention-2 and -3 papers;
- NCCL's latency model, Simple protocol (NVIDIA/nccl 2.30, src/graph/tuning.cc at 5067397, 2026-06-11:
  baseLatencies, hwLatencies, and how ncclTopoTuneModel adds them up): 8.4 µs base for ring and tree, 8.0 for
  PAT; per ring step 3.4 µs on NVLink and 14 µs across the network; per tree level 4.0 µs (NVLink) and 14 µs
  (network); PAT, for all-gathers and reduce-scatters with one GPU per node only, 14/3.5 µs per level plus
  2.8 µs per rank, at 0.75 of the ring's bus bandwidth.
- the shape at which each GPU reached its MAMF (ml-engineering, compute/accelerator/README.md, MAMF table, "Best
  Shape MxNxK" column, at 744d01e): A100 SXM 1024×10240×5120, H100 SXM 2048×2048×13312 ("H200 is the same"),
  B200 SXM 1792×16128×3072. H100's best is one wave of 128 × 256 tiles (128 tiles on 132 SMs) with the longest K
  of all: what each tile pays once, whatever its K, weighs least there (compute.matmul_time).

- GPUs of one SKU in one cluster do not run alike: Sinha et al., "Not All GPUs Are Created Equal: Characterizing
  Variability in Large-Scale, Accelerator-Rich Systems", SC'22 (arXiv:2208.11035 v3), abstract: "8% (max 22%)
  average performance variation even though the GPU architecture and vendor SKU are identical within each cluster,
  with outliers up to 1.5X slower than the median GPU" (Summit, Vortex, Frontera, Longhorn, Corona; over 90 % of
  their GPUs). A synchronous step runs at the pace of its slowest GPU (simulations/estimate/cost.py, stragglers).

Assumptions (no published microbenchmark read for them; stated so that they can be checked):
- GPU speed across a cluster is normal, and the 8 % "variation" above is its expected range (max − min) over the
  ~1,000 GPUs a cluster measured: 2 · 3.24 σ (3.24, the expected largest of 1,000 standard normals), so
  σ = 8 % / 6.5 = 1.2 % (`GPU_SPEED_SIGMA`); the same on A100, H100 and B200 clusters (the paper measured V100 and
  MI60);
- H100 SXM sustains what H200 does (same GH100 compute and 700 W cap; the MAMF table says "H200 is the same");
- A100 SXM sustains the same fraction of its MAMF as H200 does of its own (698.6 / 823.9): 271.2 × 0.848 = 230;
- FlashAttention's figures are bursts too: they are scaled by the same sustained / burst ratio;
- FP8 matmuls sustain the same fraction of the FP8 peak as bf16 ones of the bf16 peak (no FP8 MSMF published);
- achievable HBM bandwidth for streaming element-wise kernels: 0.85 of the spec sheet (`HBM_EFFICIENCY`);
- the network reaches the same fraction of its line rate as NVLink does in the measurement above (0.82);
- the NVLink fraction measured on H100 holds for A100 and B200 too.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 10**9
MiB = 2**20
TFLOP = 10**12

# What a training process can allocate. The datasheets' capacities are binary: nvidia-smi's memory.total reads
# 40960 MiB on A100-SXM4-40GB, 81920 MiB on A100-SXM4-80GB and 81559 MiB on "NVIDIA H100 80GB HBM3" (as public
# nvidia-smi logs print them), 43.0, 85.9 and 85.5 GB. For H200 and B200 the datasheet's decimal figure is kept
# (no reading at hand). Of that, the CUDA context, cuBLAS workspaces and NCCL's buffers take some (assumption:
# 1 GiB), and PyTorch's caching allocator reserves more than the live tensors: fragmentation, a stated fraction
# (assumption: 5 % of what is live), not measured here.
CUDA_RESERVED_BYTES = 1024 * MiB
ALLOCATOR_FRAGMENTATION = 0.05
# What PyTorch's splitting caching allocator leaves unusable at the peak of LLM training, measured: GMLake (Guo et al.,
# "GMLake: Efficient and Transparent GPU Memory Defragmentation for Large-scale DNN Training with Virtual Memory
# Stitching", ASPLOS 2024, arXiv:2401.08156, abstract) removes "15% (up to 33%) fragmentation among eight LLM models on
# GPU A100 with 80 GB memory". Taken here as 15 % of the live bytes: a step whose peak fits with 5 % (the assumption
# above) but not with 15 % is reported as one that may not fit (simulations/estimate/cost.py, Estimate.fit).
ALLOCATOR_FRAGMENTATION_MEASURED = 0.15

NVLINK_BUS_EFFICIENCY = 370 / 450  # 8 × H100 all-reduce bus bandwidth, large messages (scaling book, gpus.md)
NETWORK_EFFICIENCY = NVLINK_BUS_EFFICIENCY  # assumption: same fraction of the NICs' line rate
HBM_EFFICIENCY = 0.85  # assumption: streaming element-wise kernels
H200_SUSTAINED_OVER_BURST = 698.6 / 823.9  # MSMF over MAMF, all 8 GPUs of the node busy (ml-engineering)
H200_SUSTAINED = 698.6 * 10**12  # FLOP/s; H100 SXM assumed the same (see above)
GPU_SPEED_SIGMA = 0.08 / (2 * 3.24)  # GPUs' speed spread in one cluster (Sinha et al. SC'22; see above)

# Message size at which an NCCL collective gets half its large-message bandwidth, for a 450 GB/s link:
# 58 MB runs at 150 of 370 GB/s on 8 × H100 (scaling book, gpus.md), so 58 MB · (370/150 − 1) ≈ 85 MB.
HALF_BANDWIDTH_BYTES_AT_450 = 58e6 * (370 / 150 - 1)

# NCCL's own latency model, microseconds (NVIDIA/nccl src/graph/tuning.cc, Simple protocol).
NCCL_BASE_US = {"ring": 8.4, "tree": 8.4, "pat": 8.0}
NCCL_RING_STEP_US = {"nvlink": 3.4, "network": 14.0}
NCCL_TREE_STEP_US = {"nvlink": 4.0, "network": 14.0}
NCCL_PAT_LEVEL_US, NCCL_PAT_RANK_US, NCCL_PAT_BANDWIDTH = 14.0 / 3.5, 2.8, 0.75

# SMs an NCCL collective holds while it runs: one CTA per channel, each on an SM of its own that no compute kernel
# shares ("NCCL CTAs won't share an SM with compute kernels"), and as many channels as the platform needs for its
# bandwidth: "If you are on DGX with 8 NICs [...] then it would use 16 SMs" (S. Jeaugey, NCCL maintainer,
# NVIDIA/nccl issue #689, "Does NCCL Allreduce kernels slowdown the computation kernels of GPU?"). Every catalog
# node here is a DGX/HGX with 8 GPUs and 8 NICs. While a collective runs beside compute, compute has the other SMs.
NCCL_COLLECTIVE_SMS = 16


# Kernel microbenchmarks "measured on an H100 SXM with PyTorch 2.11 + CUDA 13.0" (and on an H200 with the same software):
# one NVIDIA H100 80GB HBM3 (SXM, 700 W) and one H200 (141 GB, 700 W), PyTorch 2.11.0+cu130, cuDNN 9.19, driver 580.159,
# 2026-11-28, medians of 10 timed runs after warm-up, CUDA events (the project's ../shared/measurements/gpu-kernels.json,
# measured with kernels.py beside it). Read by the single-GPU stacks only (GPU's measured fields).
# - a 2 GB device-to-device copy, bytes read plus written per second: H100 2.935 TB/s, H200 4.256 TB/s;
# - the host's cost of one eager op (5,000 back-to-back x.add_(1) on one element, the GPU idle): 7.87 µs (a second
#   run on another host: 10.62 µs). H100 host only; the H200 is taken to sit on a like host (assumption);
# - torch.optim.AdamW over 1.5e9 fp32 parameters in 64 tensors: foreach 46.6 ms, fused 16.8 ms,
#   clip_grad_norm_ 7.29 ms (H100 only; on H200 scaled by the copy bandwidths, assumption);
# - bf16 F.linear at Llama-layer shapes (m, k, n, seconds), TF32 off;
# - causal SDPA, the kernel torch picks (cuDNN on these GPUs), (batch, heads, sequence, head dim, forward s, forward and
#   backward s).
H100_COPY_BANDWIDTH, H200_COPY_BANDWIDTH = 2.935e12, 4.256e12
MEASURED_EAGER_OP_S = 7.87e-6
H100_ADAMW_S_PER_PARAM = (("foreach", 0.04661 / 1.5e9), ("fused", 0.01684 / 1.5e9),
                          ("clip", 0.007291 / 1.5e9))
H200_ADAMW_S_PER_PARAM = tuple((kind, s * H100_COPY_BANDWIDTH / H200_COPY_BANDWIDTH) for kind, s in H100_ADAMW_S_PER_PARAM)
H100_GEMM_SECONDS = ((8192, 8192, 8192, 1483.0e-6), (4096, 2048, 2048, 82.7e-6), (4096, 2048, 512, 52.5e-6), (4096, 2048, 8192, 200.9e-6),
    (4096, 8192, 2048, 183.1e-6), (4096, 2048, 128256, 2904.3e-6), (4096, 3072, 3072, 135.2e-6), (4096, 3072, 1024, 55.9e-6),
    (4096, 3072, 8192, 309.8e-6), (4096, 8192, 3072, 295.3e-6), (4096, 3072, 128256, 4457.1e-6), (4096, 4096, 4096, 238.4e-6),
    (4096, 4096, 1024, 71.7e-6), (4096, 4096, 14336, 729.6e-6), (4096, 14336, 4096, 705.0e-6), (4096, 4096, 128256, 6174.8e-6),
    (8192, 2048, 2048, 132.6e-6), (8192, 2048, 512, 47.6e-6), (8192, 2048, 8192, 471.9e-6), (8192, 8192, 2048, 444.2e-6),
    (8192, 2048, 128256, 6168.0e-6), (8192, 3072, 3072, 255.4e-6), (8192, 3072, 1024, 98.3e-6), (8192, 3072, 8192, 657.5e-6),
    (8192, 8192, 3072, 617.6e-6), (8192, 3072, 128256, 9442.0e-6), (8192, 4096, 4096, 433.2e-6), (8192, 4096, 1024, 123.8e-6),
    (8192, 4096, 14336, 1347.7e-6), (8192, 14336, 4096, 1295.2e-6), (8192, 4096, 128256, 11578.3e-6))
H200_GEMM_SECONDS = ((8192, 8192, 8192, 1450.3e-6), (4096, 2048, 2048, 61.7e-6), (4096, 2048, 512, 30.0e-6), (4096, 2048, 8192, 199.8e-6),
    (4096, 8192, 2048, 187.9e-6), (4096, 2048, 128256, 2882.2e-6), (4096, 3072, 3072, 131.1e-6), (4096, 3072, 1024, 54.1e-6),
    (4096, 3072, 8192, 293.7e-6), (4096, 8192, 3072, 282.5e-6), (4096, 3072, 128256, 4641.6e-6), (4096, 4096, 4096, 239.0e-6),
    (4096, 4096, 1024, 75.5e-6), (4096, 4096, 14336, 780.5e-6), (4096, 14336, 4096, 735.0e-6), (4096, 4096, 128256, 6458.4e-6),
    (8192, 2048, 2048, 150.3e-6), (8192, 2048, 512, 56.6e-6), (8192, 2048, 8192, 499.9e-6), (8192, 8192, 2048, 461.7e-6),
    (8192, 2048, 128256, 6244.8e-6), (8192, 3072, 3072, 275.2e-6), (8192, 3072, 1024, 105.5e-6), (8192, 3072, 8192, 676.1e-6),
    (8192, 8192, 3072, 645.9e-6), (8192, 3072, 128256, 9433.1e-6), (8192, 4096, 4096, 438.0e-6), (8192, 4096, 1024, 123.5e-6),
    (8192, 4096, 14336, 1424.3e-6), (8192, 14336, 4096, 1397.0e-6), (8192, 4096, 128256, 12429.4e-6))
H100_SDPA_SECONDS = ((4, 32, 2048, 64, 235e-6, 894e-6),
    (2, 32, 4096, 64, 373e-6, 1356e-6),
    (1, 32, 8192, 64, 679e-6, 2400e-6),
    (4, 24, 2048, 128, 230e-6, 934e-6),
    (2, 24, 4096, 128, 398e-6, 1535e-6),
    (1, 24, 8192, 128, 707e-6, 2744e-6),
    (4, 32, 2048, 128, 286e-6, 1177e-6),
    (2, 32, 4096, 128, 515e-6, 1968e-6),
    (1, 32, 8192, 128, 925e-6, 3557e-6))
H200_SDPA_SECONDS = ((4, 32, 2048, 64, 204e-6, 856e-6),
    (2, 32, 4096, 64, 360e-6, 1315e-6),
    (1, 32, 8192, 64, 657e-6, 2372e-6),
    (4, 24, 2048, 128, 231e-6, 1010e-6),
    (2, 24, 4096, 128, 394e-6, 1561e-6),
    (1, 24, 8192, 128, 724e-6, 2803e-6),
    (4, 32, 2048, 128, 293e-6, 1208e-6),
    (2, 32, 4096, 128, 513e-6, 1954e-6),
    (1, 32, 8192, 128, 941e-6, 3584e-6))


@dataclass(frozen=True)
class GPU:
    """One accelerator: spec-sheet peaks and the measured fraction of its matmul peak."""

    name: str  # the catalog's id, as the estimator's API and CLI take it ("h100-80gb")
    title: str
    peak_flops: float  # dense bf16, FLOP/s
    matmul_flops: float  # largest achievable bf16 matmul (MAMF, a burst), FLOP/s
    sustained_flops: float  # largest sustainable bf16 matmul (MSMF, at the power cap): what training runs at
    hbm_bytes: float  # capacity
    hbm_bandwidth: float  # bytes/s, spec sheet
    nvlink_bandwidth: float  # bytes/s per GPU, one direction
    sms: int  # streaming multiprocessors: the waves a matmul's tiles are scheduled in
    node_egress: float  # bytes/s leaving a node of 8 of these over the network (sum of its NICs)
    gpus_per_node: int = 8
    short: str = ""  # what slides call it ("H100"); empty: not named that way
    memory_total: float = 0.0  # bytes nvidia-smi reports (memory.total); 0: the datasheet's hbm_bytes
    fp8_flops: float = 0.0  # dense FP8 peak, FLOP/s; 0: no FP8 tensor cores
    mamf_shape: tuple[int, int, int] = (8192, 8192, 8192)  # M, N, K at which `matmul_flops` was measured
    # its fused attention against the FlashAttention papers' H100 SXM (700 W) curves (simulations/estimate/kernels.py)
    attention_vs_h100: float = 1.0
    # Measured kernel figures of this GPU with today's software (a microbenchmark, or a calibrated hardware profile),
    # read by the single-GPU stacks (simulations/estimate/stacks.py: Hugging Face eager, AMP, torch.compile); each 0 or
    # empty where none was measured, and then the stacks fall back to the datasheet model above. The multi-GPU rows
    # the estimator is validated on do not read them.
    # - eager_op_s: host seconds to issue one eager PyTorch op (Python, dispatcher, CUDA launch), the GPU idle;
    eager_op_s: float = 0.0
    # - copy_bandwidth: a large device-to-device copy, bytes read plus written per second: what a streaming
    #   element-wise kernel (a cast, an add, a norm's pass) reaches;
    copy_bandwidth: float = 0.0
    # - adamw_s_per_param: torch.optim.AdamW's step per fp32 parameter, seconds, by implementation ("foreach", the
    #   default on CUDA, or "fused"), and "clip" for torch.nn.utils.clip_grad_norm_ over the same gradients;
    adamw_s_per_param: tuple[tuple[str, float], ...] = ()
    # - gemm_seconds: bf16 F.linear(a, w) timed at given shapes, (m, k, n, seconds): a is m × k, w is n × k.
    gemm_seconds: tuple[tuple[int, int, int, float], ...] = ()
    # - sdpa_seconds: causal F.scaled_dot_product_attention, the kernel torch picks, (batch, heads, sequence, head dim,
    #   forward seconds, forward + backward seconds).
    sdpa_seconds: tuple[tuple[int, int, int, int, float, float], ...] = ()

    def adamw_seconds(self, kind: str) -> float:
        """Measured seconds per parameter of AdamW's `kind` ("foreach", "fused" or "clip"); 0 where not measured."""
        return dict(self.adamw_s_per_param).get(kind, 0.0)

    @property
    def streaming_bandwidth(self) -> float:
        """Bytes/s an element-wise pass moves: the measured copy, else the datasheet's at HBM_EFFICIENCY."""
        return self.copy_bandwidth or self.hbm_bandwidth * HBM_EFFICIENCY

    @property
    def usable_bytes(self) -> float:
        """Bytes a training process can allocate: the device's total less what CUDA and NCCL keep."""
        return (self.memory_total or self.hbm_bytes) - CUDA_RESERVED_BYTES

    @property
    def sustained_over_burst(self) -> float:
        return self.sustained_flops / self.matmul_flops

    @property
    def network_per_gpu(self) -> float:
        """Bytes/s one GPU can send to another node: its node's egress shared by the node's GPUs (one NIC each)."""
        return self.node_egress / self.gpus_per_node


GPUS: dict[str, GPU] = {
    "a100-80gb": GPU("a100-80gb", "A100 SXM 80 GB", peak_flops=312 * TFLOP, matmul_flops=271.2 * TFLOP,
                     sustained_flops=271.2 * TFLOP * H200_SUSTAINED_OVER_BURST,
                     hbm_bytes=80 * GB, hbm_bandwidth=2039 * GB, nvlink_bandwidth=300 * GB, sms=108,
                     node_egress=8 * 200 / 8 * GB, short="A100", memory_total=81920 * MiB,
                     mamf_shape=(1024, 10240, 5120)),
    # the same chip and clocks as the 80 GB part: its matmul rates are taken to be the same (no MAMF run published)
    "a100-40gb": GPU("a100-40gb", "A100 SXM 40 GB", peak_flops=312 * TFLOP, matmul_flops=271.2 * TFLOP,
                     sustained_flops=271.2 * TFLOP * H200_SUSTAINED_OVER_BURST,
                     hbm_bytes=40 * GB, hbm_bandwidth=1555 * GB, nvlink_bandwidth=300 * GB, sms=108,
                     node_egress=8 * 200 / 8 * GB, short="A100 40 GB", memory_total=40960 * MiB,
                     mamf_shape=(1024, 10240, 5120)),
    "h100-80gb": GPU("h100-80gb", "H100 SXM 80 GB", peak_flops=989 * TFLOP, matmul_flops=794.5 * TFLOP,
                     sustained_flops=H200_SUSTAINED,
                     hbm_bytes=80 * GB, hbm_bandwidth=3350 * GB, nvlink_bandwidth=450 * GB, sms=132,
                     node_egress=8 * 400 / 8 * GB, short="H100", memory_total=81559 * MiB,
                     fp8_flops=1979 * TFLOP, mamf_shape=(2048, 2048, 13312),
                     eager_op_s=MEASURED_EAGER_OP_S, copy_bandwidth=H100_COPY_BANDWIDTH,
                     adamw_s_per_param=H100_ADAMW_S_PER_PARAM, gemm_seconds=H100_GEMM_SECONDS,
                     sdpa_seconds=H100_SDPA_SECONDS),
    "h200": GPU("h200", "H200 SXM 141 GB", peak_flops=989 * TFLOP, matmul_flops=841.9 * TFLOP,
                sustained_flops=H200_SUSTAINED,
                hbm_bytes=141 * GB, hbm_bandwidth=4800 * GB, nvlink_bandwidth=450 * GB, sms=132,
                node_egress=8 * 400 / 8 * GB, short="H200", fp8_flops=1979 * TFLOP,
                mamf_shape=(2048, 2048, 13312),
                eager_op_s=MEASURED_EAGER_OP_S, copy_bandwidth=H200_COPY_BANDWIDTH,
                adamw_s_per_param=H200_ADAMW_S_PER_PARAM, gemm_seconds=H200_GEMM_SECONDS,
                sdpa_seconds=H200_SDPA_SECONDS),
    "b200": GPU("b200", "B200 SXM 180 GB", peak_flops=2250 * TFLOP, matmul_flops=1770.9 * TFLOP,
                sustained_flops=1426.4 * TFLOP,
                hbm_bytes=180 * GB, hbm_bandwidth=8000 * GB, nvlink_bandwidth=900 * GB, sms=148,
                node_egress=8 * 400 / 8 * GB, short="B200", fp8_flops=4500 * TFLOP,
                mamf_shape=(1792, 16128, 3072), attention_vs_h100=2250 / 989),
    # Meta's Grand Teton H100 (torchtitan's benchmarks/llama3_h100_202412_torchtitan.md and
    # asyncTP_llama3_h100_2025-06_torchtitan.md): "HBM2e-based SXM H100 with lower TDP", 96 GB at 2.4 TB/s, run at
    # its "default 500W power limit", 8 a host on NVLink, 400 Gb/s of RDMA per GPU; its peak "is between SXM and NVL,
    # and we don't know its exact value", so MFU is reported against the SXM's 989 as torchtitan does. Its matmul
    # rate is Meta's own microbenchmark of an "H100 500W" (pytorch/FBGEMM pull request #2546, 2024-04-29, the bf16
    # baseline of its FP8 GEMM benchmark; that it is this 96 GB part is an assumption, the PR says only "H100 500W"):
    # 585.23 TFLOP/s at 8192³, 575.12 at 65536×8192×7168 (13 ms a call), 546.31 at 65536×3584×8192. The best of
    # these three shapes stands for its burst (a sweep of shapes, as MAMF is, may find more: so this part is, if
    # anything, modelled slow), sustained at H200's fraction like A100's. Its FP8 rate follows the rule above (twice
    # the bf16 one: 993 sustained); the same benchmark's row-wise FP8 GEMMs alone burst at 1,083-1,141 TFLOP/s
    # (× 0.848: 918-967, 3-8 % below it). Fused attention runs the H100 curves scaled by this burst over H100's MAMF
    # (585.23 / 794.5): assumption, the power cap slows tensor-core kernels alike; one shape against a sweep's best,
    # so it leans slow too (no 700 W figure at 8192³ from the same software is at hand).
    "h100-96gb-500w": GPU("h100-96gb-500w", "H100 96 GB at 500 W", peak_flops=989 * TFLOP, matmul_flops=585.23 * TFLOP,
                          sustained_flops=585.23 * TFLOP * H200_SUSTAINED_OVER_BURST,
                          hbm_bytes=96 * GB, hbm_bandwidth=2400 * GB, nvlink_bandwidth=450 * GB, sms=132,
                          node_egress=8 * 400 / 8 * GB, short="H100 500 W", fp8_flops=1979 * TFLOP,
                          mamf_shape=(8192, 8192, 8192), attention_vs_h100=585.23 / 794.5),
}

class UnknownGPU(KeyError):
    pass


# The capacities the memory calculator draws its lines at: what most readers have (A100 and H100 80 GB, H200).
MEMORY_LINES = {"A100/H100": GPUS["h100-80gb"].hbm_bytes, "H200": GPUS["h200"].hbm_bytes}


def gpu(name: str) -> GPU:
    """A catalog GPU by its id ("h100-80gb") or the name slides use ("H100")."""
    for kind in GPUS.values():
        if name in (kind.name, kind.short):
            return kind
    raise UnknownGPU(name)


@dataclass(frozen=True)
class Cluster:
    """`gpus` of one kind, `gpus_per_node` to a node on one NVLink switch, nodes on a fat tree.

    `node_egress` (bytes/s) is what leaves one node over the network, all its NICs together:
    a fat tree gives every node that much to any other (scaling book, gpus.md).
    """

    gpu: GPU
    gpus: int
    gpus_per_node: int
    node_egress: float

    @property
    def nodes(self) -> int:
        return -(-self.gpus // self.gpus_per_node)


def cluster(gpu: str = "h100-80gb", gpus: int = 8, gpus_per_node: int | None = None,
            node_egress: float | None = None) -> Cluster:
    """A cluster of a catalog GPU; node egress scales with the GPUs (one NIC each) unless given."""
    try:
        kind = GPUS[gpu]
    except KeyError:
        raise UnknownGPU(gpu) from None
    per_node = gpus_per_node or kind.gpus_per_node
    egress = node_egress if node_egress is not None else kind.node_egress * per_node / kind.gpus_per_node
    return Cluster(kind, gpus, per_node, egress)
