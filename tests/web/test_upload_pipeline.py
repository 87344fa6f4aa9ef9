"""Uploads (plain, chunked, resumed) through the API, run by a real worker on PostgreSQL and Redis; every
hostile archive fails with the member and the reason, and the uploaded bytes are kept."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from tests.paths import SAMPLES
from tests.web import bad_archives
from tests.web.helpers import (
    SMALL_CSV,
    SMALL_RANK,
    project_with,
    sha256,
    stored_archive_sha256,
    wait_finished,
    zip_folder,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
KINETO_GZ = SAMPLES / "kineto" / "trace_diff_pair" / "control.json.gz"
TRACE_VIEW = SAMPLES / "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def _upload(client, project_id: int, path: Path, **fields: str):
    with open(path, "rb") as fh:
        return client.post(f"/api/projects/{project_id}/profiles/", {"file": fh, **fields},
                           format="multipart")


def test_plain_upload_reaches_ready(worker, make_user, api_for, tmp_path) -> None:
    owner = make_user("olga")
    project = project_with(owner)
    archive = zip_folder(SMALL_RANK, tmp_path / "rank0.zip")
    client = api_for(owner)

    res = _upload(client, project.pk, archive, name="baseline", tags="bf16, baseline")
    assert res.status_code == 201, res.content
    body = res.json()
    assert body["status"] == "queued" and body["project"] == project.pk and body["error"] is None
    assert body["tags"] == ["bf16", "baseline"] and body["sha256"] == sha256(archive)

    profile = wait_finished(body["id"], worker)
    assert profile.status == "ready", profile.error
    assert profile.progress == 100
    assert profile.detected_format.startswith("ascend_pt")
    assert profile.summary["files"] == sum(1 for p in SMALL_RANK.rglob("*") if p.is_file())
    assert stored_archive_sha256(profile) == sha256(archive)  # kept byte for byte

    listed = client.get(f"/api/projects/{project.pk}/profiles/").json()
    assert [p["id"] for p in listed] == [profile.pk]
    detail = client.get(f"/api/profiles/{profile.pk}/").json()
    assert {"id", "project", "name", "status", "progress", "error", "summary"} <= set(detail)
    findings = client.get(f"/api/profiles/{profile.pk}/findings/").json()
    assert set(findings) >= {"profile", "findings", "estimated_combined_speedup", "warnings"}
    assert isinstance(client.get(f"/api/profiles/{profile.pk}/artifacts/").json(), list)

    download = client.get(f"/api/profiles/{profile.pk}/archive/")
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith("attachment")
    assert download["X-Content-Type-Options"] == "nosniff"
    assert b"".join(download.streaming_content) == archive.read_bytes()


@pytest.mark.parametrize("source", [SMALL_CSV, KINETO_GZ, TRACE_VIEW],
                         ids=["kernel_csv", "kineto_gz", "trace_view"])
def test_single_file_upload_is_streamed_into_parquet(worker, make_user, api_for, tmp_path, source) -> None:
    """A lone kernel table, Kineto trace or Ascend timeline is streamed by write_profiles (bounded memory);
    what is stored loads as the in-memory reader's profile."""
    from analysis.storage import ProfileStore
    from pypto_core.formats import open_profile

    owner = make_user("carl")
    project = project_with(owner)
    res = _upload(api_for(owner), project.pk, source)
    assert res.status_code == 201, res.content
    profile = wait_finished(res.json()["id"], worker)
    assert profile.status == "ready", profile.error
    expected = open_profile(source)
    assert profile.summary["kernel_count"] == expected.kernels.num_rows > 0
    assert profile.summary["start_ns"] == expected.time_span_ns()[0]
    stored = ProfileStore(profile).load(tmp_path)
    for name in ("kernels", "host_ops", "api_calls", "flows", "steps"):
        assert stored.table(name).equals(expected.table(name)), name


def _broken_put(server: str, path: str, token: str, *, offset: int, declared: int, sent: bytes) -> None:
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        head = (f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Token {token}\r\n"
                f"Content-Type: application/octet-stream\r\nUpload-Offset: {offset}\r\n"
                f"Content-Length: {declared}\r\n\r\n")
        sock.sendall(head.encode() + sent)
        sock.shutdown(socket.SHUT_WR)  # the connection dies here
        sock.recv(65536)  # the server's answer, if any: the test does not rely on it


def test_chunked_and_resumed_upload(worker, live_server, make_user, api_for, tmp_path) -> None:
    from rest_framework.authtoken.models import Token

    owner = make_user("chen")
    project = project_with(owner)
    archive = zip_folder(SMALL_RANK, tmp_path / "chunked.zip")
    data = archive.read_bytes()
    client = api_for(owner)
    token = Token.objects.get(user=owner).key

    start = client.post(f"/api/projects/{project.pk}/uploads/",
                        {"filename": archive.name, "size": len(data), "sha256": sha256(archive),
                         "tags": ["x"]},
                        format="json")
    assert start.status_code == 201, start.content
    url = start.json()["url"]
    assert start.json()["offset"] == 0
    chunk = max(1, len(data) // 5)

    def put(offset: int, body: bytes, **headers: str):
        return client.generic("PUT", url, body, content_type="application/octet-stream",
                              HTTP_UPLOAD_OFFSET=str(offset), **headers)

    assert put(0, data[:chunk]).json()["offset"] == chunk
    # The client lost the answer and sends the first chunk again: 409 tells it where to go on.
    again = put(0, data[:chunk])
    assert again.status_code == 409 and again.json()["offset"] == chunk
    # A connection that breaks mid-chunk (a real socket, closed after part of the body): the server keeps
    # only what arrived whole.
    _broken_put(live_server.url, url, token, offset=chunk, declared=chunk, sent=data[chunk:chunk + 10])
    # A new client resumes: ask the offset, continue from there (Content-Range form of the header).
    offset = client.get(url).json()["offset"]
    assert offset == chunk
    premature = client.post(url + "complete/")
    assert premature.status_code == 400
    while offset < len(data):
        part = data[offset:offset + chunk]
        res = client.generic("PUT", url, part, content_type="application/octet-stream",
                             HTTP_CONTENT_RANGE=f"bytes {offset}-{offset + len(part) - 1}/{len(data)}")
        assert res.status_code == 200, res.content
        offset = res.json()["offset"]
    done = client.post(url + "complete/")
    assert done.status_code == 201, done.content
    again_done = client.post(url + "complete/")  # completing twice gives the same profile
    assert again_done.json()["id"] == done.json()["id"]
    assert client.get(url).json()["status"] == "complete"

    profile = wait_finished(done.json()["id"], worker)
    assert profile.status == "ready", profile.error
    assert profile.sha256 == sha256(archive)
    assert stored_archive_sha256(profile) == sha256(archive)


def test_chunked_upload_checksum_mismatch_is_refused(make_user, api_for, tmp_path) -> None:
    owner = make_user("mia")
    project = project_with(owner)
    client = api_for(owner)
    start = client.post(f"/api/projects/{project.pk}/uploads/",
                        {"filename": "a.csv", "size": 4, "sha256": "0" * 64}, format="json").json()
    client.generic("PUT", start["url"], b"a,b\n", content_type="application/octet-stream",
                   HTTP_UPLOAD_OFFSET="0")
    res = client.post(start["url"] + "complete/")
    assert res.status_code == 400 and "Checksum mismatch" in res.content.decode()


def test_unsupported_file_type_is_refused_at_upload(make_user, api_for) -> None:
    owner = make_user("una")
    project = project_with(owner)
    res = api_for(owner).post(f"/api/projects/{project.pk}/profiles/",
                              {"file": io.BytesIO(b"MZ..."), "name": "x"}, format="multipart")
    assert res.status_code == 400
    named = io.BytesIO(b"MZ...")
    named.name = "tool.exe"
    res = api_for(owner).post(f"/api/projects/{project.pk}/profiles/", {"file": named}, format="multipart")
    assert res.status_code == 400 and "unsupported file type" in res.content.decode()


def test_every_bad_archive_fails_with_its_reason_and_keeps_the_bytes(worker, make_user, api_for,
                                                                     tmp_path) -> None:
    from profiles.models import Membership, Profile

    owner = make_user("bea")
    maintainer = make_user("max")
    project = project_with(owner, maintainer=maintainer)
    client = api_for(owner)
    uploaded: dict[str, tuple[int, Path]] = {}
    for case in bad_archives.CASES:
        path = case.build(tmp_path)
        res = _upload(client, project.pk, path)
        assert res.status_code == 201, (case.id, res.content)
        uploaded[case.id] = (res.json()["id"], path)

    for case in bad_archives.CASES:
        profile_id, path = uploaded[case.id]
        profile = wait_finished(profile_id, worker)
        assert profile.status == "failed", (case.id, profile.summary)
        assert profile.error.startswith(path.name + ":"), profile.error  # names the upload...
        for needle in case.expect:  # ...the member and the reason
            assert needle in profile.error, (case.id, profile.error)
        assert stored_archive_sha256(profile) == sha256(path)  # the bytes are kept
        api_error = client.get(f"/api/profiles/{profile_id}/").json()["error"]
        assert api_error == profile.error

    # A maintainer re-runs a failed profile from its kept archive: it fails again the same way.
    assert Membership.objects.get(user=maintainer).role == "maintainer"
    profile_id, _path = uploaded["traversal"]
    res = api_for(maintainer).post(f"/api/profiles/{profile_id}/rerun/")
    assert res.status_code == 202 and res.json()["status"] == "queued"
    profile = wait_finished(profile_id, worker)
    assert profile.status == "failed" and "path traversal" in profile.error
    assert profile.runs.filter(kind="ingest").count() == 2
    assert Profile.objects.filter(project=project).count() == len(bad_archives.CASES)


@pytest.mark.parametrize("filename,expected", [
    ("rank0_ascend_pt.zip", "rank0_ascend_pt"), ("eager.pt.trace.json.gz", "eager"),
    ("PROF_000001.tar.gz", "PROF_000001"), ("kernel_details.csv", "kernel_details"),
    ("ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_0"), ("run.tgz", "run"),
])
def test_a_profile_without_a_name_takes_its_files_name_without_the_suffix(filename, expected) -> None:
    from profiles.services import default_profile_name

    assert default_profile_name(filename) == expected
    assert default_profile_name(".zip") == ".zip"  # nothing left: the name as it was


@pytest.mark.skipif(not (SAMPLES / "SOURCES.md").is_file(), reason="needs the real samples")
def test_an_upload_whose_ranks_are_all_unreadable_fails_naming_each_once(worker, make_user, api_for, client,
                                                                         tmp_path) -> None:
    """msprof's zero-byte placeholders in two folders: both ranks fail, and the upload fails with each
    folder's reason named once (it read "slice: slice: no readable ..."); its page shows no progress
    percentage beside "Failed" (it showed 47%)."""
    owner = make_user("pia")
    project = project_with(owner)
    archive = zip_folder(SAMPLES / "msprof" / "file_naming_placeholders", tmp_path / "placeholders.zip")
    res = _upload(api_for(owner), project.pk, archive, name="placeholders")
    assert res.status_code == 201, res.content
    profile = wait_finished(res.json()["id"], worker)
    assert profile.status == "failed" and profile.error.startswith("no rank could be read ("), profile.error
    for folder in ("normal", "slice"):
        assert profile.error.count(f"{folder}: no readable profiler output") == 1, profile.error
        assert f"{folder}: file_naming_placeholders/{folder}:" not in profile.error
    client.force_login(owner)
    page = client.get(f"/profiles/{profile.pk}/").content.decode()
    status = page.split('id="profile-status"')[1].split("</section>")[0]
    assert 'id="progress"' not in status and 'class="progress"' not in status and "Failed" in status
