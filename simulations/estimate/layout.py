"""A parallel layout, and the rules that make one valid for a model and a cluster.

Rank order, fastest-varying first, as Megatron-LM builds its groups: TP, CP, DP (EP splits the DP
ranks of the MoE layers), PP. So TP groups sit inside a node, and PP stages are the furthest apart.
The MoE layers fold the same ranks as TP, EP, expert-DP, PP (Megatron-core's expert rank order): an EP
group's ranks are TP apart, and each expert is replicated on dp·cp/ep ranks TP·EP apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from simulations.hardware import Cluster
from simulations.estimate.kernels import ATTENTION_KERNELS, AttentionKernel
from simulations.estimate.models import Model
from simulations.estimate.stacks import STACKS, Stack

Schedule = Literal["gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"]
# How context parallelism exchanges attention's inputs (cost.py): K and V around a ring (Liu et al. 2023);
# all-to-alls to head shards and back (DeepSpeed-Ulysses, Jacobs et al., arXiv:2309.14509); or an all-gather
# of K and V and a reduce-scatter of their gradients (Llama 3, Dubey et al., arXiv:2407.21783 sec. 3.3.2).
CPComm = Literal["ring", "all_to_all", "all_gather"]
CP_COMMS = get_args(CPComm)
Recompute = Literal["none", "selective", "full", "op"]
Precision = Literal["bf16", "fp8"]
PRECISIONS = get_args(Precision)
# What the optimizer keeps and how the loss is computed (memory.py says what each holds)
OptimizerDtype = Literal["fp32", "bf16"]
CrossEntropy = Literal["fp32", "fused", "torch", "loss_parallel", "hf"]
OPTIMIZER_DTYPES = get_args(OptimizerDtype)
CROSS_ENTROPIES = get_args(CrossEntropy)
# How the step's kernels reach the GPU (compute.py): "eager", PyTorch ops one kernel each, issued from Python (PyTorch
# FSDP stacks: LLM Foundry, torchtitan without compile), with torch.optim's foreach AdamW and a separate clipping pass;
# "fused", eager issue of fused kernels (Megatron-core, TransformerEngine: bias-dropout-add fused, fused Adam);
# "compiled", torch.compile or CUDA graphs: fused kernels replayed with no per-kernel CPU cost. "auto": "eager" for
# ZeRO-3 (the PyTorch FSDP stacks that shard parameters), "fused" otherwise (Megatron-core, the other defaults' stack).
Execution = Literal["auto", "eager", "fused", "compiled"]
EXECUTIONS = get_args(Execution)
# Which PyTorch FSDP prepares a ZeRO-2/3 gradient for its reduce-scatter (compute.fsdp_reduce_input_bytes): "fsdp2"
# (fully_shard, torchtitan: a copy-in in the reduction's dtype, the averaging left to NCCL) or "fsdp1"
# (FullyShardedDataParallel, LLM Foundry's Composer and fms-fsdp: a flat gradient, cast, then pre-divided in place).
FsdpVersion = Literal["fsdp2", "fsdp1"]
FSDP_VERSIONS = get_args(FsdpVersion)
SCHEDULES = get_args(Schedule)


class LayoutError(ValueError):
    """An impossible layout: `field` names the parameter at fault, the message the constraint."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    zero_stage: int = 1
    cp_comm: CPComm = "ring"
    # Hybrid sharding (HSDP, Zhao et al. VLDB 2023 sec. 3.2.2): ZeRO-3 over groups of this many consecutive
    # DP·CP ranks (inside a node when zero_shards·tp ≤ gpus per node), the groups replicas of each other.
    # None: shard over all dp·cp ranks (plain ZeRO-3 / FSDP).
    zero_shards: int | None = None
    schedule: Schedule = "1f1b"
    virtual_stages: int | None = 1  # None: auto
    micro_batch: int | None = 1  # sequences per micro-batch; None: auto
    global_batch: int = 1024  # sequences per optimizer step
    # Activation checkpointing: none; selective (Korthikanti et al.: attention's core replayed, nothing else); full
    # (every layer replayed from its input, or one in `recompute_every`); op (torchtitan's per-op selective
    # checkpointing, its Llama configs' default: every second matmul of a layer and every element-wise op replayed,
    # attention's output and the other matmuls' outputs kept; models.Model.op_recomputed_matmuls).
    recompute: Recompute = "selective"
    sequence_parallel: bool = True  # with tp > 1 (Korthikanti et al.)
    overlap_grad_reduce: bool = True  # DP gradient reduction on its own stream during backward
    overlap_tp_comm: bool = True  # TP's backward all-reduce behind the weight gradients (Korthikanti et al. 2022)
    overlap_param_gather: bool = True  # ZeRO-1/2 parameter all-gather hidden behind the next forward
    grad_reduce_bytes: int = 2  # bytes per gradient element on the wire (bf16; 4 for fp32)
    # Pipeline sends and receives on their own stream while the next micro-batch computes (Megatron-core's
    # overlap_p2p_comm, 2023). False: Megatron-LM before it, which waited for every batched send/recv and then
    # called torch.cuda.synchronize() (p2p_communication._communicate), so each hop stalls both ranks.
    overlap_p2p_comm: bool = True
    # Weight-gradient GEMMs accumulate straight into the fp32 main gradient (Megatron-LM's
    # --gradient-accumulation-fusion, 2022). False: a backward hook adds each micro-batch's gradient to the
    # accumulator afterwards (param.main_grad.add_(param.grad), Megatron-LM's DDP), a memory-bound pass.
    grad_accumulation_fusion: bool = True
    # The fused attention kernel (kernels.py): auto (FlashAttention-2 on A100, cuDNN on Hopper and Blackwell),
    # fa2, fa3 (Hopper), cudnn, or triton_fa1 (the 2022 Triton FlashAttention LLM Foundry ran in 2023).
    # Ignored for a model without fused attention (Model.flash_attention False).
    attention_kernel: AttentionKernel = "auto"
    # The layers' linear layers in bf16, or in FP8 with per-tensor delayed scaling (TransformerEngine's fp8_autocast:
    # FP8 GEMMs, casts around them; attention, norms, the output layer and the optimizer states as in bf16).
    precision: Precision = "bf16"
    # With recompute "full": one layer in every n recomputed, the others keeping their activations (torchtitan's
    # activation_checkpoint mode "selective" with selective_ac_option "n"; Megatron-LM's --recompute-num-layers).
    recompute_every: int = 1
    # Adam's state: fp32 master weights, momentum and variance (12 bytes a parameter: Megatron-LM, DeepSpeed, FSDP),
    # or bf16 (6: Apex's DistributedFusedAdam with dtype bf16, a bf16 copy of its parameter shard and bf16 m and v,
    # as NeMo's Nemotron-4 340B recipe sets optim.dtype: bf16).
    optimizer_dtype: OptimizerDtype = "fp32"
    # The loss over the vocabulary: "fp32" keeps an fp32 softmax beside the bf16 logits (Megatron-LM's vocab-parallel
    # cross entropy on logits.float()): 6 bytes a logit; "fused" (flash-attn's xentropy kernel, LLM Foundry's default
    # loss_fn) keeps the bf16 logits and writes a bf16 gradient: 4; "torch" (torch's own cross_entropy, eager, on
    # logits.float(), as torchtitan computes its loss): 12 at its backward's start; "loss_parallel" (the same under
    # torch's loss_parallel, on vocabulary-sharded logits: torchtitan with TP): 16 (memory.LOGIT_BYTES).
    cross_entropy: CrossEntropy = "fp32"
    execution: Execution = "auto"
    fsdp: FsdpVersion = "fsdp2"
    # With precision fp8: the sharded data-parallel all-gathers move the layers' weights already cast to FP8, 1 byte an
    # element instead of bf16's 2 (torchao's enable_fsdp_float8_all_gather, as torchtitan's float8 option sets it;
    # Megatron-LM's --fp8-param-gather). The embedding and the output layer stay bf16 (torchtitan filters "output").
    fp8_param_gather: bool = False
    # The training code (stacks.py): "auto" (today's: Megatron-core fused, or eager PyTorch FSDP under ZeRO-3), "hf"
    # (Hugging Face Transformers' Llama-family model, eager, op by op: stacks.hf_llama_layer), "torchtitan" (eager
    # PyTorch, torch's cross entropy) or "megatron" (Megatron-core with TransformerEngine's fused kernels).
    stack: Stack = "auto"
    # torch.autocast(bf16) over fp32 weights with torch.optim.AdamW on them (HF Trainer's bf16=True, Lightning's
    # "bf16-mixed"): fp32 weights, gradients and Adam states, 16 bytes a parameter, bf16 copies of the weights made each
    # forward and kept for backward. False: bf16 weights with fp32 master weights in the optimizer (Megatron's).
    amp: bool = False
    # model = torch.compile(model): inductor fuses the element-wise chains (stacks.hf_llama_layer_compiled); the
    # optimizer is not compiled. With the other stacks, execution "compiled".
    torch_compile: bool = False

    def dp(self, gpus: int) -> int:
        return gpus // (self.tp * self.pp * self.cp)

    @property
    def layer_gather_bytes(self) -> int:
        """Bytes a layer's weight element takes on the wire of a parameter all-gather (ZeRO-1/2/3)."""
        return 1 if self.fp8_param_gather else 2

    @property
    def executes(self) -> str:
        """The execution in effect: `auto` resolved (see Execution)."""
        if self.torch_compile:
            return "compiled"
        if self.execution != "auto":
            return self.execution
        if self.stack in ("hf", "torchtitan"):
            return "eager"
        if self.stack == "megatron":
            return "fused"
        return "eager" if self.zero_stage == 3 else "fused"


def validate(model: Model, cluster: Cluster, layout: Layout) -> None:
    """Raise LayoutError naming the first field that breaks a rule."""
    t, p, c, e = layout.tp, layout.pp, layout.cp, layout.ep
    for name, value in (("tp", t), ("pp", p), ("cp", c), ("ep", e)):
        if value < 1:
            raise LayoutError(name, f"must be ≥ 1, got {value}")
    if cluster.gpus < 1:
        raise LayoutError("gpus", f"must be ≥ 1, got {cluster.gpus}")
    if model.heads % t:
        raise LayoutError("tp", f"must divide the attention heads ({model.heads}), got {t}")
    if model.kv_heads % t and t % model.kv_heads:
        raise LayoutError("tp", f"must divide the key/value heads ({model.kv_heads}) or be a multiple of them, got {t}")
    if model.ffn_hidden % t:
        raise LayoutError("tp", f"must divide the FFN hidden size ({model.ffn_hidden}), got {t}")
    if cluster.gpus % (t * p * c):
        raise LayoutError("gpus", f"must be a multiple of tp·pp·cp = {t * p * c}, got {cluster.gpus}")
    if p > model.layers:
        raise LayoutError("pp", f"must be at most the layers ({model.layers}), got {p}")
    if model.seq_len % (2 * c) and c > 1:
        raise LayoutError("cp", f"2·cp must divide the sequence length ({model.seq_len}), got cp = {c}")
    if layout.recompute_every < 1:
        raise LayoutError("recompute_every", f"must be ≥ 1, got {layout.recompute_every}")
    if layout.recompute_every > 1 and layout.recompute != "full":
        raise LayoutError("recompute_every", f"recomputing every n-th layer needs recompute full, got {layout.recompute}")
    if layout.precision not in PRECISIONS:
        raise LayoutError("precision", f"must be bf16 or fp8, got {layout.precision!r}")
    if layout.precision == "fp8" and not cluster.gpu.fp8_flops:
        raise LayoutError("precision", f"fp8 needs FP8 tensor cores (H100, H200, B200); {cluster.gpu.title} has none")
    check_state_dtypes(layout)
    if layout.attention_kernel not in ATTENTION_KERNELS:
        raise LayoutError("attention_kernel", f"must be one of {', '.join(ATTENTION_KERNELS)}, "
                                              f"got {layout.attention_kernel!r}")
    if layout.execution not in EXECUTIONS:
        raise LayoutError("execution", f"must be one of {', '.join(EXECUTIONS)}, got {layout.execution!r}")
    if layout.fsdp not in FSDP_VERSIONS:
        raise LayoutError("fsdp", f"must be one of {', '.join(FSDP_VERSIONS)}, got {layout.fsdp!r}")
    if layout.fp8_param_gather and layout.precision != "fp8":
        raise LayoutError("fp8_param_gather", f"gathers FP8 weights, so it needs precision fp8, got {layout.precision}")
    check_stack(layout)
    if layout.stack == "hf" and (t, p, c, e) != (1, 1, 1, 1):
        field = next(name for name, value in (("tp", t), ("pp", p), ("cp", c), ("ep", e)) if value > 1)
        raise LayoutError(field, f"stack hf runs Transformers' model whole on each GPU (data parallel, DDP or FSDP): "
                                 f"{field} must be 1, got {getattr(layout, field)}")
    if layout.stack == "hf" and model.experts:
        raise LayoutError("experts", "stack hf times dense Llama-family layers: a mixture of experts is not modelled")
    if layout.stack == "hf" and not model.gated_mlp:
        raise LayoutError("gated_mlp", "stack hf times Llama-family layers (SwiGLU MLP): needs gated_mlp")
    if layout.cp_comm not in CP_COMMS:
        raise LayoutError("cp_comm", f"must be one of {', '.join(CP_COMMS)}, got {layout.cp_comm!r}")
    if layout.cp_comm == "all_to_all" and c > 1:
        check_ulysses_heads(model, t, c)
    dp = layout.dp(cluster.gpus)
    if e > 1 and not model.experts:
        raise LayoutError("ep", "expert parallelism needs a mixture-of-experts model (experts > 0)")
    if model.experts and (model.experts % e or dp * c % e):
        raise LayoutError("ep", f"must divide the experts ({model.experts}) and dp·cp ({dp * c}), got {e}")
    if layout.zero_stage not in (0, 1, 2, 3):
        raise LayoutError("zero_stage", f"must be 0, 1, 2 or 3, got {layout.zero_stage}")
    check_zero_shards(layout, dp * c)
    if layout.schedule not in SCHEDULES:
        raise LayoutError("schedule", f"must be one of {', '.join(SCHEDULES)}, got {layout.schedule!r}")
    if layout.recompute not in get_args(Recompute):
        raise LayoutError("recompute", f"must be none, selective, full or op, got {layout.recompute!r}")
    if layout.global_batch < 1 or layout.global_batch % dp:
        raise LayoutError("global_batch", f"must be a positive multiple of dp = {dp}, got {layout.global_batch}")
    per_replica = layout.global_batch // dp
    if layout.micro_batch is not None:
        if layout.micro_batch < 1 or per_replica % layout.micro_batch:
            raise LayoutError("micro_batch", f"must divide the sequences per data-parallel replica "
                                             f"(global_batch/dp = {per_replica}), got {layout.micro_batch}")
        check_micro_batches(layout, per_replica // layout.micro_batch)
    v = layout.virtual_stages
    if v is not None:
        if v < 1:
            raise LayoutError("virtual_stages", f"must be ≥ 1, got {v}")
        if v > 1 and layout.schedule != "interleaved_1f1b":
            raise LayoutError("virtual_stages", f"more than 1 needs schedule interleaved_1f1b, got {layout.schedule}")
        if p * v > model.layers + 2:  # one layer a chunk, and the embedding and the output in chunks of their own
            raise LayoutError("virtual_stages", f"pp·virtual_stages must be at most the layers + 2 "
                                                f"({model.layers + 2}: one layer a chunk, the embedding and the output "
                                                f"in chunks of their own), got {p}·{v}")


def check_state_dtypes(layout: Layout) -> None:
    """The optimizer's state dtype and the loss's are one of those memory.py knows."""
    if layout.optimizer_dtype not in OPTIMIZER_DTYPES:
        raise LayoutError("optimizer_dtype", f"must be {' or '.join(OPTIMIZER_DTYPES)}, got {layout.optimizer_dtype!r}")
    if layout.cross_entropy not in CROSS_ENTROPIES:
        raise LayoutError("cross_entropy", f"must be {' or '.join(CROSS_ENTROPIES)}, got {layout.cross_entropy!r}")


def check_stack(layout: Layout) -> None:
    """The stack is one stacks.py knows; Megatron-core runs TransformerEngine's fused kernels, not torch.compile's."""
    if layout.stack not in STACKS:
        raise LayoutError("stack", f"must be one of {', '.join(STACKS)}, got {layout.stack!r}")
    if layout.stack == "megatron" and layout.torch_compile:
        raise LayoutError("torch_compile", "stack megatron runs TransformerEngine's fused kernels, not torch.compile")


def check_zero_shards(layout: Layout, dpc: int) -> None:
    """HSDP is FSDP's (ZeRO-3's) hybrid: the parameters are gathered inside the shard group, so it needs stage 3
    (stages 1 and 2 shard no parameters; their hybrid, ZeRO++'s hpZ, is not modelled)."""
    s = layout.zero_shards
    if s is None:
        return
    if layout.zero_stage != 3:
        raise LayoutError("zero_shards", f"hybrid sharding needs zero_stage 3, got zero_stage {layout.zero_stage}")
    if s < 1 or dpc % s:
        raise LayoutError("zero_shards", f"must divide dp·cp ({dpc}), got {s}")
    if layout.ep > 1:
        raise LayoutError("zero_shards", "hybrid sharding of expert-parallel layers is not modelled: ep must be 1")


def kv_heads_per_tp_rank(model: Model, tp: int) -> int:
    """Key/value heads on one TP rank: split while there are enough, else each rank keeps (a copy of) one."""
    return model.kv_heads // min(tp, model.kv_heads)


def check_ulysses_heads(model: Model, tp: int, cp: int) -> None:
    """DeepSpeed-Ulysses gives each CP rank whole heads: cp must divide the query heads of a TP rank. With
    grouped-query attention a TP rank may hold fewer K/V heads than cp ranks: then they are repeated up to cp
    (one per rank, as verl's Ulysses does for GQA) so cp must be a multiple of them; otherwise cp divides them."""
    q, kv = model.heads // tp, kv_heads_per_tp_rank(model, tp)
    if q % cp:
        raise LayoutError("cp", f"all_to_all needs cp to divide the attention heads per TP rank ({q}), got {cp}")
    if (kv >= cp and kv % cp) or (kv < cp and cp % kv):
        raise LayoutError("cp", f"all_to_all needs cp to divide the key/value heads per TP rank ({kv}) or be a "
                                f"multiple of them (repeated K/V heads), got {cp}")


def check_micro_batches(layout: Layout, m: int) -> None:
    """Schedules' own rules: interleaved 1F1B runs rounds of pp micro-batches (Megatron-LM)."""
    if layout.schedule == "interleaved_1f1b" and layout.pp > 1 and m % layout.pp:
        raise LayoutError("micro_batch", f"interleaved_1f1b needs the micro-batches per step "
                                         f"({m}) to be a multiple of pp ({layout.pp})")


def parse_auto(field: str, value: int | str | None) -> int | None:
    """`auto` (or None) -> None; otherwise a positive integer, or LayoutError naming `field`."""
    if value is None or value == "auto":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise LayoutError(field, f"must be auto or a positive integer, got {value!r}") from None
    if number < 1:
        raise LayoutError(field, f"must be auto or ≥ 1, got {number}")
    return number
