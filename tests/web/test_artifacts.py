"""Remedy artifacts on the web: stored per analysis as a versioned set, listed, downloaded one by one and as
one zip, and made again with unified diffs when the user attaches their model file. The profiles are simulated
(``pypto_core.synth``) and run by a real worker; the model file is the installed transformers'
modeling_llama.py."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile

from tests.conftest import wait_until
from tests.web.helpers import project_with, wait_finished, zip_folder

pytestmark = [pytest.mark.django_db(transaction=True)]

MEDIA = {".json": "application/json", ".sh": "text/x-shellscript; charset=utf-8",
         ".py": "text/x-python; charset=utf-8", ".diff": "text/x-diff; charset=utf-8"}
KEYS = {"id", "name", "kind", "size", "sha256", "download_url", "version", "rule"}


@pytest.fixture(scope="module")
def synth_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pypto_core.synth import synthesize

    root = tmp_path_factory.mktemp("synth")
    folder = synthesize(root / "profile", tokens=2)
    return zip_folder(folder, root / "llama_sim.zip")


@pytest.fixture(scope="module")
def modeling_llama() -> bytes:
    transformers = pytest.importorskip("transformers")
    del transformers
    from transformers.models.llama import modeling_llama as module

    return Path(module.__file__).read_bytes()


def _upload(client: Any, project_id: int, path: Path, **extra: Any) -> dict[str, Any]:
    with open(path, "rb") as fh:
        res = client.post(f"/api/projects/{project_id}/profiles/", {"file": fh, **extra}, format="multipart")
    assert res.status_code == 201, res.content
    return res.json()


def _ready(profile_id: int, worker: Any) -> Any:
    profile = wait_finished(profile_id, worker)
    assert profile.status == "ready", profile.error
    return profile


def _body(res: Any) -> bytes:
    return b"".join(res.streaming_content) if res.streaming else res.content


def _download(client: Any, item: dict[str, Any]) -> bytes:
    res = client.get(item["download_url"])
    assert res.status_code == 200
    assert res["Content-Disposition"].startswith("attachment")
    assert res["X-Content-Type-Options"] == "nosniff"
    suffix = item["name"][item["name"].rfind("."):]
    assert res["Content-Type"] == MEDIA.get(suffix, "application/octet-stream"), item["name"]
    data = _body(res)
    assert len(data) == item["size"] and hashlib.sha256(data).hexdigest() == item["sha256"], item["name"]
    return data


def _zip_of(client: Any, profile_id: int, query: str = "") -> zipfile.ZipFile:
    res = client.get(f"/api/profiles/{profile_id}/artifacts/zip/{query}")
    assert res.status_code == 200, _body(res)[:300]
    assert res["Content-Disposition"].startswith("attachment") and ".zip" in res["Content-Disposition"]
    assert res["X-Content-Type-Options"] == "nosniff" and res["Content-Type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(_body(res)))


@pytest.mark.worker
def test_artifacts_listed_downloaded_zipped_and_versioned_by_rerun(worker, make_user, api_for,
                                                                   synth_zip) -> None:
    owner = make_user("ada")
    project = project_with(owner)
    client = api_for(owner)
    profile = _ready(_upload(client, project.pk, synth_zip)["id"], worker)

    listed = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    assert listed, "a simulated profile with every anti-pattern planted has remedies"
    assert all(KEYS <= set(item) for item in listed)
    assert {item["version"] for item in listed} == {1}
    findings = client.get(f"/api/profiles/{profile.pk}/findings/").json()["findings"]
    assert {item["rule"] for item in listed} <= {f["rule"] for f in findings}
    # Every remedy a finding names is in the list (the finding and the file agree).
    assert {name for f in findings for name in f["remedies"]} <= {item["name"] for item in listed}
    assert not any(item["kind"] == "diff" for item in listed)  # no model file attached: no diffs
    v1 = {item["name"]: _download(client, item) for item in listed}

    archive = _zip_of(client, profile.pk)
    assert sorted(archive.namelist()) == sorted([*v1, "MANIFEST.json"])
    for name, data in v1.items():
        assert archive.read(name) == data
    manifest = json.loads(archive.read("MANIFEST.json"))
    assert sorted(m["name"] for m in manifest) == sorted(v1)
    assert {m["name"]: m["sha256"] for m in manifest} == {i["name"]: i["sha256"] for i in listed}

    from django.test import Client

    page = Client()
    page.force_login(owner)
    html = page.get(f"/profiles/{profile.pk}/").content.decode()
    assert f'href="/api/profiles/{profile.pk}/artifacts/zip/"' in html
    # No worker path anywhere (issue 17): the sources are named as the user knows them.
    from django.conf import settings

    work = str(settings.PYPTO_WORK_DIR)
    # the profile by its dashboard name and id (issue 18), never by where a worker read it
    assert "aoe_tune.sh" in v1
    assert f"Profile: {profile.name or 'unnamed'} #{profile.pk} (".encode() in v1["aoe_tune.sh"]
    for name, data in v1.items():
        assert work.encode() not in data and b"/unpacked/" not in data, name
    assert work not in json.dumps(client.get(f"/api/profiles/{profile.pk}/").json()) and work not in html
    assert "/unpacked/" not in html
    assert all(f'href="{item["download_url"]}"' in html for item in listed)

    # A re-run stores the whole set again as version 2 and keeps version 1.
    assert client.post(f"/api/profiles/{profile.pk}/rerun/").status_code == 202
    _ready(profile.pk, worker)
    latest = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    assert {item["version"] for item in latest} == {2}
    assert sorted(i["name"] for i in latest) == sorted(v1)
    assert not {i["id"] for i in latest} & {i["id"] for i in listed}
    history = client.get(f"/api/profiles/{profile.pk}/artifacts/?all=1").json()
    assert sorted((i["version"], i["name"]) for i in history) == sorted(
        [(1, n) for n in v1] + [(2, n) for n in v1])
    assert [i["version"] for i in history] == sorted((i["version"] for i in history), reverse=True)
    for item in listed:  # the old files stay downloadable, byte for byte
        assert _download(client, item) == v1[item["name"]]
    assert sorted(_zip_of(client, profile.pk).namelist()) == sorted([*v1, "MANIFEST.json"])
    old = _zip_of(client, profile.pk, "?version=1")
    assert all(old.read(name) == data for name, data in v1.items())
    assert client.get(f"/api/profiles/{profile.pk}/artifacts/zip/?version=9").status_code == 404
    assert client.get(f"/api/profiles/{profile.pk}/artifacts/?version=x").status_code == 400


@pytest.mark.worker
@pytest.mark.skipif(shutil.which("patch") is None, reason="patch(1) is not installed")
def test_model_file_makes_diffs_that_apply_to_it(worker, make_user, api_for, synth_zip, modeling_llama,
                                                 tmp_path) -> None:
    from analysis.models import AnalysisRun

    owner, viewer = make_user("mia"), make_user("vic")
    project = project_with(owner, viewer=viewer)
    client = api_for(owner)
    profile = _ready(_upload(client, project.pk, synth_zip)["id"], worker)
    before = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    url = f"/api/profiles/{profile.pk}/model-file/"

    res = api_for(viewer).post(url, {"file": io.BytesIO(modeling_llama)}, format="multipart")
    assert res.status_code == 403
    bad = {"notes.txt": b"x = 1\n", "broken.py": b"def f(:\n", "latin.py": "x = 'é'\n".encode("latin-1")}
    for name, data in bad.items():
        fh = io.BytesIO(data)
        fh.name = name
        res = client.post(url, {"file": fh}, format="multipart")
        assert res.status_code == 400 and name in res.content.decode(), res.content

    fh = io.BytesIO(modeling_llama)
    fh.name = "modeling_llama.py"
    res = client.post(url, {"file": fh}, format="multipart")
    assert res.status_code == 202, res.content
    run_id = res.json()["run"]
    run = wait_until(lambda: AnalysisRun.objects.filter(pk=run_id, status__in=("done", "failed")).first(),
                     "the remedies run", worker)
    assert run.status == "done", run.error

    latest = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    assert {i["version"] for i in latest} == {2}
    diffs = [i for i in latest if i["kind"] == "diff"]
    assert diffs, latest
    # Everything of version 1 is still made, now with one diff per patch beside it.
    assert {i["name"] for i in before} <= {i["name"] for i in latest}
    for item in diffs:
        work = tmp_path / item["name"]
        work.mkdir()
        (work / "modeling_llama.py").write_bytes(modeling_llama)
        (work / "remedy.diff").write_bytes(_download(client, item))
        out = subprocess.run(["patch", "-p1", "--batch", "--forward", "--dry-run", "-i", "remedy.diff"],
                             cwd=work, capture_output=True, text=True)
        assert out.returncode == 0 and "fuzz" not in out.stdout.lower(), \
            item["name"] + out.stdout + out.stderr
    zipped = _zip_of(client, profile.pk).namelist()
    assert sorted(zipped) == sorted([i["name"] for i in latest] + ["MANIFEST.json"])
    assert len(client.get(f"/api/profiles/{profile.pk}/artifacts/?all=1").json()) == len(before) + len(latest)


@pytest.mark.worker
def test_model_file_with_the_upload_gives_diffs_in_the_first_version(worker, make_user, api_for, synth_zip,
                                                                     modeling_llama) -> None:
    owner = make_user("uma")
    project = project_with(owner)
    client = api_for(owner)
    model = io.BytesIO(modeling_llama)
    model.name = "modeling_llama.py"
    profile = _ready(_upload(client, project.pk, synth_zip, model_file=model)["id"], worker)
    listed = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    assert {i["version"] for i in listed} == {1}
    assert any(i["kind"] == "diff" for i in listed)


def test_a_set_without_artifacts_lists_nothing_and_new_urls_hide_from_outsiders(make_user, api_for) -> None:
    """An analysis that made no remedies is the latest version (empty), not the stale set before it; the new
    URLs answer 404 to a non-member and the model file 403 to a viewer."""
    from django.db import transaction

    from analysis.artifact_services import artifact_set_store
    from analysis.models import AnalysisRun
    from profiles.models import Profile
    from pypto_core.remedies import Artifact as CoreArtifact

    owner, viewer, outsider = make_user("own"), make_user("view"), make_user("out")
    project = project_with(owner, viewer=viewer)
    profile = Profile(project=project, name="p", original_filename="a.csv", upload_kind="csv", size=4,
                      created_by=owner, status="ready")
    profile.archive.save("a.csv", ContentFile(b"a,b\n"), save=False)
    profile.save()
    def store(run: Any, artifacts: list[Any]) -> int:
        with transaction.atomic():
            return artifact_set_store(profile=profile, run=run, artifacts=artifacts)

    first = AnalysisRun.objects.create(profile=profile, kind="diagnose")
    assert store(first, [CoreArtifact(name="aoe.json", kind="config", content=b"{}",
                                      rule="matmul_tiling")]) == 1
    # The same run again (a redelivered task): its set is replaced, the version stays.
    assert store(first, [CoreArtifact(name="aoe.json", kind="config", content=b"[]",
                                      rule="matmul_tiling")]) == 1
    client = api_for(owner)
    listed = client.get(f"/api/profiles/{profile.pk}/artifacts/").json()
    assert [(i["name"], i["version"], i["size"]) for i in listed] == [("aoe.json", 1, 2)]
    assert _download(client, listed[0]) == b"[]"

    second = AnalysisRun.objects.create(profile=profile, kind="diagnose")
    assert store(second, []) == 2
    assert client.get(f"/api/profiles/{profile.pk}/artifacts/").json() == []
    assert client.get(f"/api/profiles/{profile.pk}/artifacts/zip/").status_code == 404
    assert len(client.get(f"/api/profiles/{profile.pk}/artifacts/?all=1").json()) == 1
    assert client.get(f"/api/profiles/{profile.pk}/artifacts/zip/?version=1").status_code == 200

    model = io.BytesIO(b"x = 1\n")
    model.name = "m.py"
    assert api_for(viewer).post(f"/api/profiles/{profile.pk}/model-file/", {"file": model},
                                format="multipart").status_code == 403
    stranger = api_for(outsider)
    for path in (f"/api/profiles/{profile.pk}/artifacts/zip/", f"/api/profiles/{profile.pk}/artifacts/?all=1",
                 f"/api/artifacts/{listed[0]['id']}/download/"):
        assert stranger.get(path).status_code == 404, path
    model.seek(0)
    assert stranger.post(f"/api/profiles/{profile.pk}/model-file/", {"file": model},
                         format="multipart").status_code == 404
    profile.refresh_from_db()
    assert not profile.model_file
