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


def process_broker(url: str) -> str:
    """This process's first Redis database: ``url``'s (redis://host:port/DB, 0 without one) less
    ``BROKERS_PER_PROCESS`` for each process before it."""
    parts = urlsplit(url)
    first = int(parts.path.strip("/") or 0)
    index = first - BROKERS_PER_PROCESS * process_index()
    if index < BROKERS_PER_PROCESS - 1:  # its spares (tests.conftest.spare_broker) lie below it
        raise RuntimeError(f"Redis database {first} leaves too few below it for {process_index() + 1} test "
                           f"processes of {BROKERS_PER_PROCESS} databases each: start from database 15")
    return urlunsplit(parts._replace(path=f"/{index}"))


if "PYTEST_XDIST_WORKER" in os.environ:
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        os.environ["CELERY_BROKER_URL"] = process_broker(os.environ["CELERY_BROKER_URL"])
    var = Path(os.environ.get("PYPTO_VAR_DIR", "var/test")) / os.environ["PYTEST_XDIST_WORKER"]
    (var / "staticfiles").mkdir(parents=True, exist_ok=True)
    os.environ["PYPTO_VAR_DIR"] = str(var)
