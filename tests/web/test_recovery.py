"""Nothing stays stuck (issue 17, item 1): the recovery sweep (analysis/recovery.py, Celery beat).

The end-to-end test kills a real worker (SIGKILL, whole process group) in the middle of an ingest, after the
archive was unpacked into its work folder, under `make run`'s default broker (the filesystem broker, which
loses the message with the worker) and under Redis (which redelivers it: the redelivery and the sweep race).
A second worker started as `make run` starts it (with the embedded beat) must bring the profile to ready
exactly once, and leave no work folder behind, without anyone stepping in.
"""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.utils import timezone

from tests.conftest import Worker, purge_broker, spare_broker, wait_until, worker_env
from tests.web.helpers import SMALL_RANK, project_with, wait_finished, zip_folder


def _queued_profile(owner, archive: Path, **fields):  # type: ignore[no-untyped-def]
    from profiles.models import Profile

    project = project_with(owner)
    data = archive.read_bytes()
    profile = Profile(project=project, name="recovery", original_filename=archive.name, upload_kind="zip",
                      size=len(data), sha256=hashlib.sha256(data).hexdigest(), status="queued",
                      created_by=owner, **fields)
    profile.archive.save(archive.name, ContentFile(data), save=False)
    profile.save()
    return profile


def _filesystem_connection(var_dir: Path):  # type: ignore[no-untyped-def]
    """A connection to the filesystem broker a worker with PYPTO_VAR_DIR=var_dir uses (pypto_web.settings)."""
    from kombu import Connection

    broker = var_dir / "broker"
    for sub in ("out", "processed", "control"):
        (broker / sub).mkdir(parents=True, exist_ok=True)
    return Connection("filesystem://", transport="pypto_web.fs_broker:Transport", transport_options={
        "data_folder_in": str(broker / "out"), "data_folder_out": str(broker / "out"),
        "data_folder_processed": str(broker / "processed"), "control_folder": str(broker / "control")})


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.parametrize("broker", ["filesystem", "redis"])
def test_worker_killed_mid_ingest_profile_ready_once_and_no_work_folder(broker, make_user, tmp_path) -> None:
    from analysis.models import AnalysisRun
    from analysis.tasks import ingest
    from pypto_web.celery import app

    work = tmp_path / "work"
    hold = tmp_path / "hold"
    hold.write_text("unpacked")  # hold once the archive is unpacked into the work folder
    env = dict(PYPTO_WORK_DIR=str(work), PYPTO_VAR_DIR=str(tmp_path / "var"), PYPTO_TASK_LEASE_SECONDS="3",
               PYPTO_SWEEP_INTERVAL_S="1", PYPTO_PIPELINE_HOLD_FILE=str(hold))
    if broker == "filesystem":
        env["CELERY_BROKER_URL"] = "filesystem://"
    else:
        env["CELERY_BROKER_URL"] = spare_broker(2)
        env.update(CELERY_VISIBILITY_TIMEOUT="4", CELERY_UNACKED_RESTORE_INTERVAL="1",
                   CELERY_UNACKED_RESTORE_THROTTLE="1")
        purge_broker(env["CELERY_BROKER_URL"])
    env = worker_env(**env)
    profile = _queued_profile(make_user("kim"), zip_folder(SMALL_RANK, tmp_path / "rank0.zip"))

    first = Worker(env=env, log_path=tmp_path / "worker-a.log").start()
    try:
        conn = (_filesystem_connection(tmp_path / "var") if broker == "filesystem"
                else app.connection_for_write(env["CELERY_BROKER_URL"]))
        with conn:
            ingest.apply_async(args=[profile.pk], connection=conn)
        held = tmp_path / "worker-a.log"
        wait_until(lambda: b"holding while" in held.read_bytes(), "worker A to hold", first)
        folders = [p for p in work.iterdir() if p.name.startswith(f"p{profile.pk}-ingest-")]
        assert len(folders) == 1 and any((folders[0] / "unpacked").iterdir())  # the unpacked files
        first.kill()
    finally:
        first.kill()
    hold.unlink()
    profile.refresh_from_db()
    assert profile.status == "parsing" and profile.progress == 30  # stuck where the worker died

    second = Worker(env=env, log_path=tmp_path / "worker-b.log", beat=True).start()
    try:
        done = wait_finished(profile.pk, second)
    finally:
        second.stop()
    assert done.status == "ready", done.error
    ingest_runs = list(AnalysisRun.objects.filter(profile=done, kind="ingest"))
    assert len(ingest_runs) == 1 and ingest_runs[0].attempts == 2 and ingest_runs[0].status == "done"
    diagnose_runs = list(AnalysisRun.objects.filter(profile=done, kind="diagnose"))
    assert len(diagnose_runs) == 1 and diagnose_runs[0].attempts == 1  # ready exactly once
    rules = list(done.findings.values_list("rule", flat=True))
    assert rules and len(rules) == len(set(rules))
    assert [p.name for p in work.iterdir() if p.name.startswith("p")] == []  # no work folder left


def _expired(profile, status: str, attempts: int):  # type: ignore[no-untyped-def]
    from analysis.models import AnalysisRun
    from profiles.models import Profile

    expired = timezone.now() - timedelta(seconds=5)
    Profile.objects.filter(pk=profile.pk).update(status=status, lease_until=expired, progress=35)
    kind = "ingest" if status == "parsing" else "diagnose"
    AnalysisRun.objects.create(profile=profile, kind=kind, status="running", attempts=attempts)


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_requeue_an_expired_lease_once(make_user, tmp_path) -> None:
    from analysis.recovery import recovery_sweep
    from profiles.models import Profile

    profile = _queued_profile(make_user("ann"), zip_folder(SMALL_RANK, tmp_path / "r.zip"))
    _expired(profile, "parsing", attempts=1)
    results: list[dict[str, int]] = []
    barrier = threading.Barrier(2)

    def beat() -> None:
        from django.db import connection

        barrier.wait()
        try:
            results.append(recovery_sweep())
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["requeued"] for r in results) == [0, 1]  # one beat won, the other changed nothing
    row = Profile.objects.get(pk=profile.pk)
    # queued again (or already taken by the session's worker, when one runs on this broker)
    assert row.status in ("queued", "parsing", "analyzing", "ready") and (
        row.lease_until is None or row.lease_until > timezone.now())
    assert recovery_sweep()["requeued"] == 0  # and a third pass finds nothing to do


@pytest.mark.django_db(transaction=True)
def test_a_step_that_keeps_killing_its_worker_fails_with_the_reason(make_user, tmp_path) -> None:
    from analysis.recovery import recovery_sweep
    from profiles.models import Profile

    profile = _queued_profile(make_user("bo"), zip_folder(SMALL_RANK, tmp_path / "big.zip"))
    _expired(profile, "parsing", attempts=settings.PYPTO_MAX_STEP_ATTEMPTS)
    assert recovery_sweep()["failed"] == 1
    row = Profile.objects.get(pk=profile.pk)
    assert row.status == "failed" and row.lease_until is None
    assert row.error.startswith("big.zip: the worker stopped 3 times while reading it")
    assert row.runs.get(kind="ingest").status == "failed"
    assert row.archive.storage.exists(row.archive.name)  # the upload is kept


@pytest.mark.django_db(transaction=True)
def test_maintainer_reruns_a_stuck_profile_but_not_one_a_live_worker_holds(make_user, api_for,
                                                                           tmp_path) -> None:
    from profiles.models import Membership, Profile

    owner = make_user("cy")
    profile = _queued_profile(owner, zip_folder(SMALL_RANK, tmp_path / "s.zip"))
    maintainer = make_user("mo")
    Membership.objects.create(project=profile.project, user=maintainer, role="maintainer")
    api = api_for(maintainer)
    Profile.objects.filter(pk=profile.pk).update(status="parsing", progress=35,
                                                 lease_until=timezone.now() + timedelta(minutes=5))
    refused = api.post(f"/api/profiles/{profile.pk}/rerun/")
    assert refused.status_code == 400 and "A worker is working on this profile now" in str(refused.json())
    Profile.objects.filter(pk=profile.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    res = api.post(f"/api/profiles/{profile.pk}/rerun/")
    assert res.status_code == 202 and res.json()["status"] == "queued"
    # A profile whose message was lost (queued, no worker took it for PYPTO_REQUEUE_AFTER_S) too. Another
    # one: the re-run above sent a real message, which a test worker on the same broker may be claiming now
    # (a fresh lease: refused, rightly; seen on a loaded CI run).
    lost = _queued_profile(owner, zip_folder(SMALL_RANK, tmp_path / "lost.zip"))
    Membership.objects.create(project=lost.project, user=maintainer, role="maintainer")
    old = timezone.now() - timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S + 5)
    Profile.objects.filter(pk=lost.pk).update(status="analyzing", lease_until=None, updated_at=old)
    assert api.post(f"/api/profiles/{lost.pk}/rerun/").status_code == 202


@pytest.mark.django_db(transaction=True)
def test_sweep_cleans_dead_work_folders_stale_partials_and_silent_capture_jobs(make_user, settings,
                                                                              tmp_path) -> None:
    import os

    from analysis.recovery import recovery_sweep
    from captures.models import CaptureJob
    from captures.services import agent_create
    from profiles.models import Profile, UploadSession

    settings.PYPTO_WORK_DIR = tmp_path / "work"
    settings.PYPTO_UPLOAD_TMP_DIR = tmp_path / "partial"
    owner = make_user("di")
    live = _queued_profile(owner, zip_folder(SMALL_RANK, tmp_path / "live.zip"))
    dead = _queued_profile(owner, zip_folder(SMALL_RANK, tmp_path / "dead.zip"))
    held_until = timezone.now() + timedelta(minutes=5)
    Profile.objects.filter(pk=live.pk).update(status="parsing", lease_until=held_until)
    Profile.objects.filter(pk=dead.pk).update(status="ready", lease_until=None)
    folders = {name: settings.PYPTO_WORK_DIR / name for name in
               (f"p{live.pk}-ingest-a1", f"p{dead.pk}-ingest-b2", f"p{dead.pk}-diagnose-c3",
                f"p{dead.pk}-what-if-d4", f"p{dead.pk}-what-if-e5")}
    for path in folders.values():
        (path / "unpacked").mkdir(parents=True)
        (path / "unpacked" / "kernel_details.csv").write_bytes(b"x" * 100)
    old = (timezone.now() - timedelta(seconds=settings.PYPTO_TASK_LEASE_SECONDS + 60)).timestamp()
    os.utime(folders[f"p{dead.pk}-what-if-e5"], (old, old))

    session = UploadSession.objects.create(project=live.project, created_by=owner, filename="x.zip", size=10)
    settings.PYPTO_UPLOAD_TMP_DIR.mkdir()
    (settings.PYPTO_UPLOAD_TMP_DIR / f"{session.pk}.part").write_bytes(b"12345")
    UploadSession.objects.filter(pk=session.pk).update(
        updated_at=timezone.now() - timedelta(days=settings.PYPTO_PARTIAL_UPLOAD_DAYS + 1))

    agent, _token = agent_create(project=live.project, user=owner, name="npu-01")
    job = CaptureJob.objects.create(project=live.project, agent=agent, workload="demo", created_by=owner,
                                    status="running")

    done = recovery_sweep()
    assert done["work_folders"] == 3 and done["partial_uploads"] == 1 and done["capture_jobs"] == 1
    left = sorted(p.name for p in settings.PYPTO_WORK_DIR.iterdir())
    assert left == sorted([f"p{live.pk}-ingest-a1", f"p{dead.pk}-what-if-d4"])  # held, or young
    assert not (settings.PYPTO_UPLOAD_TMP_DIR / f"{session.pk}.part").exists()
    assert not UploadSession.objects.filter(pk=session.pk).exists()
    job.refresh_from_db()
    assert job.status == "failed" and "stopped sending heartbeats" in job.message
    assert recovery_sweep() == {"requeued": 0, "failed": 0, "work_folders": 0, "partial_uploads": 0,
                                "capture_jobs": 0}
