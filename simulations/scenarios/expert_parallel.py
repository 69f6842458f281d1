"""Expert parallelism: a mixture-of-experts layer whose experts live on different ranks.

GShard (Lepikhin et al., "GShard: Scaling Giant Models with Conditional Computation and
Automatic Sharding", arXiv:2006.16668) and Switch Transformer (Fedus et al., arXiv:2101.03961):
a learned router scores every token against every expert (softmax gating) and sends it to its
top-k experts. The experts are spread over the ranks, E/N each, so tokens must travel: every rank
sends each token to the rank that owns its expert with an all-to-all ("dispatch"), the experts run
on what they received, and a second all-to-all brings the results home ("combine").

Capacity: each expert takes at most C = ceil(capacity_factor * k * T / E) tokens from each rank's
T tokens (GShard's per-group capacity). First choices are served before second choices, and
tokens in order (GShard Algorithm 1); an assignment past capacity is dropped and contributes
nothing (in a transformer the residual connection carries the token on unchanged).

The sizes are not known in advance, so the ranks first exchange how many tokens each will send
to each expert (a small all_to_all_single of counts), then the tokens themselves with those
splits, as Megatron-LM's and DeepSpeed's dispatchers do.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulations import comm, formulas, trace
from simulations.frames import Check, Summary
from simulations.models import fp32_reorder_bound, fp32_tolerance, max_abs_diff
from simulations.scenarios.base import RankContext, Scenario
from simulations.trace import tensor_view
from simulations.words import counted, plural


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_size: int = Field(4, ge=2, le=8, description="Ranks (GPUs)")
    experts: int = Field(8, ge=2, le=64, description="Experts in the layer (a multiple of world_size)")
    top_k: int = Field(2, ge=1, le=8, description="Experts each token is sent to")
    capacity_factor: float = Field(1.0, ge=0.25, le=4.0, description="Slots per expert, relative to an even split")
    tokens: int = Field(8, ge=1, le=128, description="Tokens on each rank")
    hidden: int = Field(4, ge=2, le=64, description="Hidden size of a token")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _fits(self) -> Params:
        if self.experts % self.world_size:
            raise ValueError(f"experts ({self.experts}) must be a multiple of world_size ({self.world_size}): "
                             f"each rank holds experts/world_size whole experts")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be at most experts ({self.experts}): "
                             f"a token cannot go to more experts than exist")
        return self


# -- the layer's weights and data: the same seed gives the same layer on every rank -----------------

def make_weights(p: Params) -> dict:
    """Router [E, H] and every expert's two-layer MLP (H -> 2H -> H), as if loaded from a checkpoint."""
    g = torch.Generator().manual_seed(p.seed)
    h, f = p.hidden, 2 * p.hidden
    router = torch.randn(p.experts, h, generator=g) / math.sqrt(h)
    experts = [{"w1": torch.randn(f, h, generator=g) / math.sqrt(h), "b1": 0.1 * torch.randn(f, generator=g),
                "w2": torch.randn(h, f, generator=g) / math.sqrt(f), "b2": 0.1 * torch.randn(h, generator=g)}
               for _ in range(p.experts)]
    return {"router": router, "experts": experts}


def make_tokens(p: Params) -> torch.Tensor:
    """All N*T tokens [N*T, H]; rank r holds rows r*T .. (r+1)*T - 1."""
    g = torch.Generator().manual_seed(p.seed + 1)
    return torch.randn(p.world_size * p.tokens, p.hidden, generator=g)


def capacity(p: Params) -> int:
    return math.ceil(p.capacity_factor * p.top_k * p.tokens / p.experts)


# -- the MoE layer's pieces (used by the ranks and by the single-process reference alike) -----------

def route(x: torch.Tensor, router: torch.Tensor, top_k: int, cap: int):
    """Softmax top-k gating with capacity. Returns experts [T, k], gates [T, k], kept [T, k] (bool).

    GShard renormalises the top-k gates to sum to 1; with k = 1 (Switch) the gate is the probability.
    """
    probs = F.softmax(x @ router.T, dim=-1)
    gates, experts = probs.topk(top_k, dim=-1)
    if top_k > 1:
        gates = gates / gates.sum(-1, keepdim=True)
    # Position of each assignment in its expert's queue: all first choices (in token order), then
    # all second choices, ...; past `cap` it is dropped.
    one_hot = F.one_hot(experts.T.reshape(-1), router.shape[0])  # [k*T, E], choice-major
    position = (one_hot.cumsum(0) - 1).mul(one_hot).sum(-1).reshape(top_k, -1).T  # [T, k]
    return experts, gates, position < cap


def expert_mlp(w: dict, x: torch.Tensor) -> torch.Tensor:
    return F.linear(F.gelu(F.linear(x, w["w1"], w["b1"])), w["w2"], w["b2"])


# -- one rank's forward pass -----------------------------------------------------------------------

def run(ctx: RankContext, p: Params) -> dict:
    n, rank, group = ctx.world_size, ctx.rank, ctx.group
    per_rank = p.experts // n
    mine = range(rank * per_rank, (rank + 1) * per_rank)  # expert e lives on rank e // per_rank
    weights = make_weights(p)
    router = weights["router"].to(ctx.device)
    local_experts = {e: {k: t.to(ctx.device) for k, t in weights["experts"][e].items()} for e in mine}
    x = make_tokens(p).chunk(n)[rank].to(ctx.device)
    cap = capacity(p)
    trace.frame("tokens", f"Each of the {n} ranks holds {counted(p.tokens, 'token')} and {per_rank} of the "
                f"{p.experts} "
                f"experts; every rank holds the router", tensors=[tensor_view("tokens", "activations", x, shard=(rank, n))],
                extra=_layout(p, cap), rank_extra={"experts": list(mine)})

    # 1. Route: every rank scores its own tokens; capacity drops the overflow.
    with trace.span("router"):
        experts, gates, kept = route(x, router, p.top_k, cap)
    wanted = torch.bincount(experts.reshape(-1), minlength=p.experts)
    send_counts = torch.bincount(experts[kept], minlength=p.experts)  # tokens this rank sends to each expert
    trace.frame("route", f"The router sends each token to its top-{p.top_k} {plural(p.top_k, 'expert')}; an expert "
                f"takes at most {counted(cap, 'token')} from each rank, the rest are dropped",
                rank_extra={"routes": _routes(rank, p.tokens, experts, gates, kept),
                            "wanted": wanted.tolist(), "sent": send_counts.tolist(),
                            "dropped": int((~kept).sum())})

    # 2. Exchange counts: rank r learns how many tokens each rank will send to each of its experts.
    recv_counts = torch.empty_like(send_counts)
    comm.all_to_all_single(recv_counts, send_counts, group=group)
    recv_counts = recv_counts.reshape(n, per_rank)  # [source rank, local expert]
    in_splits = send_counts.reshape(n, per_rank).sum(1).tolist()  # tokens to each destination rank
    out_splits = recv_counts.sum(1).tolist()  # tokens from each source rank
    trace.frame("counts", "First a small all-to-all of counts: each rank learns how many tokens it will "
                "receive for each of its experts", rank_extra={"received_counts": recv_counts.tolist()})

    # 3. Dispatch: the kept assignments, sorted by expert (hence by destination rank), go out.
    token_index, slot = kept.nonzero(as_tuple=True)
    order = experts[token_index, slot].argsort(stable=True)
    token_index, slot = token_index[order], slot[order]
    outgoing = x[token_index]
    incoming = outgoing.new_empty(sum(out_splits), p.hidden)
    comm.all_to_all_single(incoming, outgoing, out_splits, in_splits, group=group)
    row = outgoing.element_size() * p.hidden
    trace.frame("dispatch", "Dispatch: an all-to-all with uneven splits carries every kept token to the rank "
                "that owns its expert", tensors=[tensor_view("received", "activations", incoming)],
                rank_extra={"send_bytes": [s * row for s in in_splits], "recv_bytes": [s * row for s in out_splits]})

    # 4. Experts: the received rows arrive grouped by source rank, then by expert within a source.
    expert_of_row = torch.tensor([e for src in range(n) for j, e in enumerate(mine)
                                  for _ in range(int(recv_counts[src, j]))], dtype=torch.long)
    processed = torch.empty_like(incoming)
    tokens_per_expert, received_sum = {}, {}
    for e in mine:
        rows = (expert_of_row == e).nonzero(as_tuple=True)[0]
        with trace.span(f"expert {e}", tokens=len(rows)):
            processed[rows] = expert_mlp(local_experts[e], incoming[rows])
        tokens_per_expert[e] = len(rows)
        received_sum[e] = incoming[rows].sum(0).cpu()  # which tokens arrived, for the check
    trace.frame("experts", "Each rank runs its experts on the tokens they received: real counts, uneven",
                rank_extra={"tokens_per_expert": [tokens_per_expert[e] for e in mine]},
                status=", ".join(f"E{e}: {c}" for e, c in tokens_per_expert.items()))

    # 5. Combine: the reverse all-to-all brings every result back to the token's own rank.
    returned = torch.empty_like(outgoing)
    comm.all_to_all_single(returned, processed, in_splits, out_splits, group=group)
    trace.frame("combine", "Combine: the reverse all-to-all returns each result to the rank its token came from",
                rank_extra={"send_bytes": [s * row for s in out_splits], "recv_bytes": [s * row for s in in_splits]})

    # 6. Weighted sum of each token's expert outputs; a token with every choice dropped stays 0.
    y = torch.zeros_like(x).index_add_(0, token_index, gates[token_index, slot, None] * returned)
    trace.frame("output", f"Each token's output is the gate-weighted sum of its experts' results; "
                f"{counted(int((~kept).sum()), 'assignment')} on this rank "
                f"{'was' if int((~kept).sum()) == 1 else 'were'} dropped",
                tensors=[tensor_view("output", "activations", y, shard=(rank, n))])
    return {"y": y.cpu(), "experts": experts.cpu(), "kept": kept.cpu(), "tokens_per_expert": tokens_per_expert,
            "received_sum": received_sum,
            "in_splits": in_splits, "out_splits": out_splits, "row_bytes": row,
            "count_bytes": send_counts.numel() * send_counts.element_size()}


def _layout(p: Params, cap: int) -> dict:
    per_rank = p.experts // p.world_size
    return {"experts": p.experts, "top_k": p.top_k, "capacity": cap, "tokens_per_rank": p.tokens,
            "expert_rank": [e // per_rank for e in range(p.experts)]}


def _routes(rank: int, tokens: int, experts, gates, kept) -> list[dict]:
    """Where every token of this rank goes: global token id, its experts, gates, and which were kept."""
    return [{"token": rank * tokens + t, "experts": experts[t].tolist(),
             "gates": [round(float(g), 4) for g in gates[t]], "kept": kept[t].tolist()}
            for t in range(len(experts))]


# -- the single-process reference and the checks --------------------------------------------------

def reference(p: Params, dtype: torch.dtype = torch.float32) -> dict:
    """The same MoE layer in one process, routed by a plain loop: GShard's Algorithm 1 written out (softmax,
    top-k, gates renormalised per token when k > 1, capacity C = ceil(capacity_factor·k·T/E) per expert and
    routing group, every token's first choice queued before any second choice, tokens in order). It shares
    no code with the run's `route`, `capacity` or `expert_mlp`: only the weights and the tokens.
    Also returns what the all-to-alls must carry: `sends[a][b]`, assignments from rank a to rank b.
    `dtype`: the experts' arithmetic (float64: the exact values the fp32 round-off is measured from); the
    routing is always decided in fp32, as the run decides it, so both dtypes route alike."""
    weights, x32 = make_weights(p), make_tokens(p)
    x = x32.to(dtype)
    n, E, k, T = p.world_size, p.experts, p.top_k, p.tokens
    cap = math.ceil(p.capacity_factor * k * T / E)
    y = torch.zeros_like(x)
    kept = torch.zeros(n * T, k, dtype=torch.bool)
    counts = [0] * E
    received = [torch.zeros(p.hidden, dtype=dtype) for _ in range(E)]
    received_abs = [torch.zeros(p.hidden, dtype=dtype) for _ in range(E)]  # Σ|rows|: the sums' round-off scale
    sends = [[0] * n for _ in range(n)]
    for group in range(n):  # one routing group per rank's tokens
        probs = torch.softmax(x32[group * T:(group + 1) * T] @ weights["router"].T, dim=-1)
        choices = []
        for t in range(T):
            best = sorted(range(E), key=lambda e: -float(probs[t, e]))[:k]
            total = sum(float(probs[t, e]) for e in best) if k > 1 else 1.0
            choices.append([(e, float(probs[t, e]) / total) for e in best])
        load = [0] * E
        for j in range(k):
            for t in range(T):
                e, gate = choices[t][j]
                if load[e] == cap:
                    continue  # dropped: the expert's queue for this group is full
                load[e] += 1
                token = x[group * T + t]
                w = {name: t.to(dtype) for name, t in weights["experts"][e].items()}
                hidden = F.gelu(w["w1"] @ token + w["b1"])
                y[group * T + t] += gate * (w["w2"] @ hidden + w["b2"])
                kept[group * T + t, j] = True
                counts[e] += 1
                received[e] += token
                received_abs[e] += token.abs()
                sends[group][e // (E // n)] += 1
    return {"y": y, "kept": kept, "counts": counts, "received": received, "received_abs": received_abs,
            "sends": sends, "capacity": cap}


def summarize(p: Params, results: list[dict], frames) -> Summary:
    n = p.world_size
    ref, exact = reference(p), reference(p, torch.float64)
    y = torch.cat([r["y"] for r in results])
    kept = torch.cat([r["kept"] for r in results])
    diff = max_abs_diff(y, ref["y"])
    # A token's output: dot products of h and 2h terms through the expert's MLP, then a gate-weighted sum of k.
    y_terms = 2 * p.hidden + p.top_k
    y_tol = fp32_tolerance(ref["y"], exact["y"], terms=y_terms)
    counts = [c for r in results for c in r["tokens_per_expert"].values()]
    arrived = {e: t for r in results for e, t in r["received_sum"].items()}
    # The rows an expert received, summed on its rank (one vectorised sum) and in the reference (one row at a
    # time): the same fp32 values in another order, so they agree within the reordering bound, per element.
    arrived_diff = max(max_abs_diff(arrived[e], ref["received"][e]) for e in range(p.experts))
    arrived_excess = max(float(((arrived[e].double() - ref["received"][e].double()).abs()
                                - fp32_reorder_bound(ref["received_abs"][e].double(), ref["counts"][e])).max())
                         for e in range(p.experts))
    arrived_tol = max(float(fp32_reorder_bound(ref["received_abs"][e].double(), ref["counts"][e]).max())
                      for e in range(p.experts))
    dropped = int((~kept).sum())

    # Bytes, expected from the configuration and the reference's routing: the count exchange is E int64
    # counts per rank; dispatch sends each kept assignment's row (h fp32 values) to its expert's rank, and
    # combine sends it back. The traced all-to-alls record the buffer each rank handed over.
    row, count_bytes = p.hidden * 4, p.experts * 8
    sends = ref["sends"]
    out_rows = [sum(sends[r]) for r in range(n)]
    in_rows = [sum(sends[a][r] for a in range(n)) for r in range(n)]
    expected_traced = [count_bytes + row * (out_rows[r] + in_rows[r]) for r in range(n)]
    traced = [r["_sent"].get("all_to_all", 0) for r in results]
    expected_off = [row * (out_rows[r] - sends[r][r] + in_rows[r] - sends[r][r]) for r in range(n)]
    off_rank = [row * (sum(r["in_splits"]) - r["in_splits"][i] + sum(r["out_splits"]) - r["out_splits"][i])
                for i, r in enumerate(results)]
    token_bytes = [row * (sum(r["in_splits"]) + sum(r["out_splits"])) for r in results]
    formula = [formulas.all_gather_bytes(s, n) for s in token_bytes]  # all-to-all: the same (N−1)/N · S
    mean_off, mean_formula = sum(off_rank) / n, sum(formula) / n

    checks = [
        Check(name="output equals the single-process MoE layer", passed=diff <= y_tol, measured=diff,
              expected=f"≤ {y_tol:.1e}", detail="max |y_EP − y_reference| over every token, drops included; the "
              "two differ by summation order only: the bound is 4× the fp32 reference's own distance from its "
              f"float64 twin (same routing), at least {y_terms}·ε·max|y| (dot products of h and 2h terms, k gated "
              "outputs; ε = 2⁻²⁴); a wrong gate or capacity moves y by > 1e-2"),
        Check(name="same assignments dropped as a plain router", passed=bool(torch.equal(kept, ref["kept"])),
              measured=dropped, expected=int((~ref["kept"]).sum()),
              detail=f"every (token, choice) kept or dropped alike; capacity C = {ref['capacity']} per expert and rank"),
        Check(name="tokens that arrived at each expert: as many as the plain router's",
              passed=counts == ref["counts"], measured=counts, expected=ref["counts"],
              detail="rows each expert processed after the dispatch, exact"),
        Check(name="tokens that arrived at each expert: the plain router's tokens (sum of the rows)",
              passed=arrived_excess <= 0, measured=arrived_diff, expected=f"≤ {arrived_tol:.1e}",
              detail="max |Σ rows received − Σ rows the plain router sent| per expert and element: the right tokens, "
                     "not only the right number. The bound, per element, is fp32 reordering of a sum of c rows: "
                     "2(c−1)·ε·Σ|rows| (Higham §4.2), c the expert's count; the largest shown. A wrong token moves "
                     "the sum by ~|x| ≈ 1"),
        Check(name="traced all-to-all bytes = counts + dispatched + combined rows", passed=traced == expected_traced,
              measured=traced, expected=expected_traced,
              detail=f"per rank: E × 8 B of counts, then {row} B per assignment sent and received, from the plain "
                     f"router's routing"),
        Check(name="off-rank bytes per rank match the routing", passed=off_rank == expected_off,
              measured=off_rank, expected=expected_off,
              detail="rows dispatched to other ranks plus rows combined back to other ranks (the run's splits), "
                     "against the plain router's assignments between distinct ranks"),
    ]
    return Summary(checks=checks, figures={
        "capacity_per_expert_per_rank": capacity(p), "tokens_per_expert": counts,
        "assignments": n * p.tokens * p.top_k, "dropped_assignments": dropped,
        "drop_rate": dropped / (n * p.tokens * p.top_k),
        "tokens_dropped_entirely": int((~kept.any(-1)).sum()),
        "all_to_all_bytes_per_rank": token_bytes, "off_rank_bytes_per_rank": off_rank,
        "formula_off_rank_bytes_per_rank": formula,
        "off_rank_bytes_mean": mean_off, "formula_off_rank_bytes_mean": mean_formula,
        "formula": "all-to-all of M bytes: (N−1)/N · M leave each rank when routing is uniform",
        "count_exchange_bytes_per_rank": count_bytes, "frames": len(frames),
    })


SCENARIO = Scenario(
    name="expert_parallel",
    title="Expert parallelism",
    description="A mixture-of-experts layer with top-k softmax routing and capacity; experts spread over ranks, "
                "tokens dispatched and combined with all-to-all.",
    params=Params,
    run=run,
    summarize=summarize,
    views=["tokens", "ranks", "timeline"],
    controls=["world_size", "experts", "top_k", "capacity_factor"],
)
