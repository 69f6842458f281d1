"""The loop closed on this machine: calibrate it, estimate a small Llama's training step on the profile, then train
that step for real and print predicted against measured (issue 37, item 3).

1. `distdeck calibrate` on this CPU, one thread (a rank), timed by this process's CPU time (`--clock cpu`): the
   machine the benchmarks run on is shared, and under load a microsecond GEMM runs inside one slice of the scheduler
   while a second-long step is spread over many, so wall-clock rates of the two disagree (at a load average of 37 on
   2 cores a calibrated wall-clock estimate came out 10 times too fast). One thread a rank: the two-rank run has a
   core each.
2. The estimator (simulations.estimate) on the profile, stack "hf" with AMP (the op-by-op Hugging Face Llama under
   autocast): the small Llama (simulations.calibrate.llama.BENCH_LLAMA), one rank, then two ranks of data
   parallelism (DDP, fp32 gradients on the wire) over the link the profile measured (gloo, loopback).
3. The same step for real: the model in fp32 under torch.autocast(bfloat16) (the mixed precision Hugging Face's
   Trainer and Lightning's bf16-mixed run), F.cross_entropy on fp32 logits, gradient clipping, torch.optim.AdamW
   (foreach); one rank, then two gloo ranks with torch's DistributedDataParallel. The median step of REPEATS after
   WARM_UP.

Each real step is timed on both clocks: CPU time (the process's, so for DDP gloo's threads too; what the estimate is
compared with) and wall time (which a busy machine stretches; printed with the load average beside it). The error is
predicted / measured − 1 (negative: the estimate is too fast). Figures, not a test: they are printed and written to
bench/results/calibrated-latest.json. Run alone with `python -m bench.calibrated`.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from simulations import estimate as est
from simulations.calibrate import calibrate, llama, plan
from simulations.estimate import profile

RESULTS = Path(__file__).resolve().parent / "results"
SEQUENCES = 2  # per rank and step
WARM_UP, REPEATS = 2, int(os.environ.get("DISTDECK_BENCH_REPEATS", "7"))
SHAPE = llama.BENCH_LLAMA


def train_steps(model: torch.nn.Module, rank: int, seed: int) -> list[tuple[float, float]]:
    """(CPU seconds, wall seconds) of each timed training step (after WARM_UP untimed ones) of `model` on this
    process's batch."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    tokens, targets = llama.batch(SHAPE, SEQUENCES, seed + rank, torch.device("cpu"))
    times = []
    for i in range(WARM_UP + REPEATS):
        if dist.is_initialized():
            dist.barrier()  # every rank starts the step together, as a synchronous job's steps do
        start, cpu_start = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(tokens)
        llama.loss(logits, targets).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= WARM_UP:
            times.append((time.process_time() - cpu_start, time.perf_counter() - start))
    return times


def _ddp_rank(rank: int, world: int, store: str, out) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(llama.Llama(SHAPE))
    times = train_steps(model, rank, seed=1)
    # the step of the slowest rank: a step ends for the job when every rank's gradients are reduced
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put([tuple(step) for step in slowest.tolist()])
    dist.destroy_process_group()


def measured_ddp(world: int) -> list[tuple[float, float]]:
    store = tempfile.mktemp(prefix="distdeck-bench-ddp-")
    results = mp.get_context("spawn").SimpleQueue()
    try:
        mp.spawn(_ddp_rank, args=(world, store, results), nprocs=world, join=True)
        return results.get()
    finally:
        Path(store).unlink(missing_ok=True)


def predicted(hardware: est.GPU, ranks: int) -> est.Estimate:
    """The estimator on the calibrated machine: the same model, batch and stack as the real step."""
    model, cluster, layout = est.build(
        "custom", layers=SHAPE.layers, hidden=SHAPE.hidden, heads=SHAPE.heads, kv_heads=SHAPE.kv_heads,
        ffn_hidden=SHAPE.ffn_hidden, vocab=SHAPE.vocab, seq_len=SHAPE.seq_len, gated_mlp=True, dropout=False,
        flash_attention=True, gpus=ranks, tp=1, zero_stage=0, global_batch=SEQUENCES * ranks, micro_batch=SEQUENCES,
        recompute="none", stack="hf", amp=True, grad_reduce_dtype="fp32", hardware=hardware)
    return est.estimate(model, cluster, layout)


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    started = time.perf_counter()
    data = calibrate(plan("cpu", shape=SHAPE, sequences=SEQUENCES, threads=1, clock="cpu"))
    calibrate_s = time.perf_counter() - started
    hardware = profile.to_gpu(profile.from_dict(data))
    figures: dict = {"model": SHAPE.name, "params": SHAPE.params(), "sequences_per_rank": SEQUENCES,
                     "tokens_per_rank": SEQUENCES * SHAPE.seq_len, "calibrate_s": calibrate_s,
                     "load_average": os.getloadavg(), "cores": os.cpu_count(),
                     "profile": {"gemm_best_flops_per_s": hardware.sustained_flops,
                                 "copy_bytes_per_s": data["memory_copy"]["bytes_per_s"],
                                 "eager_op_s": data["eager_op"]["seconds_per_op"],
                                 "link_bus_bytes_per_s": (data["interconnect"] or {}).get("bus_bytes_per_s")}}
    print(f"calibrated: this CPU, one thread, CPU clock, in {calibrate_s:.0f} s: GEMM up to "
          f"{hardware.sustained_flops / 1e9:.0f} GFLOP/s ({data['device']['dtype']}), copy "
          f"{data['memory_copy']['bytes_per_s'] / 1e9:.1f} GB/s, eager op {data['eager_op']['seconds_per_op'] * 1e6:.1f} "
          f"µs, gloo all-reduce {figures['profile']['link_bus_bytes_per_s'] / 1e9:.2f} GB/s", flush=True)
    for label, ranks in (("one rank", 1), ("two gloo ranks, DDP", 2)):
        estimate = predicted(hardware, ranks)
        if ranks == 1:
            saved = torch.get_num_threads()
            torch.set_num_threads(1)
            torch.manual_seed(0)
            steps = train_steps(llama.Llama(SHAPE), 0, seed=1)
            torch.set_num_threads(saved)
        else:
            steps = measured_ddp(ranks)
        cpu, wall = statistics.median(s[0] for s in steps), statistics.median(s[1] for s in steps)
        error = estimate.step_time_s / cpu - 1
        figures[label] = {"ranks": ranks, "predicted_step_s": estimate.step_time_s, "measured_cpu_step_s": cpu,
                          "measured_wall_step_s": wall, "measured_steps_s": steps, "error": error,
                          "wall_error": estimate.step_time_s / wall - 1,
                          "predicted_parts_s": {"compute": estimate.compute_s, "optimizer": estimate.optimizer_s,
                                                "exposed_comm": estimate.exposed_comm_s}}
        print(f"calibrated: {SHAPE.name} ({SHAPE.params() / 1e6:.0f} M parameters, {SEQUENCES} × {SHAPE.seq_len} "
              f"tokens a rank), {label}: predicted {estimate.step_time_s * 1000:.0f} ms a step, measured median "
              f"{cpu * 1000:.0f} ms of CPU time, error {error:+.0%} (wall clock {wall * 1000:.0f} ms, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", flush=True)
    out = RESULTS / "calibrated-latest.json"
    out.write_text(json.dumps(figures, indent=2))
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
