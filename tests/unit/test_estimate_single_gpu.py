"""The single-GPU stacks (simulations/estimate/stacks.py) against real torch on this CPU, and as inputs.

A small Llama written as Transformers' modeling_llama.py writes it (LlamaRMSNorm with its fp32 upcast, the rotary
cos/sin in the embeddings' dtype, rotate_half, apply_rotary_pos_emb, SDPA with is_causal and enable_gqa as
integrations/sdpa_attention.py calls it, LlamaMLP, LlamaDecoderLayer, lm_head and ForCausalLMLoss's logits.float()),
run forward under torch.autocast(bf16) over fp32 weights (AMP) or in bf16, with every tensor autograd saves for
backward recorded by torch.autograd.graph.saved_tensors_hooks, each storage counted once. CPU autocast casts what
CUDA's does here (linear, SDPA; not the embedding, the norms or the products), and CPU's fused SDPA saves what the GPU
kernels save (Q, K, V, its output, one fp32 log-sum-exp a head and query).

Tolerance: none. Every saved tensor is one whole storage whose bytes the estimator counts per token, so one layer's
saved bytes (the model with two layers less the model with one: the rotary tables and the token ids, shared by the
layers, cancel) must equal the estimator's count exactly, and so must the whole model's.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from simulations.estimate import Layout, build, cluster, estimate, memory, stacks
from simulations.estimate.models import Model

VOCAB, HIDDEN, HEADS, KV_HEADS, FFN, SEQ, BATCH = 97, 64, 4, 2, 160, 40, 2
TOKENS = BATCH * SEQ
SHAPE = Model("tiny-llama", layers=1, hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS, ffn_hidden=FFN, vocab=VOCAB,
              seq_len=SEQ, gated_mlp=True, dropout=False)


class RMSNorm(nn.Module):  # transformers' LlamaRMSNorm
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        input_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(input_dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):  # LlamaAttention with sdpa_attention_forward
    def __init__(self):
        super().__init__()
        d = HIDDEN // HEADS
        self.head_dim = d
        self.q_proj = nn.Linear(HIDDEN, HEADS * d, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * d, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * d, bias=False)
        self.o_proj = nn.Linear(HEADS * d, HIDDEN, bias=False)

    def forward(self, x, cos, sin):
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.head_dim ** -0.5, enable_gqa=True)
        out = out.transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*x.shape[:-1], -1).contiguous())


class MLP(nn.Module):  # LlamaMLP, act_fn SiLU
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.mlp = Attention(), MLP()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(HIDDEN), RMSNorm(HIDDEN)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class CausalLM(nn.Module):  # LlamaForCausalLM: embedding, layers, norm, lm_head, ForCausalLMLoss
    def __init__(self, layers: int):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(DecoderLayer() for _ in range(layers))
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        d = HIDDEN // HEADS
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def forward(self, ids, labels):
        x = self.embed_tokens(ids)
        with torch.no_grad(), torch.autocast("cpu", enabled=False):  # LlamaRotaryEmbedding: fp32, then x's dtype
            freqs = torch.arange(SEQ).float()[:, None] * self.inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)[None].expand(ids.shape[0], -1, -1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()  # ForCausalLMLoss
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), shifted.view(-1), ignore_index=-100)
        return logits, loss


def saved_bytes(layers: int, amp: bool) -> dict[str, float]:
    """Bytes autograd keeps for backward after one forward, by role, each storage once: the weights themselves,
    autocast's bf16 copies of them, the loss's (a vocabulary-wide last dimension), the activations, and the int64 token
    ids and targets with the loss's scalars (16 bytes a token, not counted by the estimator)."""
    torch.manual_seed(0)
    model = CausalLM(layers)
    if not amp:
        model = model.to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    # autocast's bf16 weight copies, as linear saves them (the weight, or its transpose)
    weight_shapes = {shape for p in model.parameters() if p.dim() == 2 for shape in (tuple(p.shape), tuple(p.shape)[::-1])}
    seen: dict[int, tuple[str, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in params:
            role = "parameters"
        elif t.dim() == 0 or not t.is_floating_point():  # the loss's scalars, the token ids and targets
            role = "ids and scalars"
        elif t.dtype == torch.bfloat16 and tuple(t.shape) in weight_shapes:
            role = "weight casts"
        elif t.shape[-1] == VOCAB:
            role = "logits and loss"
        else:
            role = "activations"
        seen[ptr] = (role, storage.nbytes())
        return t

    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            _, loss = model(ids, ids)
    loss.backward()  # the graph is whole: every saved tensor was used
    roles: dict[str, float] = {}
    for role, nbytes in seen.values():
        roles[role] = roles.get(role, 0) + nbytes
    return roles


@pytest.mark.parametrize("amp", [True, False])
def test_one_layer_keeps_what_the_estimator_counts_tensor_by_tensor(amp):
    one, two = saved_bytes(1, amp), saved_bytes(2, amp)
    per_layer = (two["activations"] - one["activations"]) / TOKENS
    assert per_layer == stacks.hf_saved_bytes_per_token(SHAPE, amp)


@pytest.mark.parametrize("amp", [True, False])
def test_the_whole_model_keeps_what_the_estimator_counts(amp):
    layers = 2
    measured = saved_bytes(layers, amp)
    model = Model(**{**SHAPE.__dict__, "layers": layers})
    counted = memory.hf_activation_bytes(model, Layout(stack="hf", amp=amp, recompute="none"), BATCH)
    assert measured["activations"] == counted["activations"]
    if amp:  # every linear's weight, lm_head's too, cast to bf16 once and kept; the embedding is not cast
        assert measured["weight casts"] == 2 * (layers * stacks.linear_weights(model) + VOCAB * HIDDEN)
    else:
        assert "weight casts" not in measured
    assert measured["logits and loss"] == 4 * TOKENS * VOCAB  # log_softmax's fp32 output (the rest: LOGIT_BYTES)


def llama32_3b(**overrides) -> dict:
    """Llama 3.2 3B's shape with untied embeddings: 3.6B parameters (the issue's fit case)."""
    return {**dict(model="custom", layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192, vocab=128256,
                   seq_len=4096, gated_mlp=True, dropout=False, gpus=1, tp=1, zero_stage=0, micro_batch=1,
                   global_batch=1, recompute="none"), **overrides}


def test_the_3_6b_llama_at_4096_tokens_under_amp_is_not_said_to_fit_on_an_h100():
    """It ran out of memory on an 80 GB H100 (issue 37): the estimate must not sell it as a yes."""
    result = estimate(*build(**llama32_3b(stack="hf", amp=True))).as_dict()
    assert not result["fit"]["verdict"].startswith("fits")
    roles = [d["role"] for d in result["fit"]["dominant"]]
    assert roles[:2] == ["optimizer", "activations"]
    assert {"weight casts", "logits and loss", "parameters"} <= set(roles)


def test_amp_holds_fp32_weights_gradients_and_moments_and_peaks_when_backward_starts():
    e = estimate(*build(**llama32_3b(stack="hf", amp=True)))
    psi = e.model.params()
    assert e.memory_peak == "backward start"
    assert e.memory_per_gpu_bytes["parameters"] == pytest.approx(4 * psi)
    assert e.memory_per_gpu_bytes["optimizer"] == pytest.approx(8 * psi)
    assert "gradients" not in e.memory_per_gpu_bytes  # set to None by zero_grad: they come as activations go
    # with gradient checkpointing the activations shrink and the optimizer step's foreach temporary sets the peak
    checkpointed = estimate(*build(**llama32_3b(stack="hf", amp=True, recompute="full")))
    assert checkpointed.memory_peak == "optimizer step"
    assert checkpointed.memory_per_gpu_bytes["total"] == pytest.approx(20 * psi)


def test_compile_fuses_passes_but_keeps_gemms_attention_and_memory():
    eager = estimate(*build(**llama32_3b(stack="hf", amp=True)))
    compiled = estimate(*build(**llama32_3b(stack="hf", amp=True, torch_compile=True)))
    assert compiled.memory_per_gpu_bytes == eager.memory_per_gpu_bytes
    assert compiled.optimizer_s == eager.optimizer_s  # the model is compiled, not the optimizer
    assert compiled.step_time_s < eager.step_time_s
    # a layer's forward is faster by exactly the bytes the fused kernels do not move (GEMMs and SDPA unchanged)
    from simulations.estimate import compute
    model, hw = eager.model, eager.cluster
    tokens = model.seq_len
    moved = {name: tokens * sum(p.bytes for p in table(model, True)[0])
             for name, table in (("eager", stacks.hf_llama_layer), ("compiled", stacks.hf_llama_layer_compiled))}
    layer_eager = compute.hf_layer_time(model, eager.layout, hw, 1)
    layer_compiled = compute.hf_layer_time(model, compiled.layout, hw, 1)
    assert layer_eager.forward - layer_compiled.forward == pytest.approx(
        (moved["eager"] - moved["compiled"]) / hw.gpu.streaming_bandwidth)
    f_eager, b_eager = stacks.hf_llama_layer(SHAPE, True)
    f_comp, b_comp = stacks.hf_llama_layer_compiled(SHAPE, True)
    assert sum(p.bytes for p in f_comp) < sum(p.bytes for p in f_eager) / 2
    assert sum(p.kernels for p in f_comp + b_comp) < sum(p.kernels for p in f_eager + b_eager) / 5


def test_measured_gemms_and_sdpa_are_read_where_the_gpu_has_them():
    from simulations.estimate import compute
    h100 = cluster("h100-80gb", 1)
    assert compute.gemm_time(4096, 1024, 3072, h100) == pytest.approx(55.9e-6)  # k_proj of the 3B, measured
    assert compute.gemm_time(8192, 1024, 3072, h100) == pytest.approx(98.3e-6)
    assert compute.gemm_time(6144, 1024, 3072, h100) == pytest.approx(98.3e-6 * 6144 / 8192)  # nearest M
    assert compute.measured_gemm_time(cluster("a100-80gb", 1).gpu, 4096, 1024, 3072) is None
    model = Model(**{**SHAPE.__dict__, "hidden": 3072, "heads": 24, "kv_heads": 8, "seq_len": 4096})
    forward, backward = compute.sdpa_time(model, Layout(), h100, 1)
    assert (forward, backward) == pytest.approx((398e-6 / 2, (1535e-6 - 398e-6) / 2))


@pytest.mark.parametrize("flags, field, words", [
    (dict(stack="keras"), "stack", "must be one of auto, hf, torchtitan, megatron"),
    (dict(amp=True), "amp", "stack hf only"),
    (dict(stack="megatron", torch_compile=True), "torch_compile", "not torch.compile"),
    (dict(stack="hf", tp=2, gpus=2), "tp", "must be 1"),
    (dict(stack="hf", gated_mlp=False), "gated_mlp", "SwiGLU"),
    (dict(stack="hf", experts=8, top_k=2), "experts", "mixture of experts is not modelled"),
])
def test_bad_stack_inputs_name_the_field(flags, field, words):
    from simulations.estimate import LayoutError
    with pytest.raises(LayoutError) as caught:
        estimate(*build(**{**llama32_3b(), **flags}))
    assert caught.value.field == field and words in caught.value.message


def test_the_verdict_states_the_margin_either_way():
    small = estimate(*build(**llama32_3b(stack="hf", amp=True, seq_len=512))).fit
    assert small["margin_bytes"] > 0 and small["verdict"].startswith(f"fits with {small['margin_bytes'] / 1e9:.1f} GB")
    huge = estimate(*build(**llama32_3b(stack="hf", amp=True, seq_len=16384))).fit
    assert huge["optimistic_margin_bytes"] < 0 and huge["verdict"].startswith(
        f"does not fit: {-huge['optimistic_margin_bytes'] / 1e9:.1f} GB missing")
    # the two margins differ by the fragmentation allowances, 15 % and 5 % of the peak
    total = sum(d["bytes"] for d in huge["dominant"])
    assert huge["optimistic_margin_bytes"] - huge["margin_bytes"] == pytest.approx(0.10 * total)
    assert huge["fragmentation_bytes"] == pytest.approx(0.15 * total) and huge["reserved_bytes"] == 2**30


# The ops that launch no kernel (views) and the ones timed apart from the element-wise passes (GEMMs, attention, the
# embedding and the loss), by aten name.
VIEW_OPS = {"view", "_unsafe_view", "transpose", "t", "expand", "slice", "unsqueeze", "reshape", "as_strided",
            "detach", "alias", "split", "narrow", "select", "permute", "squeeze", "_reshape_alias", "unbind"}
TIMED_APART = {"mm", "addmm", "bmm", "embedding", "embedding_dense_backward", "nll_loss_forward", "nll_loss_backward",
               "_log_softmax", "_log_softmax_backward_data", "_scaled_dot_product_flash_attention_for_cpu",
               "_scaled_dot_product_flash_attention_for_cpu_backward"}


def dispatched(layers: int, amp: bool) -> dict[str, Counter]:
    """Every aten op one forward and one backward dispatch, by direction: kernels (one an op) and the bytes of the
    tensors each reads and writes, the weights' own casts and gradient passes apart ("weights": an op on a tensor of a
    2-D weight's shape; the norms' 1-D weights are read beside [tokens, h] activations and stay with them)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.manual_seed(0)
    model = CausalLM(layers)
    if not amp:
        model = model.to(torch.bfloat16)
    weights = {shape for p in model.parameters() if p.dim() == 2 for shape in (tuple(p.shape), tuple(p.shape)[::-1])}

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.counts: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            if name not in VIEW_OPS and name not in TIMED_APART:
                kind = "weights" if any(tuple(t.shape) in weights for t in tensors) else "passes"
                self.counts[f"{kind} kernels"] += 1
                self.counts[f"{kind} bytes"] += sum(t.numel() * t.element_size() for t in tensors)
            return out

    forward, backward = Count(), Count()
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    with forward, torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        _, loss = model(ids, ids)
    with backward:
        loss.backward()
    return {"forward": forward.counts, "backward": backward.counts}


@pytest.mark.parametrize("amp", [True, False])
def test_one_layer_launches_and_moves_what_the_estimator_counts(amp):
    """One layer's element-wise ops as torch dispatches them (two layers less one), against stacks.hf_llama_layer.

    Forward: the same kernels, and the same bytes but for the two norms' weights, which the estimator leaves out
    (a [h] vector read once, not a byte a token): 2 · h · (its bytes) over the tokens. Backward, where the
    dispatcher's view and the kernels differ: slice_backward is one op of two kernels (zeros, then the copy of the
    slice), four of them (rotate_half's halves of Q and K); CPU's SDPA backward hands back Q's and K's gradients in
    a layout their views need copied (two clones: CUDA's kernels write them in the query's layout). Bytes: the
    dispatcher counts mean's backward input as the expanded [tokens, h] view it is given (4 bytes a token read, not
    4·h), slice_backward's zeros not at all and the clones on top, so within 5 %."""
    one, two = dispatched(1, amp), dispatched(2, amp)
    layer = {direction: two[direction] - one[direction] for direction in ("forward", "backward")}
    forward, backward = stacks.hf_llama_layer(SHAPE, amp)
    norm_weights = 2 * HIDDEN * (4 if amp else 2)  # read by the two weight * x, once each
    assert layer["forward"]["passes kernels"] == sum(p.kernels for p in forward)
    assert (layer["forward"]["passes bytes"] - norm_weights) / TOKENS == pytest.approx(sum(p.bytes for p in forward))
    slice_zeros, cpu_clones = 4, 2
    assert layer["backward"]["passes kernels"] + slice_zeros - cpu_clones == sum(p.kernels for p in backward)
    assert layer["backward"]["passes bytes"] / TOKENS == pytest.approx(sum(p.bytes for p in backward), rel=0.05)


def test_the_other_stacks_are_today_s_settings_by_name():
    """torchtitan is eager PyTorch with torch's cross entropy on fp32 logits, megatron Megatron-core's fused kernels
    and fp32 softmax: the same estimates as those settings spelled out (and auto keeps today's defaults)."""
    def step(**flags) -> float:
        return estimate(*build(**llama32_3b(**flags))).step_time_s

    assert step(stack="torchtitan") == step(execution="eager", cross_entropy="torch")
    assert step(stack="torchtitan", torch_compile=True) == step(execution="compiled", cross_entropy="torch")
    assert step(stack="megatron") == step(execution="fused", cross_entropy="fp32") == step()
