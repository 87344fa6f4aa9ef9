"""A worker SIGKILLed in the middle of a task: the job is redone by another worker, not lost, not duplicated.

Its own broker database and workers, so the session's worker cannot take the job: worker A claims the
profile and is held mid-task by the pipeline's hold file, then killed. Late acknowledgement leaves the
message unacknowledged in Redis; after the (short) visibility timeout worker B gets it again, takes over
the expired lease, and finishes.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.files.base import ContentFile

from tests.conftest import Worker, purge_broker, spare_broker, wait_until, worker_env
from tests.web.helpers import SMALL_CSV, project_with, wait_finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_worker_killed_mid_task_job_redone_once(make_user, tmp_path) -> None:
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("redelivery after a visibility timeout is a Redis broker behaviour")
    from analysis.models import AnalysisRun
    from analysis.tasks import ingest
    from profiles.models import Profile
    from pypto_web.celery import app

    broker = spare_broker(1)
    purge_broker(broker)
    hold = tmp_path / "hold"
    hold.touch()
    env = worker_env(
        CELERY_BROKER_URL=broker,
        CELERY_VISIBILITY_TIMEOUT="4",
        CELERY_UNACKED_RESTORE_INTERVAL="1",
        CELERY_UNACKED_RESTORE_THROTTLE="1",
        PYPTO_TASK_LEASE_SECONDS="3",
        PYPTO_PIPELINE_HOLD_FILE=str(hold),
    )

    owner = make_user("kim")
    project = project_with(owner)
    profile = Profile(project=project, name="kill-test", original_filename=SMALL_CSV.name, upload_kind="csv",
                      size=SMALL_CSV.stat().st_size, status="queued", created_by=owner)
    import hashlib

    profile.sha256 = hashlib.sha256(SMALL_CSV.read_bytes()).hexdigest()
    profile.archive.save(SMALL_CSV.name, ContentFile(SMALL_CSV.read_bytes()), save=False)
    profile.save()

    first = Worker(env=env, log_path=tmp_path / "worker-a.log").start()
    try:
        with app.connection_for_write(broker) as conn:
            ingest.apply_async(args=[profile.pk], connection=conn)
        # Worker A has claimed the profile and is inside the task (held before reading).
        wait_until(lambda: b"holding while" in (tmp_path / "worker-a.log").read_bytes(), "worker A to hold",
                   first)
        assert Profile.objects.get(pk=profile.pk).status == "parsing"
        first.kill()
    finally:
        first.kill()
    hold.unlink()
    assert Profile.objects.get(pk=profile.pk).status == "parsing"  # the dead worker's claim is still there

    second = Worker(env=env, log_path=tmp_path / "worker-b.log").start()
    try:
        done = wait_finished(profile.pk, second)
    finally:
        second.stop()

    assert done.status == "ready", done.error
    assert done.progress == 100
    ingest_runs = list(AnalysisRun.objects.filter(profile=done, kind="ingest"))
    assert len(ingest_runs) == 1  # one job...
    assert ingest_runs[0].attempts == 2  # ...redone once after the kill
    assert ingest_runs[0].status == "done"
    assert "taking over" in ingest_runs[0].log
    diagnose_runs = list(AnalysisRun.objects.filter(profile=done, kind="diagnose"))
    assert len(diagnose_runs) == 1 and diagnose_runs[0].attempts == 1  # not duplicated downstream
    rules = list(done.findings.values_list("rule", flat=True))
    assert len(rules) == len(set(rules))  # one set of findings
    assert Profile.objects.filter(project=project).count() == 1
