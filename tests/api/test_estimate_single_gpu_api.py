"""The single-GPU stacks through the CLI and the API: `--stack`, `--amp`, `--compile` are inputs, the fit verdict with
its margin and dominant tensors is in the table, --json and the response, and bad values are an exit 2 / a 422."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from app.settings import Settings

runner = CliRunner()
LLAMA32_3B = dict(model="custom", layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192, vocab=128256,
                  seq_len=4096, gated_mlp=True, dropout=False, gpus=1, tp=1, zero_stage=0, micro_batch=1,
                  global_batch=1, recompute="none")


def cli_args(**overrides) -> list[str]:
    args = ["estimate"]
    for key, value in {**LLAMA32_3B, **overrides}.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        else:
            args += [flag, str(value)]
    return args


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Settings(start_pool_on_startup=False)), raise_server_exceptions=False)


def test_cli_json_carries_the_stack_and_the_fit_verdict():
    result = runner.invoke(cli, cli_args(stack="hf", amp=True) + ["--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["stack"], out["amp"], out["torch_compile"], out["execution"]) == ("hf", True, False, "eager")
    fit = out["fit"]
    assert fit["peak"] == "backward start" and fit["verdict"].startswith("may not fit")
    assert [d["role"] for d in fit["dominant"]][:2] == ["optimizer", "activations"]
    compiled = json.loads(runner.invoke(cli, cli_args(stack="hf", amp=True, compile=True) + ["--json"]).output)
    assert compiled["execution"] == "compiled" and compiled["step_time_s"] < out["step_time_s"]


def test_cli_table_shows_the_verdict_and_the_stack():
    result = runner.invoke(cli, cli_args(stack="hf", amp=True, seq_len=1024))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "fits with" in text and "GB to spare" in text and "AMP" in text


@pytest.mark.parametrize("overrides, words", [
    (dict(stack="keras"), "--stack must be one of auto, hf, torchtitan, megatron"),
    (dict(amp=True), "--amp autocast over fp32 weights is modelled op by op for stack hf only"),
    (dict(stack="megatron", compile=True), "--compile stack megatron runs TransformerEngine"),
    (dict(stack="hf", gpus=2, tp=2), "--tp stack hf runs Transformers' model whole"),
    (dict(stack="hf", cross_entropy="xent"), "--cross-entropy must be"),
])
def test_cli_bad_stack_inputs_exit_2_naming_the_flag(overrides, words):
    result = runner.invoke(cli, cli_args(**overrides))
    assert result.exit_code == 2 and words in result.output, result.output


def test_api_answers_the_stack_and_its_verdict(client):
    response = client.get("/api/estimate", params={**LLAMA32_3B, "stack": "hf", "amp": True, "torch_compile": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stack"] == "hf" and body["amp"] and body["torch_compile"] and body["execution"] == "compiled"
    assert body["fit"]["margin_bytes"] < body["fit"]["optimistic_margin_bytes"]
    assert body["fit"]["dominant"][0]["role"] == "optimizer"


@pytest.mark.parametrize("query, field, words", [
    (dict(stack="keras"), "stack", "auto"),
    (dict(amp=True), "amp", "stack hf only"),
    (dict(stack="megatron", torch_compile=True), "torch_compile", "not torch.compile"),
    (dict(stack="hf", gpus=2, tp=2), "tp", "must be 1"),
    (dict(stack="hf", amp="sometimes"), "amp", "bool"),
])
def test_api_bad_stack_inputs_are_422_naming_the_field(client, query, field, words):
    response = client.get("/api/estimate", params={**LLAMA32_3B, **query})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == field and words in json.dumps(detail)
