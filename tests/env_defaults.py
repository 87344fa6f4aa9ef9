"""Loaded with ``-p`` (pyproject addopts) before pytest-django reads the settings.

- The suite runs with DEBUG=0, and the settings refuse to load without a SECRET_KEY unless DEBUG (issue 17):
  a key of the suite's own, unless the caller set one; the workers the tests start inherit it.
- Under ``pytest -n`` (pytest-xdist), each test process gets its own block of Redis databases and its own
  var folder, so one process's Celery workers never take the other's tasks or files. pytest-django gives
  each its own test database.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "test-suite-only-" + "k" * 48)

BROKERS_PER_PROCESS = 6  # the session worker's database and the spares of tests.conftest.spare_broker


def process_index() -> int:
    """0 in a plain run, N in pytest-xdist's worker gwN."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def broker_below(url: str, below: int) -> str:
    """The Redis database ``below`` the one in ``url`` (redis://host:port/DB, 0 without one), the one place
    the tests move between them; a clear error where there is none that far down."""
    parts = urlsplit(url)
    first = int(parts.path.strip("/") or 0)
    if first - below < 0:
        raise RuntimeError(f"Redis database {first} leaves no database {below} below it: start the tests "
                           f"from database 15 ({BROKERS_PER_PROCESS} databases for each test process)")
    return urlunsplit(parts._replace(path=f"/{first - below}"))


def process_broker(url: str) -> str:
    """This process's first Redis database: ``url``'s less ``BROKERS_PER_PROCESS`` for each process before
    it, with room for its spares (tests.conftest.spare_broker) below it."""
    broker_below(url, BROKERS_PER_PROCESS * (process_index() + 1) - 1)
    return broker_below(url, BROKERS_PER_PROCESS * process_index())


if "PYTEST_XDIST_WORKER" in os.environ:
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        os.environ["CELERY_BROKER_URL"] = process_broker(os.environ["CELERY_BROKER_URL"])
    var = Path(os.environ.get("PYPTO_VAR_DIR", "var/test")) / os.environ["PYTEST_XDIST_WORKER"]
    (var / "staticfiles").mkdir(parents=True, exist_ok=True)
    os.environ["PYPTO_VAR_DIR"] = str(var)
