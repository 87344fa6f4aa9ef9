"""Verify a fix (issue 21) through the API on the test database: stable finding ids, the job and the remedies
it carries, named refusals, membership, the verdicts of the automatic comparison, the fix ledger and the
regression check that counts verified fixes. Profiles are simulated decoder runs diagnosed in-process; the
live agent loop is tests/capture/test_verify_loop.py."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db import transaction
from rest_framework.test import APIClient

from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db
MODEL = Path(__file__).resolve().parents[1] / "capture" / "workloads" / "llama_src" / "modeling_tiny.py"
NORM = "norm_launch_overhead"


def diagnosed(project: Any, owner: Any, planted: frozenset[str], tmp: Path, name: str) -> Any:
    """A profile with its Parquet in storage and the model file attached, through the real diagnose step."""
    from analysis.pipeline.diagnose import pipeline_diagnose
    from analysis.storage import store_folder
    from profiles.models import Profile, ProfileStatus

    core = decoder_profile(planted=planted, tokens=4, layers=2)
    profile = Profile.objects.create(project=project, name=name, original_filename="p.zip", upload_kind="zip",
                                     created_by=owner, status=ProfileStatus.ANALYZING, progress=60)
    profile.archive.save("p.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18), save=False)
    profile.model_file.save("modeling_tiny.py", ContentFile(MODEL.read_bytes()), save=True)
    local = tmp / f"pq-{profile.pk}"
    core.save(local / "rank_0")
    prefix = f"projects/{project.pk}/parquet/{profile.pk}/t"
    store_folder(local, prefix)
    summary = {**core.summary(), "ranks": 1, "rank_folders": ["rank_0"]}
    Profile.objects.filter(pk=profile.pk).update(parquet_prefix=prefix, summary=summary)
    pipeline_diagnose(profile_id=profile.pk)
    profile.refresh_from_db()
    assert profile.status == ProfileStatus.READY, profile.error
    return profile


def agent_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
    return client


@pytest.fixture
def world(make_user, api_for, tmp_path: Path, settings: Any) -> dict[str, Any]:
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner, viewer, stranger = make_user("owner"), make_user("viewer"), make_user("stranger")
    project = project_with(owner, viewer=viewer)
    api = api_for(owner)
    before = diagnosed(project, owner, frozenset({NORM, "kv_cache_layout"}), tmp_path, "before")
    made = api.post(f"/api/projects/{project.pk}/agents/", {"name": "npu-1"}, format="json").json()

    def register(kinds: list[str], env: list[str], patchable: bool = True) -> None:
        r = agent_client(made["token"]).post("/api/agent/register/", {
            "hostname": "h", "capabilities": {"backend": "cpu", "npu": []}, "version": "0",
            "workloads": [{"name": "llama", "kind": "python", "timeout_s": 60, "patchable": patchable}],
            "remedies": {"kinds": kinds, "env": env}}, format="json")
        assert r.status_code == 200, r.content

    register(["patch", "env"], ["TASK_QUEUE_ENABLE"])
    norm = before.findings.get(rule=NORM)
    return {"owner": owner, "viewer": viewer, "stranger": stranger, "project": project, "api": api,
            "before": before, "norm": norm, "agent": made["id"], "token": made["token"], "register": register,
            "api_for": api_for, "tmp": tmp_path}


def test_finding_ids_are_stable_across_reruns_and_in_the_api(world: dict[str, Any]) -> None:
    from analysis.pipeline.diagnose import pipeline_diagnose
    from profiles.models import Profile, ProfileStatus

    before = world["before"]
    ids = dict(before.findings.values_list("rule", "id"))
    listed = world["api"].get(f"/api/profiles/{before.pk}/findings/").json()["findings"]
    assert {f["rule"]: f["id"] for f in listed} == ids
    Profile.objects.filter(pk=before.pk).update(status=ProfileStatus.ANALYZING)
    pipeline_diagnose(profile_id=before.pk)
    assert dict(before.findings.values_list("rule", "id")) == ids


def test_verify_a_finding_answers_202_with_the_job_and_its_remedies(world: dict[str, Any]) -> None:
    r = world["api"].post(f"/api/findings/{world['norm'].pk}/verify/",
                          {"agent": world["agent"], "workload": "llama"}, format="json")
    assert r.status_code == 202, r.content
    job = r.json()
    kinds = {rem["kind"]: rem for rem in job["remedies"]}
    assert set(kinds) == {"patch", "env"} and kinds["env"]["content"] == "TASK_QUEUE_ENABLE=2\n"
    # the variable the agent does not list is left out, with the reason
    assert [(x["name"], x["reason"]) for x in job["remedies_left_out"]] == [
        ("CPU_AFFINITY_CONF.env", "agent npu-1 does not let a job set CPU_AFFINITY_CONF")]
    patch = kinds["patch"]
    assert patch["name"] == "norm_fusion_patch.diff" and patch["content"].startswith("--- a/modeling_tiny.py")
    assert patch["sha256"] == hashlib.sha256(patch["content"].encode()).hexdigest()
    assert job["verification"]["findings"] == [{"id": world["norm"].pk, "rule": NORM,
                                                "title": world["norm"].title}]
    # the agent is told the remedies with their content and sha256, never more
    told = agent_client(world["token"]).post("/api/agent/jobs/next/", {"wait_s": 0}, format="json").json()
    assert told["id"] == job["id"]
    assert [t["sha256"] for t in told["remedies"]] == [x["sha256"] for x in job["remedies"]]
    assert set(told["remedies"][0]) == {"kind", "name", "content", "sha256", "rule"}


def test_a_ticked_set_of_findings(world: dict[str, Any]) -> None:
    ids = list(world["before"].findings.values_list("id", flat=True))
    r = world["api"].post(f"/api/profiles/{world['before'].pk}/verify/",
                          {"findings": ids, "agent": world["agent"], "workload": "llama"}, format="json")
    assert r.status_code == 202, r.content
    assert {f["id"] for f in r.json()["verification"]["findings"]} == set(ids)
    assert {x["rule"] for x in r.json()["remedies"] if x["kind"] == "patch"} >= {NORM, "kv_cache_layout"}
    r = world["api"].post(f"/api/profiles/{world['before'].pk}/verify/",
                          {"findings": [ids[0], 10**9], "agent": world["agent"], "workload": "llama"},
                          format="json")
    assert r.status_code == 400 and r.json()["code"] == "unknown_findings"


def test_named_refusals_when_no_agent_can_run_it(world: dict[str, Any]) -> None:
    from captures.models import CaptureJob

    url = f"/api/findings/{world['norm'].pk}/verify/"
    world["register"]([], [])
    r = world["api"].post(url, {"agent": world["agent"], "workload": "llama"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "no_applicable_remedy"
    assert {item["kind"] for item in r.json()["left_out"]} == {"patch", "env"}
    assert all("does not apply" in item["reason"] for item in r.json()["left_out"])
    world["register"](["patch"], [], patchable=False)
    r = world["api"].post(url, {"agent": world["agent"], "workload": "llama"}, format="json")
    assert r.status_code == 400 and "declares no source folder" in str(r.json()["left_out"])
    r = world["api"].post(url, {"agent": world["agent"], "workload": "other"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "workload_unknown"
    r = world["api"].post(url, {}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "agent_needed"
    world["api"].post(f"/api/agents/{world['agent']}/revoke/")
    r = world["api"].post(url, {"agent": world["agent"], "workload": "llama"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "agent_unavailable"
    assert not CaptureJob.objects.exists()


def test_membership_on_every_verify_and_ledger_url(world: dict[str, Any]) -> None:
    body = {"agent": world["agent"], "workload": "llama", "findings": [world["norm"].pk]}
    stranger, viewer = world["api_for"](world["stranger"]), world["api_for"](world["viewer"])
    assert stranger.post(f"/api/findings/{world['norm'].pk}/verify/", body, format="json").status_code == 404
    assert stranger.post(f"/api/profiles/{world['before'].pk}/verify/", body,
                         format="json").status_code == 404
    assert stranger.get(f"/api/projects/{world['project'].pk}/fixes/").status_code == 404
    assert viewer.post(f"/api/findings/{world['norm'].pk}/verify/", body, format="json").status_code == 403
    assert viewer.get(f"/api/projects/{world['project'].pk}/fixes/").status_code == 200


def test_verdicts_ledger_and_a_fix_that_comes_back(world: dict[str, Any]) -> None:
    """The job's profile (norm fixed) compared with the original: a verdict per finding; the ledger shows
    found -> verified fixed; a later profile with the finding again is a regression against the baseline."""
    from analysis.comparisons import comparison_run
    from analysis.models import Comparison, FixVerification
    from analysis.regressions import comparison_auto_create
    from captures.models import CaptureJob
    from captures.verification import verification_compare_queue
    from profiles.models import Project

    api, project = world["api"], world["project"]
    job_id = api.post(f"/api/findings/{world['norm'].pk}/verify/",
                      {"agent": world["agent"], "workload": "llama"}, format="json").json()["id"]
    after = diagnosed(project, world["owner"], frozenset({"kv_cache_layout"}), world["tmp"], "after")
    CaptureJob.objects.filter(pk=job_id).update(profile=after, status="done")  # as the agent's upload does
    with transaction.atomic():
        comparison = verification_compare_queue(profile_id=after.pk)
    assert comparison is not None
    assert (comparison.base_id, comparison.candidate_id) == (world["before"].pk, after.pk)
    with transaction.atomic():
        assert verification_compare_queue(profile_id=after.pk) is None  # once
    comparison_run(comparison_id=comparison.pk)
    verdict = FixVerification.objects.get(comparison=comparison)
    assert verdict.rule == NORM and verdict.verdict == "fixed" and verdict.finding_id == world["norm"].pk
    assert verdict.data["measured_saving_us"] > 0 and verdict.data["estimated_saving_us"] > 0
    assert verdict.data["npu_figure"] is False and verdict.data["measured_on"] == "cpu"
    assert verdict.data["noise"]["verdict"] in ("better", "worse", "within noise")
    detail = api.get(f"/api/captures/{job_id}/").json()["verification"]
    assert detail["comparison"] == comparison.pk and detail["verdicts"][0]["verdict"] == "fixed"
    assert api.get(f"/api/comparisons/{comparison.pk}/").json()["verdicts"][0]["rule"] == NORM

    ledger = api.get(f"/api/projects/{project.pk}/fixes/").json()
    norm = next(f for f in ledger["fixes"] if f["rule"] == NORM)
    assert [e["event"] for e in norm["events"]] == ["found", "verified_fixed"] and norm["state"] == "fixed"
    assert norm["events"][1]["measured_saving_us"] == verdict.data["measured_saving_us"]

    # pinned baseline = the fixed run; a later run with the norm chains again regresses, whatever the metrics
    Project.objects.filter(pk=project.pk).update(baseline=after)
    again = diagnosed(project, world["owner"], frozenset({NORM, "kv_cache_layout"}), world["tmp"], "again")
    auto = comparison_auto_create(profile_id=again.pk)
    comparison_run(comparison_id=auto.pk)
    auto = Comparison.objects.get(pk=auto.pk)
    assert auto.is_regression and any(NORM in line and "found again" in line for line in auto.regression)
    from analysis.texts import localized_list  # the same line in Chinese, from its stored message

    zh = localized_list(auto.regression, auto.regression_messages, "zh-Hans")
    assert any(line.startswith(f"{NORM}：") and "现再次出现" in line for line in zh), zh
    norm = next(f for f in api.get(f"/api/projects/{project.pk}/fixes/").json()["fixes"] if f["rule"] == NORM)
    assert norm["events"][-1]["event"] == "regressed" and norm["state"] == "regressed"


def test_verify_on_agent_from_the_profile_page(world: dict[str, Any]) -> None:
    """The buttons are there for maintainers; one click makes the job and opens its page, which shows the
    remedies' content and sha256 before the agent takes it; a refusal comes back as a message."""
    from django.test import Client

    from captures.models import CaptureJob

    owner, viewer = Client(), Client()
    owner.force_login(world["owner"])
    viewer.force_login(world["viewer"])
    url = f"/profiles/{world['before'].pk}/"
    page = owner.get(url).content.decode()
    assert 'id="verify-form"' in page and f'name="only" value="{world["norm"].pk}"' in page
    assert "npu-1 · llama" in page
    assert 'id="verify-form"' not in viewer.get(url).content.decode()

    r = owner.post(f"/profiles/{world['before'].pk}/verify/", {"only": world["norm"].pk,
                                                               "target": f"{world['agent']}:llama"})
    job = CaptureJob.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/captures/{job.pk}/"
    page = owner.get(r["Location"]).content.decode()
    patch = next(x for x in job.remedies if x["kind"] == "patch")
    assert patch["sha256"] in page and "TASK_QUEUE_ENABLE=2" in page and "CPU_AFFINITY_CONF" in page
    assert job.verify_findings[0]["id"] == world["norm"].pk

    world["register"]([], [])
    r = owner.post(f"/profiles/{world['before'].pk}/verify/", {"finding": [world["norm"].pk],
                                                               "target": f"{world['agent']}:llama"},
                   follow=True)
    assert "cannot apply any remedy" in r.content.decode() and CaptureJob.objects.count() == 1
    assert viewer.post(f"/profiles/{world['before'].pk}/verify/",
                       {"only": world["norm"].pk}).status_code == 302
    assert CaptureJob.objects.count() == 1  # a viewer changes nothing
