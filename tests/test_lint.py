"""Lint and type checks in `make test` (issue 19): ruff (the 110-character limit, pyflakes, import order,
bugbear, pyupgrade) on the whole repository and mypy (strict on pypto_core, the Django apps at the level set
in pyproject.toml). Both read their configuration from pyproject.toml and run from the project's virtualenv
(requirements-dev.txt pins them); a finding fails the test with the tool's own report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    assert exe.is_file(), f"{tool} is not installed in {BIN}: pip install -r requirements-dev.txt"
    # the django-stubs plugin imports the settings, which need a SECRET_KEY outside DEBUG
    env = dict(os.environ, SECRET_KEY=os.environ.get("SECRET_KEY") or "lint-only")
    return subprocess.run([str(exe), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--output-format=concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout, done.stdout
