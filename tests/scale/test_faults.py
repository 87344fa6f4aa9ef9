"""Faults: the broker restarted during a run, the database unreachable for a moment.

Redis: a private ``redis-server`` on a free loopback port (with an append-only file, as production runs
it), so the shared test Redis of other suites is never stopped. A worker is held inside a task, Redis is
shut down and started again, then the hold is lifted: the run finishes and a task sent after the restart
runs too, each profile read exactly once.

PostgreSQL: not stopped (other suites share it). A request through a database alias pointing at a closed
port stands in for "briefly unavailable": the API answers 503 with a reason, not a 500 page, and the next
request on the real database succeeds. That is a simulation of the outage, said as such.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from tests.conftest import Worker, wait_until, worker_env
from tests.scale.conftest import free_port, sending_to
from tests.web.helpers import SMALL_RANK, project_with, wait_finished, zip_folder


def _redis(port: int, data: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data),
                             "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_until(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"],
                                      capture_output=True).stdout.strip()
               == b"PONG", "private redis")
    return proc


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_redis_restarted_mid_run_tasks_resume(make_user, api_for, tmp_path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from analysis.models import AnalysisRun

    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    server = _redis(port, data)
    broker = f"redis://127.0.0.1:{port}/0"
    hold = tmp_path / "hold"
    hold.touch()
    owner = make_user("rey")
    project = project_with(owner)
    client = api_for(owner)
    archive = zip_folder(SMALL_RANK, tmp_path / "rank0.zip")
    worker = Worker(env=worker_env(CELERY_BROKER_URL=broker, PYPTO_PIPELINE_HOLD_FILE=str(hold)),
                    log_path=tmp_path / "worker.log")
    try:
        with sending_to(broker):
            worker.start()
            with open(archive, "rb") as fh:
                first = client.post(f"/api/projects/{project.pk}/profiles/", {"file": fh},
                                    format="multipart").json()
            wait_until(lambda: b"holding while" in worker.log_path.read_bytes(), "the worker inside the task",
                       worker)

            subprocess.run(["redis-cli", "-p", str(port), "shutdown"], check=False, capture_output=True)
            server.wait(timeout=30)
            server = _redis(port, data)  # the same data: messages sent before the restart are still there
            hold.unlink()

            second = client.post(f"/api/projects/{project.pk}/profiles/",
                                 {"file": ContentFile(archive.read_bytes(), name="after.zip")},
                                 format="multipart")
            assert second.status_code == 201, second.content
            done = [wait_finished(first["id"], worker), wait_finished(second.json()["id"], worker)]
    finally:
        worker.stop()
        server.terminate()
        server.wait(timeout=30)
    assert [p.status for p in done] == ["ready", "ready"], [p.error for p in done]
    assert b"Connection to broker lost" in worker.log_path.read_bytes()  # the worker did see the restart
    for p in done:
        runs = AnalysisRun.objects.filter(profile=p, kind="ingest", status="done")
        assert runs.count() == 1


@pytest.mark.django_db(transaction=True)  # no test transaction around it: the connection may be dropped
def test_database_unreachable_is_503_then_recovers(make_user, api_for, settings) -> None:
    from django.db import connections

    owner = make_user("dee")
    project = project_with(owner)
    client = api_for(owner)
    assert client.get(f"/api/projects/{project.pk}/").status_code == 200
    default = connections["default"]
    real_port = default.settings_dict["PORT"]
    default.close()
    default.settings_dict["PORT"] = str(free_port())  # nothing listens there: the database is "down"
    try:
        res = client.get(f"/api/projects/{project.pk}/")
    finally:
        default.close()
        default.settings_dict["PORT"] = real_port
    assert res.status_code == 503, res.content
    assert "database" in res.json()["detail"].lower() and res["Retry-After"]
    assert client.get(f"/api/projects/{project.pk}/").status_code == 200  # recovered
