"""NCCL with more ranks on a machine than GPUs is refused before any rank starts: exit 2 and one message naming
the ranks asked, the GPUs visible and what to do (issue 32). The GPU count is patched: these run on any machine."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from typer.testing import CliRunner

from app.cli import cli
from simulations.record import app as record_app

runner = CliRunner()


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.fixture
def no_process_group(monkeypatch):
    """Nothing may start a process group or a rank pool: the refusal comes first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a process group or rank pool was started")

    monkeypatch.setattr(dist, "init_process_group", refuse)
    monkeypatch.setattr("simulations.runtime.pool.RankPool._spawn", refuse)


def torchrun_env(monkeypatch, rank: int, local_ranks: int, world_size: int) -> None:
    for name, value in {"RANK": rank, "LOCAL_RANK": rank % local_ranks, "WORLD_SIZE": world_size,
                        "LOCAL_WORLD_SIZE": local_ranks, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": 1}.items():
        monkeypatch.setenv(name, str(value))


@pytest.mark.parametrize("rank", [0, 1])
def test_record_under_torchrun_with_more_ranks_than_gpus_exits_2_before_the_process_group(
        monkeypatch, tmp_path, one_gpu, no_process_group, rank):
    torchrun_env(monkeypatch, rank, local_ranks=2, world_size=2)
    result = runner.invoke(record_app, ["ddp", "--backend", "nccl", "--set", "world_size=2",
                                        "--out", str(tmp_path / "run.json")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not (tmp_path / "run.json").exists()
    if rank == 0:  # said once, by local rank 0
        assert result.output.strip() == (
            "error: --backend nccl needs a GPU for each rank: 2 ranks asked on this machine, 1 GPU visible; "
            "use --backend gloo (or auto, which picks gloo here), or at most 1 rank (--nproc-per-node 1)")
    else:
        assert result.output == ""


def test_record_on_many_nodes_compares_the_ranks_of_this_node_with_its_gpus(monkeypatch, tmp_path, one_gpu,
                                                                             no_process_group):
    # 2 nodes × 2 ranks: the world is 4, this node runs 2 of them on its 1 GPU.
    torchrun_env(monkeypatch, rank=2, local_ranks=2, world_size=4)
    result = runner.invoke(record_app, ["ddp", "--backend", "nccl", "--set", "world_size=4"])
    assert result.exit_code == 2 and "2 ranks asked on this machine, 1 GPU visible" in result.output


def test_record_without_a_gpu_offers_gloo_only(monkeypatch, no_process_group):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    torchrun_env(monkeypatch, rank=0, local_ranks=1, world_size=1)
    result = runner.invoke(record_app, ["ddp", "--backend", "nccl", "--set", "world_size=1"])
    assert result.exit_code == 2
    assert result.output.strip().endswith("1 rank asked on this machine, 0 GPUs visible; "
                                          "use --backend gloo (or auto, which picks gloo here)")


def test_simulate_with_a_larger_pool_than_gpus_exits_2(one_gpu, no_process_group):
    result = runner.invoke(cli, ["simulate", "ddp", "--world-size", "2", "--backend", "nccl"])
    assert result.exit_code == 2, result.output
    assert ("2 ranks asked on this machine, 1 GPU visible; use --backend gloo (or auto, which picks gloo here), "
            "or at most 1 rank (fewer ranks in --world-size or --set)") in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_serve_with_a_larger_pool_than_gpus_exits_2_before_the_server_starts(monkeypatch, one_gpu, how):
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("DISTDECK_BACKEND", "nccl" if how == "environment" else "auto")  # restored after the test
    monkeypatch.setenv("DISTDECK_POOL_SIZE", "4")
    result = runner.invoke(cli, ["serve", *(["--backend", "nccl"] if how == "flag" else [])])
    assert result.exit_code == 2, result.output
    assert ("4 ranks asked on this machine, 1 GPU visible; use --backend gloo (or auto, which picks gloo here), "
            "or at most 1 rank (a pool of DISTDECK_POOL_SIZE=1)") in result.output
    assert not started


def test_serve_with_as_many_gpus_as_ranks_starts(monkeypatch, one_gpu):
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("DISTDECK_BACKEND", "nccl")
    monkeypatch.setenv("DISTDECK_POOL_SIZE", "1")
    result = runner.invoke(cli, ["serve"])
    assert result.exit_code == 0, result.output
    assert started == [("app.main:create_app",)]


def test_serve_with_a_bad_setting_is_a_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("DISTDECK_POOL_SIZE", "9")
    result = runner.invoke(cli, ["serve"])
    assert result.exit_code == 2
    assert "DISTDECK_POOL_SIZE: Input should be less than or equal to 8" in result.output
