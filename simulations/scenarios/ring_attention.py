"""Ring attention: the sequence is sharded over ranks and the K/V blocks travel round a ring.

Liu, Zaharia & Abbeel, "Ring Attention with Blockwise Transformers for Near-Infinite Context"
(arXiv:2310.01889). Each rank keeps its own queries and passes its key/value block to the right
neighbour N-1 times; meanwhile it attends to the block it holds. The partial results are merged
with the online softmax of FlashAttention (Dao et al., arXiv:2205.14135; Milakov & Gimelshein,
arXiv:1805.02867): a running row maximum m, a running sum l of exp(score - m), and an unnormalised
output, rescaled whenever the maximum grows. The block for the next step is in flight while the
current one is computed (isend/irecv), so communication hides behind compute.

Causal masking makes a contiguous split unfair: rank 0's queries see only their own block, the
last rank's see everything. Zig-zag placement (as in zhuzilin/ring-flash-attention and Llama 3's
context parallelism, arXiv:2407.21783 section 3.3.2; Brandon et al.'s striped attention,
arXiv:2311.09431, balances the same way with stripes) cuts the sequence into 2N chunks and gives
rank r chunks r and 2N-1-r: every rank then does the same work at every step.

The backward pass runs the same ring: K/V travel again, and the gradients dK/dV of each block
travel with it, accumulated by every rank it visits, until one last hop takes them home.
"""

from __future__ import annotations

import math

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulations import comm, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_tolerance, max_abs_diff
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import tensor_view
from simulations.words import counted


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=2, le=8, description="Ranks (GPUs) on the ring")
    seq_len: int = Field(16, ge=2, le=512, description="Sequence length (divisible by world_size, 2·world_size with zigzag)")
    heads: int = Field(2, ge=1, le=8, description="Attention heads")
    head_dim: int = Field(4, ge=1, le=64, description="Size of one head")
    causal: bool = Field(True, description="Causal mask: a token attends to itself and earlier tokens")
    zigzag: bool = Field(True, description="Zig-zag placement: rank r holds chunks r and 2N-1-r")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _divides(self) -> Params:
        parts = 2 * self.world_size if self.zigzag else self.world_size
        if self.seq_len % parts:
            how = f"2·world_size = {parts} with zigzag (each rank holds two chunks)" if self.zigzag \
                else f"world_size = {parts}"
            raise ValueError(f"seq_len ({self.seq_len}) must be divisible by {how}")
        return self


def make_inputs(p: Params) -> dict:
    """Q, K, V [heads, seq, head_dim] and the gradient of the loss w.r.t. the output, from the seed."""
    g = torch.Generator().manual_seed(p.seed)
    shape = (p.heads, p.seq_len, p.head_dim)
    return {name: torch.randn(shape, generator=g) for name in ("q", "k", "v", "grad_out")}


def chunks_of(rank: int, p: Params) -> list[int]:
    """Which chunks of the sequence a rank holds: its own block, or chunks r and 2N-1-r (zig-zag)."""
    return [rank, 2 * p.world_size - 1 - rank] if p.zigzag else [rank]


def local(t: torch.Tensor, rank: int, p: Params) -> torch.Tensor:
    pieces = t.chunk(2 * p.world_size if p.zigzag else p.world_size, dim=1)
    return torch.cat([pieces[c] for c in chunks_of(rank, p)], dim=1).contiguous()


def tile_kind(q_chunk: int, kv_chunk: int, causal: bool) -> str:
    """Chunks are equal, contiguous stretches of positions, so the mask of a tile is all, half or nothing."""
    if not causal or kv_chunk < q_chunk:
        return "full"
    return "diagonal" if kv_chunk == q_chunk else "skip"


def tiles(q_chunks: list[int], kv_chunks: list[int], c: int, causal: bool):
    """(rows of my queries, rows of the K/V block, kind) for every query-chunk x K/V-chunk tile."""
    for i, qc in enumerate(q_chunks):
        for j, kc in enumerate(kv_chunks):
            yield slice(i * c, (i + 1) * c), slice(j * c, (j + 1) * c), tile_kind(qc, kc, causal), (qc, kc)


def scores(q: torch.Tensor, k: torch.Tensor, kind: str) -> torch.Tensor:
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if kind == "diagonal":
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), -math.inf)
    return s


# -- forward: attend to the held block while the next one arrives; merge with online softmax --------

def forward_block(state: dict, q: torch.Tensor, kv: torch.Tensor, q_chunks, kv_chunks, c: int, causal: bool) -> list:
    """Fold one K/V block into the running (m, l, acc) of every query row. Returns the tiles it did."""
    done = []
    for rows, cols, kind, ids in tiles(q_chunks, kv_chunks, c, causal):
        done.append({"q": ids[0], "kv": ids[1], "kind": kind})
        if kind == "skip":  # every query in the tile precedes every key: nothing to compute
            continue
        s = scores(q[:, rows], kv[0][:, cols], kind)
        m_old = state["m"][:, rows]
        # Never -inf: a row's first tile is its diagonal (step 0) or a full one.
        m_new = torch.maximum(m_old, s.amax(-1))
        correction = torch.exp(m_old - m_new)  # rescale what was summed under the old maximum
        p = torch.exp(s - m_new[..., None])
        state["l"][:, rows] = state["l"][:, rows] * correction + p.sum(-1)
        state["acc"][:, rows] = state["acc"][:, rows] * correction[..., None] + p @ kv[1][:, cols]
        state["m"][:, rows] = m_new
        done[-1]["scores"] = s.numel()
    return done


def backward_block(q, kv, dkv, dq, d_out, lse, delta, q_chunks, kv_chunks, c: int, causal: bool) -> None:
    """Gradients of one tile from the saved log-sum-exp: dQ stays, dK/dV go with the block (FlashAttention-2)."""
    scale = 1 / math.sqrt(q.shape[-1])
    for rows, cols, kind, _ in tiles(q_chunks, kv_chunks, c, causal):
        if kind == "skip":
            continue
        k, v = kv[0][:, cols], kv[1][:, cols]
        p = torch.exp(scores(q[:, rows], k, kind) - lse[:, rows, None])  # the softmax, recomputed
        dkv[1][:, cols] += p.transpose(-1, -2) @ d_out[:, rows]
        ds = p * (d_out[:, rows] @ v.transpose(-1, -2) - delta[:, rows, None])
        dq[:, rows] += ds @ k * scale
        dkv[0][:, cols] += ds.transpose(-1, -2) @ q[:, rows] * scale


def run(ctx: RankContext, p: Params) -> dict:
    n, rank, group = ctx.world_size, ctx.rank, ctx.group
    right, left = (rank + 1) % n, (rank - 1) % n
    c = p.seq_len // (2 * n if p.zigzag else n)  # tokens per chunk
    inputs = make_inputs(p)
    q, k, v, d_out = (local(inputs[name], rank, p).to(ctx.device) for name in ("q", "k", "v", "grad_out"))
    mine = chunks_of(rank, p)
    trace.frame("shard", f"The {p.seq_len}-token sequence is cut into {p.seq_len // c} chunks of {c}: rank {rank} "
                f"holds chunk(s) {mine} of Q, K and V" + (" (zig-zag)" if p.zigzag else ""),
                tensors=[tensor_view(name, "activations", t, shard=(rank, n)) for name, t in (("Q", q), ("K", k), ("V", v))],
                extra=_layout(p, c), rank_extra={"chunks": mine})

    # Forward: N steps; at step s rank r holds the K/V block that started on rank r - s.
    state = {"m": q.new_full(q.shape[:2], -math.inf), "l": q.new_zeros(q.shape[:2]), "acc": torch.zeros_like(q)}
    kv = torch.stack([k, v])  # one message per step: K and V of one block
    work = []
    for step in range(n):
        src = (rank - step) % n
        pending = comm.sendrecv_async(kv, right, torch.empty_like(kv), left, group, chunk=src, name=f"kv{src}") \
            if step < n - 1 else None  # the next block is on its way while this one is computed
        with trace.span(f"attend kv{src}", step=step):
            done = forward_block(state, q, kv, mine, chunks_of(src, p), c, p.causal)
        work.append(sum(t.get("scores", 0) for t in done))
        sent = kv
        if pending is not None:
            kv = pending.wait()
        _show_step("forward", step, n, rank, src, p, done, pending is not None, sent)
    out = state["acc"] / state["l"][..., None]
    lse = state["m"] + state["l"].log()
    trace.frame("merged", "After N steps every query has seen every key it may: out = acc / l, and the "
                "log-sum-exp m + log l is kept for backward", tensors=[tensor_view("out", "activations", out, shard=(rank, n)),
                                                                 tensor_view("lse", "activations", lse)])

    # Backward: K/V go round again, and each block's dK/dV accumulators travel with it.
    delta = (d_out * out).sum(-1)  # rowsum(dO * O), FlashAttention-2's D
    kv = torch.stack([k, v])  # start again from this rank's own block
    dq, dkv = torch.zeros_like(q), torch.zeros_like(kv)
    for step in range(n):
        src = (rank - step) % n
        pending = comm.sendrecv_async(kv, right, torch.empty_like(kv), left, group, chunk=src, name=f"kv{src}") \
            if step < n - 1 else None
        with trace.span(f"grad kv{src}", step=step):
            backward_block(q, kv, dkv, dq, d_out, lse, delta, mine, chunks_of(src, p), c, p.causal)
        sent = kv
        if pending is not None:
            kv = pending.wait()
        # This block's dK/dV (now holding this rank's share) move on with it; the last hop takes them home.
        dkv = comm.sendrecv(dkv, right, torch.empty_like(dkv), left, group, chunk=src, name=f"dkv{src}")
        _show_step("backward", step, n, rank, src, p, list(_tile_list(mine, chunks_of(src, p), c, p.causal)),
                   pending is not None, sent)
    trace.frame("grads", "Backward done: dQ never moved; dK and dV came home after visiting every rank",
                tensors=[tensor_view(name, "gradients", t, shard=(rank, n)) for name, t in (("dQ", dq), ("dK", dkv[0]), ("dV", dkv[1]))])
    return {"chunks": mine, "out": out.cpu(), "dq": dq.cpu(), "dk": dkv[0].cpu(), "dv": dkv[1].cpu(),
            "work": work, "kv_bytes": kv.numel() * kv.element_size()}


def _tile_list(q_chunks, kv_chunks, c, causal):
    for _, _, kind, (qc, kc) in tiles(q_chunks, kv_chunks, c, causal):
        yield {"q": qc, "kv": kc, "kind": kind}


def _layout(p: Params, c: int) -> dict:
    return {"chunks": p.seq_len // c, "chunk_len": c, "zigzag": p.zigzag, "causal": p.causal,
            "chunks_of_rank": [chunks_of(r, p) for r in range(p.world_size)], "steps": p.world_size}


def _show_step(direction: str, step: int, n: int, rank: int, src: int, p: Params, done: list, sending: bool, kv) -> None:
    kinds = [t["kind"] for t in done]
    computed = sum(k != "skip" for k in kinds)
    trace.frame(f"{direction}_step",
                f"{direction.capitalize()} step {step + 1}/{n}: each rank computes with the K/V block it holds"
                + (" while sending it on to the right" if sending else ", the last one: nothing left to send"),
                extra={"step": step, "steps": n, "pass": direction},
                rank_extra={"holds": src, "kv_chunks": chunks_of(src, p), "tiles": done,
                            "sending": src if sending else None, "send_bytes": kv.numel() * kv.element_size() if sending else 0},
                status=f"kv{src}: {computed}/{len(kinds)} tiles" + (" (skipped)" if computed == 0 else ""))


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """Full attention on the whole sequence with torch's own op, F.scaled_dot_product_attention
    (is_causal for the mask), and autograd for the gradients. `dtype` float64: the same fp32 inputs in
    float64, the nearly exact values fp32 round-off is measured from."""
    inputs = {name: t.to(dtype) for name, t in make_inputs(p).items()}
    q, k, v = (inputs[name].clone().requires_grad_() for name in ("q", "k", "v"))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=p.causal)
    (out * inputs["grad_out"]).sum().backward()
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n = p.world_size
    ref, exact = reference(p), reference(p, torch.float64)
    pieces = 2 * n if p.zigzag else n
    diffs = {}
    # fp32 round-off: the online softmax sums a row's L scores block by block, rescaled, where SDPA takes one
    # softmax; bound: 4× the SDPA reference's own distance from float64, at least L·ε·max|x| (a row sums L terms).
    tolerances = {name: fp32_tolerance(ref[name], exact[name], terms=p.seq_len) for name in ("out", "dq", "dk", "dv")}
    for name in ("out", "dq", "dk", "dv"):
        whole = [None] * pieces
        for r in results:
            for i, part in zip(r["chunks"], r[name].chunk(len(r["chunks"]), dim=1)):
                whole[i] = part
        diffs[name] = max_abs_diff(torch.cat(whole, dim=1), ref[name])

    # Bytes, from the traced transfers: K/V blocks in forward and backward, dK/dV in backward; expected
    # from the configuration: a block is K and V of seq/N positions, heads × head_dim fp32 values each.
    kv_block = 2 * p.heads * (p.seq_len // n) * p.head_dim * 4
    sent = {"forward": [0] * n, "backward_kv": [0] * n, "backward_dkv": [0] * n}
    backward = False
    for f in frames:
        backward = backward or f.phase.startswith("backward") or f.phase == "grads"
        for t in f.transfers:
            key = "backward_dkv" if (t.tensor or "").startswith("dkv") else ("backward_kv" if backward else "forward")
            sent[key][t.src] += t.bytes
    formula_fwd, formula_dkv = (n - 1) * kv_block, n * kv_block

    # Overlap, from the trace: how much of each K/V transfer's flight ran during the rank's compute spans.
    overlap, transfer_time = 0.0, 0.0
    for f in frames:
        for t in f.transfers:
            if (t.tensor or "").startswith("kv"):
                transfer_time += t.end - t.start
                overlap += sum(max(0.0, min(t.end, s.end) - max(t.start, s.start))
                               for s in f.spans if s.kind == "compute" and s.rank == t.src)
    # In flight while computing, by the order of events (not by timing): at every step but the last, the
    # next block's transfer is posted before the step's compute starts and completed after it ends.
    hidden, expected_hidden = 0, 2 * n * (n - 1)
    for f in frames:
        if f.phase not in ("forward_step", "backward_step"):
            continue
        for t in f.transfers:
            if (t.tensor or "").startswith("kv"):
                computed = [s for s in f.spans if s.kind == "compute" and s.rank == t.src]
                hidden += bool(computed) and all(t.start <= s.start and s.end <= t.end for s in computed)

    # Work: score elements each rank computed at each forward step, against the tile count of the layout.
    # A tile is c × c scores per head (a diagonal tile is computed whole, then masked). Zig-zag with a
    # causal mask: at step 0 a rank attends its own two chunks (two diagonal tiles, and its late chunk
    # sees all of its early one: 3 tiles); at every later step exactly 2 of its 4 tiles are needed (one
    # chunk of the block precedes both of its query chunks, or both its chunks precede its late one);
    # contiguous: rank r needs a tile only at steps s ≤ r.
    c = p.seq_len // pieces
    tile = p.heads * c * c
    per_rank = 2 if p.zigzag else 1
    if not p.causal:
        expected_work = [[per_rank * per_rank * tile] * n for _ in range(n)]
    elif p.zigzag:
        expected_work = [[3 * tile] + [2 * tile] * (n - 1) for _ in range(n)]
    else:
        expected_work = [[tile if s <= r else 0 for s in range(n)] for r in range(n)]
    measured_work = [list(r["work"]) for r in results]
    work = [sum(r["work"]) for r in results]
    checks = [
        Check(name="output equals full attention", passed=diffs["out"] <= tolerances["out"], measured=diffs["out"],
              expected=f"≤ {tolerances['out']:.1e}", detail="max |O_ring − O_full|; fp32, online softmax vs one "
              "softmax: the bound is 4× the SDPA reference's own distance from float64, at least s·ε·max|O|, "
              "ε = 2⁻²⁴; a missed rescale or mask errs by > 1e-2"),
        *[Check(name=f"gradients equal full attention's ({g})", passed=diffs[g] <= tolerances[g], measured=diffs[g],
                expected=f"≤ {tolerances[g]:.1e}", detail=f"max |{g}_ring − {g}_full|; bound as for the output")
          for g in ("dq", "dk", "dv")],
        Check(name="forward bytes per rank = (N−1)·(K+V block bytes)", passed=all(s == formula_fwd for s in sent["forward"]),
              measured=sent["forward"], expected=formula_fwd, detail=f"K+V block = {kv_block} bytes"),
        Check(name="backward K/V bytes per rank = (N−1)·(K+V block bytes)",
              passed=all(s == formula_fwd for s in sent["backward_kv"]), measured=sent["backward_kv"],
              expected=formula_fwd, detail="the K/V blocks go round the ring again in backward"),
        Check(name="backward dK/dV bytes per rank = N·(dK+dV block bytes)",
              passed=all(s == formula_dkv for s in sent["backward_dkv"]), measured=sent["backward_dkv"], expected=formula_dkv),
        Check(name="each K/V block is in flight while the held one is computed", passed=hidden == expected_hidden,
              measured=hidden, expected=expected_hidden,
              detail="transfers whose span (posted → completed) encloses the rank's compute of that step, forward "
                     "and backward, N − 1 steps each on N ranks: the order of events, not a timing"),
        Check(name="work per rank and step = the layout's tile count"
              + (" (zig-zag: equal on every rank)" if p.zigzag and p.causal else ""),
              passed=measured_work == expected_work, measured=work, expected=[sum(w) for w in expected_work],
              detail=f"score elements computed per forward step, {tile} per tile of {c}×{c} positions and "
                     f"{counted(p.heads, 'head')}; " + ("zig-zag + causal: 3 tiles at step 0, then 2 per step, on every rank" if p.zigzag and p.causal
                     else "causal, contiguous: rank r computes at steps 0..r only" if p.causal
                     else f"no mask: {per_rank * per_rank} tile(s) per step")),
    ]
    return Summary(checks=checks, figures={
        "kv_block_bytes": kv_block, "forward_bytes_per_rank": sent["forward"], "formula_forward_bytes": formula_fwd,
        "backward_kv_bytes_per_rank": sent["backward_kv"], "backward_dkv_bytes_per_rank": sent["backward_dkv"],
        "formula_backward_bytes": formula_fwd + formula_dkv,
        "scores_computed_per_rank": work, "work_imbalance": max(work) / (sum(work) / n),
        "scores_full_attention": p.heads * p.seq_len ** 2,
        "kv_transfer_s": transfer_time, "kv_transfer_overlapped_s": overlap,
        "backward": True, "frames": len(frames),
    })


SCENARIO = Scenario(
    name="ring_attention",
    title="Ring attention",
    description="Sequence-sharded attention: K/V blocks travel round a ring, merged with online softmax; "
                "causal with optional zig-zag balancing; forward and backward.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["ring", "timeline", "ranks"],
    controls=["world_size", "seq_len", "causal", "zigzag"],
)
