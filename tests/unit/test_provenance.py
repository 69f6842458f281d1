"""Where a run was measured, as its ranks report it (issue 32): the GPU path with torch's answers patched."""

from __future__ import annotations

from datetime import UTC, datetime

import torch

from simulations.frames import Meta, RunFile, Summary
from simulations.runtime.execute import cpu_model, provenance, where_this_rank_ran


def test_a_gpu_rank_reports_its_gpu_and_the_run_its_nccl(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"NVIDIA H200 (cuda:{device.index})")
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 27, 5, "+cuda12.9"))
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    wheres = [where_this_rank_ran(torch.device("cuda", 0)), where_this_rank_ran(torch.device("cuda", 0))]
    assert wheres[0]["device"] == "NVIDIA H200 (cuda:0)" and wheres[0]["device_type"] == "cuda"
    before = datetime.now(UTC).replace(microsecond=0)
    made = provenance("nccl", [{"_where": w} for w in wheres])
    assert made.devices == {"NVIDIA H200 (cuda:0)": 2} and made.hosts == [wheres[0]["host"]]
    assert (made.backend, made.cuda, made.nccl, made.torch) == ("nccl", "12.9", "2.27.5+cuda12.9", torch.__version__)
    assert before <= datetime.fromisoformat(made.date) <= datetime.now(UTC)


def test_cpu_ranks_on_two_hosts_are_counted_by_model_and_named_by_host():
    results = [{"_where": {"host": host, "device": cpu_model(), "device_type": "cpu"}} for host in ("b", "a", "b")]
    made = provenance("gloo", results)
    assert made.hosts == ["a", "b"] and made.devices == {cpu_model(): 3} and made.nccl is None
    assert cpu_model() and "model name" not in cpu_model()


def test_a_run_file_from_before_provenance_still_loads():
    meta = Meta(scenario="ddp", title="DDP", params={}, world_size=1, backend="gloo", views=["ranks"])
    old = RunFile(meta=meta, frames=[], summary=Summary(checks=[])).model_dump_json(exclude={"meta": {"provenance"}})
    assert "provenance" not in old and RunFile.model_validate_json(old).meta.provenance is None
