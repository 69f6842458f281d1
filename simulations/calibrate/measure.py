"""The measurements of `distdeck calibrate`, one function a part, each adding its section to the profile.

What each part times and how (its note goes into the profile beside the figures):
- gemm: F.linear(a, w), a [m, k], w [n, k], at every GEMM shape a training step of the model runs (forward, input
  gradient, weight gradient; llama.gemm_shapes): 2·m·k·n FLOPs over the median time. On a GPU in bf16 (TF32 off);
  on a CPU in the faster of fp32 and bf16 at the model's largest layer GEMM (AMX and AVX-512 BF16 make bf16 the fast
  one on recent Xeons, and it is the dtype autocast runs the matmuls in), both rates kept;
- attention: F.scaled_dot_product_attention(q, k, v, is_causal=True) at the model's heads, head size and length,
  forward and forward + backward, with the kernel torch picks and each one it has (flash, memory-efficient, cuDNN,
  math), FLOPs counted as the shared H100 measurements count them (4·b·heads·s²·d/2 forward, 2.5 times that
  backward);
- memory_copy: dst.copy_(src) of a large buffer (2 GB on a GPU, 256 MB on a CPU), bytes read plus written per second;
- eager_op: x.add_(1) on a one-element tensor, many times back to back, then a synchronisation: what the host spends
  to issue one eager op (Python, the dispatcher, the launch), seconds per op;
- elementwise: a residual add, SwiGLU's silu(a)·b, an RMSNorm op by op (Meta's reference) and by F.rms_norm, a cast
  of fp32 to bf16, F.cross_entropy forward and backward on fp32 logits: bytes an ideal single pass moves per
  second (a chain of unfused ops moves more, so its rate reads low: that is what it costs);
- optimizer: torch.optim.AdamW, foreach and fused, over `params` fp32 parameters in 16 tensors with gradients set,
  and clip_grad_norm_ over their gradients: seconds per parameter;
- every CPU figure on the host's clock, or with `clock="cpu"` on this process's CPU time (timing.py);
- interconnect (not in quick mode): an all_reduce of 64 MB (and 4 KB for latency) between two ranks on this machine,
  NCCL on two GPUs or gloo on the CPU: bus bandwidth 2(n−1)/n · bytes / seconds.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import torch
import torch.nn.functional as F

from simulations.calibrate import llama
from simulations.calibrate.timing import device_time, synchronize, wall
from simulations.estimate.models import Model
from simulations.estimate.profile import FORMAT
from simulations.runtime.execute import cpu_model

MB = 2**20


@dataclass
class Plan:
    """What to measure: the device, the model whose shapes the GEMMs and attention take, and how much."""

    device: torch.device
    shape: Model
    sequences: int  # sequences per step: GEMMs of sequences × seq_len rows
    quick: bool = False
    threads: int | None = None  # CPU: threads torch uses (a rank of n on this machine: cores / n)
    clock: str = "wall"  # CPU: "wall", or "cpu" (this process's CPU time: a busy machine, one thread; timing.py)
    reps: int = 5
    copy_bytes: int = 256 * MB
    eager_ops: int = 2000
    optimizer_params: int = 16 * 2**20
    interconnect: bool = True
    dtype: torch.dtype = torch.bfloat16
    notes: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.sequences * self.shape.seq_len


def plan(device: str = "auto", quick: bool = False, shape: Model | None = None, sequences: int | None = None,
         threads: int | None = None, clock: str = "wall") -> Plan:
    """The measurements for `device` ("cuda", "cpu" or "auto": a GPU if torch sees one). A GPU measures a Llama 3
    8B layer at 4,096 tokens; a CPU the benchmark's small Llama (llama.BENCH_LLAMA); quick: the tiny one, smaller
    buffers, fewer repeats, no interconnect."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA GPU here (use --device cpu or auto)")
    if clock not in ("wall", "cpu"):
        raise ValueError(f"--clock must be wall or cpu, not {clock!r}")
    if clock == "cpu" and (device == "cuda" or threads != 1):
        raise ValueError("--clock cpu times a CPU's work by this process's CPU time, which is the work's own only "
                         "on one thread: use it with --device cpu --threads 1")
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    if shape is None:
        from simulations.estimate.models import MODELS

        # on a GPU one sequence of 4,096 tokens, the length of the shared H100/H200 measurements
        shape = llama.TINY_LLAMA if quick else (replace(MODELS["llama3-8b"], seq_len=4096) if gpu else llama.BENCH_LLAMA)
    if sequences is None:
        sequences = max(1, 4096 // shape.seq_len) if gpu and not quick else 2
    p = Plan(dev, shape, sequences, quick, threads, clock)
    if gpu:
        p.copy_bytes, p.eager_ops, p.optimizer_params = 2 * 2**30, 5000, 256 * 2**20
    if quick:
        p.reps, p.copy_bytes, p.eager_ops, p.optimizer_params, p.interconnect = 3, 16 * MB, 500, 2**20, False
    return p


def environment(p: Plan) -> dict:
    """Where and with what the profile was measured."""
    cores = os.cpu_count() or 1
    out = {"format": FORMAT, "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "host": {"cpu": cpu_model(), "cores": cores, "system": platform.platform()},
           "software": {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": None,
                        "threads": torch.get_num_threads()}}
    if p.device.type == "cuda":
        props = torch.cuda.get_device_properties(p.device)
        out["device"] = {"type": "cuda", "name": props.name, "memory_bytes": props.total_memory,
                         "compute_units": props.multi_processor_count, "driver": nvidia_driver(),
                         "capability": f"{props.major}.{props.minor}", "dtype": "bfloat16"}
        out["software"]["cudnn"] = torch.backends.cudnn.version()
    else:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        out["device"] = {"type": "cpu", "name": cpu_model(), "memory_bytes": memory,
                         "compute_units": torch.get_num_threads(), "driver": None, "dtype": None}
    return out


def nvidia_driver() -> str | None:
    """The NVIDIA driver's version as nvidia-smi reports it, or None where it cannot be asked."""
    import subprocess

    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, p: Plan) -> tuple[float, float]:
    a = torch.randn(m, k, device=p.device, dtype=dtype)
    w = torch.randn(n, k, device=p.device, dtype=dtype)
    seconds = device_time(lambda: F.linear(a, w), p.device, reps=p.reps, clock=p.clock)
    return seconds, 2 * m * k * n / seconds


def gemm_dtype(p: Plan, out: dict) -> None:
    """A CPU runs the GEMMs in the faster of fp32 and bf16 at the model's largest layer GEMM; a GPU in bf16."""
    if p.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        p.dtype = torch.bfloat16
        return
    m, k, n = p.tokens, p.shape.hidden, p.shape.ffn_hidden
    rates = {name: gemm_rate(m, k, n, dtype, p)[1] for name, dtype in (("float32", torch.float32),
                                                                       ("bfloat16", torch.bfloat16))}
    chosen = max(rates, key=rates.get)
    p.dtype = getattr(torch, chosen)
    out["gemm"] = {"dtype_probe": {"m": m, "k": k, "n": n, "flops_per_s": rates, "chosen": chosen}}


def gemm(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    section = out.setdefault("gemm", {})
    section["note"] = ("F.linear(a, w), a m x k, w n x k, FLOPs 2mkn over the median of "
                       f"{p.reps} timed calls or more after 2 warm-up calls ({'CUDA events' if p.device.type == 'cuda' else p.clock + ' clock'}); "
                       f"the shapes of {p.shape.name} at {p.tokens} tokens: forward, input and weight gradients")
    rows = section.setdefault("rows", [])
    name = str(p.dtype).removeprefix("torch.")
    for m, k, n in llama.gemm_shapes(p.shape, p.tokens):
        seconds, rate = gemm_rate(m, k, n, p.dtype, p)
        rows.append({"m": m, "k": k, "n": n, "dtype": name, "seconds": seconds, "flops_per_s": rate})
        tick()
    out["device"]["dtype"] = name


def attention_backends(device: torch.device) -> dict:
    """The SDPA kernels this torch has for `device`, by SDPBackend name."""
    from torch.nn.attention import SDPBackend

    if device.type == "cpu":  # the flash CPU kernel and the math fallback
        return {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
    found = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "math": SDPBackend.MATH}
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        found["cudnn"] = SDPBackend.CUDNN_ATTENTION
    return found


def picked_backend(q: torch.Tensor) -> str:
    """The kernel F.scaled_dot_product_attention picks for q, k, v like q, causal (torch's own dispatcher)."""
    from torch.nn.attention import SDPBackend

    try:
        choice = SDPBackend(torch._fused_sdp_choice(q, q, q, None, 0.0, True))
    except (AttributeError, RuntimeError, ValueError):
        return "unknown"
    return {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient", "CUDNN_ATTENTION": "cudnn",
            "MATH": "math"}.get(choice.name, choice.name.lower())


def attention(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    from torch.nn.attention import sdpa_kernel

    b, heads, s, d = p.sequences, p.shape.heads, p.shape.seq_len, p.shape.head_dim
    q, k, v = (torch.randn(b, heads, s, d, device=p.device, dtype=p.dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, heads, s, d, device=p.device, dtype=p.dtype)
    forward_flops = 4 * b * heads * s * s * d / 2  # causal: half the square
    backends = attention_backends(p.device)
    default = picked_backend(q)
    rows, errors = [], {}
    for name in ["default", *backends]:
        def forward():
            if name == "default":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            with sdpa_kernel(backends[name]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def forward_backward():
            forward().backward(grad)
            q.grad = k.grad = v.grad = None
        try:
            with torch.no_grad():
                fwd = device_time(forward, p.device, reps=p.reps, clock=p.clock)
            both = device_time(forward_backward, p.device, reps=p.reps, clock=p.clock)
        except RuntimeError as exc:  # a kernel that does not take these inputs here
            errors[name] = str(exc).splitlines()[0][:200]
            tick()
            continue
        rows.append({"b": b, "heads": heads, "s": s, "d": d, "kernel": default if name == "default" else name,
                     "picked_by_torch": name == "default", "forward_s": fwd, "forward_backward_s": both,
                     "forward_flops_per_s": forward_flops / fwd,
                     "backward_flops_per_s": 2.5 * forward_flops / max(both - fwd, 1e-9)})
        tick()
    out["attention"] = {"note": "F.scaled_dot_product_attention(q, k, v, is_causal=True), q/k/v (b, heads, s, d) in "
                                f"{str(p.dtype).removeprefix('torch.')}; forward FLOPs 4*b*heads*s*s*d/2 (causal "
                                "half), backward 2.5 x that over (forward+backward time - forward time); "
                                "picked_by_torch: the kernel torch's dispatcher chose, the others forced with "
                                "torch.nn.attention.sdpa_kernel",
                        "available": sorted(backends), "default_kernel": default, "rows": rows,
                        "errors": errors}


def memory_copy(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    src = torch.empty(p.copy_bytes, dtype=torch.uint8, device=p.device).fill_(1)
    dst = torch.empty_like(src)
    seconds = device_time(lambda: dst.copy_(src), p.device, reps=p.reps, clock=p.clock)
    out["memory_copy"] = {"note": f"dst.copy_(src) of {p.copy_bytes} bytes, median of {p.reps}; bytes read plus "
                                  "written per second",
                          "bytes_moved": 2 * p.copy_bytes, "seconds": seconds, "bytes_per_s": 2 * p.copy_bytes / seconds}
    tick()


def eager_op(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    x = torch.zeros(1, device=p.device)

    def many() -> None:
        for _ in range(p.eager_ops):
            x.add_(1)
    seconds = wall(many, p.device, warm=1, reps=p.reps, clock=p.clock) / p.eager_ops
    out["eager_op"] = {"note": f"{p.eager_ops} back-to-back x.add_(1) on a one-element tensor, then a "
                               "synchronisation, host clock (CPU time with the cpu clock): Python, the dispatcher and the launch of one eager op",
                       "ops": p.eager_ops, "seconds_per_op": seconds}
    tick()


def elementwise(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    t, h, vocab = p.tokens, p.shape.hidden, p.shape.vocab
    x = torch.randn(t, h, device=p.device, dtype=torch.bfloat16)
    wide = torch.randn(t, p.shape.ffn_hidden, device=p.device, dtype=torch.bfloat16)
    weight = torch.ones(h, device=p.device, dtype=torch.bfloat16)
    master = torch.randn(p.optimizer_params, device=p.device)
    logits = torch.randn(t, vocab, device=p.device, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (t,), device=p.device)
    norm = llama.RMSNorm(h).to(p.device, torch.bfloat16)

    def cross_entropy() -> None:
        F.cross_entropy(logits.float(), labels).backward()
        logits.grad = None
    nbytes, wide_bytes = x.numel() * 2, wide.numel() * 2
    passes = {  # name: (call, shape, bytes an ideal single pass reads and writes)
        "add_bf16": (lambda: x + x, [t, h], 3 * nbytes),
        "silu_mul_bf16": (lambda: F.silu(wide) * wide, [t, p.shape.ffn_hidden], 3 * wide_bytes),
        "rmsnorm_op_by_op_bf16": (lambda: norm(x), [t, h], 2 * nbytes),
        "rms_norm_torch_bf16": (lambda: F.rms_norm(x, (h,), weight), [t, h], 2 * nbytes),
        "cast_fp32_to_bf16": (lambda: master.to(torch.bfloat16), [p.optimizer_params], 6 * p.optimizer_params),
        "cross_entropy_fp32_forward_backward": (cross_entropy, [t, vocab], t * vocab * (2 + 2)),
    }
    rows = {}
    for name, (call, shape, moved) in passes.items():
        seconds = device_time(call, p.device, reps=p.reps, clock=p.clock)
        rows[name] = {"shape": shape, "seconds": seconds, "bytes_moved": moved, "bytes_per_s": moved / seconds}
        tick()
    out["elementwise"] = {"note": "median seconds of one call; bytes_moved counts what an ideal single fused pass "
                                  "reads and writes (bf16 in and out; the loss: bf16 logits read, their bf16 gradient "
                                  "written), so a chain of unfused ops reads slower than the memory can go",
                          "rows": rows}


def optimizer(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    tensors = 16
    params = [torch.zeros(p.optimizer_params // tensors, device=p.device, requires_grad=True) for _ in range(tensors)]
    for param in params:
        param.grad = torch.randn_like(param)
    count = sum(param.numel() for param in params)
    rows, errors = {}, {}
    for name in ("foreach", "fused"):
        try:
            opt = torch.optim.AdamW(params, lr=1e-5, **{name: True})
            seconds = wall(opt.step, p.device, warm=1, reps=p.reps, clock=p.clock)
        except (RuntimeError, ValueError) as exc:  # fused AdamW on a device or dtype that lacks it
            errors[name] = str(exc).splitlines()[0][:200]
        else:
            rows[name] = {"seconds": seconds, "seconds_per_param": seconds / count}
        tick()
    seconds = wall(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), p.device, warm=1, reps=p.reps, clock=p.clock)
    rows["clip"] = {"seconds": seconds, "seconds_per_param": seconds / count}
    tick()
    out["optimizer"] = {"note": f"torch.optim.AdamW(lr=1e-5).step() over {count} fp32 parameters in {tensors} "
                                "tensors, gradients set, foreach and fused; clip: torch.nn.utils.clip_grad_norm_(1.0) "
                                "over the same gradients; median of steps on the host's clock (or CPU time) with a "
                                "synchronisation",
                        "params": count, "tensors": tensors, "rows": rows, "errors": errors}


def _all_reduce_rank(rank: int, world: int, store: str, backend: str, sizes: list[int], reps: int, clock: str,
                     results) -> None:
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    if backend == "gloo":
        torch.set_num_threads(1)
    times = []
    for size in sizes:
        buffer = torch.ones(size // 4, device=device)
        times.append(wall(lambda: dist.all_reduce(buffer), device, warm=2, reps=reps, clock=clock,  # noqa: B023
                          min_total_s=0.0))
    if rank == 0:
        results.put(times)
    dist.barrier()
    dist.destroy_process_group()


def interconnect(p: Plan, out: dict, tick: Callable[[], None]) -> None:
    """Two ranks on this machine: NCCL between two GPUs, gloo between two CPU processes. None with one GPU."""
    import torch.multiprocessing as mp

    if p.device.type == "cuda" and torch.cuda.device_count() < 2:
        out["interconnect"] = None
        tick()
        return
    backend = "nccl" if p.device.type == "cuda" else "gloo"
    big, small, world = 64 * MB, 4096, 2
    store = tempfile.mktemp(prefix="distdeck-calibrate-")
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    try:
        mp.spawn(_all_reduce_rank, args=(world, store, backend, [big, small], p.reps, p.clock, results), nprocs=world,
                 join=True)
        big_s, small_s = results.get()
    finally:
        if os.path.exists(store):
            os.unlink(store)
    out["interconnect"] = {"note": f"dist.all_reduce of fp32 buffers between {world} ranks on this machine "
                                   f"({backend}), median of {p.reps} ({p.clock} clock: with the CPU clock, the "
                                   "CPU time of rank 0's process, gloo's threads included); bus bandwidth "
                                   "2(n-1)/n x bytes / seconds",
                           "backend": backend, "ranks": world, "bytes": big, "seconds": big_s,
                           "bus_bytes_per_s": 2 * (world - 1) / world * big / big_s,
                           "small_bytes": small, "small_seconds": small_s}
    tick()


PARTS: dict[str, Callable] = {"gemm": gemm, "attention": attention, "memory_copy": memory_copy,
                              "eager_op": eager_op, "elementwise": elementwise, "optimizer": optimizer,
                              "interconnect": interconnect}


def steps(p: Plan) -> int:
    """How many ticks calibrate() gives: its progress bar's total."""
    return (len(llama.gemm_shapes(p.shape, p.tokens)) + 1 + len(attention_backends(p.device)) + 1 + 1 + 6 + 3
            + (1 if p.interconnect else 0))


def calibrate(p: Plan, on_step: Callable[[str], None] = lambda part: None) -> dict:
    """Measure everything `p` asks and return the profile's JSON (simulations.estimate.profile reads it)."""
    saved_threads = torch.get_num_threads()
    if p.threads and p.device.type == "cpu":
        torch.set_num_threads(p.threads)
    started = time.perf_counter()
    try:
        torch.manual_seed(0)
        out = environment(p)
        out["measured_for"] = {"model": p.shape.name, "layers": p.shape.layers, "hidden": p.shape.hidden,
                               "heads": p.shape.heads, "kv_heads": p.shape.kv_heads,
                               "ffn_hidden": p.shape.ffn_hidden, "vocab": p.shape.vocab, "seq_len": p.shape.seq_len,
                               "sequences": p.sequences, "quick": p.quick}
        gemm_dtype(p, out)
        for name, part in PARTS.items():
            if name == "interconnect" and not p.interconnect:
                out[name] = None
                continue
            part(p, out, lambda name=name: on_step(name))
            synchronize(p.device)
        out["clock"] = "cuda events" if p.device.type == "cuda" else p.clock
        out["about"] = (f"Measured by distdeck calibrate on {out['device']['name']} ({out['device']['type']}), "
                        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {out['clock']} clock, "
                        f"in {time.perf_counter() - started:.0f} s; each section's note says how.")
        out["seconds"] = time.perf_counter() - started
        return out
    finally:
        torch.set_num_threads(saved_threads)
