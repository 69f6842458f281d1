"""A small Llama in plain PyTorch, written op for op as Hugging Face Transformers' LlamaForCausalLM runs eagerly
(transformers, src/transformers/models/llama/modeling_llama.py: LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half and
apply_rotary_pos_emb, LlamaAttention through sdpa_attention_forward with is_causal and enable_gqa, LlamaMLP,
LlamaDecoderLayer; the loss as loss_utils.ForCausalLMLoss computes it, on `logits.float()`), so that the estimator's
"hf" stack describes it (transformers itself is not a dependency of this project). `distdeck calibrate` measures the
kernels at its shapes, and the benchmark (bench/calibrated.py) trains it for real, under torch.autocast(bfloat16) as
HF's Trainer does with bf16=True, to compare a step's time with the estimate of the same shape.

`shape` is the estimator's description of the same model (simulations.estimate.models.Model), so both sides read
one set of numbers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from simulations.estimate.models import Model

# The benchmark's model: about 17 M parameters, a step of 2 × 256 tokens in well under a second on two CPU cores.
BENCH_LLAMA = Model("bench-llama", layers=4, hidden=512, heads=8, kv_heads=4, ffn_hidden=1408, vocab=8192,
                    seq_len=256, gated_mlp=True, dropout=False, flash_attention=True)
# A smaller one for calibrate's quick mode and the tests: seconds, not a minute.
TINY_LLAMA = Model("tiny-llama", layers=2, hidden=128, heads=4, kv_heads=2, ffn_hidden=352, vocab=1024,
                   seq_len=64, gated_mlp=True, dropout=False, flash_attention=True)


class RMSNorm(nn.Module):
    """LlamaRMSNorm: in fp32, cast back to the input's dtype, times the weight."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        dtype = hidden.dtype
        hidden = hidden.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + self.eps)
        return self.weight * hidden.to(dtype)


def rotary(head_dim: int, seq_len: int, theta: float = 500000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's angles, [seq_len, head_dim], each frequency twice (LlamaRotaryEmbedding's
    cat((freqs, freqs)); Llama 3's θ), in fp32: the embeddings' dtype under autocast."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    freqs = torch.outer(torch.arange(seq_len).float(), inv_freq)
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [b, heads, s, d] rotated by its positions' angles: x·cos + rotate_half(x)·sin."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        self.head_dim = shape.head_dim
        h, kv = shape.hidden, shape.kv_heads * shape.head_dim
        self.q_proj, self.k_proj = nn.Linear(h, h, bias=False), nn.Linear(h, kv, bias=False)
        self.v_proj, self.o_proj = nn.Linear(h, kv, bias=False), nn.Linear(h, h, bias=False)
        self.gqa = shape.kv_heads != shape.heads

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = hidden.shape
        split = (b, s, -1, self.head_dim)
        q = self.q_proj(hidden).view(split).transpose(1, 2)
        k = self.k_proj(hidden).view(split).transpose(1, 2)
        v = self.v_proj(hidden).view(split).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.gqa)
        return self.o_proj(out.transpose(1, 2).contiguous().reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        h, f = shape.hidden, shape.ffn_hidden
        self.gate_proj, self.up_proj = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(shape.hidden), RMSNorm(shape.hidden)
        self.self_attn, self.mlp = Attention(shape), MLP(shape)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos, sin)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class Llama(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        self.shape = shape
        self.embed_tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden)
        self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
        cos, sin = rotary(shape.head_dim, shape.seq_len)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_tokens(tokens)
        for layer in self.layers:
            hidden = layer(hidden, self.cos, self.sin)
        return self.lm_head(self.norm(hidden))


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """ForCausalLMLoss's: cross entropy on the logits upcast to fp32 (targets already shifted by `batch`)."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)


def batch(shape: Model, sequences: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and their next-token targets, [sequences, seq_len] each."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, shape.vocab, (sequences, shape.seq_len + 1), generator=g)
    return ids[:, :-1].to(device), ids[:, 1:].to(device)


def gemm_shapes(shape: Model, tokens: int, backward: bool = True) -> list[tuple[int, int, int]]:
    """(m, k, n) of every distinct GEMM a training step of `tokens` tokens runs: each linear layer's forward
    [tokens, k] × [k, n] (Q, K/V, O, gate/up, down, the output layer), and with `backward` its input gradient
    [tokens, n] × [n, k] and weight gradient [k, tokens] × [tokens, n]."""
    h, kv = shape.hidden, shape.kv_heads * shape.head_dim
    linears = [(h, h), (h, kv), (h, shape.ffn_hidden), (shape.ffn_hidden, h), (h, shape.vocab)]
    shapes = []
    for k, n in linears:
        shapes.append((tokens, k, n))
        if backward:
            shapes += [(tokens, n, k), (k, tokens, n)]
    return list(dict.fromkeys(shapes))
