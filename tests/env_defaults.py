"""Loaded with ``-p`` (pyproject addopts) before pytest-django reads the settings.

- The suite runs with DEBUG=0, and the settings refuse to load without a SECRET_KEY unless DEBUG (issue 17):
  a key of the suite's own, unless the caller set one; the workers the tests start inherit it.
- Under ``pytest -n`` (pytest-xdist), each test process gets its own block of Redis databases and its own
  var folder, so one process's Celery workers never take the other's tasks or files. pytest-django gives
  each its own test database.
"""

import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-suite-only-" + "k" * 48)

REDIS_DATABASES = 16
BROKERS_PER_PROCESS = 6  # the session worker's database and the spares of tests.conftest.spare_broker


def process_index() -> int:
    """0 in a plain run, N in pytest-xdist's worker gwN."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def broker_database(url: str, offset: int) -> str:
    """``url`` (redis://host:port/DB) moved ``offset`` databases down, past this process's own block."""
    base, _sep, db = url.rpartition("/")
    first = int(db) if db.isdigit() else REDIS_DATABASES - 1
    index = first - BROKERS_PER_PROCESS * process_index() - offset
    if index < 0:
        raise RuntimeError(f"Redis has {REDIS_DATABASES} databases: too many test processes for "
                           f"{BROKERS_PER_PROCESS} each from database {first} (use -n 2 at most)")
    return f"{base}/{index}"


if "PYTEST_XDIST_WORKER" in os.environ:
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        os.environ["CELERY_BROKER_URL"] = broker_database(os.environ["CELERY_BROKER_URL"], 0)
    var = Path(os.environ.get("PYPTO_VAR_DIR", "var/test")) / os.environ["PYTEST_XDIST_WORKER"]
    (var / "staticfiles").mkdir(parents=True, exist_ok=True)
    os.environ["PYPTO_VAR_DIR"] = str(var)
