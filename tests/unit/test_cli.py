"""`distdeck simulate`: frames, checks and timings printed; bad input is a message and exit code 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()


@pytest.mark.slow
def test_simulate_prints_checks_and_writes_trace_and_run_file(tmp_path):
    trace, out = tmp_path / "trace.json", tmp_path / "run.json"
    result = runner.invoke(cli, ["simulate", "ddp", "--world-size", "2", "--trace", str(trace), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ddp:" in result.output and "frames on 2 rank(s)" in result.output
    assert result.output.count("[pass]") == 6 and "[FAIL]" not in result.output  # ddp's six checks
    assert "first_frame_s" in result.output
    assert {e["tid"] for e in json.loads(trace.read_text())["traceEvents"]} == {0, 1}
    assert json.loads(out.read_text())["meta"]["world_size"] == 2


@pytest.mark.parametrize("args, message", [
    (["simulate", "ddp", "--world-size", "0"], "world_size: Input should be greater than or equal to 1"),
    (["simulate", "ddp", "--world-size", "9"], "world_size: Input should be less than or equal to 8"),
    (["simulate", "nope"], "unknown scenario 'nope'"),
    (["simulate", "ddp", "--set", "oops"], "--set expects key=value"),
    (["simulate", "ddp", "--set", "colour=red"], "colour: Extra inputs are not permitted"),
])
def test_bad_input_is_a_message_and_exit_code_2(args, message):
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
