"""A replayed run's player names where it was measured, from its run file (issue 32): not "this machine"."""

from __future__ import annotations

import pytest

from simulations.frames import Provenance
from simulations.runtime import simulate
from tests.browser.sites import serve_app, stop_all

pytestmark = pytest.mark.slow

# Where a run recorded under torchrun on one H200 says it ran (the run): the player's label is tested
# against it; its frames are this machine's.
H200 = Provenance(hosts=["gpu-node-1"], devices={"NVIDIA H200": 1}, device_type="cuda", backend="nccl",
                  torch="2.9.1+cu128", cuda="12.8", nccl="2.27.5", date="2026-11-20T09:30:00+00:00")


@pytest.fixture(scope="module")
def runs_url(pool, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    cpu = simulate(pool, "ddp", {"world_size": 2}).to_file()
    (runs / "cpu.json").write_text(cpu.model_dump_json())
    one = simulate(pool, "ddp", {"world_size": 1}).to_file()
    one.meta.provenance = H200
    (runs / "h200.json").write_text(one.model_dump_json())
    one.meta.provenance = None  # a run file from before run files said where they ran
    (runs / "old.json").write_text(one.model_dump_json(exclude={"meta": {"provenance"}}))
    cpu_model = cpu.meta.provenance.devices
    yield serve_app(pool, runs_dir=runs), next(iter(cpu_model))
    stop_all()


def badge_of(page, url: str):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector(".live-sim[data-status=done]")
    return page.locator(".sim-clock"), page.locator("select[name=time_on] option").first


def test_a_run_recorded_on_a_gpu_names_the_gpu_backend_and_date(page, runs_url):
    badge, option = badge_of(page, f"{runs_url[0]}/runs/h200")
    assert badge.text_content() == "measured on 1 × NVIDIA H200 (nccl), 2026-11-20"
    assert badge.get_attribute("title") == ("recorded on gpu-node-1 at 2026-11-20T09:30:00+00:00, torch 2.9.1+cu128, "
                                            "CUDA 12.8, NCCL 2.27.5")
    assert option.text_content() == "where it ran"


def test_a_run_recorded_on_cpus_names_the_cpu_and_its_ranks(page, runs_url):
    url, cpu_model = runs_url
    badge, option = badge_of(page, f"{url}/runs/cpu")
    assert badge.text_content().startswith(f"measured on {cpu_model} (2 ranks, gloo), 20")
    assert option.text_content() == "where it ran"


def test_an_older_run_file_still_replays_and_does_not_claim_this_machine(page, runs_url):
    badge, option = badge_of(page, f"{runs_url[0]}/runs/old")
    assert badge.text_content() == "measured where it was recorded"
    assert option.text_content() == "where it ran"
