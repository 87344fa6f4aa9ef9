"""`pypto upload` against the platform's own user endpoints (a live server, PostgreSQL): plain, resumed,
and refused."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from profiles.models import Membership, Profile, Role
from pypto_core.capture.client import ApiClient
from pypto_core.capture.upload import ResumableUpload
from tests.paths import SAMPLES
from tests.web.helpers import project_with

SAMPLE = SAMPLES / "ascend_pt" / "cnn_8npu_text_level1" / "rank0_ascend_pt"


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run([sys.executable, "-m", "pypto_core", "upload", *args], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture
def site(transactional_db: None, live_server: Any, make_user, monkeypatch) -> dict[str, Any]:
    owner, viewer = make_user("uploader"), make_user("watcher")
    project = project_with(owner)
    Membership.objects.create(project=project, user=viewer, role=Role.VIEWER)
    # These tests are about the upload protocol: the profile is queued (recorded here), not handed to the
    # session's worker, which once ingested it while this test's teardown emptied the tables (a deadlock,
    # then the next test's users already existed).
    queued: list[tuple[str, int]] = []
    monkeypatch.setattr("analysis.profile_services.enqueue_on_commit",
                        lambda task, object_id: queued.append((str(task), object_id)))
    return {"url": live_server.url, "project": project, "queued": queued,
            "owner": Token.objects.create(user=owner).key, "viewer": Token.objects.create(user=viewer).key}


def test_cli_uploads_a_folder_and_prints_the_profile_url(site: dict[str, Any], tmp_path: Path) -> None:
    done = _cli(str(SAMPLE), "--server", site["url"], "--project", str(site["project"].pk),
                "--token", site["owner"], "--name", "level1 rank0", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    profile = Profile.objects.get(project=site["project"])
    assert done.stdout.strip() == f"{site['url']}/profiles/{profile.pk}/"
    assert profile.name == "level1 rank0" and profile.size > 0
    assert site["queued"] == [("analysis.tasks.ingest", profile.pk)]  # handed to the pipeline once
    assert "uploading" in done.stderr and "(100%)" in done.stderr


def test_a_broken_upload_resumes_from_the_servers_offset(site: dict[str, Any], tmp_path: Path) -> None:
    data = tmp_path / "trace_view.json"
    data.write_bytes((SAMPLE / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    state = tmp_path / "state.json"
    client = ApiClient(site["url"], site["owner"])
    create = f"/api/projects/{site['project'].pk}/uploads/"
    # the first process sends one chunk, then dies (nothing more is sent)
    first = ResumableUpload(client, create, data, state_path=state, chunk_bytes=64 * 1024)
    offset, _ = first._open()
    chunk = data.read_bytes()[: first.chunk_bytes]
    client.request("PUT", first.upload_url, data=chunk, headers={"Upload-Offset": str(offset)})
    # a new process with the same state file asks the server where it stopped and goes on from there
    sent: list[int] = []
    second = ResumableUpload(client, create, data, state_path=state, chunk_bytes=64 * 1024,
                             progress=lambda done, total: sent.append(done))
    profile = second.run()
    assert second.upload_id == first.upload_id
    assert sent[0] == 2 * 64 * 1024, "the resumed upload started after the chunk the server already had"
    stored = Profile.objects.get(pk=profile["id"])
    assert stored.sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    assert not state.exists()


def test_viewer_and_stranger_are_refused_with_a_clear_message(site: dict[str, Any], tmp_path: Path,
                                                             make_user) -> None:
    viewer = _cli(str(SAMPLE), "--server", site["url"], "--project", str(site["project"].pk),
                  "--token", site["viewer"], "--quiet", cache=tmp_path)
    assert viewer.returncode != 0 and "403" in viewer.stderr and "Traceback" not in viewer.stderr
    stranger = Token.objects.create(user=make_user("stranger")).key
    other = _cli(str(SAMPLE), "--server", site["url"], "--project", str(site["project"].pk),
                 "--token", stranger, "--quiet", cache=tmp_path)
    assert other.returncode != 0 and "404" in other.stderr and "Traceback" not in other.stderr
    assert not Profile.objects.filter(project=site["project"]).exists()
