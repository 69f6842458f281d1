"""What one GPU holds during a step: its parameters' share (by TP, PP, EP and the ZeRO shards), the model states
by ZeRO stage (simulations.formulas) in the dtypes the stack keeps them in, what FSDP gathers on the way, and the
activations each schedule keeps in flight (Korthikanti et al. 2022's per-layer count with this model's own tensors)
with the loss's logits on the last stage. `Estimate.fits` compares the total, with the allocator's
fragmentation, with what a process can allocate (simulations.hardware).
"""

from __future__ import annotations

import math

from simulations import formulas
from simulations.estimate import stacks
from simulations.estimate.layout import Layout, kv_heads_per_tp_rank
from simulations.estimate.models import BF16, Model
from simulations.hardware import Cluster

# Adam's state, bytes a parameter: fp32 master weights, momentum and variance (ZeRO, arXiv:1910.02054); or Apex's
# DistributedFusedAdam with dtype bf16 ("datatype for optimizer state"), whose store_params (default True) keeps a
# copy of the parameter shard in that dtype beside m and v (apex/contrib/optimizers/distributed_fused_adam.py).
OPTIMIZER_BYTES = {"fp32": 12, "bf16": 6}
# The loss's bytes a logit at its peak, this rank's vocabulary share. "fp32": Megatron-LM's vocab-parallel cross
# entropy takes logits.float() and keeps its softmax in that fp32 copy for backward, beside the bf16 logits the output
# layer wrote (tensor_parallel/cross_entropy.py, calculate_logits_max; its --cross-entropy-loss-fusion variant,
# fusions/fused_cross_entropy.py, saves the same fp32 softmax, and the backward works in it in place): 2 + 4.
# "fused": flash-attn's xentropy kernel (flash_attn/losses/cross_entropy.py, LLM Foundry's default loss_fn) saves the
# bf16 logits and one fp32 log-sum-exp a token, and its backward writes a bf16 gradient: 2 + 2.
# "torch": torch.nn.functional.cross_entropy, eager, on logits.float(), the bf16 logits dropped before backward
# (torchtitan's train.py at 9dec370: `del pred`, "need to free to before bwd to avoid peaking memory"): log_softmax
# saves its fp32 output; at the start of backward nll_loss's gradient (fp32, dense) and log_softmax's backward output
# (fp32) are allocated beside it: 4 + 4 + 4, the loss's peak (the forward's is 2 + 4 + 4). Measured, not only read:
# tests/unit/test_estimate_memory.py runs it in torch and reads the process's peak.
# "loss_parallel": the same call under torch's loss_parallel on vocabulary-sharded logits (DTensor; torchtitan with TP,
# torch/distributed/tensor/parallel/loss.py): its _log_softmax keeps x − max beside the fp32 copy and writes the result
# (saved); its fused backward, _nll_loss_and_log_softmax_backward, allocates zeros_like(x), exp(x), their sum and the
# product with the gradient: the saved result and three fp32 temporaries at its peak, 16 (measured likewise).
# "hf": Transformers' ForCausalLMLoss, the same kernels as "torch", but the model's output (CausalLMOutputWithPast) holds
# the bf16 logits through backward in the loop most people write (`outputs = model(**batch); outputs.loss.backward()`):
# 2 + 4 + 4 + 4. (HF Trainer's compute_loss returns the loss alone and drops them: 12.)
LOGIT_BYTES = {"fp32": BF16 + 4, "fused": BF16 + BF16, "torch": 4 + 4 + 4, "loss_parallel": 4 + 4 + 4 + 4,
               "hf": BF16 + 4 + 4 + 4}
FP32 = 4


def layer_param_split(model: Model, layout: Layout) -> tuple[float, float]:
    """One layer's parameters on one GPU, (dense, expert): attention and norms split over TP; a mixture of
    experts' FFNs also over EP. A dense model's FFN, and experts not split over EP (ep = 1, so replicated
    on every data-parallel rank as the dense weights are), count as dense."""
    ffn = (3 if model.gated_mlp else 2) * model.hidden * model.ffn_hidden * max(1, model.experts)
    attn = model.layer_params() - ffn
    if not model.experts or layout.ep == 1:
        return (attn + ffn) / layout.tp, 0.0
    return attn / layout.tp, ffn / layout.ep / layout.tp


def layer_params_local(model: Model, layout: Layout) -> float:
    """One layer's parameters on one GPU: attention split over TP, experts also over EP."""
    return sum(layer_param_split(model, layout))


def stage_param_split(model: Model, layout: Layout, stage: int, v: int | None = None) -> tuple[float, float]:
    """Parameters one GPU of `stage` holds, (dense, expert): its layers' share, plus an embedding on the
    first and the output layer on the last stage (dense), all split over TP (and the experts over EP).

    With `v` (the virtual stages in effect) the stage's layers are those its chunks hold (chunk_layers): with Llama
    3's placement the first and the last stage hold one layer fewer than the others, the first chunk on the first
    stage only the embedding and the last on the last only the output layer (Dubey et al. 2024, sec. 3.3.2; Megatron-LM's
    --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split, arguments.py, count the
    embedding and the loss as a layer each in the split). Without, ceil(L/p) layers: the busiest stage of an uneven
    split, what the DP traffic and the optimizer step are sized by (traffic.py, cost.py)."""
    p = layout.pp
    embeddings = (stage == 0) + (stage == p - 1)
    if v is None:
        layers = math.ceil(model.layers / p)  # an uneven split: the busiest stage
    else:
        layers = sum(chunk_layers(model.layers, p, v)[stage::p])
    dense, expert = layer_param_split(model, layout)
    return layers * dense + embeddings * model.vocab * model.hidden / layout.tp, layers * expert


def stage_params(model: Model, layout: Layout, stage: int, v: int | None = None) -> float:
    return sum(stage_param_split(model, layout, stage, v))


def shard_ranks(layout: Layout, dpc: int) -> tuple[int, int]:
    """The ranks over which (dense, expert) parameters' gradients are reduced and, under ZeRO, their states
    sharded: the dense over DP·CP (hybrid sharded: `zero_shards` of them); a mixture of experts' expert weights
    over their expert-data-parallel group, dp·cp/ep ranks."""
    return layout.zero_shards or dpc, dpc // layout.ep


def model_states(model: Model, layout: Layout, stage: int, dpc: int, v: int | None = None) -> dict[str, float]:
    """Parameters, gradients and optimizer states one GPU of `stage` holds during backward, by ZeRO stage
    (formulas.model_state_bytes), the dense and the expert weights each sharded over their own replicas.

    Gradients are kept in the dtype they are reduced in: Megatron-LM accumulates them in an fp32 main_grad buffer
    when it reduces in fp32 (--accumulate-allreduce-grads-in-fp32, forced with bf16), so its distributed optimizer
    holds 6 + 12/N bytes a parameter (docs/source/api-guide/distrib_optimizer.md, "bf16 param, fp32 grads"); in
    bf16 (NeMo's grad_sync_dtype: bf16) 4 + 12/N. Its collectives need no other buffers: Megatron-core's
    ParamAndGradBuffer reduce-scatters each bucket in place (the output is the rank's shard, a view of the gradient
    buffer) and all-gathers the updated shards straight into the contiguous bf16 parameter buffer. Under ZeRO-3, as PyTorch's FSDP runs it with mixed precision, the
    sharded parameters are the fp32 master weights themselves (counted in the optimizer's 12 bytes; FSDP's
    MixedPrecision: param_dtype is the unsharded parameters' dtype in forward and backward, the shards stay in full
    precision), and the reduced gradient shard is cast to that fp32 (FSDP1's _cast_grad_to_param_dtype; FSDP2 keeps
    it in the sharded parameter's dtype): 16/N bytes a parameter in all, no bf16 shard. At the start of backward it
    also holds:
    - two units' (layers') gathered bf16 parameters, the one computing and the one prefetched (FSDP's rate limiter,
      limit_all_gathers, on by default since pytorch#104900, keeps two all-gathers in flight; PyTorch's FSDP notes,
      "FSDP Prefetch Nuances");
    - that unit's unsharded bf16 gradient and, when gradients are reduced in fp32, its fp32 copy for the
      reduce-scatter (FSDP's _post_backward_hook casts flat_param.grad to the reduce dtype before _reduce_grad);
    - the root unit's parameters, the embedding and the output layer, gathered from forward to backward (FSDP does
      not reshard the root after forward: fully_shard's reshard_after_forward, "the root FSDP state has its value
      specially set to False"; FSDP1's _post_forward_reshard skips the root too)."""
    states: dict[str, float] = {}
    fsdp = layout.zero_stage == 3
    reduce_bytes, optimizer_bytes = layout.grad_reduce_bytes, OPTIMIZER_BYTES[layout.optimizer_dtype]
    for params, ranks in zip(stage_param_split(model, layout, stage, v), shard_ranks(layout, dpc)):
        for role, nbytes in formulas.model_state_bytes(params, "bf16", layout.zero_stage, ranks,
                                                       grad_bytes=FP32 if fsdp else reduce_bytes,
                                                       optimizer_bytes=optimizer_bytes).items():
            states[role] = states.get(role, 0.0) + nbytes
    if fsdp:
        unit = layer_params_local(model, layout)
        states["parameters"] = 2 * layout.layer_gather_bytes * unit
        states["gradients"] += unit * (BF16 + (reduce_bytes if reduce_bytes != BF16 else 0))
        root = ((stage == 0) + (stage == layout.pp - 1)) * model.vocab * model.hidden / layout.tp
        states["parameters"] += BF16 * root * (1 - 1 / shard_ranks(layout, dpc)[0])
    return states


def chunk_layers(layers: int, p: int, v: int) -> list[int]:
    """Layers of each of the p·v model chunks, in stage order. Up to one layer a chunk: ceil(L/(p·v)) each, the
    busiest split, which sets the pace. Beyond (p·v = L + 1 or L + 2), Llama 3's placement (Dubey et al. 2024,
    sec. 3.3.2, "Pipeline parallelism"): one layer a chunk, the first chunk holding only the embedding and, with
    L + 2 chunks, the last only the output layer and the loss."""
    chunks = p * v
    if chunks <= layers:
        return [math.ceil(layers / chunks)] * chunks
    return [0] + [1] * layers + [0] * (chunks - layers - 1)


def interleaved_warmup(p: int, v: int, m: int, stage: int, group: int | None = None) -> int:
    """Forward passes (chunk-micro-batches) `stage` runs before its first backward under Megatron-LM's interleaved
    schedule (megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches): (p − stage − 1)·2 for the
    round trip to the last stage and back, plus (v − 1)·N for the earlier chunks' groups of N micro-batches,
    all m·v of them when that is more. N is microbatch_group_size_per_vp_stage, Llama 3's tunable N (Dubey et al.
    2024, Figure 6), p by default (model_parallel_config.py) and at least p (a smaller N leaves dependency bubbles:
    the schedule refuses it). Until Megatron-LM's tunable schedule (Nov. 2024, commit 4295be1) m = p also ran every
    forward first; from it, that is only where the count above reaches m·v."""
    n = p if group is None else group
    return min(m * v, (p - stage - 1) * 2 + (v - 1) * n)


def interleaved_chunk_order(m: int, v: int, group: int) -> list[int]:
    """The model chunk of each of a stage's m·v forwards, in order (schedules.py, get_schedule_table): groups of
    `group` micro-batches, each run through chunk 0, then chunk 1, ... chunk v − 1; the last group takes what is
    left. Backward k runs chunk v − 1 − that of forward k (get_model_chunk_id with forward=False)."""
    order: list[int] = []
    for first in range(0, m, group):
        size = m - first if first + group >= m else group
        order += [chunk for chunk in range(v) for _ in range(size)]
        if first + group >= m:
            break
    return order


def interleaved_layers_in_flight(chunks: list[int], p: int, v: int, m: int, stage: int) -> int:
    """The most layers whose activations `stage` holds at once under Megatron's interleaved schedule
    (Narayanan et al. 2021 sec. 2.2.2; Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving):
    interleaved_warmup's forwards, then one forward and one backward each (the forward first: its activations are
    held before the backward frees the oldest), then the cool-down's backwards, in interleaved_chunk_order with N = p.
    With equal chunks of k layers the peak is the warm-up's end plus one, (p·v + p − 1)·k on the first stage: its
    L·(1 + (p − 1)/(p·v)) of Korthikanti et al. (sec. 4.2.3). With Llama 3's placement the first stage's
    embedding-only chunk holds nothing, the second stage holds a layer more, and the steady phase can go above the
    warm-up (a layer's forward in while an empty chunk's backward goes out)."""
    own = chunks[stage::p]
    order = interleaved_chunk_order(m, v, p)
    warmup = interleaved_warmup(p, v, m, stage)
    held = sum(own[c] for c in order[:warmup])
    peak = held
    steady = len(order) - warmup
    if m % p == 0:  # groups of p all through: the steady phase repeats every p·v steps, so one period is replayed
        steady = min(steady, p * v)
    for k in range(steady):
        held += own[order[warmup + k]]
        peak = max(peak, held)
        held -= own[v - 1 - order[k]]
    return peak


def pipeline_micro_batches_in_flight(p: int, m: int, stage: int) -> int:
    """Micro-batches whose activations `stage` holds at once under 1F1B without interleaving (Narayanan et al. 2021
    sec. 2.2.1; Megatron-LM schedules.py, forward_backward_pipelining_without_interleaving): a warm-up of
    p − stage − 1 forwards (get_pp_rank_microbatches), then one forward before each backward, so p − stage, or all
    m when fewer: p on the first stage, 1 on the last."""
    return min(p - stage, m)


def layer_activation_bytes_per_token(model: Model) -> float:
    """Bytes one layer keeps for backward per token, bf16, the attention scores aside (fused, or recomputed), in
    Korthikanti et al.'s decomposition (sec. 4.1): the two norms' inputs, the Q/K/V projection's input, Q, K, V
    (K and V of the key/value heads only), the attention output, the MLP's input, 2 bytes an element; the MLP's
    activations (GeLU: its input and output, 2·f each; SwiGLU: gate, up and their product, 3·f; the routed
    experts' top_k copies); a 1-byte dropout mask after attention and after the MLP. A GPT-3 layer (MHA,
    GeLU of 4h, dropout) comes to their 34·h. A fused attention kernel also keeps the softmax's log-sum-exp, one
    fp32 a head (FlashAttention-2's softmax_lse, [batch, heads, sequence], saved with Q, K, V and O for its
    backward); never the scores. A layer's output is not counted: it is the next layer's input, and a stage's last
    one is sent on and freed (Megatron-LM's deallocate_pipeline_outputs keeps only its grad_fn)."""
    h, kv = model.hidden, model.kv_heads * model.head_dim
    f = model.ffn_hidden * (model.top_k if model.experts else 1)
    mlp = (6 if model.gated_mlp else 4) * f
    masks = 2 * h if model.dropout else 0
    log_sum_exp = 4 * model.heads if model.flash_attention else 0
    return 2 * (6 * h + 2 * kv) + mlp + masks + log_sum_exp


def op_checkpoint_bytes_per_token(model: Model, layout: Layout) -> float:
    """Bytes a layer keeps per token on one GPU under torchtitan's per-op selective checkpointing (Layout.recompute
    "op"): the layer's input, which the replay starts from (its share under sequence parallelism); the outputs of
    the matmuls it does not replay (the first, third, ... the layer calls: models.Model.layer_matmuls); attention's
    output and its fp32 log-sum-exp a head (the fused attention op is saved whole). Element-wise results (norms,
    rotary positions, SwiGLU's product, dropout) are replayed, not kept."""
    t = layout.tp
    sp = t if (layout.sequence_parallel and t > 1) else 1
    kept = sum(n * copies for _, n, _, copies in model.layer_matmuls(t)[0::2])
    attention_out = model.heads * model.head_dim / t
    return BF16 * (model.hidden / sp + kept + attention_out) + 4 * model.heads / t


def layer_activation_bytes(model: Model, layout: Layout, micro_batch: int, recompute: str) -> float:
    """Bytes one layer keeps for backward on one GPU: formulas' (Korthikanti's) count, with this model's own
    tensors (layer_activation_bytes_per_token) and, with CP by all-gather, the other ranks' K and V."""
    t, c = layout.tp, layout.cp
    if recompute == "none" and model.flash_attention:
        recompute = "selective"  # FlashAttention never stores the s×s scores (REFERENCE.md)
    if recompute == "op":
        per_layer = micro_batch * model.seq_len / c * op_checkpoint_bytes_per_token(model, layout)
    else:
        per_layer = formulas.activation_bytes_per_layer(model.seq_len // c, micro_batch, model.hidden, model.heads, t,
                                                        recompute, layout.sequence_parallel)
    if recompute not in ("full", "op"):  # Korthikanti's 34·h bytes a token are a GPT-3 layer's; this model's own, tensor by tensor
        per_layer += micro_batch * model.seq_len / c * (layer_activation_bytes_per_token(model) - 34 * model.hidden) / t
    if c > 1 and layout.cp_comm == "all_gather" and recompute != "full":  # the other ranks' K, V kept for backward
        kv_heads = kv_heads_per_tp_rank(model, t)
        per_layer += (c - 1) * 2 * micro_batch * model.seq_len / c * kv_heads * model.head_dim * BF16
    return per_layer


def memory(model: Model, layout: Layout, cluster: Cluster, micro_batch: int, m: int, v: int) -> dict[str, float]:
    """Bytes per GPU by role on the busiest stage (first or last), formulas' model states and activations.

    The input embedding's gradient, a dense [V/t, h] table (torch's embedding_dense_backward), is not counted: it
    is written at the end of a micro-batch's backward, once that micro-batch's layers have freed their activations,
    so it stays below the peak the in-flight activations set."""
    dp = layout.dp(cluster.gpus)
    t, p, c = layout.tp, layout.pp, layout.cp
    recompute = layout.recompute
    if recompute == "full" and layout.recompute_every > 1:  # the average layer: 1 in n keeps its input only
        kept = layer_activation_bytes(model, layout, micro_batch, "none")
        per_layer = (layer_activation_bytes(model, layout, micro_batch, "full")
                     + (layout.recompute_every - 1) * kept) / layout.recompute_every
    else:
        per_layer = layer_activation_bytes(model, layout, micro_batch, recompute)
    chunks = chunk_layers(model.layers, p, v)
    best = None
    # the first and last stages hold the embedding and the output; with Llama 3's placement the second holds a
    # layer more than the first (its first chunk is the embedding's)
    for stage in {0, min(1, p - 1), p - 1}:
        states = model_states(model, layout, stage, dp * c, v)
        layers = sum(chunks[stage::p])  # the stage's chunks (Llama 3's placement: the first holds no layer)
        if layout.schedule == "gpipe":  # every forward before any backward
            acts = per_layer * layers * m
        elif layout.schedule == "interleaved_1f1b" and v > 1 and m >= p:
            acts = per_layer * interleaved_layers_in_flight(chunks, p, v, m, stage)
        elif v > 1:  # fewer micro-batches than stages (refused by check_micro_batches): Korthikanti's factor
            acts = per_layer * layers * min(p, m) * (1 + (p - 1) / (p * v))
        else:
            acts = per_layer * layers * pipeline_micro_batches_in_flight(p, m, stage)
        if recompute == "full":  # the layer being replayed holds its whole activations for a moment
            acts += formulas.activation_bytes_per_layer(model.seq_len // c, micro_batch, model.hidden, model.heads,
                                                        t, "selective", layout.sequence_parallel)
        elif recompute == "op":  # and what the replay rebuilds, beside what the layer kept
            acts += layer_activation_bytes(model, layout, micro_batch, "none") - per_layer
        if stage == p - 1:  # the logits, this rank's vocabulary share, and what the loss keeps beside them
            acts += micro_batch * model.seq_len / c * model.vocab / t * LOGIT_BYTES[layout.cross_entropy]
        roles = {**states, "activations": acts}
        roles["total"] = sum(roles.values())
        if best is None or roles["total"] > best["total"]:
            best = roles
    return best


def hf_activation_bytes(model: Model, layout: Layout, micro_batch: int) -> dict[str, float]:
    """What a Transformers Llama step keeps for backward on one GPU, tensor by tensor (stacks.hf_llama_saved): every
    layer's saved tensors and the model end's (final norm, lm_head's bf16 input), the rotary cos and sin (one [tokens,
    head dim] table each, in the embeddings' dtype); the logits and the loss's buffers at its backward (LOGIT_BYTES
    "hf"). HF's gradient checkpointing (recompute full) keeps each layer's input instead (the residual's bytes), and
    one layer's whole saved set while it is replayed."""
    tokens = micro_batch * model.seq_len
    per_layer = tokens * stacks.hf_saved_bytes_per_token(model, layout.amp)
    if layout.recompute == "full":
        layers = model.layers * tokens * stacks.residual_bytes(layout.amp) * model.hidden + per_layer
    else:
        layers = model.layers * per_layer
    rotary = 2 * tokens * model.head_dim * stacks.residual_bytes(layout.amp)
    held = {"activations": layers + tokens * stacks.hf_head_saved_bytes_per_token(model, layout.amp) + rotary,
            "logits and loss": tokens * model.vocab * LOGIT_BYTES[layout.cross_entropy]}
    # use_cache (config.use_cache, True for Llama; only gradient checkpointing turns it off in training): each layer
    # stores its K after RoPE and its V in the output's DynamicCache (references, no copy). V and, in bf16, K are
    # SDPA's saved tensors already; under AMP K is the fp32 rotated tensor SDPA cast from, kept alive by the cache.
    if layout.amp and layout.recompute != "full":
        held["KV cache"] = model.layers * tokens * FP32 * model.kv_heads * model.head_dim
    return held


def hf_memory(model: Model, layout: Layout, cluster: Cluster, micro_batch: int, m: int) -> tuple[dict[str, float], str]:
    """Bytes per GPU of a Transformers step by role at its peak, and which moment of the step that is. What is held
    changes through the step, so the peak is the largest of three moments (gradients appear as activations are
    freed, layer by layer, so between these the sum moves linearly and peaks at one end):
    - "backward start", at the loss's backward: weights, optimizer states, autocast's bf16 weight copies (AMP: made
      in forward and kept by each linear for its input gradient: 2 bytes a parameter of the linears, lm_head's too),
      every activation, the logits and the loss's buffers; and the gradients when micro-batches accumulate into them;
    - "end of backward": weights, optimizer states, gradients;
    - "optimizer step": those and torch.optim.AdamW's foreach temporary, sqrt(v) for every parameter at once
      (torch/optim/adam.py, _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs), 4 bytes a
      parameter).
    States: AMP keeps fp32 weights, fp32 gradients and fp32 m and v (formulas' fp32 row: 4 + 4 + 8), sharded as the
    ZeRO stage says; without AMP, model_states' bf16 weights and gradients with fp32 master weights, m and v."""
    dpc = layout.dp(cluster.gpus)
    if layout.amp:
        states = formulas.model_state_bytes(stage_params(model, layout, 0), "fp32", layout.zero_stage,
                                            shard_ranks(layout, dpc)[0])
    else:
        states = model_states(model, layout, 0, dpc)
    params = stage_params(model, layout, 0) / (shard_ranks(layout, dpc)[0] if layout.zero_stage >= 1 else 1)
    casts = BF16 * (model.layers * stacks.linear_weights(model) + model.vocab * model.hidden) if layout.amp else 0.0
    held = hf_activation_bytes(model, layout, micro_batch)
    base = {"parameters": states["parameters"], "optimizer": states["optimizer"]}
    moments = {
        "backward start": {**base, **({"gradients": states["gradients"]} if m > 1 else {}),
                           **({"weight casts": casts} if casts else {}), **held},
        "end of backward": {**base, "gradients": states["gradients"]},
        "optimizer step": {**base, "gradients": states["gradients"], "optimizer temporaries": FP32 * params},
    }
    phase = max(moments, key=lambda name: sum(moments[name].values()))
    roles = dict(moments[phase])
    roles["total"] = sum(roles.values())
    return roles, phase
