"""Planted bugs: small, realistic mistakes in the scenarios' algorithms, each of which a self-check must catch.

Each mutant is (module of simulations.scenarios to patch, an exact snippet of it, its replacement,
the parameters to run at). `scenario` is the scenario whose run uses the patched module. The
snippets are exact: when the code they target changes, the runner says so (a broken mutant),
instead of silently testing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mutant:
    id: str
    scenario: str  # the scenario module (and its SCENARIO.name)
    old: str
    new: str
    bug: str
    params: dict = field(default_factory=dict)
    module: str = ""  # the module patched, when not the scenario's own

    def __post_init__(self):
        if not self.module:
            object.__setattr__(self, "module", self.scenario)

    @property
    def scenario_name(self) -> str:
        return self.scenario


BASICS = {}
DDP = {"world_size": 4, "steps": 1}
DILOCO = {"world_size": 2, "inner_steps": 2, "outer_steps": 2, "width": 8}
EP = {"world_size": 4, "experts": 8, "top_k": 2, "capacity_factor": 1.0, "tokens": 8}
P3D = {"dp": 2, "pp": 2, "tp": 2, "layers": 2, "hidden": 4, "microbatches": 2}
P3D_SMALL = {"dp": 2, "pp": 1, "tp": 2, "layers": 2, "hidden": 4, "microbatches": 2}
PIPE = {"stages": 4, "microbatches": 4, "schedule": "1f1b"}
RING = {"world_size": 4, "seq_len": 16}
TP = {"tp": 2, "hidden": 8, "heads": 2, "seq_len": 4}
TP_SP = {**TP, "sequence_parallel": True}
ZERO3 = {"stage": 3, "world_size": 2, "width": 8, "depth": 1}
ZERO2 = {"stage": 2, "world_size": 2, "width": 8, "depth": 1}
ULYSSES = {"world_size": 2, "seq_len": 8, "heads": 4}
HSDP = {"replicas": 2, "shards": 2, "width": 8, "depth": 1}
FAILURES = {"world_size": 4, "restart_world_size": 3, "steps": 9, "checkpoint_every": 3, "fail_at_step": 8}

MUTANTS: list[Mutant] = [
    # -- basics ------------------------------------------------------------------------------------
    Mutant("basics-tanh-derivative", "basics", 'd_z1 = d_h * (1 - acts["h"] ** 2)', 'd_z1 = d_h * (1 - acts["h"])',
           "tanh' written as 1 - h instead of 1 - h^2", BASICS),
    Mutant("basics-bias-grad-mean", "basics", '"b2": d_y_hat.sum(0)}', '"b2": d_y_hat.mean(0)}',
           "output bias gradient averaged over the batch instead of summed", BASICS),
    Mutant("basics-final-loss-stale", "basics", "final = forward(w, x)", "final = acts",
           "the trained loss shown is the last step's, before its update", BASICS),
    # -- ddp ---------------------------------------------------------------------------------------
    Mutant("ddp-reduce-scatter-overwrites", "ddp", "chunks[receive] += incoming", "chunks[receive].copy_(incoming)",
           "reduce-scatter overwrites the chunk instead of adding", DDP),
    Mutant("ddp-no-average", "ddp", "    grads.div_(ctx.world_size)\n", "",
           "bucket summed but not divided by N", DDP),
    Mutant("ddp-allgather-extra-round", "ddp", "    for step in range(n - 1):\n        send, receive = (rank + 1 - step) % n",
           "    for step in range(n):\n        send, receive = (rank + 1 - step) % n",
           "one all-gather round too many: same values, a chunk more sent per bucket", DDP),
    Mutant("ddp-allgather-wrong-chunk", "ddp", "send, receive = (rank + 1 - step) % n, (rank - step) % n",
           "send, receive = (rank - step) % n, (rank - step - 1) % n",
           "all-gather passes on the wrong chunk", DDP),
    Mutant("ddp-optimizer-without-momentum", "ddp",
           "optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)",
           "optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE)",
           "the replicas' optimizer is built without momentum", {**DDP, "steps": 2}),
    # -- diloco ------------------------------------------------------------------------------------
    Mutant("diloco-no-nesterov", "diloco", "momentum=p.outer_momentum, nesterov=p.outer_momentum > 0)",
           "momentum=p.outer_momentum, nesterov=False)",
           "outer SGD uses heavy-ball momentum instead of Nesterov", DILOCO),
    Mutant("diloco-adam-not-adamw", "diloco", "return torch.optim.AdamW(params, lr=p.inner_lr, weight_decay=WEIGHT_DECAY)",
           "return torch.optim.Adam(params, lr=p.inner_lr, weight_decay=WEIGHT_DECAY)",
           "inner optimizer is Adam with L2 penalty, not AdamW's decoupled decay", DILOCO),
    Mutant("diloco-no-zero-grad", "diloco", "def train_step(model, optimizer, x, y) -> float:\n    optimizer.zero_grad()\n",
           "def train_step(model, optimizer, x, y) -> float:\n",
           "inner steps never zero the gradients: they accumulate", DILOCO),
    Mutant("diloco-delta-sign", "diloco", "delta = theta - parameters_to_vector(worker.parameters()).detach()",
           "delta = parameters_to_vector(worker.parameters()).detach() - theta",
           "pseudo-gradient with the wrong sign", DILOCO),
    Mutant("diloco-no-restart", "diloco",
           "        vector_to_parameters(parameters_to_vector(global_model.parameters()).detach(), worker.parameters())\n",
           "", "workers do not restart from the new global parameters", DILOCO),
    Mutant("diloco-eval-shows-ddp-model", "diloco", 'ev = {"diloco": float(mse(global_model(self.x_eval), self.y_eval)),',
           'ev = {"diloco": float(mse(baseline(self.x_eval), self.y_eval)),',
           "the held-out loss shown for DiLoCo is the DDP model's", DILOCO),
    # -- expert parallel ---------------------------------------------------------------------------
    Mutant("ep-capacity-off-by-one", "expert_parallel", "return experts, gates, position < cap",
           "return experts, gates, position <= cap", "each expert takes C + 1 tokens", EP),
    Mutant("ep-token-major-queue", "expert_parallel",
           "    one_hot = F.one_hot(experts.T.reshape(-1), router.shape[0])  # [k*T, E], choice-major\n"
           "    position = (one_hot.cumsum(0) - 1).mul(one_hot).sum(-1).reshape(top_k, -1).T  # [T, k]",
           "    one_hot = F.one_hot(experts.reshape(-1), router.shape[0])  # [T*k, E], token-major\n"
           "    position = (one_hot.cumsum(0) - 1).mul(one_hot).sum(-1).reshape(-1, top_k)  # [T, k]",
           "capacity queue in token order: a token's second choice beats the next token's first", EP),
    Mutant("ep-gates-normalised-globally", "expert_parallel", "gates = gates / gates.sum(-1, keepdim=True)",
           "gates = gates / gates.sum()", "top-k gates divided by the sum over all tokens, not per token", EP),
    Mutant("ep-rows-grouped-by-expert", "expert_parallel",
           "expert_of_row = torch.tensor([e for src in range(n) for j, e in enumerate(mine)",
           "expert_of_row = torch.tensor([e for j, e in enumerate(mine) for src in range(n)",
           "received rows assumed grouped by expert, not by source rank", EP),
    Mutant("ep-combine-ungated", "expert_parallel", "gates[token_index, slot, None] * returned", "returned",
           "expert outputs summed without their gates", EP),
    # -- 3D parallelism ----------------------------------------------------------------------------
    Mutant("3d-mesh-dp-fastest", "parallel_3d",
           "layout = torch.arange(p.dp * p.pp * p.tp).reshape(p.dp, p.pp, p.tp)",
           "layout = torch.arange(p.dp * p.pp * p.tp).reshape(p.tp, p.pp, p.dp).permute(2, 1, 0)",
           "mesh laid out dp fastest: tp peers on different nodes", P3D_SMALL),
    Mutant("3d-block-relu", "parallel_3d", "partial = F.linear(F.gelu(F.linear(enter(x)",
           "partial = F.linear(F.relu(F.linear(enter(x)", "MLP block uses ReLU instead of GeLU", P3D_SMALL),
    Mutant("3d-grads-reduced-over-tp", "parallel_3d",
           "for w in params]), group=dp_group)", "for w in params]), group=tp_group)",
           "data-parallel all-reduce run on the tensor-parallel group", P3D),
    Mutant("3d-loss-per-microbatch", "parallel_3d", "** 2).sum() / y.numel()", "** 2).sum() / y_mine[k].numel()",
           "each micro-batch's loss normalised by its own size, not the global batch", P3D),
    # -- pipeline ----------------------------------------------------------------------------------
    Mutant("pipe-activations-never-released", "pipeline", "f = self.in_flight.pop((s, i))",
           "f = self.in_flight[(s, i)]", "a micro-batch's activations are kept after its backward", PIPE),
    Mutant("pipe-1f1b-long-warmup", "pipeline", "    warmup = min(p - 1 - rank, m)\n    order = [Action(\"F\", rank, i) for i in range(warmup)]\n    for i in range(m - warmup):",
           "    warmup = min(p - rank, m)\n    order = [Action(\"F\", rank, i) for i in range(warmup)]\n    for i in range(m - warmup):",
           "1F1B warms up with one forward too many", PIPE, module="pipeline_schedules"),
    Mutant("pipe-zb-bias-grad-mean", "pipeline", "layer.bias.grad += dy.sum(0)", "layer.bias.grad += dy.mean(0)",
           "zero-bubble W step averages the bias gradient over the micro-batch",
           {"stages": 2, "microbatches": 2, "schedule": "zero_bubble"}),
    Mutant("pipe-loss-not-split", "pipeline", "out = F.mse_loss(out, self.ys[i]) / self.p.microbatches",
           "out = F.mse_loss(out, self.ys[i])", "micro-batch losses summed, not averaged",
           {"stages": 2, "microbatches": 2, "schedule": "gpipe"}),
    Mutant("pipe-stage-cut-drops-relu", "pipeline",
           "layers = [nn.Sequential(*model[i:i + 2]) for i in range(0, len(model), 2)]",
           "layers = [nn.Sequential(*model[i:i + 1]) for i in range(0, len(model), 2)]",
           "the model is cut into stages without each Linear's ReLU", PIPE),
    # -- ring attention ----------------------------------------------------------------------------
    Mutant("ring-sum-not-rescaled", "ring_attention",
           'state["l"][:, rows] = state["l"][:, rows] * correction + p.sum(-1)',
           'state["l"][:, rows] = state["l"][:, rows] + p.sum(-1)',
           "the running softmax denominator is not rescaled when the maximum grows", RING),
    Mutant("ring-contiguous-pairs", "ring_attention", "return [rank, 2 * p.world_size - 1 - rank] if p.zigzag else [rank]",
           "return [2 * rank, 2 * rank + 1] if p.zigzag else [rank]",
           "'zig-zag' placement gives each rank two neighbouring chunks: unbalanced", RING),
    Mutant("ring-backward-extra-hop", "ring_attention",
           "            if step < n - 1 else None\n        with trace.span(f\"grad kv{src}\"",
           "            if step < n else None\n        with trace.span(f\"grad kv{src}\"",
           "backward sends K/V one hop too many (same values)", RING),
    Mutant("ring-forward-blocking-exchange", "ring_attention",
           'pending = comm.sendrecv_async(kv, right, torch.empty_like(kv), left, group, chunk=src, name=f"kv{src}") \\\n'
           "            if step < n - 1 else None  # the next block",
           'pending = (lambda got: type("Done", (), {"wait": lambda self: got})())(comm.sendrecv('
           'kv, right, torch.empty_like(kv), left, group, chunk=src, name=f"kv{src}")) \\\n'
           "            if step < n - 1 else None  # the next block",
           "forward exchanges K/V with a blocking sendrecv before computing: same values, no overlap", RING),
    Mutant("ring-lse-without-max", "ring_attention", 'lse = state["m"] + state["l"].log()', 'lse = state["l"].log()',
           "log-sum-exp saved without the running maximum", RING),
    Mutant("ring-dq-unscaled", "ring_attention", "dq[:, rows] += ds @ k * scale", "dq[:, rows] += ds @ k",
           "dQ misses the 1/sqrt(d) scale", RING),
    # -- tensor parallel ---------------------------------------------------------------------------
    Mutant("tp-attention-scale", "tensor_parallel",
           "scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])\n    scores = scores.masked_fill",
           "scores = q @ k.transpose(-1, -2) / q.shape[-1]\n    scores = scores.masked_fill",
           "attention scores divided by d instead of sqrt(d)", TP),
    Mutant("tp-softmax-axis", "tensor_parallel", "out = scores.softmax(-1) @ v", "out = scores.softmax(-2) @ v",
           "softmax over the queries instead of the keys", TP),
    Mutant("tp-gelu-tanh", "tensor_parallel", 'F.gelu(F.linear(a, w["fc1.weight"], w["fc1.bias"]))',
           'F.gelu(F.linear(a, w["fc1.weight"], w["fc1.bias"]), approximate="tanh")',
           "tanh-approximated GeLU in the MLP", TP),
    Mutant("tp-f-backward-no-all-reduce", "tensor_parallel",
           "        grad = comm.all_reduce(grad.contiguous().clone(), group=ctx.group)\n        if ctx.show:\n"
           "            ctx.show(\"f_backward\", \"f backward: all-reduce",
           "        grad = grad.contiguous().clone()\n        if ctx.show:\n"
           "            ctx.show(\"f_backward\", \"f backward: all-reduce",
           "f's backward forgets its all-reduce", TP),
    Mutant("tp-sp-replicated-grads-not-reduced", "tensor_parallel", "    if sp:  # LayerNorms and biases",
           "    if False:  # LayerNorms and biases", "SP: LayerNorm and bias gradients not summed over ranks", TP_SP),
    Mutant("tp-fc1-wrong-slice", "tensor_parallel",
           "        n = shape[0] // tp\n        return None, (slice(rank * n, (rank + 1) * n),)",
           "        n = shape[0] // tp\n        return None, (slice((tp - 1 - rank) * n, (tp - rank) * n),)",
           "fc1's column slice taken at the mirrored offset", TP),
    # -- ZeRO / FSDP -------------------------------------------------------------------------------
    Mutant("zero3-gathered-kept-after-backward", "zero",
           "        unit.full.grad = None\n        if self.p.stage == 3:\n            free(unit.full)",
           "        unit.full.grad = None", "stage 3 keeps the gathered parameters after backward", ZERO3),
    Mutant("zero-adam-bias-correction", "zero", "denom = (v.sqrt() / (1 - b2**t) ** 0.5).add_(EPS)",
           "denom = (v.sqrt() / (1 - b2**t)).add_(EPS)", "Adam's second-moment correction without the sqrt", ZERO2),
    Mutant("zero2-gradient-not-averaged", "zero", "        shard.div_(self.ctx.world_size)\n", "",
           "stage 2 reduce-scatter sums the gradients but does not average them", ZERO2),
    Mutant("zero-accumulation-not-divided", "zero",
           "return F.mse_loss(out.float(), y) / self.p.grad_accumulation", "return F.mse_loss(out.float(), y)",
           "accumulated micro-batch losses are summed, not averaged", {**ZERO2, "grad_accumulation": 2}),
    Mutant("zero-adam-step-count-frozen", "zero", "optimizer_step(unit, p, n, step + 1, ctx.group)",
           "optimizer_step(unit, p, n, 1, ctx.group)", "Adam's step count stuck at 1 (bias correction of step 1 forever)",
           {**ZERO2, "precision": "bf16", "steps": 2}),
    Mutant("zero-checkpoint-not-applied", "zero", "x = checkpoint(self.unit_forward, unit, x, use_reentrant=False)",
           "x = self.unit_forward(unit, x)", "activation checkpointing keeps the inputs but never recomputes",
           {"stage": 0, "world_size": 2, "width": 8, "depth": 2, "activation_checkpointing": True}),
    Mutant("zero2-full-gradient-kept", "zero",
           "        unit.full.grad = None\n        if self.p.stage == 3:\n            free(unit.full)",
           "        if self.p.stage == 3:\n            free(unit.full)",
           "stage 2 keeps the full gradient after reduce-scattering it", ZERO2),
    Mutant("3d-stage-sends-its-input", "parallel_3d", "comm.send(out.detach(), s + 1, pp_group",
           "comm.send(inp.detach(), s + 1, pp_group", "a stage passes on its input instead of its output", P3D),
    Mutant("zero1-updated-shard-not-gathered", "zero",
           "            comm.all_gather_into_tensor(unit.full.data, unit.sent, group)\n", "",
           "stage 1 never all-gathers the updated shards", {**ZERO2, "stage": 1}),
    # -- Ulysses (context parallel, all-to-all) -------------------------------------------------------
    Mutant("ulysses-split-heads-wrong-axis", "ulysses",
           "send = x.reshape(c, n, h // n, t, d).transpose(0, 1).contiguous()",
           "send = x.reshape(c, h // n, n, t, d).transpose(0, 2).transpose(1, 2).contiguous()",
           "the all-to-all sends heads interleaved across ranks instead of contiguous head groups", ULYSSES),
    Mutant("ulysses-return-not-transposed", "ulysses",
           "return recv.transpose(0, 1).reshape(c, n * h, length // n, d)",
           "return recv.reshape(c, n * h, length // n, d)",
           "the way back stacks the received blocks in the wrong order", ULYSSES),
    Mutant("ulysses-causal-offset-dropped", "ulysses",
           "rows = torch.arange(q.shape[-2], device=q.device)[:, None] + q_start",
           "rows = torch.arange(q.shape[-2], device=q.device)[:, None]",
           "the causal mask forgets where the rank's queries start in the sequence",
           {**ULYSSES, "method": "all_gather_kv"}),
    Mutant("ulysses-output-sent-twice", "ulysses",
           "out = heads_to_seq(out_heads.detach()[None], n, group)[0]",
           "out = heads_to_seq(torch.stack([out_heads.detach()] * 2), n, group)[0]",
           "the output all-to-all carries a second, useless copy (right values, twice the bytes)", ULYSSES),
    # -- HSDP (shard inside a group, replicate across groups) ----------------------------------------
    Mutant("hsdp-no-cross-replica-all-reduce", "hsdp", "        comm.all_reduce(grad, replicate_group)\n", "",
           "gradient shards never all-reduced across replicas", HSDP),
    Mutant("hsdp-averaged-over-shards-only", "hsdp", "unit.grad = grad.div_(world)", "unit.grad = grad.div_(p.shards)",
           "gradients averaged over the shard group instead of every rank", HSDP),
    Mutant("hsdp-all-reduce-on-wrong-dimension", "hsdp", "comm.all_reduce(grad, replicate_group)",
           "comm.all_reduce(grad, shard_group)", "the cross-replica all-reduce runs over the shard group", HSDP),
    Mutant("hsdp-all-reduce-instead-of-reduce-scatter", "hsdp",
           "comm.reduce_scatter_tensor(grad, unit.full.grad, shard_group)",
           "grad.copy_(comm.all_reduce(unit.full.grad, shard_group)[unit.lo: unit.hi])",
           "a full all-reduce where a reduce-scatter suffices (right numbers, more bytes)", HSDP),
    Mutant("hsdp-replicas-read-the-same-data", "hsdp",
           "x.chunk(world)[ctx.rank].to(ctx.device), y.chunk(world)[ctx.rank].to(ctx.device)",
           "x.chunk(world)[shard].to(ctx.device), y.chunk(world)[shard].to(ctx.device)",
           "every replica trains on the same slice of the batch", HSDP),
    # -- failures (checkpoint, fail, restart) --------------------------------------------------------
    Mutant("failures-restores-the-oldest-checkpoint", "failures", "resume = complete_checkpoints(root)[-1]",
           "resume = complete_checkpoints(root)[0]", "the restart loads the first checkpoint, not the last", FAILURES),
    Mutant("failures-skips-the-optimizer-state", "failures",
           'state = {"model": model_state, "optimizer": optim_state, "step": -1}',
           'state = {"model": model_state, "step": -1}',
           "the restart loads the weights but starts Adam afresh", FAILURES),
    Mutant("failures-resume-skips-a-step", "failures", "for step in range(resume_from[0] + 1, p.steps + 1):",
           "for step in range(resume_from[0] + 2, p.steps + 1):",
           "off by one: the restart goes on from the step after the checkpoint's next", FAILURES),
    Mutant("failures-checkpoint-records-the-step-before", "failures", '"step": step}, checkpoint_id=path',
           '"step": step - 1}, checkpoint_id=path',
           "the checkpoint says it holds the step before its own: that step is trained twice", FAILURES),
]

BY_ID = {m.id: m for m in MUTANTS}
assert len(BY_ID) == len(MUTANTS), "mutant ids must be unique"
