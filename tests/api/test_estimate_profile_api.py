"""POST /api/estimate: the estimate on a calibrated machine, its hardware profile in the body; 422 naming the field
of a bad profile (its JSON path) or of a layout the profile cannot run."""

from __future__ import annotations

import copy

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from simulations.calibrate import llama
from simulations.estimate import profile

SHAPE = llama.TINY_LLAMA
TOKENS = 2 * SHAPE.seq_len
RATE, COPY, LINK = 200e9, 20e9, 2e9  # FLOP/s, bytes/s: a CPU's order of magnitude, round to check arithmetic


def synthetic() -> dict:
    """A profile in calibrate's format, every GEMM at RATE, copy at COPY, a gloo link at LINK."""
    rows = [{"m": m, "k": k, "n": n, "dtype": "bfloat16", "seconds": 2 * m * k * n / RATE, "flops_per_s": RATE}
            for m, k, n in llama.gemm_shapes(SHAPE, TOKENS)]
    fwd = 4 * 2 * SHAPE.heads * SHAPE.seq_len ** 2 * SHAPE.head_dim / 2 / (RATE / 4)
    return {"format": profile.FORMAT, "date": "2026-11-28T12:00:00+00:00",
            "device": {"type": "cpu", "name": "Test CPU", "memory_bytes": 32e9, "compute_units": 2, "dtype": "bfloat16"},
            "gemm": {"rows": rows},
            "attention": {"rows": [{"b": 2, "heads": SHAPE.heads, "s": SHAPE.seq_len, "d": SHAPE.head_dim,
                                    "kernel": "flash", "picked_by_torch": True, "forward_s": fwd,
                                    "forward_backward_s": 3.5 * fwd, "forward_flops_per_s": RATE / 4,
                                    "backward_flops_per_s": RATE / 4}]},
            "memory_copy": {"bytes_per_s": COPY}, "eager_op": {"seconds_per_op": 5e-6},
            "elementwise": {"rows": {}}, "optimizer": {"rows": {name: {"seconds_per_param": s} for name, s in
                                                                 (("foreach", 4e-9), ("fused", 2e-9), ("clip", 1e-9))}},
            "interconnect": {"backend": "gloo", "bus_bytes_per_s": LINK}}


BODY = {"model": "custom", "layers": SHAPE.layers, "hidden": SHAPE.hidden, "heads": SHAPE.heads,
        "kv_heads": SHAPE.kv_heads, "ffn_hidden": SHAPE.ffn_hidden, "vocab": SHAPE.vocab, "seq_len": SHAPE.seq_len,
        "gated_mlp": True, "dropout": False, "gpus": 1, "tp": 1, "zero_stage": 0, "micro_batch": 2,
        "global_batch": 2, "recompute": "none", "stack": "hf", "amp": True}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)


def test_the_estimate_runs_on_the_posted_profile(client):
    r = client.post("/api/estimate", json={**BODY, "hardware_profile": synthetic()})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["gpu"] == "profile-test-cpu" and out["gpu_memory_bytes"] == 32e9
    # the optimizer step is AdamW (foreach) and clipping at the profile's seconds a parameter
    assert out["optimizer_s"] == pytest.approx(SHAPE.params() * (4e-9 + 1e-9), rel=1e-9)
    slower = synthetic()
    for row in slower["gemm"]["rows"]:
        row["seconds"], row["flops_per_s"] = 2 * row["seconds"], row["flops_per_s"] / 2
    r2 = client.post("/api/estimate", json={**BODY, "hardware_profile": slower})
    assert r2.json()["compute_s"] > out["compute_s"]  # the GEMMs are read from the profile


def test_two_ranks_run_over_the_measured_link(client):
    r = client.post("/api/estimate", json={**BODY, "gpus": 2, "global_batch": 4, "grad_reduce_dtype": "fp32",
                                           "hardware_profile": synthetic()})
    assert r.status_code == 200, r.text
    assert r.json()["comm_total_s"]["dp"] > 0


@pytest.mark.parametrize("change, loc", [
    (lambda d: d["gemm"]["rows"][1].update(seconds=0), ["body", "hardware_profile", "gemm", "rows", "1", "seconds"]),
    (lambda d: d.update(format="v0"), ["body", "hardware_profile", "format"]),
    (lambda d: d["device"].pop("memory_bytes"), ["body", "hardware_profile", "device", "memory_bytes"]),
    # numbers past what the estimator's floats hold, and a malformed list: a 422, never a 500
    (lambda d: d["gemm"]["rows"][0].update(m=10**400), ["body", "hardware_profile", "gemm", "rows", "0", "m"]),
    (lambda d: d["device"].update(memory_bytes=1e300), ["body", "hardware_profile", "device", "memory_bytes"]),
    (lambda d: d["attention"].update(rows=5), ["body", "hardware_profile", "attention", "rows"]),
])
def test_a_bad_profile_is_a_422_at_its_json_path(client, change, loc):
    data = synthetic()
    change(data)
    r = client.post("/api/estimate", json={**BODY, "hardware_profile": data})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc


def test_more_devices_than_a_linkless_profile_has_is_a_422_naming_gpus(client):
    data = copy.deepcopy(synthetic())
    data["interconnect"] = None
    r = client.post("/api/estimate", json={**BODY, "gpus": 2, "global_batch": 4, "hardware_profile": data})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "gpus"]
    assert "must be 1" in r.json()["detail"][0]["msg"]


def test_a_post_without_a_profile_is_a_422(client):
    r = client.post("/api/estimate", json=BODY)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hardware_profile"]


def test_a_body_that_is_not_json_text_is_a_422_naming_the_body(client):
    """FastAPI answers bytes it cannot decode with a bare 400; the API answers every bad input with a 422."""
    response = client.post("/api/estimate", content=b"\xff\xfe-", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]


def test_a_method_the_path_does_not_take_names_both_it_takes(client):
    """GET (query) and POST (profile in the body) are two routes on one path: a 405 allows both."""
    response = client.options("/api/estimate")
    assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
    assert client.delete("/healthz").headers["allow"] == "GET"
