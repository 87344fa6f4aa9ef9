"""Upload limits (size, project quota, uploads in flight per user and per project) answer 413 / 429 with the
reason; an unreachable store answers 503 and the chunked upload stays resumable; a full disk during ingest
fails the profile with the reason and keeps the archive.

What is real and what is simulated: the store that does not answer is the loopback S3 client pointed at a
closed port; the full disk is a real 4 MiB tmpfs (needs root to mount; skipped otherwise) that the test fills
after the upload, so the worker's Parquet write gets ENOSPC from the kernel.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from tests.conftest import Worker, spare_broker, worker_env
from tests.scale.conftest import free_port, sending_to
from tests.web.helpers import SMALL_RANK, project_with, wait_finished, zip_folder


def _post(client, project_id: int, name: str, data: bytes):
    return client.post(f"/api/projects/{project_id}/profiles/", {"file": ContentFile(data, name=name)},
                       format="multipart")


def _start(client, project_id: int, name: str, size: int):
    return client.post(f"/api/projects/{project_id}/uploads/", {"filename": name, "size": size},
                       format="json")


@pytest.mark.django_db
def test_too_large_and_over_quota_are_413_with_the_reason(make_user, api_for, settings) -> None:
    owner = make_user("lia")
    project = project_with(owner)
    client = api_for(owner)
    settings.PYPTO_MAX_UPLOAD_BYTES = 1000
    res = _post(client, project.pk, "big.json", b"[" + b" " * 2000 + b"]")
    assert res.status_code == 413 and "over the upload limit of 1000 bytes" in str(res.json()), res.content
    res = _start(client, project.pk, "big.zip", 5000)
    assert res.status_code == 413 and "big.zip" in str(res.json())

    settings.PYPTO_MAX_UPLOAD_BYTES = 10**9
    settings.PYPTO_PROJECT_QUOTA_BYTES = 3000
    assert _start(client, project.pk, "a.zip", 2000).status_code == 201  # an open upload is not stored yet
    res = _post(client, project.pk, "t.json", b"[" + b" " * 2500 + b"]")
    assert res.status_code == 201, res.content
    res = _post(client, project.pk, "u.json", b"[" + b" " * 600 + b"]")
    assert res.status_code == 413 and "storage quota" in str(res.json()) and "u.json" in str(res.json())
    assert project.profiles.count() == 1


@pytest.mark.django_db
def test_uploads_in_flight_per_user_and_per_project_are_429(make_user, api_for, settings) -> None:
    owner, colleague = make_user("max"), make_user("noa")
    project = project_with(owner, maintainer=colleague)
    settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER = 2
    settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_PROJECT = 3
    mine, theirs = api_for(owner), api_for(colleague)
    assert _start(mine, project.pk, "1.zip", 10).status_code == 201
    assert _post(mine, project.pk, "2.json", b"[]").status_code == 201  # queued: still in flight
    res = _start(mine, project.pk, "3.zip", 10)
    assert res.status_code == 429 and "Too many uploads in flight for you (2, limit 2)" in str(res.json())
    res = _post(mine, project.pk, "3.json", b"[]")
    assert res.status_code == 429
    assert _start(theirs, project.pk, "4.zip", 10).status_code == 201  # the colleague has their own budget...
    res = _start(theirs, project.pk, "5.zip", 10)
    # ...within the project's
    assert res.status_code == 429 and "this project (3, limit 3)" in str(res.json())
    project.profiles.update(status="ready")  # analysed: no longer in flight
    assert _post(theirs, project.pk, "6.json", b"[]").status_code == 201


@pytest.mark.django_db
def test_unreachable_storage_is_503_and_the_upload_resumable(make_user, api_for, s3, settings) -> None:
    from profiles.models import UploadSession
    from profiles.services import partial_upload_path

    owner = make_user("ola")
    project = project_with(owner)
    client = api_for(owner)
    data = b'{"traceEvents": []}'
    upload = _start(client, project.pk, "trace.json", len(data)).json()
    res = client.put(f"/api/uploads/{upload['id']}/", data=data, content_type="application/octet-stream",
                     HTTP_UPLOAD_OFFSET="0")
    assert res.status_code == 200, res.content

    reachable = settings.STORAGES["default"]
    settings.STORAGES = {**settings.STORAGES, "default": {
        **reachable, "OPTIONS": {**reachable["OPTIONS"], "endpoint_url": f"http://127.0.0.1:{free_port()}"}}}
    res = client.post(f"/api/uploads/{upload['id']}/complete/")
    assert res.status_code == 503 and "Storage is unreachable: trace.json was not stored" in str(res.json())
    session = UploadSession.objects.get(pk=upload["id"])
    assert session.status == "open" and partial_upload_path(session).read_bytes() == data  # kept

    settings.STORAGES = {**settings.STORAGES, "default": reachable}  # the store is back: complete again
    res = client.post(f"/api/uploads/{upload['id']}/complete/")
    assert res.status_code == 201, res.content
    assert project.profiles.get().archive.read() == data


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mnt = tmp_path / "tiny-media"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("a full disk is simulated with a small tmpfs, which needs root")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_disk_full_during_ingest_fails_with_the_reason_and_keeps_the_archive(
        make_user, api_for, tiny_disk, settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tiny_disk
    broker = spare_broker(5)
    owner = make_user("pia")
    project = project_with(owner)
    archive = zip_folder(SMALL_RANK, tmp_path / "rank0.zip")
    with sending_to(broker):
        with open(archive, "rb") as fh:
            res = api_for(owner).post(f"/api/projects/{project.pk}/profiles/", {"file": fh},
                                      format="multipart")
        assert res.status_code == 201, res.content
        filler = tiny_disk / "filler"
        with open(filler, "wb") as out:  # take every byte left on the disk
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError:
                pass
        worker = Worker(env=worker_env(CELERY_BROKER_URL=broker, MEDIA_ROOT=str(tiny_disk)),
                        log_path=tmp_path / "worker.log").start()
        try:
            failed = wait_finished(res.json()["id"], worker)
            assert failed.status == "failed"
            assert "storage is full" in failed.error and "archive is kept" in failed.error, failed.error
            assert "rank0.zip" in failed.error
            with failed.archive.open("rb") as fh:  # kept, byte for byte
                assert hashlib.sha256(fh.read()).hexdigest() == failed.sha256

            filler.unlink()  # space freed: the same archive runs again to the end
            rerun = api_for(owner).post(f"/api/profiles/{failed.pk}/rerun/")
            assert rerun.status_code in (200, 201, 202), rerun.content
            done = wait_finished(failed.pk, worker)
        finally:
            worker.stop()
    assert done.status == "ready", done.error
