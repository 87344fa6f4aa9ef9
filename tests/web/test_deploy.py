"""Deployment checks: production settings pass ``check --deploy``, migrations are committed and current,
and the compose file is valid."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("DEBUG",)}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=full, capture_output=True,
                          text=True)


def test_check_deploy_is_clean_with_production_settings(tmp_path) -> None:
    res = _manage("check", "--deploy", "--fail-level", "WARNING",
                  PYPTO_PRODUCTION="1", DEBUG="0", PYPTO_HTTPS="1", SECRET_KEY=secrets.token_urlsafe(50),
                  ALLOWED_HOSTS="pypto.example.com", PYPTO_VAR_DIR=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no issues" in res.stdout


def test_production_refuses_debug_and_the_default_secret(tmp_path) -> None:
    res = _manage("check", PYPTO_PRODUCTION="1", DEBUG="1", SECRET_KEY=secrets.token_urlsafe(50),
                  PYPTO_VAR_DIR=str(tmp_path))
    assert res.returncode != 0 and "DEBUG must be off in production" in res.stderr
    res = _manage("check", PYPTO_PRODUCTION="1", DEBUG="0", PYPTO_VAR_DIR=str(tmp_path), SECRET_KEY="")
    assert res.returncode != 0 and "SECRET_KEY must be set" in res.stderr


def test_no_secret_key_refused_unless_debug_even_outside_production(tmp_path) -> None:
    # Issue 17: a publicly known built-in key passed `check --deploy` when PYPTO_PRODUCTION was unset.
    res = _manage("check", "--deploy", DEBUG="0", PYPTO_VAR_DIR=str(tmp_path), SECRET_KEY="")
    assert res.returncode != 0
    assert "SECRET_KEY must be set (a long random string) unless DEBUG=1" in res.stderr
    assert _manage("check", DEBUG="1", PYPTO_VAR_DIR=str(tmp_path), SECRET_KEY="").returncode == 0


def test_compose_file_requires_a_secret_key() -> None:
    text = (REPO / "docker" / "compose.yaml").read_text()
    assert "SECRET_KEY: ${SECRET_KEY:?" in text  # compose refuses to start without one
    assert "SECRET_KEY: ${SECRET_KEY:-" not in text


def test_migrations_are_committed_and_current(tmp_path) -> None:
    res = _manage("makemigrations", "--check", "--dry-run", PYPTO_VAR_DIR=str(tmp_path),
                  DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert res.returncode == 0, res.stdout + res.stderr


def _compose() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_file_is_valid() -> None:
    compose = _compose()
    if compose is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    res = subprocess.run([*compose, "-f", "docker/compose.yaml", "config", "--quiet"], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    services = subprocess.run([*compose, "-f", "docker/compose.yaml", "config", "--services"], cwd=REPO,
                              capture_output=True, text=True).stdout.split()
    expected = {"web", "worker-ingest", "worker-diagnose", "worker-light", "beat", "redis", "postgres"}
    assert expected <= set(services)
