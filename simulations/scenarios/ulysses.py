"""DeepSpeed-Ulysses: context parallelism by all-to-all, trading a sequence shard for a head shard.

Jacobs et al., "DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long
Sequence Transformer Models" (arXiv:2309.14509). The sequence of L tokens is split over N ranks,
as in ring attention: rank r holds Q, K and V of tokens [r·L/N, (r+1)·L/N) for all H heads.
Attention heads are independent, so one all-to-all turns that into all L tokens for H/N heads:
each rank sends the slice of its tokens belonging to the heads of rank j to rank j. Attention
then runs locally, any kernel, on whole sequences; a second all-to-all returns each output row
to the rank that holds its token. Backward mirrors it: dO goes to the head shards, the local
backward runs, and dQ, dK, dV come home by one more all-to-all. Each all-to-all moves (N−1)/N of
a rank's buffer, and that buffer is 1/N of the sequence: the bytes per rank fall as 1/N, where
ring attention's and an all-gather's stay flat. The price: N must divide the number of heads
(of K/V heads, with grouped-query attention), so the degree is capped by the head count.

`method="all_gather_kv"` runs the other collective variant for comparison: each rank all-gathers
the whole sequence's K and V, attends with its own queries, and reduce-scatters dK and dV in
backward (Llama 3, Dubey et al., arXiv:2407.21783 section 3.3.2, which uses it with zig-zag
chunks; here contiguous). Its bytes per rank, like the ring's, do not shrink with N.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulations import comm, formulas, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_tolerance, max_abs_diff
from simulations.scenarios.base import RankContext, Scenario
from simulations.scenarios.ring_attention import make_inputs
from simulations.trace import tensor_view

BACKWARD_PHASES = ("grad_to_heads", "local_backward", "grads_home", "kv_grads_scattered")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=2, le=8, description="Ranks (GPUs) sharing the sequence")
    method: Literal["all_to_all", "all_gather_kv"] = Field(
        "all_to_all", description="all_to_all: Ulysses (heads for tokens); all_gather_kv: gather the whole K/V")
    seq_len: int = Field(16, ge=2, le=512, description="Sequence length (divisible by world_size)")
    heads: int = Field(8, ge=1, le=16, description="Attention heads (divisible by world_size for all_to_all)")
    head_dim: int = Field(2, ge=1, le=64, description="Size of one head")
    causal: bool = Field(True, description="Causal mask: a token attends to itself and earlier tokens")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _divides(self) -> Params:
        if self.seq_len % self.world_size:
            raise ValueError(f"seq_len ({self.seq_len}) must be divisible by world_size ({self.world_size}): "
                             f"each rank holds an equal stretch of tokens")
        if self.method == "all_to_all" and self.heads % self.world_size:
            raise ValueError(f"heads ({self.heads}) must be divisible by world_size ({self.world_size}) with "
                             f"all_to_all: each rank takes heads/world_size whole heads")
        return self


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, q_start: int = 0) -> torch.Tensor:
    """softmax(Q Kᵀ/√d + mask) V for queries at positions q_start.. against keys at 0..: the local kernel."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        rows = torch.arange(q.shape[-2], device=q.device)[:, None] + q_start
        s = s.masked_fill(torch.arange(k.shape[-2], device=q.device)[None, :] > rows, -math.inf)
    return torch.softmax(s, dim=-1) @ v


# -- the two all-to-alls: tokens of all heads <-> all tokens of some heads -------------------------

def seq_to_heads(x: torch.Tensor, n: int, group) -> torch.Tensor:
    """[c, H, L/N, d] (my tokens, every head) -> [c, H/N, L, d] (every token, my heads)."""
    c, h, t, d = x.shape
    send = x.reshape(c, n, h // n, t, d).transpose(0, 1).contiguous()  # block j: rank j's heads
    recv = comm.all_to_all_single(torch.empty_like(send), send, group=group)  # block i: rank i's tokens
    return recv.permute(1, 2, 0, 3, 4).reshape(c, h // n, n * t, d)


def heads_to_seq(y: torch.Tensor, n: int, group) -> torch.Tensor:
    """[c, H/N, L, d] (every token, my heads) -> [c, H, L/N, d] (my tokens, every head)."""
    c, h, length, d = y.shape
    send = y.reshape(c, h, n, length // n, d).permute(2, 0, 1, 3, 4).contiguous()  # block j: rank j's tokens
    recv = comm.all_to_all_single(torch.empty_like(send), send, group=group)  # block i: rank i's heads
    return recv.transpose(0, 1).reshape(c, n * h, length // n, d)


def run(ctx: RankContext, p: Params) -> dict:
    n, rank = ctx.world_size, ctx.rank
    cp = comm.subgroup(range(n), ctx.group, tag="cp")  # the context-parallel group, labelled on its transfers
    comm.name_group(cp, "cp")
    ctx = replace(ctx, group=cp)
    t = p.seq_len // n
    inputs = make_inputs(p)
    q, k, v, d_out = (inputs[name].chunk(n, dim=1)[rank].contiguous().to(ctx.device)
                      for name in ("q", "k", "v", "grad_out"))
    story = _Story(p, rank, n)
    story.frame("shard", f"The {p.seq_len}-token sequence is split over {n} ranks: rank {rank} holds tokens "
                f"{rank * t}–{(rank + 1) * t - 1} of Q, K and V, all {p.heads} heads",
                [("Q", "activations", q, story.mine), ("K", "activations", k, story.mine),
                 ("V", "activations", v, story.mine)])
    if p.method == "all_to_all":
        out, grads = ulysses(ctx, p, q, k, v, d_out, story)
    else:
        out, grads = all_gather_kv(ctx, p, q, k, v, d_out, story)
    story.frame("done", "Done: every rank holds the output and dQ, dK, dV of its own tokens, all heads, "
                "as full attention in one process would give them (see the checks)",
                [("O", "activations", out, story.mine)]
                + [(f"d{name}", "gradients", g, story.mine) for name, g in zip("QKV", grads)])
    return {"out": out.detach().cpu(), "dq": grads[0].cpu(), "dk": grads[1].cpu(), "dv": grads[2].cpu()}


def ulysses(ctx: RankContext, p: Params, q, k, v, d_out, story: _Story):
    n, group = ctx.world_size, ctx.group
    qkv = seq_to_heads(torch.stack([q, k, v]), n, group).requires_grad_()  # one all-to-all for Q, K, V
    story.frame("qkv_to_heads", f"All-to-all: rank {ctx.rank} sends each rank the heads it will own and "
                f"receives, from every rank, their tokens of head{story.heads_text}: now all "
                f"{p.seq_len} tokens, {p.heads // n} head{'s' if p.heads // n > 1 else ''}",
                [(name, "activations", qkv[i], story.my_heads) for i, name in enumerate("QKV")])
    with trace.span("attention (local)"):
        out_heads = attention(qkv[0], qkv[1], qkv[2], p.causal)
    story.frame("attention", f"Attention runs locally on whole sequences: heads are independent, so no "
                f"rank needs another's heads ({p.seq_len}×{p.seq_len} scores per head)",
                [("O", "activations", out_heads, story.my_heads)])
    out = heads_to_seq(out_heads.detach()[None], n, group)[0]
    story.frame("out_to_seq", "All-to-all back: each output row returns to the rank that holds its token",
                [("O", "activations", out, story.mine)])

    d_out_heads = seq_to_heads(d_out[None], n, group)[0]
    story.frame("grad_to_heads", "Backward: dO takes the same all-to-all, to the head shards",
                [("dO", "gradients", d_out_heads, story.my_heads)])
    with trace.span("attention backward (local)"):
        out_heads.backward(d_out_heads)
    story.frame("local_backward", "The local backward gives dQ, dK, dV for all tokens of this rank's heads",
                [(f"d{name}", "gradients", qkv.grad[i], story.my_heads) for i, name in enumerate("QKV")])
    grads = heads_to_seq(qkv.grad, n, group)
    story.frame("grads_home", "All-to-all: dQ, dK, dV come home to the ranks that hold their tokens",
                [(f"d{name}", "gradients", grads[i], story.mine) for i, name in enumerate("QKV")])
    return out, grads


def all_gather_kv(ctx: RankContext, p: Params, q, k, v, d_out, story: _Story):
    n, rank, group = ctx.world_size, ctx.rank, ctx.group
    t = p.seq_len // n
    kv_mine = torch.stack([k, v])  # [2, H, L/N, d]
    gathered = comm.all_gather_into_tensor(kv_mine.new_empty(n * 2, *kv_mine.shape[1:]), kv_mine, group)
    kv = gathered.view(n, 2, p.heads, t, p.head_dim).permute(1, 2, 0, 3, 4).reshape(2, p.heads, p.seq_len, p.head_dim)
    kv.requires_grad_()
    q = q.clone().requires_grad_()
    story.frame("kv_gathered", f"All-gather: every rank receives the K and V of all {p.seq_len} tokens "
                f"and keeps its own {t} queries", [("K", "activations", kv[0], "all tokens, all heads"),
                                                     ("V", "activations", kv[1], "all tokens, all heads")])
    with trace.span("attention (local)"):
        out = attention(q, kv[0], kv[1], p.causal, q_start=rank * t)
    story.frame("attention", f"Each rank attends with its {t} queries to every key it may see",
                [("O", "activations", out, story.mine)])
    with trace.span("attention backward (local)"):
        out.backward(d_out)
    # dK, dV of the whole sequence, partial on every rank: sum them and keep one's own tokens.
    full = kv.grad.view(2, p.heads, n, t, p.head_dim).permute(2, 0, 1, 3, 4).contiguous().view(n * 2, p.heads, t, p.head_dim)
    dkv = comm.reduce_scatter_tensor(kv_mine.new_empty(kv_mine.shape), full, group)
    story.frame("kv_grads_scattered", "Backward: dQ stays; the partial dK, dV of the whole sequence are "
                "reduce-scattered, each rank keeping the sum for its own tokens",
                [("dQ", "gradients", q.grad, story.mine), ("dK", "gradients", dkv[0], story.mine),
                 ("dV", "gradients", dkv[1], story.mine)])
    return out, (q.grad, dkv[0], dkv[1])


class _Story:
    """The frames: which tokens and heads each tensor covers, said beside it."""

    def __init__(self, p: Params, rank: int, n: int):
        t, h = p.seq_len // n, p.heads // n
        self.mine = f"tokens {rank * t}–{(rank + 1) * t - 1}, all heads"
        self.heads_text = f"s {rank * h}–{(rank + 1) * h - 1}" if h > 1 else f" {rank * h}"
        self.my_heads = f"all tokens, head{self.heads_text}"
        self.extra = {"method": p.method, "world_size": n, "seq_len": p.seq_len, "heads": p.heads,
                      "tokens_per_rank": t, "heads_per_rank": h if p.method == "all_to_all" else p.heads}
        self.rank_extra = {"tokens": [rank * t, (rank + 1) * t]}
        if p.method == "all_to_all":
            self.rank_extra["heads"] = [rank * h, (rank + 1) * h]

    def frame(self, phase: str, caption: str, tensors) -> None:
        trace.frame(phase, caption, extra=self.extra, rank_extra=self.rank_extra,
                    tensors=[tensor_view(name, role, x.detach(), note=note) for name, role, x, note in tensors])


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """Full attention on the whole sequence in one process: torch's scaled_dot_product_attention, autograd."""
    inputs = {name: t.to(dtype) for name, t in make_inputs(p).items()}
    q, k, v = (inputs[name].clone().requires_grad_() for name in ("q", "k", "v"))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=p.causal)
    out.backward(inputs["grad_out"])
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n = p.world_size
    ref, exact = reference(p), reference(p, torch.float64)
    diffs, tolerances = {}, {}
    for name in ("out", "dq", "dk", "dv"):
        whole = torch.cat([r[name] for r in results], dim=1)  # rank r holds tokens r·L/N ..
        diffs[name] = max_abs_diff(whole, ref[name])
        tolerances[name] = fp32_tolerance(ref[name], exact[name], terms=p.seq_len)  # a row sums L terms

    # Bytes: each rank's traced collectives (the buffer it handed over), turned into bytes that left
    # the rank by the op's definition; expected from the configuration by REFERENCE.md's formulas.
    wire = {"forward": [0.0] * n, "backward": [0.0] * n}
    buffers: dict[str, list[int]] = {}
    for f in frames:
        direction = "backward" if f.phase in BACKWARD_PHASES else "forward"
        for tr in f.transfers:
            wire[direction][tr.src] += formulas.collective_sent_bytes(tr.op, tr.bytes, n)
            buffers.setdefault(tr.op, [0] * n)[tr.src] += tr.bytes
    method = p.method
    formula = formulas.context_parallel_bytes(method, p.seq_len, p.heads, p.head_dim, n)
    block = formula["block"]
    expected_buffers = ({"all_to_all": 8 * block} if method == "all_to_all"
                        else {"all_gather": 2 * block, "reduce_scatter": 2 * block * n})
    how = ("4 all-to-alls of one block each way (Q, K, V out, O back; dO out, dQ, dK, dV back): (N−1)/N · 4M"
           if method == "all_to_all" else "forward all-gather of K+V: (N−1)·2M; backward reduce-scatter of the "
           "whole dK+dV: (N−1)/N · 2NM")
    checks = [
        Check(name="output equals full attention (SDPA)", passed=diffs["out"] <= tolerances["out"],
              measured=diffs["out"], expected=f"≤ {tolerances['out']:.1e}",
              detail="max |O_run − O_sdpa|; the bound is fp32 round-off: 4× the SDPA reference's own distance "
                     "from fp64, at least s·ε·max|O|, ε = 2⁻²⁴"),
        *[Check(name=f"gradients equal full attention's (SDPA autograd, {g})", passed=diffs[g] <= tolerances[g],
                measured=diffs[g], expected=f"≤ {tolerances[g]:.1e}",
                detail=f"max |{g}_run − {g}_sdpa|; bound as for the output")
          for g in ("dq", "dk", "dv")],
        Check(name="buffers handed to the collectives per rank = the configuration's",
              passed=buffers == {op: [b] * n for op, b in expected_buffers.items()},
              measured={op: b[0] for op, b in buffers.items()}, expected=expected_buffers,
              detail=f"M = a·(s/N)·head_dim·4 = {block} bytes, one of Q, K, V or O for one rank's tokens"),
        *[Check(name=f"{d} bytes sent per rank = formula", passed=all(math.isclose(w, formula[d]) for w in wire[d]),
                measured=wire[d], expected=formula[d], detail=how)
          for d in ("forward", "backward")],
    ]
    return Summary(checks=checks, figures={
        "method": method, "block_bytes": block,
        "forward_bytes_per_rank": wire["forward"], "backward_bytes_per_rank": wire["backward"],
        "total_bytes_per_rank": [f + b for f, b in zip(wire["forward"], wire["backward"])],
        "formula_forward_bytes": formula["forward"], "formula_backward_bytes": formula["backward"],
        "formula_total_bytes": formula["total"],
        "formula_ring_total_bytes": formulas.context_parallel_bytes("ring", p.seq_len, p.heads, p.head_dim, n)["total"],
        "collective_buffers_per_rank": buffers,
        "max_abs_diff": diffs, "tolerance": tolerances, "frames": len(frames),
    })


SCENARIO = Scenario(
    name="ulysses",
    title="Ulysses: context parallelism by all-to-all",
    description="DeepSpeed-Ulysses: an all-to-all trades each rank's sequence shard for a head shard, attention "
                "runs locally, and an all-to-all brings the output home; forward and backward. Or the "
                "all-gather K/V variant, for comparison.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["ranks", "timeline"],
    controls=["world_size", "method", "seq_len", "causal"],
)
