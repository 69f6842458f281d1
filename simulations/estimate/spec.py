"""From flat options (the CLI's flags, the API's query) to a model, a cluster and a layout."""

from __future__ import annotations

from dataclasses import replace

from simulations.hardware import GPU, GPUS, Cluster, cluster
from simulations.estimate.kernels import ATTENTION_KERNELS
from simulations.estimate.layout import EXECUTIONS, FSDP_VERSIONS, Layout, LayoutError, check_state_dtypes, parse_auto, validate
from simulations.estimate.models import MODELS, Model
from simulations.estimate.stacks import STACKS

SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len")


def check_profile_cluster(hardware: GPU, gpus: int) -> None:
    """A calibrated machine estimates the devices it has a link measured between: one, or, with an interconnect
    measured (two ranks on it), as many as share that link."""
    if gpus > 1 and not hardware.nvlink_bandwidth:
        raise LayoutError("gpus", f"must be 1 with a hardware profile that measured no interconnect "
                                  f"(calibrate on a machine with two devices, or a CPU), got {gpus}")


def build(model: str = "llama3-70b", *, layers: int | None = None, hidden: int | None = None,
          heads: int | None = None, kv_heads: int | None = None, ffn_hidden: int | None = None,
          vocab: int | None = None, seq_len: int | None = None, experts: int | None = None, top_k: int | None = None,
          gpu: str = "h100-80gb", gpus: int = 1024,
          gpus_per_node: int = 8, tp: int = 8, pp: int = 1, cp: int = 1, ep: int = 1, zero_stage: int = 1,
          cp_comm: str = "ring", zero_shards: int | None = None,
          schedule: str = "1f1b", virtual_stages: int | str | None = "auto", micro_batch: int | str | None = "auto",
          global_batch: int = 1024, recompute: str = "selective", sequence_parallel: bool = True,
          flash_attention: bool | None = None, gated_mlp: bool | None = None, dropout: bool | None = None,
          overlap_grad_reduce: bool = True, overlap_param_gather: bool = True, overlap_tp_comm: bool = True,
          overlap_p2p_comm: bool = True, grad_accumulation_fusion: bool = True, grad_reduce_dtype: str = "bf16",
          attention_kernel: str = "auto", precision: str = "bf16", recompute_every: int = 1, network_gbps: float | None = None,
          optimizer_dtype: str = "fp32", cross_entropy: str | None = None, execution: str = "auto",
          fsdp: str = "fsdp2", fp8_param_gather: bool = False, stack: str = "auto", amp: bool = False,
          torch_compile: bool = False, check_layout: bool = True,
          hardware: GPU | None = None) -> tuple[Model, Cluster, Layout]:
    """A preset (its shape overridable field by field, e.g. a longer `seq_len`) or `custom`, which needs
    every shape field; raises LayoutError naming the field at fault. `check_layout=False` (the layout
    search, which tries its own TP, PP, CP) checks the model, the cluster and the batch only. The overlap and
    fusion switches, `grad_reduce_dtype`, `attention_kernel` and `execution` describe the training software (Layout's fields say what each
    does); the defaults are today's Megatron-core. `hardware`: a GPU-like entry in place of the catalog's `gpu`
    (a calibrated machine, simulations.estimate.profile.to_gpu), its devices all on one machine. `stack` names the training code (stacks.py), `amp` autocast over
    fp32 weights (stack hf), `torch_compile` torch.compile of the model; `cross_entropy` left None is the stack's
    loss (hf: Transformers' ForCausalLMLoss; torchtitan: torch's cross_entropy; otherwise Megatron's fp32)."""
    if stack not in STACKS:
        raise LayoutError("stack", f"must be one of {', '.join(STACKS)}, got {stack!r}")
    if amp and stack != "hf":
        raise LayoutError("amp", f"autocast over fp32 weights is modelled op by op for stack hf only, got stack {stack}")
    if cross_entropy is None:
        cross_entropy = {"hf": "hf", "torchtitan": "torch"}.get(stack, "fp32")
    shape = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden, vocab=vocab,
                 seq_len=seq_len)
    if model == "custom":
        missing = [k for k in SHAPE_FIELDS if shape[k] is None and k not in ("kv_heads", "ffn_hidden")]
        if missing:
            raise LayoutError(missing[0], f"model=custom needs {', '.join(missing)}")
        shape["kv_heads"] = shape["kv_heads"] or shape["heads"]
        shape["ffn_hidden"] = shape["ffn_hidden"] or 4 * shape["hidden"]
        spec = Model("custom", **shape, gated_mlp=False, dropout=False, flash_attention=True)
    elif model in MODELS:
        spec = replace(MODELS[model], **{k: v for k, v in shape.items() if v is not None})
    else:
        raise LayoutError("model", f"must be one of {', '.join([*MODELS, 'custom'])}, got {model!r}")
    if flash_attention is not None:  # presets say what their own papers ran; a newer run may differ
        spec = replace(spec, flash_attention=flash_attention)
    if gated_mlp is not None:  # SwiGLU (Llama, Mixtral) or a two-matrix MLP (GPT); custom shapes default to GPT's
        spec = replace(spec, gated_mlp=gated_mlp)
    if dropout is not None:  # GPT-3-era runs drop out after attention and MLP; Llama-era runs do not
        spec = replace(spec, dropout=dropout)
    if grad_reduce_dtype not in ("bf16", "fp32"):
        raise LayoutError("grad_reduce_dtype", f"must be bf16 or fp32, got {grad_reduce_dtype!r}")
    if experts is not None or top_k is not None:  # a mixture of experts: each FFN becomes `experts` FFNs
        spec = replace(spec, experts=experts if experts is not None else spec.experts,
                       top_k=top_k if top_k is not None else max(1, spec.top_k))
        if spec.experts < 0 or spec.top_k < 1 or (spec.experts and spec.top_k > spec.experts):
            raise LayoutError("top_k", f"must be 1..experts ({spec.experts}), got {spec.top_k}")
    for name in SHAPE_FIELDS:
        if getattr(spec, name) < 1:
            raise LayoutError(name, f"must be ≥ 1, got {getattr(spec, name)}")
    if spec.hidden % spec.heads:
        raise LayoutError("heads", f"must divide hidden ({spec.hidden}), got {spec.heads}")
    if spec.heads % spec.kv_heads:
        raise LayoutError("kv_heads", f"must divide heads ({spec.heads}), got {spec.kv_heads}")
    if hardware is not None:
        check_profile_cluster(hardware, gpus)
    elif gpu not in GPUS:
        raise LayoutError("gpu", f"must be one of {', '.join(GPUS)}, got {gpu!r}")
    if gpus_per_node < 1 or gpus_per_node > 72:
        raise LayoutError("gpus_per_node", f"must be 1..72, got {gpus_per_node}")
    if gpus % gpus_per_node and gpus > gpus_per_node:
        raise LayoutError("gpus", f"must fill whole nodes: a multiple of gpus_per_node ({gpus_per_node}), got {gpus}")
    # At least 1 Gb/s (one Ethernet port): below it a step takes longer than a float can say.
    if network_gbps is not None and not 1 <= network_gbps <= 1e6:
        raise LayoutError("network_gbps", f"must be at least 1 and at most 1,000,000 Gb/s per node, got {network_gbps}")
    # the node's network bandwidth, all its NICs together (Gb/s); default: the GPU's catalog node (hardware.py)
    if hardware is not None:  # one machine: every device in one node, linked as calibrate measured
        hw = Cluster(hardware, gpus, gpus, hardware.node_egress)
    else:
        hw = cluster(gpu, gpus, gpus_per_node, node_egress=None if network_gbps is None else network_gbps * 1e9 / 8)
    layout = Layout(tp=tp, pp=pp, cp=cp, ep=ep, zero_stage=zero_stage, cp_comm=cp_comm,  # type: ignore[arg-type]
                    zero_shards=zero_shards, schedule=schedule,  # type: ignore[arg-type]
                    virtual_stages=parse_auto("virtual_stages", virtual_stages),
                    micro_batch=parse_auto("micro_batch", micro_batch), global_batch=global_batch,
                    recompute=recompute, sequence_parallel=sequence_parallel,  # type: ignore[arg-type]
                    overlap_grad_reduce=overlap_grad_reduce, overlap_param_gather=overlap_param_gather,
                    overlap_tp_comm=overlap_tp_comm, overlap_p2p_comm=overlap_p2p_comm,
                    grad_accumulation_fusion=grad_accumulation_fusion,
                    grad_reduce_bytes=4 if grad_reduce_dtype == "fp32" else 2,
                    attention_kernel=attention_kernel, precision=precision,  # type: ignore[arg-type]
                    recompute_every=recompute_every, optimizer_dtype=optimizer_dtype,  # type: ignore[arg-type]
                    cross_entropy=cross_entropy, execution=execution, fsdp=fsdp,  # type: ignore[arg-type]
                    fp8_param_gather=fp8_param_gather, stack=stack, amp=amp,  # type: ignore[arg-type]
                    torch_compile=torch_compile)
    if layout.virtual_stages is None and schedule != "interleaved_1f1b":
        layout = replace(layout, virtual_stages=1)
    if attention_kernel not in ATTENTION_KERNELS:
        raise LayoutError("attention_kernel", f"must be one of {', '.join(ATTENTION_KERNELS)}, got {attention_kernel!r}")
    check_state_dtypes(layout)
    if fsdp not in FSDP_VERSIONS:
        raise LayoutError("fsdp", f"must be one of {', '.join(FSDP_VERSIONS)}, got {fsdp!r}")
    if fp8_param_gather and precision != "fp8":
        raise LayoutError("fp8_param_gather", f"gathers FP8 weights, so it needs precision fp8, got {precision}")
    if execution not in EXECUTIONS:
        raise LayoutError("execution", f"must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
    if precision not in ("bf16", "fp8"):
        raise LayoutError("precision", f"must be bf16 or fp8, got {precision!r}")
    if precision == "fp8" and not hw.gpu.fp8_flops:
        raise LayoutError("precision", f"fp8 needs FP8 tensor cores (H100, H200, B200); {hw.gpu.title} has none")
    if not check_layout:
        if global_batch < 1:
            raise LayoutError("global_batch", f"must be ≥ 1, got {global_batch}")
        return spec, hw, layout
    if tp > gpus_per_node:
        raise LayoutError("tp", f"must fit in a node (≤ gpus_per_node = {gpus_per_node}), got {tp}")
    validate(spec, hw, layout)
    return spec, hw, layout
