"""Each user installs what they use (issue 23): the wheel of the project, installed into clean virtualenvs,
gives the engine alone (`pip install pypto-lens`), the NPU-host agent and SDK (`[agent]`: no Django, and
never torch), and the dashboard (`[web]`). Network: the package registry only, for the dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.paths import MISSING_SAMPLES, REPO, SAMPLES

pytestmark = pytest.mark.slow
SAMPLE = SAMPLES / "kineto/a100_nccl_2rank/nccl_data.json.gz"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, text=True, timeout=300)
    (whl,) = out.glob("pypto_lens-*.whl")
    return whl


# The suite runs with PYTHONPATH at the repository, where `pip wheel` leaves pypto_lens.egg-info: the new
# venv's pip would take the package as installed and skip it. The venv sees only what it installed.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _install(tmp: Path, requirement: str) -> Path:
    """``requirement`` installed into the virtualenv ``tmp`` (made on first use); returns its python."""
    py = tmp / "bin" / "python"
    if not py.exists():
        venv.create(tmp, with_pip=True)
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", requirement], capture_output=True,
                          text=True, timeout=600, env=CLEAN_ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return py


def _run(py: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(py.parent / "pypto"), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or py.parent, env=CLEAN_ENV)


def _importable(py: Path, module: str) -> bool:
    return subprocess.run([str(py), "-c", f"import {module}"], capture_output=True, timeout=120,
                          env=CLEAN_ENV).returncode == 0


def test_the_wheel_carries_the_scanners_and_the_pages(wheel) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"pypto_core/formats/_csvscan.c", "pypto_core/formats/_eventscan.c",
            "pypto_core/remedies/torch_npu_api_names.txt",
            "pypto_core/i18n/locale/zh_Hans/LC_MESSAGES/pypto_core.mo"} <= names  # the engine's zh-Hans text
    assert any(n.startswith("frontend/templates/") for n in names)
    assert any(n.startswith("captures/") for n in names)
    assert not any(n.startswith("tests/") for n in names)


def test_engine_then_agent_then_web_each_bring_only_what_they_use(wheel, tmp_path) -> None:
    """One virtualenv, installed up in the order a user would widen it: the engine alone, then ``[agent]``,
    then ``[web]``; after each step only that step's packages are there (three venvs installed the same
    packages again: 70 s of the suite)."""
    if not SAMPLE.exists():  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    py = _install(tmp_path / "venv", str(wheel))
    assert _run(py, "--help").returncode == 0
    proc = _run(py, "analyze", str(SAMPLE), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"device_vendor": "nvidia"' in proc.stdout
    assert _run(py, "agent", "--help").returncode == 0  # the agent command is the engine's own
    for module in ("django", "rest_framework", "celery", "torch", "transformers", "pytest"):
        assert not _importable(py, module), f"{module} is installed by pypto-lens"

    _install(tmp_path / "venv", f"{wheel}[agent]")  # the NPU host's agent and SDK: never Django or torch
    assert _run(py, "agent", "--help").returncode == 0
    for module in ("django", "rest_framework", "celery", "torch", "transformers", "pytest"):
        assert not _importable(py, module), f"{module} is installed by pypto-lens[agent]"

    _install(tmp_path / "venv", f"{wheel}[web]")
    for module in ("django", "rest_framework", "celery", "pyecharts", "pypto_web.celery", "frontend.charts"):
        assert _importable(py, module), module
    for module in ("torch", "transformers", "pytest", "playwright", "moto"):
        assert not _importable(py, module), f"{module} is installed by pypto-lens[web]"
