"""The `distdeck` command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from simulations.hardware import GPUS
from simulations.estimate.models import MODELS

cli = typer.Typer(no_args_is_help=True, add_completion=False, help="distdeck: see distributed training, for real.")


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    reload: Annotated[bool, typer.Option(help="Reload on code changes (development).")] = False,
    runs: Annotated[Path | None, typer.Option(help="A folder of recorded run files to list and replay.",
                                              exists=True, file_okay=False)] = None,
    backend: Annotated[str | None, typer.Option(help="The pool's backend: auto, gloo or nccl (default: "
                                                     "DISTDECK_BACKEND, else auto).", show_default=False)] = None,
    talk: Annotated[Path | None, typer.Option(help="Your own talk: a Markdown talk file (`distdeck new` writes one) "
                                                  "served instead of the whole deck (default: DISTDECK_TALK_FILE).",
                                             show_default=False)] = None,
) -> None:
    """Serve the deck (or your talk file) at http://HOST:PORT."""
    import uvicorn
    from pydantic import ValidationError

    from app.settings import Settings
    from simulations.runtime.execute import NotEnoughGPUs, pick_backend

    if runs is not None:
        os.environ["DISTDECK_RUNS_DIR"] = str(runs.resolve())  # read by Settings, also in --reload workers
    if talk is not None:
        os.environ["DISTDECK_TALK_FILE"] = str(talk.absolute())  # read by Settings, also in --reload workers
    if backend is not None:
        os.environ["DISTDECK_BACKEND"] = backend
    try:
        settings = Settings()
    except ValidationError as exc:
        problem = exc.errors()[0]
        typer.echo(f"error: DISTDECK_{str(problem['loc'][0]).upper()}: {problem['msg']}", err=True)
        raise typer.Exit(2) from None
    _check_talk(settings, talk)  # a wrong talk file is refused before the server starts, as export refuses it
    try:  # before the server starts: a pool of more NCCL ranks than GPUs would fail in every rank
        pick_backend(settings.backend, settings.pool_size)
    except NotEnoughGPUs as exc:
        typer.echo(f"error: {exc.advice('a pool of DISTDECK_POOL_SIZE={gpus}')}", err=True)
        raise typer.Exit(2) from None
    uvicorn.run("app.main:create_app", factory=True, host=host, port=port, reload=reload)


def _check_talk(settings, shown: Path | None) -> None:
    """Exit 2 with `FILE:LINE: what is wrong` if the settings' talk file does not load (`shown`: the path as the
    user typed it, for the message)."""
    from app.content.talk import load_talk
    from app.content.talkfile import TalkFileError

    if settings.talk_file is None:
        return
    shown = shown if shown is not None else settings.talk_file
    try:
        talk = load_talk(settings.slides_dir, shown)
        too_large = talk.deck.too_large_for(settings.pool_size)
        if too_large is not None:
            raise TalkFileError(str(shown), *too_large)
    except TalkFileError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


@cli.command()
def new(
    file: Annotated[Path, typer.Argument(help="The talk file to write (never over an existing file).")],
) -> None:
    """Write a starter talk file that shows every feature and serves as is (`distdeck serve --talk FILE`)."""
    from app.content.talkfile import STARTER_TALK

    try:
        with file.open("x", encoding="utf-8") as out:  # "x": refuse an existing file, atomically
            out.write(STARTER_TALK.read_text(encoding="utf-8"))
    except FileExistsError:
        typer.echo(f"error: {file} exists; `distdeck new` never overwrites a file: choose another name", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {file}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {file}\n  serve it:  distdeck serve --talk {file}\n  export it: distdeck export site --talk {file}")


@cli.command()
def simulate(
    scenario: Annotated[str, typer.Argument(help="Scenario name: see `distdeck scenarios`.")],
    world_size: Annotated[int | None, typer.Option(help="Ranks, for scenarios that take world_size.")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="A parameter as key=value; repeatable.")] = [],  # noqa: B006
    trace: Annotated[Path | None, typer.Option(help="Write a Chrome trace (open it in Perfetto).")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the run file, replayable by `serve --runs`.")] = None,
    backend: Annotated[str, typer.Option(help="auto, gloo or nccl.")] = "auto",
) -> None:
    """Run a scenario on real ranks; print its frames, checks and timings."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from simulations import scenarios
    from simulations.chrome_trace import chrome_trace
    from simulations.params import ParamError, parse_params
    from simulations.runtime import RankPool
    from simulations.runtime.execute import NotEnoughGPUs
    from simulations.runtime.runs import execute, new_run

    assignments = list(set_) + ([f"world_size={world_size}"] if world_size is not None else [])
    try:
        params = parse_params(scenario, assignments)
    except ParamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    ranks = scenarios.get(scenario).world_size(params)
    console = Console(stderr=True)
    try:
        pool = RankPool(size=ranks, backend=backend)
    except NotEnoughGPUs as exc:
        typer.echo(f"error: {exc.advice('fewer ranks in --world-size or --set')}", err=True)
        raise typer.Exit(2) from None
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed} frames"),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            task = progress.add_task(f"starting {ranks} rank(s)", total=None)
            pool.start(background=False)
            progress.update(task, description=f"{scenario} on {ranks} rank(s), {pool.backend}")
            run = execute(pool, new_run(scenario, params, pool.backend), params,
                          on_fragment=lambda run: progress.update(task, completed=len(run.frames)))
    finally:
        pool.close()
    if run.error is not None:
        typer.echo(f"error: the run failed: {run.error}", err=True)
        raise typer.Exit(1)
    summary = run.summary
    typer.echo(f"{scenario}: {len(run.frames)} frames on {ranks} rank(s), backend {pool.backend}")
    for check in summary.checks:
        typer.echo(f"  [{'pass' if check.passed else 'FAIL'}] {check.name}: measured {check.measured}"
                   f" (expected {check.expected})")
    for name, seconds in summary.timings.items():
        typer.echo(f"  {name}: {seconds * 1000:.1f} ms")
    if trace is not None:
        import json

        trace.write_text(json.dumps(chrome_trace(run.meta, run.frames)))
        typer.echo(f"  trace: {trace}")
    if out is not None:
        out.write_text(run.to_file().model_dump_json())
        typer.echo(f"  run file: {out}")
    if not summary.passed:
        raise typer.Exit(1)


@cli.command("export")
def export(
    out: Annotated[Path, typer.Argument(help="Folder to write the static site into (created if missing).")],
    variants: Annotated[str, typer.Option(help="grid: each live slide's default run and a small grid of its "
                                          "controls' values; default: the default runs only.")] = "grid",
    backend: Annotated[str, typer.Option(help="auto, gloo or nccl.")] = "auto",
    talk: Annotated[Path | None, typer.Option(help="Export your own talk file instead of the whole deck.",
                                             show_default=False)] = None,
) -> None:
    """Write the deck (or your talk file) as a static site for any host, with its live runs recorded."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from app.export import ExportError, export_site
    from app.settings import Settings
    from simulations.runtime.execute import NotEnoughGPUs

    if variants not in ("grid", "default"):
        typer.echo(f"error: --variants must be grid or default, not {variants!r}", err=True)
        raise typer.Exit(2)
    settings = Settings(backend=backend, talk_file=talk)  # type: ignore[arg-type]
    _check_talk(settings, talk)
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("planning the runs", total=None)

        def on_plan(to_record: int, reused: int) -> None:
            progress.update(task, total=to_record, completed=0,
                            description=f"recording {to_record} run(s), reusing {reused}")

        def on_run(item, state: str) -> None:
            if state == "recording":
                progress.update(task, description=f"{item.scenario} for {item.where[0]}")
            else:
                progress.advance(task)

        try:
            report = export_site(out, settings=settings, variants=variants,  # type: ignore[arg-type]
                                 on_plan=on_plan, on_run=on_run)
        except ExportError as exc:
            progress.stop()
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except NotEnoughGPUs as exc:
            progress.stop()
            typer.echo(f"error: {exc}; use --backend gloo or auto (the deck's runs need the whole pool)", err=True)
            raise typer.Exit(2) from None
    typer.echo(f"exported to {out}: {report.live_sims} live simulation(s), {report.runs} run(s) "
               f"({len(report.recorded)} recorded, {len(report.reused)} reused)")
    if report.skipped:
        typer.echo(f"  {len(report.skipped)} grid variant(s) the scenarios reject were left out")
    typer.echo(f"  open {out / 'index.html'} through any static server, e.g. python -m http.server -d {out}")


@cli.command("scenarios")
def list_scenarios() -> None:
    """List the scenarios and their parameters."""
    from simulations import scenarios

    for scenario in scenarios.all_scenarios().values():
        fields = ", ".join(f"{k}={v.default}" for k, v in scenario.params.model_fields.items())
        typer.echo(f"{scenario.name:18} {scenario.title}\n{'':18} {fields}")


@cli.command("calibrate")
def calibrate_cmd(
    out: Annotated[Path, typer.Option(help="Where to write the hardware profile (JSON).")] = Path("hardware-profile.json"),
    device: Annotated[str, typer.Option(help="cuda, cpu, or auto: the GPU if torch sees one, else the CPU.")] = "auto",
    quick: Annotated[bool, typer.Option("--quick", help="Small shapes and buffers, no interconnect: seconds, "
                                                        "for a smoke test (its rates read low).")] = False,
    threads: Annotated[int | None, typer.Option(min=1, help="CPU: the threads torch may use, as one of several "
                                                            "ranks on this machine would (default: all).",
                                                show_default=False)] = None,
    clock: Annotated[str, typer.Option(help="CPU: wall, or cpu (this process's CPU time: on a machine other work "
                                            "keeps busy; with --threads 1).")] = "wall",
) -> None:
    """Measure this machine (GEMMs at a model's shapes, attention kernels, memory bandwidth, eager op cost,
    element-wise passes, AdamW, the link between two ranks) and write a hardware profile for `estimate
    --hardware-profile`."""
    import json

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from simulations.calibrate import calibrate, plan, steps
    from simulations.estimate import profile

    if device not in ("cuda", "cpu", "auto"):
        typer.echo(f"error: --device must be cuda, cpu or auto, not {device!r}", err=True)
        raise typer.Exit(2)
    if out.exists() and out.is_dir():
        typer.echo(f"error: --out {out} is a folder; give a file name", err=True)
        raise typer.Exit(2)
    if not out.parent.is_dir():
        typer.echo(f"error: --out {out}: the folder {out.parent} does not exist", err=True)
        raise typer.Exit(2)
    try:
        measurements = plan(device, quick=quick, threads=threads, clock=clock)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(f"calibrating the {measurements.device.type}", total=steps(measurements))

        def on_step(part: str) -> None:
            progress.update(task, advance=1, description=f"{measurements.device.type}: {part.replace('_', ' ')}")

        data = calibrate(measurements, on_step)
    checked = profile.from_dict(data)  # what estimate will read: a bug here fails now, not there
    out.write_text(json.dumps(data, indent=1))
    best = checked.best_gemm
    link = (f", {checked.interconnect_backend} all-reduce {checked.interconnect_bus_bytes_per_s / 1e9:.2f} GB/s"
            if checked.interconnect_bus_bytes_per_s else "")
    typer.echo(f"{checked.device_name} ({checked.device_type}), {data['software']['threads']} threads, "
               f"{data['seconds']:.0f} s: GEMM up to {best.flops_per_s / 1e12:.3g} TFLOP/s in {checked.dtype} "
               f"({best.m}×{best.k}×{best.n}), copy {checked.copy_bytes_per_s / 1e9:.1f} GB/s, eager op "
               f"{checked.eager_op_s * 1e6:.1f} µs{link}")
    typer.echo(f"profile: {out}  (use it: distdeck estimate --hardware-profile {out} --gpus 1 ...)")


@cli.command("estimate")
def estimate_cmd(
    model: Annotated[str, typer.Option(help=f"{', '.join(MODELS)} or custom.")] = "llama3-70b",
    layers: Annotated[int | None, typer.Option(help="Layers (custom, or override a preset).")] = None,
    hidden: Annotated[int | None, typer.Option(help="Hidden size.")] = None,
    heads: Annotated[int | None, typer.Option(help="Attention heads.")] = None,
    kv_heads: Annotated[int | None, typer.Option(help="Key/value heads (GQA).")] = None,
    ffn_hidden: Annotated[int | None, typer.Option(help="FFN hidden size.")] = None,
    vocab: Annotated[int | None, typer.Option(help="Vocabulary size.")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Sequence length in tokens.")] = None,
    experts: Annotated[int | None, typer.Option(help="FFN experts per layer (mixture of experts).")] = None,
    top_k: Annotated[int | None, typer.Option(help="Experts each token is routed to.")] = None,
    gpu: Annotated[str, typer.Option(help=f"{', '.join(GPUS)}.")] = "h100-80gb",
    gpus: Annotated[int, typer.Option(help="GPUs in the cluster.")] = 1024,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node (one NVLink domain).")] = 8,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 8,
    pp: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    cp: Annotated[int, typer.Option(help="Context-parallel degree.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree (MoE models).")] = 1,
    zero_stage: Annotated[int, typer.Option(help="ZeRO stage over the data-parallel ranks, 0-3.")] = 1,
    cp_comm: Annotated[str, typer.Option(help="Context parallelism: ring, all_to_all (Ulysses) or all_gather "
                                              "(Llama 3's K/V all-gather).")] = "ring",
    zero_shards: Annotated[int | None, typer.Option(help="Hybrid sharding (HSDP, with --zero-stage 3): shard over "
                                                         "groups of N data-parallel ranks, replicate across them.",
                                                    show_default=False)] = None,
    schedule: Annotated[str, typer.Option(help="gpipe, 1f1b, interleaved_1f1b or zero_bubble.")] = "1f1b",
    virtual_stages: Annotated[str, typer.Option(help="auto or N (interleaved_1f1b).")] = "auto",
    micro_batch: Annotated[str, typer.Option(help="auto or N sequences per micro-batch.")] = "auto",
    global_batch: Annotated[int, typer.Option(help="Sequences per optimizer step.")] = 1024,
    recompute: Annotated[str, typer.Option(
        help="none, selective (attention's core replayed), full (whole layers) or op (torchtitan's per-op "
             "checkpointing: every second matmul replayed).")] = "selective",
    sequence_parallel: Annotated[bool, typer.Option(help="Sequence parallelism with TP.")] = True,
    flash_attention: Annotated[bool | None, typer.Option(
        help="Fused attention (default: what the preset's paper ran).", show_default=False)] = None,
    gated_mlp: Annotated[bool | None, typer.Option(
        help="SwiGLU MLP (default: the preset's; custom: GPT's two-matrix MLP).", show_default=False)] = None,
    dropout: Annotated[bool | None, typer.Option(
        help="Dropout after attention and MLP (default: the preset's; custom: none).", show_default=False)] = None,
    overlap_grad_reduce: Annotated[bool, typer.Option(help="DP gradient reduction overlaps backward.")] = True,
    overlap_param_gather: Annotated[bool, typer.Option(help="ZeRO-1/2 parameter all-gather overlaps forward.")] = True,
    overlap_tp_comm: Annotated[bool, typer.Option(help="TP's backward collectives overlap weight gradients.")] = True,
    overlap_p2p_comm: Annotated[bool, typer.Option(help="Pipeline sends overlap compute.")] = True,
    grad_accumulation_fusion: Annotated[bool, typer.Option(help="Weight gradients accumulate in the GEMM.")] = True,
    grad_reduce_dtype: Annotated[str, typer.Option(help="Gradients on the wire: bf16 or fp32.")] = "bf16",
    attention_kernel: Annotated[str, typer.Option(
        help="Fused attention kernel: auto (FA2 on A100, cuDNN on H100/H200/B200), fa2, fa3, cudnn, triton_fa1 "
             "(the 2022 Triton FlashAttention) or fa1.")] = "auto",
    precision: Annotated[str, typer.Option(help="The layers' matmuls: bf16, or fp8 (TransformerEngine, per-tensor "
                                                "scaling; H100, H200, B200).")] = "bf16",
    recompute_every: Annotated[int, typer.Option(
        help="With --recompute full: recompute one layer in every N (partial activation checkpointing).")] = 1,
    network_gbps: Annotated[float | None, typer.Option(
        help="Network bandwidth leaving one node, all NICs together, Gb/s (default: the GPU's DGX node).",
        show_default=False)] = None,
    optimizer_dtype: Annotated[str, typer.Option(
        help="Adam's state: fp32 (master weights, m, v: 12 bytes a parameter) or bf16 (Apex's distributed Adam "
             "with dtype bf16: 6).")] = "fp32",
    cross_entropy: Annotated[str | None, typer.Option(
        help="The loss: fp32 (Megatron-LM's: an fp32 softmax beside the bf16 logits), fused (flash-attn's fused "
             "cross entropy, LLM Foundry), torch (torch's cross_entropy on fp32 logits, eager, torchtitan), "
             "loss_parallel (the same under torch's loss_parallel, torchtitan with TP) or hf (Transformers' "
             "ForCausalLMLoss); default: the stack's (fp32 for auto and megatron).", show_default=False)] = None,
    execution: Annotated[str, typer.Option(
        help="How kernels reach the GPU: eager (PyTorch ops, one kernel each, foreach AdamW: FSDP stacks), fused "
             "(Megatron-core / TransformerEngine), compiled (torch.compile or CUDA graphs: no per-kernel CPU cost); "
             "auto: eager with --zero-stage 3, fused otherwise.")] = "auto",
    fsdp: Annotated[str, typer.Option(
        help="Which PyTorch FSDP prepares a ZeRO-2/3 gradient for its reduce-scatter: fsdp2 (fully_shard: a copy-in, "
             "NCCL averages) or fsdp1 (FullyShardedDataParallel, LLM Foundry, fms-fsdp: flat gradient, cast, "
             "pre-divide).")] = "fsdp2",
    fp8_param_gather: Annotated[bool, typer.Option(
        help="With --precision fp8: ZeRO's parameter all-gathers move the layers' weights in FP8 (torchao's FSDP "
             "float8 all-gather, Megatron-LM's --fp8-param-gather).")] = False,
    stack: Annotated[str, typer.Option(
        help="The training code: auto (today's: Megatron-core fused, eager PyTorch FSDP with ZeRO-3), hf (Hugging Face "
             "Transformers' LlamaForCausalLM / Mistral / Qwen2 / GPT-NeoX, eager, op by op), torchtitan or "
             "megatron.")] = "auto",
    amp: Annotated[bool, typer.Option(
        help="With --stack hf: torch.autocast(bf16) over fp32 weights with torch.optim.AdamW (HF Trainer's bf16=True); "
             "default: bf16 weights with fp32 master weights.")] = False,
    torch_compile: Annotated[bool, typer.Option(
        "--compile/--no-compile", help="model = torch.compile(model): inductor's fused element-wise kernels.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print a JSON object instead of a table.")] = False,
    search: Annotated[bool, typer.Option(
        "--search", help="Search the layouts instead (TP, PP, CP, EP, ZeRO or HSDP, schedule, micro-batch; the layout "
                         "flags are ignored) and print the fastest that fit, as the deck's layout chooser does.")] = False,
    top: Annotated[int, typer.Option(min=1, max=50, help="With --search: how many layouts to print.")] = 5,
    hardware_profile: Annotated[Path | None, typer.Option(
        help="A profile written by `distdeck calibrate`: estimate on that machine's measured rates instead of "
             "--gpu's datasheet figures (one device, or as many as share the link it measured).",
        show_default=False)] = None,
) -> None:
    """Estimate one training step on a modelled GPU cluster: time, throughput, MFU, memory per GPU."""
    import json

    from simulations import estimate as est
    from simulations.estimate import profile

    hardware = None
    if hardware_profile is not None:
        try:
            hardware = profile.to_gpu(profile.load(hardware_profile))
        except profile.ProfileError as exc:
            typer.echo(f"error: --hardware-profile {hardware_profile}: {exc}", err=True)
            raise typer.Exit(2) from None
    try:
        spec, cluster, layout = est.build(
            model, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden, vocab=vocab,
            seq_len=seq_len, experts=experts, top_k=top_k, gpu=gpu, gpus=gpus, gpus_per_node=gpus_per_node,
            tp=tp, pp=pp, cp=cp, ep=ep, cp_comm=cp_comm, zero_shards=zero_shards,
            zero_stage=zero_stage, schedule=schedule, virtual_stages=virtual_stages, micro_batch=micro_batch,
            global_batch=global_batch, recompute=recompute, sequence_parallel=sequence_parallel,
            flash_attention=flash_attention, gated_mlp=gated_mlp, dropout=dropout, overlap_grad_reduce=overlap_grad_reduce,
            overlap_param_gather=overlap_param_gather, overlap_tp_comm=overlap_tp_comm,
            overlap_p2p_comm=overlap_p2p_comm, grad_accumulation_fusion=grad_accumulation_fusion,
            grad_reduce_dtype=grad_reduce_dtype, attention_kernel=attention_kernel, precision=precision,
            recompute_every=recompute_every, network_gbps=network_gbps, optimizer_dtype=optimizer_dtype,
            cross_entropy=cross_entropy, execution=execution, fsdp=fsdp,
            fp8_param_gather=fp8_param_gather, stack=stack, amp=amp, torch_compile=torch_compile,
            check_layout=not search, hardware=hardware)
        if search:
            found = [e.as_dict() for e in est.search(spec, cluster, layout, top=top)]
        else:
            result = est.estimate(spec, cluster, layout).as_dict()
    except est.LayoutError as exc:
        flag = {"torch_compile": "compile"}.get(exc.field, exc.field)  # the flags whose name is not the field's
        typer.echo(f"error: --{flag.replace('_', '-')} {exc.message}", err=True)
        raise typer.Exit(2) from None
    if search:
        _print_search(found, spec.name, cluster, json_)
        return
    if json_:
        typer.echo(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result['model']} on {result['gpus']} × {cluster.gpu.title}", show_header=False)
    gb = 1e9
    rows = [
        ("layout", f"TP {result['tp']} · PP {result['pp']} · CP {result['cp']} · EP {result['ep']} · "
                   f"DP {result['dp']}, ZeRO-{result['zero_stage']}, {result['schedule']}"),
        *([("hybrid sharding", f"ZeRO-3 in groups of {result['zero_shards']}, replicated across them")]
          if result["zero_shards"] else []),
        *([("context parallel", f"CP by {result['cp_comm']}")] if result["cp"] > 1 else []),
        ("micro-batch / virtual stages", f"{result['micro_batch']} × {result['micro_batches']} per step, "
                                         f"v = {result['virtual_stages']}, recompute {result['recompute']}"),
        ("precision / attention / execution / network", f"{result['precision']}, {result['attention_kernel']}, "
                                                        f"{result['execution']}, "
                                                        f"{result['network_gbps']:,.0f} Gb/s per node"),
        ("stack", f"{result['stack']}{', AMP (autocast over fp32 weights)' if result['amp'] else ''}"
                  f"{', torch.compile' if result['torch_compile'] else ''}"),
        ("step time", f"{result['step_time_s']:.3f} s"),
        ("tokens/s", f"{result['tokens_per_s']:,.0f}"),
        ("model TFLOP/s per GPU", f"{result['model_tflops_per_gpu']:.0f}"),
        ("MFU", f"{result['mfu']:.1%}"),
        ("pipeline bubble", f"{result['bubble_fraction']:.1%}"),
        ("exposed communication", f"{result['exposed_comm_s']:.3f} s ("
         + ", ".join(f"{k} {v:.3f}" for k, v in result["exposed_comm_by_kind_s"].items() if v and k != "pp") + ")"),
    ]
    rows += [(f"memory: {role}", f"{value / gb:.1f} GB") for role, value in result["memory_per_gpu_bytes"].items()]
    rows.append(("fits", f"{result['fit']['verdict']} ({result['gpu_memory_bytes'] / gb:.0f} GB per GPU)"))
    rows.append(("how far to trust it", result["validation"]["summary"]))
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def _print_search(found: list[dict], model: str, cluster, json_: bool) -> None:
    """The layout search's answer: a JSON list, or a table with the layout chooser's columns."""
    import json

    if json_:
        typer.echo(json.dumps(found, indent=2))
        return
    if not found:
        typer.echo(f"no layout of {model} fits {cluster.gpus} × {cluster.gpu.title}: more GPUs, a shorter sequence "
                   f"or a smaller batch")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{model} on {cluster.gpus} × {cluster.gpu.title}: the fastest layouts that fit")
    for name in ("#", "TP × PP × CP × DP", "EP", "ZeRO", "schedule", "micro-batch", "memory / GPU", "step", "MFU",
                 "exposed comm.", "bubble"):
        table.add_column(name, justify="left" if name in ("TP × PP × CP × DP", "ZeRO", "schedule") else "right",
                         no_wrap=True)
    for i, r in enumerate(found, 1):
        # hybrid sharding (HSDP): ZeRO-3 inside groups of zero_shards DP·CP ranks, replicated across them
        zero = f"3, HSDP {r['zero_shards']}" if r["zero_shards"] else str(r["zero_stage"])
        schedule = (f"interleaved, v {r['virtual_stages']}" if r["schedule"] == "interleaved_1f1b"
                    else "1F1B" if r["pp"] > 1 else "—")
        table.add_row(str(i), f"{r['tp']} × {r['pp']} × {r['cp']} × {r['dp']}", str(r["ep"]), zero, schedule,
                      str(r["micro_batch"]), f"{r['memory_per_gpu_bytes']['total'] / 1e9:.0f} GB",
                      f"{r['step_time_s']:.2f} s", f"{r['mfu']:.0%}", f"{r['exposed_comm_s']:.2f} s",
                      f"{r['bubble_fraction']:.0%}")
    Console(width=max(Console().width, 130)).print(table)  # eleven columns: wider than a pipe's default 80


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
