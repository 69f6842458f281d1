"""The training stacks people run on one GPU, op by op: what a Hugging Face Transformers Llama layer launches, moves
and keeps, eager or compiled, under AMP or in bf16. Torch-free tables; compute.py times them, memory.py counts them.

Read from the model code, not fitted to any run: huggingface/transformers, src/transformers/models/llama/
modeling_llama.py (LlamaRMSNorm, apply_rotary_pos_emb and rotate_half, LlamaAttention, LlamaMLP, LlamaDecoderLayer),
integrations/sdpa_attention.py (sdpa_attention_forward: with no attention mask and torch ≥ 2.5, is_causal and
enable_gqa, no repeat_kv copy) and loss/loss_utils.py (ForCausalLMLoss: `logits = logits.float()`, then
nn.functional.cross_entropy). Mistral, Qwen2 and (for these ops) GPT-NeoX's rotary path are written the same way
(transformers' "Copied from ...llama" modules). The backward of each op is autograd's formula for it
(tools/autograd/derivatives.yaml in pytorch/pytorch: pow_backward, mul's two products, mean's expand / numel,
rsqrt's -0.5·grad·result³, slice_backward's zeros + copy, the engine's cast of a gradient to its input's dtype).

Stacks (Layout.stack):
- "auto": today's estimator, unchanged: Megatron-core's fused kernels, or eager PyTorch FSDP with ZeRO-3 (layout.py);
- "hf": transformers' LlamaForCausalLM (and its Mistral / Qwen2 / GPT-NeoX siblings) as it runs eagerly with SDPA,
  the loss it computes on fp32-upcast logits, and torch.optim.AdamW (foreach, the default on CUDA); tables below;
- "torchtitan": torchtitan's Llama, eager (or compiled), F.cross_entropy on fp32 logits (execution "eager",
  cross_entropy "torch": compute.py's eager Llama passes);
- "megatron": Megatron-core with TransformerEngine (execution "fused", cross_entropy "fp32").

AMP (Layout.amp): torch.autocast(bf16) over fp32 weights, as HF Trainer's bf16=True and Lightning's "bf16-mixed" run
it. What it does to a Llama layer, from autocast's op lists (aten/src/ATen/autocast_mode.cpp: linear, matmul and
scaled_dot_product_attention run in bf16, their inputs cast; everything else runs in its inputs' dtype):
- every nn.Linear casts its fp32 weight to bf16 each forward (read 4, write 2 a parameter) and its input to bf16
  (the three of Q/K/V cast the same norm output three times, gate and up twice: autocast caches only leaf weights);
  in backward the bf16 weight gradient is cast back to fp32 (read 2, write 4);
- nn.Embedding is not on the lists: it returns fp32, so the residual stream stays fp32 through every layer (the
  residual adds promote bf16 + fp32 to fp32), and LlamaRMSNorm's `.to(torch.float32)` is a no-op;
- the rotary cos and sin take the embeddings' dtype (LlamaRotaryEmbedding returns cos.to(x.dtype)), so q·cos
  promotes the bf16 projections to fp32 and SDPA casts Q and K back to bf16.

torch.compile (Layout.torch_compile): inductor fuses each chain of element-wise ops between two extern kernels (the
GEMMs stay aten.mm, SDPA stays its kernel) into one generated kernel that reads the chain's inputs once and writes
only what leaves it: a GEMM's input, the residual stream, and what backward keeps (the saved set is taken to be
eager's: memory is not saved). A reduction over the last dimension and the element-wise ops around it (an RMSNorm)
fuse into one kernel too, and identical casts of one tensor are one (common-subexpression elimination). Checked on
this machine with torch 2.13's inductor (its C++ backend; TORCH_LOGS=output_code) on the HF layer of
tests/unit/test_estimate_single_gpu.py under autocast: per layer, forward, the kernels it generates are
cpp_fused_..._add_mean_mul_pow_rsqrt (residual add + RMSNorm + the input cast, twice), ..._cat_cos_mul_neg_sin_slice
(RoPE with SDPA's casts) and ..._mul_silu (SwiGLU), the GEMMs and SDPA left extern: the four chains counted below;
backward ..._mul_silu_silu_backward, ..._cat_clone_mul_neg_slice_backward (RoPE, one kernel for Q and one for K),
..._add_div_expand_mul_pow_sum (each norm's backward) and ..._add_mul_sum (the norms' weight gradients). The C++
backend also folds the weight casts into those loops and copies SDPA's gradients after its CPU backward, which CUDA's
Triton kernels and cuDNN do not: not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from simulations.estimate.models import BF16, Model

Stack = Literal["auto", "hf", "torchtitan", "megatron"]
STACKS = get_args(Stack)
FP32 = 4


@dataclass(frozen=True)
class Pass:
    """Element-wise work of one op (or one fused kernel): kernels launched and HBM bytes read plus written, per
    token of the micro-batch."""

    name: str
    kernels: int
    bytes: float


@dataclass(frozen=True)
class Widths:
    """A layer's tensor widths, elements a token: hidden, query, key/value, FFN, heads, head dim."""

    h: float
    q: float
    kv: float
    f: float
    heads: float
    d: float


def widths(model: Model) -> Widths:
    return Widths(model.hidden, model.heads * model.head_dim, model.kv_heads * model.head_dim, model.ffn_hidden,
                  model.heads, model.head_dim)


def residual_bytes(amp: bool) -> int:
    """Bytes an element of the residual stream: fp32 under AMP (the embedding's output is fp32), else bf16."""
    return FP32 if amp else BF16


def rms_norm_passes(h: float, amp: bool) -> tuple[list[Pass], list[Pass]]:
    """LlamaRMSNorm over [tokens, h], forward and backward, op by op.

    Forward: hidden_states.to(torch.float32) (bf16: read 2, write 4; a no-op on fp32), .pow(2) (4, 4), .mean(-1) (4; 4),
    variance + eps and torch.rsqrt (4, 4 each: one value a token), hidden_states * rsqrt (4 and 4, 4), .to(input_dtype) (bf16:
    4, 2), self.weight * (r, r; r the residual's bytes). Backward (autograd): weight * x's two gradients (grad·weight:
    r, r; grad·x summed over tokens for the weight: 2r, r then r), the cast back (bf16: 2, 4), x * rsqrt's (grad·rsqrt:
    4, 4; grad·x summed over the row: 8, 4 then 4), rsqrt's -0.5·grad·result³ and mean's expand / numel (4 written),
    pow's grad·2·x^1 (x.pow(1) a copy: 4, 4; times 2: 4, 4; times grad: 8, 4), the two gradients of the fp32 input
    added (8, 4), the cast to the input's dtype (bf16: 4, 2)."""
    r = residual_bytes(amp)
    cast = not amp  # bf16 input: two casts each way
    forward = [Pass("norm: to float32", 1, (2 + 4) * h)] if cast else []
    forward += [Pass("norm: pow", 1, 8 * h), Pass("norm: mean", 1, 4 * h + 4), Pass("norm: + eps, rsqrt", 2, 16),
                Pass("norm: x * rsqrt", 1, 8 * h + 4)]
    forward += [Pass("norm: to input dtype", 1, (4 + 2) * h)] if cast else []
    forward += [Pass("norm: weight *", 1, 2 * r * h)]
    backward = [Pass("norm: weight * (input, weight gradients)", 3, 2 * r * h + 3 * r * h + r * h)]
    backward += [Pass("norm: to input dtype, backward", 1, (2 + 4) * h)] if cast else []
    backward += [Pass("norm: x * rsqrt (both gradients)", 3, 8 * h + 12 * h + 4 * h),
                 Pass("norm: rsqrt, mean backward", 4, 4 * h),
                 Pass("norm: pow backward", 3, 8 * h + 8 * h + 12 * h),
                 Pass("norm: two gradients added", 1, 12 * h)]
    backward += [Pass("norm: to float32, backward", 1, (4 + 2) * h)] if cast else []
    return forward, backward


def rope_passes(t: float, d: float, amp: bool) -> tuple[list[Pass], list[Pass]]:
    """apply_rotary_pos_emb on one of Q or K, `t` elements a token (bf16 from its projection), cos and sin d a token
    (fp32 under AMP: the product p bytes, 4 under AMP, else 2): q * cos (read 2 and the broadcast cos, write p);
    rotate_half: -x2 (half: 1, 1) and torch.cat((-x2, x1)) (2, 2); * sin (2, p); the sum (2p, p).
    Backward: the sum passes its gradient on; each product's gradient grad·cos (p, p) cast back to the bf16 input
    (AMP: 4, 2); cat's gradient is two views; -x2's a negation (1, 1); each slice's slice_backward a zeros of the whole
    (write 2) and a copy of the half (1, 1); Q's three gradients (q·cos, x1, x2) added twice (4, 2 each)."""
    p = FP32 if amp else BF16
    cos = p * d
    forward = [Pass("rope: q * cos", 1, 2 * t + cos + p * t), Pass("rope: neg", 1, 2 * t),
               Pass("rope: cat", 1, 4 * t), Pass("rope: * sin", 1, 2 * t + cos + p * t),
               Pass("rope: +", 1, 3 * p * t)]
    product = Pass("rope: grad * cos (sin)", 2 if amp else 1, 2 * p * t + cos + ((4 + 2) * t if amp else 0))
    backward = [product, product, Pass("rope: neg backward", 1, 2 * t),
                Pass("rope: slice_backward x2", 4, 2 * (2 * t + 2 * t)),
                Pass("rope: three gradients added", 2, 2 * 6 * t)]
    return forward, backward


def hf_llama_layer(model: Model, amp: bool) -> tuple[list[Pass], list[Pass]]:
    """One LlamaDecoderLayer's element-wise work, eager, forward and backward (the GEMMs and SDPA are timed apart,
    compute.py): the two norms, autocast's input casts, rotary positions, SDPA's casts, SwiGLU (act_fn(gate) * up),
    the two residual adds, and in backward each tensor's gradients added where it feeds several ops. The attention
    output's transpose(1, 2).contiguous() copies nothing: SDPA's fused kernels write their output in the query's
    memory layout ([batch, sequence, heads, head dim], as the projection's view left it), so the transpose back is
    contiguous already, and so is its gradient for SDPA's backward."""
    w = widths(model)
    h, r = w.h, residual_bytes(amp)
    norm_f, norm_b = rms_norm_passes(h, amp)
    rope_qf, rope_qb = rope_passes(w.q, w.d, amp)
    rope_kf, rope_kb = rope_passes(w.kv, w.d, amp)
    forward = [*norm_f, *rope_qf, *rope_kf, *norm_f]
    backward = [*norm_b, *rope_qb, *rope_kb, *norm_b]
    if amp:  # autocast: the norms' fp32 outputs cast to bf16 for each linear (3 for Q/K/V, 2 for gate and up)
        forward += [Pass("autocast: input cast", 5, 5 * (4 + 2) * h),
                    Pass("autocast: Q, K cast for SDPA", 2, (4 + 2) * (w.q + w.kv))]
        backward += [Pass("autocast: input cast backward", 5, 5 * (2 + 4) * h),
                     Pass("autocast: Q, K cast backward", 2, (2 + 4) * (w.q + w.kv)),
                     Pass("norm outputs: gradients added (2 for Q/K/V, 1 for gate/up)", 3, 3 * 3 * FP32 * h)]
    else:  # the linears' bf16 input gradients added: two for Q/K/V, one for gate/up
        backward += [Pass("norm outputs: gradients added", 3, 3 * 3 * BF16 * h)]
    forward += [Pass("SwiGLU: silu(gate)", 1, 4 * w.f), Pass("SwiGLU: * up", 1, 6 * w.f),
                Pass("residual adds", 2, 2 * (r + BF16 + r) * h)]
    backward += [Pass("SwiGLU: * up backward", 2, 2 * 6 * w.f), Pass("SwiGLU: silu backward", 1, 6 * w.f),
                 # the residual input feeds the norm and the add: its gradients added (2r, r), twice a layer
                 Pass("residual stream: gradients added", 2, 2 * 3 * r * h)]
    if amp:  # fp32 + bf16: the add's gradient cast to the bf16 branch's dtype (4, 2), twice a layer
        backward += [Pass("residual adds: gradient cast to bf16", 2, 2 * (4 + 2) * h)]
    return forward, backward


def hf_llama_layer_compiled(model: Model, amp: bool) -> tuple[list[Pass], list[Pass]]:
    """The same layer under torch.compile: one generated kernel for each chain of element-wise ops between extern
    kernels, reading what enters the chain and writing what leaves it (eager's saved set kept).

    Forward, four chains a layer (the residual add ending one layer fuses with the next layer's first norm): two of
    residual add + RMSNorm + input cast (norm_chain_forward); RoPE on Q and K with SDPA's casts (read Q and K, 2
    each, write the rotated bf16 Q and K SDPA takes and keeps); SwiGLU (read gate and up, 2 each, write their product
    and silu(gate), kept by the product, 2 each). Backward: the two norms' (norm_chain_backward), RoPE's (read SDPA's
    Q and K gradients, write the projections'), SwiGLU's (read the product's gradient, gate and up: 6; write the two
    gradients: 4)."""
    w = widths(model)
    h, r = w.h, residual_bytes(amp)
    forward = [norm_chain_forward(h, amp), norm_chain_forward(h, amp),
               Pass("fused: RoPE + SDPA casts", 1, 2 * BF16 * (w.q + w.kv)),
               Pass("fused: SwiGLU", 1, 4 * w.f + 2 * BF16 * w.f)]
    backward = [norm_chain_backward(h, amp, 3), norm_chain_backward(h, amp, 2),
                Pass("fused: RoPE backward + casts (Q, K)", 2, 2 * BF16 * (w.q + w.kv)),
                Pass("fused: SwiGLU backward", 1, 6 * w.f + 4 * w.f)]
    return forward, backward


def norm_saved_beyond_input(h: float, amp: bool) -> float:
    """What an eager LlamaRMSNorm keeps beyond its input (the rsqrt aside): under AMP the fp32 normed x (4); in bf16
    the fp32 upcast of the input (4) and the bf16 normed x (2)."""
    return FP32 * h if amp else (FP32 + BF16) * h


def norm_chain_forward(h: float, amp: bool) -> Pass:
    """Compiled: the residual add, the RMSNorm after it and the linears' input cast (one, by CSE) in one kernel: read
    the residual and the branch's bf16 output, write the new residual, the bf16 GEMM input and what backward keeps."""
    r = residual_bytes(amp)
    return Pass("fused: residual add + RMSNorm + input cast", 1,
                (r + BF16) * h + r * h + BF16 * h + norm_saved_beyond_input(h, amp))


def norm_chain_backward(h: float, amp: bool, linears: int) -> Pass:
    """Compiled: the `linears` bf16 input gradients summed (and cast back), the RMSNorm's backward from its saved
    tensors, the residual's gradient added and (AMP) cast to bf16 for the branch's GEMM; and a second kernel reducing
    grad · normed x over the tokens for the norm's weight (it re-reads the gradients and the normed x)."""
    r = residual_bytes(amp)
    saved = (r if amp else 0) * h + norm_saved_beyond_input(h, amp)  # under AMP the input is the residual itself
    main = linears * BF16 * h + saved + 2 * r * h + (BF16 * h if amp else 0)
    weight = linears * BF16 * h + (FP32 if amp else BF16) * h
    return Pass("fused: RMSNorm backward + input-cast gradients + residual", 2, main + weight)


def hf_llama_saved(model: Model, amp: bool) -> dict[str, float]:
    """Bytes a layer's autograd graph keeps per token, tensor by tensor (each stored once, however many ops save
    it), as the ops above save them:
    - each norm: its fp32 input (x.pow(2) and x * rsqrt save it; under AMP the residual itself, else the fp32 upcast),
      the rsqrt (fp32, one a token), and the normed x weight * saves (fp32 under AMP, else its bf16 cast);
    - each linear keeps its bf16 input for the weight gradient: under AMP autocast's cast, one per linear (3 of the
      norm output for Q/K/V, 2 for gate and up; o_proj's and down_proj's inputs are bf16 already); in bf16 the norm
      output, once for Q/K/V and once for gate/up;
    - SDPA keeps Q, K, V (bf16, K and V of the key/value heads), its output and one fp32 log-sum-exp a head;
    - o_proj's input is SDPA's output itself (its transpose back is contiguous: no copy, one storage);
    - SwiGLU keeps gate (silu's input), silu(gate) and up (the product's operands) and down_proj its input, the
      product. (q·cos saves only cos, which needs no gradient: one [tokens, d] table for all layers.)"""
    w = widths(model)
    h = w.h
    normed = FP32 if amp else BF16
    norm = (FP32 * h + FP32 + normed * h) if amp else (FP32 * h + FP32 + BF16 * h)
    linear_inputs = (5 if amp else 2) * BF16 * h
    return {"norms": 2 * norm, "linear inputs": linear_inputs,
            "attention (Q, K, V, output, log-sum-exp)": BF16 * (2 * w.q + 2 * w.kv) + FP32 * w.heads,
            "SwiGLU (gate, silu, up, product)": 4 * BF16 * w.f}


def hf_saved_bytes_per_token(model: Model, amp: bool) -> float:
    return sum(hf_llama_saved(model, amp).values())


def hf_head_saved_bytes_per_token(model: Model, amp: bool) -> float:
    """What the model's end keeps per token beside the logits: the final norm (as a layer's) and lm_head's bf16
    input (autocast's cast of the norm's fp32 output under AMP; the norm's bf16 output otherwise)."""
    h = model.hidden
    norm = (FP32 * h + FP32 + (FP32 if amp else BF16) * h)
    return norm + BF16 * h


def linear_weights(model: Model) -> float:
    """Parameters of a layer's linears (what autocast casts): Q, K, V, O and the FFN's, norms aside."""
    return model.layer_params() - 4 * model.hidden


def layer_gemms(model: Model) -> list[tuple[str, float, float]]:
    """HF's linears in call order, (name, n, k): q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; the
    Q/K/V and gate/up projections are separate nn.Linear calls, not one fused GEMM."""
    w = widths(model)
    return [("q_proj", w.q, w.h), ("k_proj", w.kv, w.h), ("v_proj", w.kv, w.h), ("o_proj", w.h, w.q),
            ("gate_proj", w.f, w.h), ("up_proj", w.f, w.h), ("down_proj", w.h, w.f)]

