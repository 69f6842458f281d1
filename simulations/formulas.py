"""The analytic formulas of ../shared/REFERENCE.md, in one place.

Everything the deck puts *beside* a measurement as a check comes from here: the
memory calculator (app/routers/calculator.py) and the scenarios' summary checks
import these same functions, so the calculator and the checks cannot disagree.
Pure functions of numbers: no torch, no I/O.

Sources, as REFERENCE.md cites them:
- model states per rank by ZeRO stage: Rajbhandari et al., "ZeRO: Memory
  Optimizations Toward Training Trillion Parameter Models", arXiv:1910.02054,
  and the Ultra-Scale Playbook;
- transformer parameter count: the Ultra-Scale Playbook;
- activations per layer: Korthikanti et al., "Reducing Activation Recomputation
  in Large Transformer Models", arXiv:2205.05198;
- communication volumes: the ring all-reduce (Patarasuk & Yuan 2009) and the
  ZeRO paper's 2Ψ / 3Ψ;
- pipeline bubbles: GPipe, 1F1B, interleaved 1F1B (Playbook, torch pipelining).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from simulations import hardware

GB = 10**9  # spec sheets and the Playbook's tables count decimal gigabytes

Precision = Literal["bf16", "fp32"]
Recompute = Literal["none", "selective", "full"]
MODEL_STATE_ROLES = ("parameters", "gradients", "optimizer")


# -- model states ----------------------------------------------------------------------------------

def bytes_per_parameter(precision: Precision = "bf16") -> dict[str, int]:
    """Bytes each parameter costs, by role, before any sharding (REFERENCE.md, "Memory per rank").

    bf16 mixed precision with Adam: bf16 parameters 2, bf16 gradients 2, and in fp32 the master
    parameters, momentum and variance, k = 12: 16 bytes in all.
    fp32 without mixed precision: parameters 4, gradients 4, Adam momentum and variance 8
    (the parameters are their own master copy): also 16.
    """
    if precision == "bf16":
        return {"parameters": 2, "gradients": 2, "optimizer": 12}
    if precision == "fp32":
        return {"parameters": 4, "gradients": 4, "optimizer": 8}
    raise ValueError(f"precision must be 'bf16' or 'fp32', got {precision!r}")


def sharded_roles(zero_stage: int) -> set[str]:
    """Which model states ZeRO stage 0..3 splits over the data-parallel ranks.

    Stage 1 shards the optimizer states, stage 2 also the gradients, stage 3 (FSDP) also
    the parameters; stage 0 is plain data parallel, everything replicated.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0..3, got {zero_stage}")
    return set(MODEL_STATE_ROLES[3 - zero_stage:]) if zero_stage else set()


def model_state_bytes(psi: float, precision: Precision = "bf16", zero_stage: int = 0, ranks: int = 1,
                      cpu_offload: bool = False, fp32_grad_accumulation: bool = False,
                      grad_bytes: float | None = None, optimizer_bytes: float | None = None) -> dict[str, float]:
    """Bytes of parameters, gradients and optimizer states on each rank's device.

    REFERENCE.md's table, for Ψ = `psi` parameters and N = `ranks`:
    DDP 16Ψ; ZeRO-1 2Ψ + 2Ψ + 12Ψ/N; ZeRO-2 2Ψ + (2Ψ + 12Ψ)/N; ZeRO-3 (2Ψ + 2Ψ + 12Ψ)/N
    (bf16; fp32 is 4 + 4 + 8). With `cpu_offload` the optimizer states (and, in fp32, the
    master copy of the parameters the step updates) live in host memory: see `host_bytes`.
    `fp32_grad_accumulation` adds the Playbook's fp32 gradient buffer, +4Ψ (sharded like the
    gradients): 1B → 20 GB instead of 16 GB.
    `grad_bytes` / `optimizer_bytes` replace the precision's bytes a parameter for the gradients and for the
    optimizer states where a stack keeps other dtypes: Megatron-LM's gradient buffer in fp32 (4; its
    distributed optimizer then holds 6 + 12/N bytes a parameter, docs/source/api-guide/distrib_optimizer.md), or
    Apex's DistributedFusedAdam with a bf16 state (a bf16 copy of the parameters, m and v: 6).
    """
    if ranks < 1:
        raise ValueError(f"ranks must be ≥ 1, got {ranks}")
    sharded = sharded_roles(zero_stage)
    per_param = bytes_per_parameter(precision)
    if grad_bytes is not None:
        per_param["gradients"] = grad_bytes
    if optimizer_bytes is not None:
        per_param["optimizer"] = optimizer_bytes
    per_rank = {role: k * psi / (ranks if role in sharded else 1) for role, k in per_param.items()}
    if fp32_grad_accumulation:
        per_rank["gradients"] += 4 * psi / (ranks if "gradients" in sharded else 1)
    if cpu_offload:
        per_rank["optimizer"] = 0.0
    return per_rank


def host_bytes(psi: float, zero_stage: int = 0, ranks: int = 1, cpu_offload: bool = False) -> float:
    """Host (CPU) memory per rank for the offloaded optimizer: fp32 master, momentum, variance = 12Ψ,
    divided by N from stage 1 on (DeepSpeed's ZeRO-Offload keeps these on the CPU, arXiv:2101.06840)."""
    if not cpu_offload:
        return 0.0
    return 12 * psi / (ranks if zero_stage >= 1 else 1)


def model_state_total(psi: float, precision: Precision = "bf16", zero_stage: int = 0, ranks: int = 1) -> float:
    """Sum of `model_state_bytes`: 16Ψ for DDP, 16Ψ/N for ZeRO-3 (the Playbook's 1B → 16 GB table)."""
    return sum(model_state_bytes(psi, precision, zero_stage, ranks).values())


# -- transformer shapes ----------------------------------------------------------------------------

def mlp_params(in_features: int, width: int, depth: int, out_features: int) -> int:
    """Weights and biases of `depth` hidden Linear layers of `width`, then a Linear head (the live runs' MLP)."""
    features, total = in_features, 0
    for _ in range(depth):
        total += features * width + width
        features = width
    return total + features * out_features + out_features


def transformer_params(hidden: int, layers: int, vocab: int) -> int:
    """Parameters of a decoder-only transformer (Playbook): N = h·v + L·(12h² + 13h) + 2h."""
    return hidden * vocab + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden


def activation_bytes_per_layer(seq: int, micro_batch: int, hidden: int, heads: int, tp: int = 1,
                               recompute: Recompute = "none", sequence_parallel: bool = True,
                               flash_attention: bool = False, attention_dropout: bool = True) -> float:
    """Activation bytes one transformer layer keeps for backward, in 16-bit (Korthikanti et al.).

    No recomputation: s·b·h·(34 + 5·a·s/h); with tensor parallel degree t and sequence
    parallelism everything is divided by t. Selective recomputation drops the attention term
    5·a·s/h; full recomputation keeps only the layer input, 2·s·b·h (divided by t with SP).
    Without sequence parallelism (t > 1) the layer norms' and dropouts' 10·s·b·h are replicated on
    every tensor-parallel rank: s·b·h·(10 + 24/t + 5·a·s/(h·t)) (their Table 2), and full
    recomputation keeps the whole 2·s·b·h input.
    `flash_attention`: FlashAttention never stores the a·s² score and softmax matrices (it
    recomputes them in backward), so the 5·a·s/h term goes as with selective recomputation
    (Ultra-Scale Playbook; every Llama-class run). The 34 is Korthikanti's count for a GPT-3
    layer (GeLU MLP of 4h, dropout); a SwiGLU layer without dropout keeps about as much.
    The 5·a·s²·b of stored scores is the softmax output (2·a·s²·b), the attention-dropout mask (a·s²·b) and the
    dropout's output (2·a·s²·b) (their section 4.1). `attention_dropout=False`, as in Llama: an unfused kernel
    still keeps the softmax output, 2·a·s²·b, the term 2·a·s/h.
    """
    sbh = seq * micro_batch * hidden
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    if recompute == "full":
        return 2 * sbh / (tp if sequence_parallel else 1)
    stores_scores = recompute == "none" and not flash_attention
    attention = (5 if attention_dropout else 2) * heads * seq / hidden if stores_scores else 0.0
    if sequence_parallel or tp == 1:
        return sbh * (34 + attention) / tp
    return sbh * (10 + (24 + attention) / tp)


def activation_bytes(seq: int, micro_batch: int, hidden: int, heads: int, layers: int, tp: int = 1,
                     pp: int = 1, recompute: Recompute = "none", flash_attention: bool = False,
                     attention_dropout: bool = True) -> float:
    """Activation bytes on the busiest GPU: its L/p layers times the micro-batches in flight.

    Under 1F1B with m ≥ p the first stage holds p micro-batches (REFERENCE.md, "Peak in-flight
    activations"), so it keeps L/p · p = L layers' worth: pipeline parallelism alone does not
    shrink the first stage's activations (Korthikanti et al., section 4.2.3).
    """
    layers_per_stage = layers / pp
    in_flight = pp
    per_layer = activation_bytes_per_layer(seq, micro_batch, hidden, heads, tp, recompute,
                                           flash_attention=flash_attention, attention_dropout=attention_dropout)
    return per_layer * layers_per_stage * in_flight


def full_recompute_peak_bytes(seq: int, micro_batch: int, hidden: int, heads: int, layers: int,
                              flash_attention: bool = True) -> float:
    """Activation bytes at the peak of a fully checkpointed backward, one GPU: every layer's kept input (2·s·b·h
    each, Korthikanti et al. section 5) plus the one layer whose forward is being replayed, which rebuilds all
    that layer keeps for its backward. Before the logits and the framework's buffers."""
    kept = activation_bytes(seq, micro_batch, hidden, heads, layers, recompute="full")
    rebuilt = activation_bytes_per_layer(seq, micro_batch, hidden, heads, flash_attention=flash_attention)
    return kept + rebuilt


def logits_bytes(tokens: int, vocab: int, element: int = 4) -> float:
    """Bytes of one micro-batch's output logits, tokens × vocabulary, fp32 by default (the loss upcasts them)."""
    return tokens * vocab * element


# -- communication ---------------------------------------------------------------------------------

def ring_all_reduce_bytes(size: float, ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce of `size` bytes: 2(N−1)/N · S."""
    return 2 * (ranks - 1) / ranks * size


def all_gather_bytes(size: float, ranks: int) -> float:
    """Bytes each rank sends in an all-gather (or a reduce-scatter) of a `size`-byte whole: (N−1)/N · S."""
    return (ranks - 1) / ranks * size


def zero_comm_elements(psi: float, zero_stage: int, grad_accumulation: int = 1) -> float:
    """Elements communicated per optimizer step, counting an all-reduce of S as 2S and an
    all-gather or reduce-scatter of an S-element whole as S (the ZeRO paper's accounting).

    m = 1: 2Ψ for DDP, ZeRO-1 and ZeRO-2 (reduce-scatter the gradients, all-gather the updated
    parameters); 3Ψ for ZeRO-3 (all-gather in forward and again in backward, reduce-scatter).
    With m micro-batches accumulated (the deck's m; `grad_accumulation` here): DDP and ZeRO-1 keep
    full gradients and still communicate once, 2Ψ; ZeRO-2, keeping only a shard, reduce-scatters
    after every micro-batch, (m + 1)Ψ; ZeRO-3 gathers and scatters for every micro-batch, 3mΨ.
    That is what the zero scenario does; keeping unsharded gradients (and parameters) until the
    last micro-batch, as FSDP2's set_requires_gradient_sync(False) allows, trades memory for it.
    """
    sharded_roles(zero_stage)  # validates
    g = grad_accumulation
    return {0: 2 * psi, 1: 2 * psi, 2: (g + 1) * psi, 3: 3 * g * psi}[zero_stage]


def all_to_all_bytes(size: float, ranks: int) -> float:
    """Bytes each rank sends in an all-to-all of its `size`-byte buffer: (N−1)/N · S (its own block stays)."""
    return (ranks - 1) / ranks * size



def collective_sent_bytes(op: str, buffer: float, ranks: int) -> float:
    """Bytes a rank sends in collective `op` of `ranks` ranks, from the buffer it hands the op (the bytes
    simulations.comm records): a reduce-scatter's or all-to-all's whole input, an all-gather's shard, an
    all-reduce's tensor; a ring algorithm for the reductions (REFERENCE.md, "Communication")."""
    if op == "all_gather":
        return all_gather_bytes(buffer * ranks, ranks)
    if op == "reduce_scatter":
        return all_gather_bytes(buffer, ranks)
    if op == "all_to_all":
        return all_to_all_bytes(buffer, ranks)
    if op == "all_reduce":
        return ring_all_reduce_bytes(buffer, ranks)
    raise ValueError(f"no formula for collective {op!r}")

ContextParallel = Literal["ring", "all_gather_kv", "all_to_all"]


def context_parallel_bytes(method: ContextParallel, seq: int, heads: int, head_dim: int, ranks: int,
                           element: int = 4) -> dict[str, float]:
    """Bytes each rank sends for one attention layer, forward and backward, when the sequence is split
    over `ranks` (context parallelism). `block` = one of Q, K, V, O for this rank's seq/N tokens, all heads.

    - ring (Liu et al., arXiv:2310.01889; our ring_attention): K+V go round the ring, N−1 hops forward;
      backward sends K+V again (N−1 hops) and the dK+dV accumulators N hops (the last one home).
    - all_gather_kv (Llama 3, arXiv:2407.21783 section 3.3.2): all-gather K+V, (N−1)·2·block;
      backward reduce-scatters the full-sequence dK+dV, (N−1)/N · 2N·block. Neither shrinks with N.
    - all_to_all (DeepSpeed-Ulysses, arXiv:2309.14509): Q, K, V to head shards and O back, four
      all-to-alls of one block each; backward dO in and dQ, dK, dV back, four more: (N−1)/N · 4·block
      each way, falling as 1/N for a fixed sequence.
    """
    if seq % ranks:
        raise ValueError(f"seq ({seq}) must be divisible by ranks ({ranks})")
    n, block = ranks, heads * (seq // ranks) * head_dim * element
    if method == "ring":
        forward, backward = (n - 1) * 2 * block, (n - 1) * 2 * block + n * 2 * block
    elif method == "all_gather_kv":
        forward, backward = (n - 1) * 2 * block, all_gather_bytes(2 * block * n, n)
    elif method == "all_to_all":
        forward = backward = all_to_all_bytes(4 * block, n)
    else:
        raise ValueError(f"method must be ring, all_gather_kv or all_to_all, got {method!r}")
    return {"forward": forward, "backward": backward, "total": forward + backward, "block": block}


def hsdp_bytes(size: float, shards: int, replicas: int) -> dict[str, float]:
    """Bytes each rank sends per step under hybrid sharding (HSDP; FSDP paper, arXiv:2304.11277,
    section 3.2.2): the model's `size` bytes are sharded over a group of `shards` ranks and that group
    is replicated `replicas` times. Inside the shard group, ZeRO-3's 3Ψ: two all-gathers of the
    parameters (forward, backward) and a reduce-scatter of the gradients, (N−1)/N · size each. Across
    replicas, an all-reduce of this rank's gradient shard only: 2(R−1)/R · size/shards."""
    return {"shard": 3 * all_gather_bytes(size, shards),
            "replicate": ring_all_reduce_bytes(size / shards, replicas)}


def fsdp_step_bytes(psi: float, ranks: int, param_bytes: int = 2, reduce_bytes: int = 2) -> float:
    """Bytes each rank sends per step under ZeRO-3 / FSDP on a ring: two all-gathers of the parameters in
    `param_bytes` (forward, backward) and a reduce-scatter of the gradients in `reduce_bytes`,
    (N−1)/N · Ψ · (2·param_bytes + reduce_bytes). An fp32 reduce (FSDP2's reduce_dtype=torch.float32, torchtitan's
    only mixed_precision_reduce, Llama 3's practice) makes it (N−1)/N · 8Ψ: twice DDP's bf16 all-reduce."""
    return 2 * all_gather_bytes(psi * param_bytes, ranks) + all_gather_bytes(psi * reduce_bytes, ranks)


# -- pipeline bubble -------------------------------------------------------------------------------

def bubble_fraction(stages: int, micro_batches: int, virtual: int = 1) -> float:
    """Fraction of a pipeline's total time spent idle (REFERENCE.md, "Pipeline bubble").

    GPipe / AFAB and 1F1B: (p−1)/(m + p − 1); interleaved 1F1B with v virtual stages per rank:
    (p−1)/(v·m + p − 1); the naive schedule is m = 1: (p−1)/p.
    """
    p, m, v = stages, micro_batches, virtual
    if p < 1 or m < 1 or v < 1:
        raise ValueError("stages, micro_batches and virtual must be ≥ 1")
    return (p - 1) / (v * m + p - 1)


def bubble_over_ideal(stages: int, micro_batches: int, virtual: int = 1) -> float:
    """The Playbook's form: bubble time relative to the ideal time, (p−1)/(v·m)."""
    return (stages - 1) / (virtual * micro_batches)


# -- presets for the calculator and the slides -----------------------------------------------------

@dataclass(frozen=True)
class ModelShape:
    """A model size: `params` is the nominal Ψ the Playbook's table uses; the shape feeds activations."""

    name: str
    params: float
    hidden: int
    layers: int
    heads: int
    vocab: int


# Llama-3-like shapes (1B: Llama 3.2 1B; 7B: Llama 2 7B; 70B: Llama 3 70B; 405B: Llama 3.1 405B).
PRESETS: dict[str, ModelShape] = {
    "1B": ModelShape("1B", 1e9, hidden=2048, layers=16, heads=32, vocab=128256),
    "7B": ModelShape("7B", 7e9, hidden=4096, layers=32, heads=32, vocab=32000),
    "70B": ModelShape("70B", 70e9, hidden=8192, layers=80, heads=64, vocab=128256),
    "405B": ModelShape("405B", 405e9, hidden=16384, layers=126, heads=128, vocab=128256),
}


def per_gpu_memory(psi: float, shape: ModelShape, *, precision: Precision = "bf16", zero_stage: int = 0,
                   gpus: int = 1, tp: int = 1, pp: int = 1, activation_checkpointing: bool = False,
                   seq_len: int = 4096, micro_batch: int = 1, cpu_offload: bool = False,
                   flash_attention: bool = False) -> dict[str, float]:
    """Bytes per GPU by role for a 3D layout: TP·PP split the model, ZeRO shards over DP = gpus/(TP·PP).

    Model states: `model_state_bytes(Ψ/(t·p), precision, stage, DP)`. Activations:
    `activation_bytes` with full recomputation when checkpointing (activations are 16-bit in
    both precisions' formulas; fp32 doubles them).
    """
    if gpus % (tp * pp):
        raise ValueError(f"gpus ({gpus}) must be a multiple of tp·pp ({tp * pp})")
    dp = gpus // (tp * pp)
    states = model_state_bytes(psi / (tp * pp), precision, zero_stage, dp, cpu_offload)
    recompute: Recompute = "full" if activation_checkpointing else "none"
    if not shape.layers:  # a parameter count without a transformer shape: model states only
        return {**states, "activations": 0.0}
    activations = activation_bytes(seq_len, micro_batch, shape.hidden, shape.heads, shape.layers, tp, pp, recompute,
                                   flash_attention)
    if precision == "fp32":
        activations *= 2
    return {**states, "activations": activations}


# -- precision -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrecisionRecipe:
    """Bytes per parameter of one training recipe, by what is kept (the Ultra-Scale Playbook's table
    "a summary of a few known approaches to FP8 training", early 2025; fp32 from REFERENCE.md).

    `gemm` is the precision the matmuls run in; `master` the optimizer's copy of the weights,
    `accumulated_grads` a separate buffer gradients are summed in across micro-batches, `params`
    and `grads` the working copies forward and backward use, `optimizer` Adam's two moments.
    """

    name: str
    gemm: str
    master: int
    accumulated_grads: int
    params: int
    grads: int
    optimizer: int
    source: str

    @property
    def total(self) -> int:
        return self.master + self.accumulated_grads + self.params + self.grads + self.optimizer


PLAYBOOK = "Ultra-Scale Playbook, mixed precision training"
PRECISION_RECIPES: dict[str, PrecisionRecipe] = {
    # fp32 without mixed precision: the parameters are their own master copy (REFERENCE.md).
    "fp32": PrecisionRecipe("fp32", "fp32", 0, 0, 4, 4, 8, "REFERENCE.md; ZeRO, arXiv 1910.02054"),
    "bf16 + fp32 master, fp32 grad accumulation": PrecisionRecipe(
        "bf16 + fp32 master, fp32 grad accumulation", "bf16", 4, 4, 2, 2, 8, PLAYBOOK),
    "bf16 + fp32 master": PrecisionRecipe("bf16 + fp32 master", "bf16", 4, 0, 2, 2, 8, PLAYBOOK),
    "FP8, Transformer Engine": PrecisionRecipe("FP8, Transformer Engine", "fp8", 0, 0, 4, 4, 8, PLAYBOOK),
    "FP8, DeepSeek-V3": PrecisionRecipe("FP8, DeepSeek-V3", "fp8", 4, 4, 1, 2, 4,
                                        PLAYBOOK + "; DeepSeek-V3, arXiv 2412.19437, section 3.3"),
    "FP8, Nanotron": PrecisionRecipe("FP8, Nanotron", "fp8", 2, 4, 1, 1, 2, PLAYBOOK),
    "FP8, FP8-LM O3": PrecisionRecipe("FP8, FP8-LM O3", "fp8", 2, 2, 1, 1, 3,
                                      PLAYBOOK + "; FP8-LM, arXiv 2310.18313"),
}


def precision_state_bytes(psi: float, recipe: str, zero_stage: int = 0, ranks: int = 1) -> float:
    """Model-state bytes per rank for a `PRECISION_RECIPES` recipe: Ψ · (its bytes per parameter),
    with ZeRO's sharding applied role by role (stage 1: optimizer and master; 2: + gradients and
    their accumulation buffer; 3: + parameters)."""
    r = PRECISION_RECIPES[recipe]
    sharded = sharded_roles(zero_stage)
    split = {"optimizer": r.optimizer + r.master, "gradients": r.grads + r.accumulated_grads,
             "parameters": r.params}
    return sum(k * psi / (ranks if role in sharded else 1) for role, k in split.items())


def gradient_reduce_bytes(psi: float, ranks: int, reduce_bytes: int = 2) -> float:
    """Bytes each rank sends to all-reduce Ψ gradients on a ring, in a dtype of `reduce_bytes` bytes:
    2(N−1)/N · Ψ · bytes. bf16 (2) is DDP's default with bf16 gradients; fp32 (4), as Llama 3
    reduce-scatters its gradients (arXiv 2407.21783, section 3.3.2) and FSDP2's
    MixedPrecisionPolicy(reduce_dtype=torch.float32) does, doubles it."""
    return ring_all_reduce_bytes(psi * reduce_bytes, ranks)


# -- GPUs (the one catalog: simulations.hardware) ------------------------------------------------

def gpus_to_hold(n_bytes: float, gpu: str = "H100") -> int:
    """How many GPUs of this kind it takes just to hold `n_bytes`, if they could be split evenly."""
    return math.ceil(n_bytes / hardware.gpu(gpu).hbm_bytes)


def ring_attention_min_block(flops: float, bandwidth: float, element_bytes: int = 2, causal: bool = False) -> float:
    """Tokens per K/V block for ring attention to hide its transfer behind the block's attention
    (Liu et al., Ring Attention, arXiv 2310.01889, section 3): a block of c tokens costs 4·c²·d
    FLOPs (QKᵀ and PV) and sends K and V, 2·c·d elements. Overlap needs 4c²d/F ≥ 2cd·e/B, so
    c ≥ F·e/(2B): F/B tokens in 16-bit, whatever the head dimension d. Causal with the zig-zag
    placement, each step computes half a block's pairs but still sends a whole block: twice the tokens."""
    work_share = 0.5 if causal else 1.0
    return flops * element_bytes / (2 * bandwidth * work_share)


# -- failures and the checkpoint interval --------------------------------------------------------

@dataclass(frozen=True)
class FailureLog:
    """A training run's published failure record and the storage its checkpoints went to."""

    name: str
    days: float
    interruptions: int  # every job interruption, planned or not: each one restarts from a checkpoint
    unexpected: int
    gpus: int
    parameters: float
    storage_bytes_per_s: float  # the checkpoint file system's sustained write throughput
    largest_state_per_gpu: float  # bytes: the most model state one GPU saves
    source: str

    @property
    def hours(self) -> float:
        return self.days * 24


# Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783: section 3.3.4 and Table 5 (a 54-day snapshot
# of the 405B pre-training: 466 job interruptions, 47 planned, 419 unexpected); section 3.3.1 (up to 16K H100
# GPUs; Tectonic storage, 2 TB/s sustained and 7 TB/s peak; each GPU saves 1 MB to 4 GB of model state).
LLAMA3_405B = FailureLog("Llama 3 405B", days=54, interruptions=466, unexpected=419, gpus=16_384,
                         parameters=405e9, storage_bytes_per_s=2e12, largest_state_per_gpu=4e9,
                         source="Llama 3 paper (arXiv:2407.21783), sections 3.3.1 and 3.3.4, Table 5")


def mean_time_between(duration: float, events: int) -> float:
    """Mean time between failures of the whole job, from a count over a period (same unit as `duration`)."""
    return duration / events


def young_interval(write_time: float, mtbf: float) -> float:
    """The compute time between checkpoints that loses the least, to first order: τ = √(2·δ·M).

    Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974: per unit
    of time a job spends δ/τ writing checkpoints and, failing once per M on average half an interval
    after the last one, τ/(2M) redoing work; the sum is least at τ = √(2δM). Any unit, the same for both.
    """
    return math.sqrt(2 * write_time * mtbf)


def daly_interval(write_time: float, mtbf: float) -> float:
    """Daly's higher-order optimum: τ = √(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M, else τ = M.

    Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3),
    2006: failures as a Poisson process, the time lost to a failure and the checkpoints' own
    time counted exactly, solved by perturbation. Close to Young's when δ ≪ M.
    """
    if write_time >= 2 * mtbf:
        return mtbf
    x = write_time / (2 * mtbf)
    return math.sqrt(2 * write_time * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - write_time


def checkpoint_overhead(interval: float, write_time: float, mtbf: float) -> float:
    """Young's first-order fraction of time lost: δ/τ writing, τ/(2M) redone after failures (restart time
    not counted). At τ = √(2δM) it is √(2δ/M)."""
    return write_time / interval + interval / (2 * mtbf)
