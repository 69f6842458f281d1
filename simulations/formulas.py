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

from dataclasses import dataclass
from typing import Literal

GB = 10**9  # spec sheets and the Playbook's tables count decimal gigabytes
GPU_CAPACITY = {"A100/H100": 80 * GB, "H200": 141 * GB}

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
                      cpu_offload: bool = False, fp32_grad_accumulation: bool = False) -> dict[str, float]:
    """Bytes of parameters, gradients and optimizer states on each rank's device.

    REFERENCE.md's table, for Ψ = `psi` parameters and N = `ranks`:
    DDP 16Ψ; ZeRO-1 2Ψ + 2Ψ + 12Ψ/N; ZeRO-2 2Ψ + (2Ψ + 12Ψ)/N; ZeRO-3 (2Ψ + 2Ψ + 12Ψ)/N
    (bf16; fp32 is 4 + 4 + 8). With `cpu_offload` the optimizer states (and, in fp32, the
    master copy of the parameters the step updates) live in host memory: see `host_bytes`.
    `fp32_grad_accumulation` adds the Playbook's fp32 gradient buffer, +4Ψ (sharded like the
    gradients): 1B → 20 GB instead of 16 GB.
    """
    if ranks < 1:
        raise ValueError(f"ranks must be ≥ 1, got {ranks}")
    sharded = sharded_roles(zero_stage)
    per_rank = {role: k * psi / (ranks if role in sharded else 1)
                for role, k in bytes_per_parameter(precision).items()}
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

def transformer_params(hidden: int, layers: int, vocab: int) -> int:
    """Parameters of a decoder-only transformer (Playbook): N = h·v + L·(12h² + 13h) + 2h."""
    return hidden * vocab + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden


def activation_bytes_per_layer(seq: int, micro_batch: int, hidden: int, heads: int, tp: int = 1,
                               recompute: Recompute = "none") -> float:
    """Activation bytes one transformer layer keeps for backward, in 16-bit (Korthikanti et al.).

    No recomputation: s·b·h·(34 + 5·a·s/h); with tensor parallel degree t and sequence
    parallelism everything is divided by t. Selective recomputation drops the attention term
    5·a·s/h; full recomputation keeps only the layer input, 2·s·b·h (divided by t with SP).
    """
    sbh = seq * micro_batch * hidden
    if recompute == "none":
        per_layer = sbh * (34 + 5 * heads * seq / hidden)
    elif recompute == "selective":
        per_layer = sbh * 34
    elif recompute == "full":
        per_layer = 2 * sbh
    else:
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    return per_layer / tp


def activation_bytes(seq: int, micro_batch: int, hidden: int, heads: int, layers: int, tp: int = 1,
                     pp: int = 1, recompute: Recompute = "none") -> float:
    """Activation bytes on the busiest GPU: its L/p layers times the micro-batches in flight.

    Under 1F1B with m ≥ p the first stage holds p micro-batches (REFERENCE.md, "Peak in-flight
    activations"), so it keeps L/p · p = L layers' worth: pipeline parallelism alone does not
    shrink the first stage's activations (Korthikanti et al., section 4.2.3).
    """
    layers_per_stage = layers / pp
    in_flight = pp
    return activation_bytes_per_layer(seq, micro_batch, hidden, heads, tp, recompute) * layers_per_stage * in_flight


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

    g = 1: 2Ψ for DDP, ZeRO-1 and ZeRO-2 (reduce-scatter the gradients, all-gather the updated
    parameters); 3Ψ for ZeRO-3 (all-gather in forward and again in backward, reduce-scatter).
    With g micro-batches accumulated: DDP and ZeRO-1 keep full gradients and still communicate
    once, 2Ψ; ZeRO-2 keeps only a shard, so it reduce-scatters after every micro-batch,
    (g + 1)Ψ; ZeRO-3 gathers and scatters for every micro-batch, 3gΨ.
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
                   seq_len: int = 4096, micro_batch: int = 1, cpu_offload: bool = False) -> dict[str, float]:
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
    activations = activation_bytes(seq_len, micro_batch, shape.hidden, shape.heads, shape.layers, tp, pp, recompute)
    if precision == "fp32":
        activations *= 2
    return {**states, "activations": activations}
