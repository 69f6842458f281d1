"""Record a run under torchrun, on one machine or many, into a run file the deck can replay.

    torchrun --nproc-per-node 4 -m simulations.record ddp --out run.json
    torchrun --nnodes 2 --nproc-per-node 8 ... -m simulations.record zero --set stage=3 --out zero.json
    distdeck serve --runs DIR          # lists and replays every run file in DIR

The per-rank scenario code is the same as in the server's warm pool: only the
launcher differs. Rank 0 gathers every rank's frame fragments and result, runs
the scenario's single-process checks and writes the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import torch.distributed as dist
import typer

from simulations import scenarios
from simulations.params import ParamError, parse_params
from simulations.runtime.execute import NotEnoughGPUs, pick_backend, provenance, run_on_rank
from simulations.runtime.runs import new_run
from simulations.trace import seal
from simulations.words import counted

app = typer.Typer(add_completion=False)


@app.command()
def record(
    scenario: Annotated[str, typer.Argument(help="Scenario name, e.g. ddp")],
    out: Annotated[Path, typer.Option(help="Run file to write (JSON)")] = Path("run.json"),
    set_: Annotated[list[str], typer.Option("--set", help="A parameter as key=value; repeatable")] = [],  # noqa: B006
    backend: Annotated[str, typer.Option(help="auto (NCCL if every rank has a GPU), gloo or nccl")] = "auto",
) -> None:
    if "RANK" not in os.environ:
        raise typer.BadParameter("run me under torchrun, e.g. `torchrun --nproc-per-node 4 -m simulations.record ddp`")
    world_size = int(os.environ["WORLD_SIZE"])
    try:
        params = parse_params(scenario, set_, world_size=world_size)
    except ParamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    # Checked before the process group starts, on every rank: NCCL with more ranks on a machine than GPUs
    # would end each rank in ncclInvalidUsage. Local rank 0 says why; every rank exits 2.
    try:
        chosen = pick_backend(backend, int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    except NotEnoughGPUs as exc:
        if os.environ.get("LOCAL_RANK", "0") == "0":
            typer.echo(f"error: {exc.advice('--nproc-per-node {gpus}')}", err=True)
        raise typer.Exit(2) from None
    # What the pool's ranks import before their first job: DDP's first use imports torch._dynamo (2.6 s measured),
    # which would otherwise sit on the timeline before the first step.
    from simulations.runtime import preload  # noqa: F401

    dist.init_process_group(chosen)
    rank = dist.get_rank()
    try:
        fragments: list[dict] = []
        result = run_on_rank(scenario, params.model_dump(mode="json"), rank=rank, world_size=world_size,
                             group=None, backend=chosen, sink=fragments.append)
        gathered: list = [None] * world_size
        dist.all_gather_object(gathered, (seal(fragments), result))  # as JSON parts, not pickled as tensors
        if rank == 0:
            run = new_run(scenario, params, chosen)
            for rank_fragments, _ in gathered:
                for fragment in rank_fragments:
                    run.add_fragment(fragment)
            results = [r for _, r in gathered]
            summary = scenarios.get(scenario).summarize(params, results, run.frames)
            summary.timings["run_s"] = max(r["_run_s"] for r in results)
            run.meta.provenance = provenance(chosen, results)
            run.finish(summary=summary)
            out.write_text(run.to_file().model_dump_json())
            verdict = "all checks passed" if summary.passed else "SOME CHECKS FAILED"
            typer.echo(f"wrote {out}: {len(run.frames)} frames, {counted(world_size, 'rank')}, {chosen}; {verdict}")
    finally:
        dist.destroy_process_group()


def main() -> None:
    app(prog_name="python -m simulations.record")


if __name__ == "__main__":
    sys.exit(main())
