"""A small Llama in plain PyTorch, as Meta's reference and torchtitan write one (meta-llama/llama llama/model.py;
torchtitan models/llama3/model.py): pre-normalisation by an RMSNorm written op by op, rotary positions on Q and K,
grouped-query attention by F.scaled_dot_product_attention (causal), a SwiGLU feed-forward, untied input and output
embeddings. `distdeck calibrate` measures the kernels at its shapes, and the benchmark (bench/calibrated.py) trains
it for real to compare a step's time with the estimate (simulations.estimate) of the same shape.

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
    """x · rsqrt(mean(x²) + ε) · weight, in fp32 and cast back (Meta's reference, op by op)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotary(head_dim: int, seq_len: int, theta: float = 500000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position's rotation angles, [seq_len, head_dim / 2] (Llama 3's θ)."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (even, odd) pair of x [b, s, heads, d] by its position's angle, in fp32."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        h, kv = shape.hidden, shape.kv_heads * shape.head_dim
        self.attention_norm, self.ffn_norm = RMSNorm(h), RMSNorm(h)
        self.wq, self.wk, self.wv = nn.Linear(h, h, bias=False), nn.Linear(h, kv, bias=False), nn.Linear(h, kv, bias=False)
        self.wo = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, shape.ffn_hidden, bias=False)  # gate
        self.w3 = nn.Linear(h, shape.ffn_hidden, bias=False)  # up
        self.w2 = nn.Linear(shape.ffn_hidden, h, bias=False)  # down

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        y = self.attention_norm(x)
        q = apply_rotary(self.wq(y).view(b, s, self.heads, self.head_dim), cos, sin)
        k = apply_rotary(self.wk(y).view(b, s, self.kv_heads, self.head_dim), cos, sin)
        v = self.wv(y).view(b, s, self.kv_heads, self.head_dim)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                             enable_gqa=self.kv_heads != self.heads)
        x = x + self.wo(out.transpose(1, 2).reshape(b, s, -1))
        y = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


class Llama(nn.Module):
    def __init__(self, shape: Model):
        super().__init__()
        self.shape = shape
        self.embedding = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden)
        self.output = nn.Linear(shape.hidden, shape.vocab, bias=False)
        cos, sin = rotary(shape.head_dim, shape.seq_len)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.output(self.norm(x))


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
