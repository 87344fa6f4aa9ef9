"""Shared fixtures: users and clients, and a REAL Celery worker process on the pytest-django test database.

Tests that need the worker use ``transactional_db`` (rows must be committed for another process to see
them) and the ``worker`` fixture. Waiting for the pipeline is polling with a generous limit, never a timed
assertion.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

REPO = Path(__file__).resolve().parent.parent
WORKER_QUEUES = "ingest,diagnose,light"
WAIT_LIMIT_S = 180.0  # a ceiling for a 2-core machine under load, not an expectation


def database_url() -> str:
    """The URL of the database the tests use now (pytest-django's ``test_<name>``)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("a real worker needs PostgreSQL: run the suite with `make test` (DATABASE_URL)")
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _die_with_parent() -> None:
    """In the worker's child before exec: SIGKILL it when the test session dies (Linux). A session killed
    mid-run used to leave its workers consuming the next run's broker with the old code."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


@dataclass
class Worker:
    """A ``celery -A pypto_web worker`` process in its own process group."""

    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    queues: str = WORKER_QUEUES  # "": no -Q, the worker consumes what the settings declare
    beat: bool = False  # with the embedded beat (-B), as `make run` starts it: the recovery sweep runs

    def start(self) -> Worker:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        beat = ["-B", "-s", str(self.log_path.with_suffix(".beat"))] if self.beat else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "pypto_web", "worker",
             *(["-Q", self.queues] if self.queues else []), "-P", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO", *beat,
             "-n", f"test-{os.getpid()}-{time.monotonic_ns()}@%h"],
            cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()
        wait_until(lambda: b" ready." in self.log_path.read_bytes() or self.proc.poll() is not None,
                   "worker start", self)
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited at start:\n{self.tail()}")
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group: no warm shutdown, no chance to requeue or ack."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except FileNotFoundError:
            return ""


def wait_until(predicate: Callable[[], Any], what: str, worker: Worker | None = None,
               limit_s: float = WAIT_LIMIT_S) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}"
                                 + (f"\nworker log:\n{worker.tail()}" if worker else ""))
        time.sleep(0.2)


def worker_env(**overrides: str) -> dict[str, str]:
    """Environment for a worker that shares this test session's database, broker and storage."""
    from django.conf import settings

    env = dict(os.environ)
    env.update({
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "PYPTO_WORK_DIR": str(settings.PYPTO_WORK_DIR),
        "DJANGO_SETTINGS_MODULE": "pypto_web.settings",
        "DB_CONN_MAX_AGE": "0",
        "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    env.update(overrides)
    return env


def spare_broker(n: int) -> str:
    """A Redis database apart from the session worker's: n = 1..5 below it, one n per test that needs its
    own, so only that test's workers see its tasks. Under pytest-xdist the session's database is already
    the process's own (tests/env_defaults.py), so the spares of two processes never meet."""
    from django.conf import settings

    from tests.env_defaults import BROKERS_PER_PROCESS, broker_below

    url = settings.CELERY_BROKER_URL
    if not url.startswith("redis://"):
        pytest.skip("this test needs the Redis broker (scripts/test.sh)")
    assert 0 < n < BROKERS_PER_PROCESS
    return broker_below(url, n)


def purge_broker(url: str) -> None:
    """Drop messages left by an earlier run: their ids would point at this run's rows."""
    if url.startswith("redis://"):
        import redis

        redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="session")
def worker(django_db_setup: None, django_db_blocker: Any,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One worker for the session, with the small archive limits of tests/web/bad_archives.py."""
    from django.conf import settings

    from tests.web.bad_archives import WORKER_ENV

    with django_db_blocker.unblock():
        env = worker_env(**WORKER_ENV)
    purge_broker(settings.CELERY_BROKER_URL)
    w = Worker(env=env, log_path=tmp_path_factory.mktemp("worker") / "worker.log").start()
    yield w
    w.stop()


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    from django.contrib.auth import get_user_model

    def make(username: str, password: str = "pw-for-tests-1") -> Any:
        return get_user_model().objects.create_user(username=username, password=password)

    return make


@pytest.fixture
def api_for() -> Callable[[Any], Any]:
    """A DRF client authenticated as ``user`` by token (how scripts call the API)."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user: Any) -> APIClient:
        client = APIClient()
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make


@pytest.fixture(autouse=True)
def _default_language() -> Iterator[None]:
    """Each test starts in the default language and leaves it so: a request through the test client activates
    the user's language in this thread (SessionLanguageMiddleware) and nothing deactivates it, so a Chinese
    page left the next test's chart options in Chinese (an order-dependent failure of test_chart_options)."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _plain_static_storage(settings: Any) -> None:
    """Pages render ``{% static %}`` without a collectstatic manifest (production uses the manifest)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


def _reads_samples(item: pytest.Item) -> bool:
    """Whether the test's module holds the samples' folder or a path inside it (directly or via helpers)."""
    module = getattr(item, "module", None)

    def under(value: Any) -> bool:
        if isinstance(value, Path):
            return value == SAMPLES or SAMPLES in value.parents
        if isinstance(value, (list, tuple)) and value and len(value) < 1000:
            return any(under(v) for v in value)
        return False

    return module is not None and any(under(v) for v in vars(module).values())


def _names_samples(call: pytest.CallInfo[None]) -> bool:
    """Whether the failure names a path in the samples' folder (a reader refusing a sample that is not
    there: "<path>: no such file or folder"), for tests that reach the samples only inside a function."""
    return call.excinfo is not None and str(SAMPLES) in str(call.excinfo.value)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On a clone without the real samples (no ../shared/samples, no $PYPTO_SAMPLES), a failed test of a
    module that reads them is reported skipped with one line saying how to get them; with a partial set, one
    that failed on a missing sample file names the file. Any other failure stays a failure."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    reason = None
    missing = None
    if call.excinfo is not None and isinstance(call.excinfo.value, FileNotFoundError):
        missing = Path(str(call.excinfo.value.filename or ""))
    if missing is not None and SAMPLES in missing.parents:
        # a sample file missing, wherever it was opened (benchmarks and generators read samples as templates);
        # with a partial set (fetch-samples.sh leaves out peer_outputs/ and derived/) the file is named
        reason = MISSING_SAMPLES if not HAVE_SAMPLES else ("needs the sample "
                                                           f"{missing.relative_to(SAMPLES)}, "
                                                           f"not in {SAMPLES.name}/")
    elif not HAVE_SAMPLES and (_reads_samples(item) or _names_samples(call)):
        reason = MISSING_SAMPLES
    if reason:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
