"""Capture API and services on the test database (no agent process): who may do what."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from captures.models import Agent, CaptureJob, JobStatus
from captures.services import hash_token, job_claim_next
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db


def agent_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
    return client


@pytest.fixture
def setup(make_user, api_for) -> dict[str, Any]:
    owner, viewer, outsider = make_user("owner"), make_user("viewer"), make_user("outsider")
    project = project_with(owner, viewer=viewer)
    api = api_for(owner)
    made = api.post(f"/api/projects/{project.pk}/agents/", {"name": "npu-1"}, format="json")
    assert made.status_code == 201, made.content
    token = made.json()["token"]
    reg = agent_client(token).post("/api/agent/register/", {
        "hostname": "h1", "capabilities": {"npu_sku": "910B3"}, "version": "0.1.0",
        "workloads": [{"name": "llama", "kind": "python", "description": "decode", "command": "ignored"}],
    }, format="json")
    assert reg.status_code == 200, reg.content
    return {"owner": owner, "viewer": viewer, "outsider": outsider, "project": project, "api": api,
            "token": token, "agent_id": made.json()["id"], "api_for": api_for}


def test_token_shown_once_and_stored_hashed(setup) -> None:
    agent = Agent.objects.get(pk=setup["agent_id"])
    assert agent.token_hash == hash_token(setup["token"]) and setup["token"] not in str(agent.__dict__)
    listed = setup["api"].get(f"/api/projects/{setup['project'].pk}/agents/").json()
    assert "token" not in listed[0] and listed[0]["online"] is True
    # the host's command never reaches the server: only names, kinds, descriptions
    assert listed[0]["workloads"] == [{"name": "llama", "kind": "python", "description": "decode",
                                       "timeout_s": None, "patchable": False}]
    # an agent that reports no remedy policy accepts none
    assert listed[0]["capabilities"]["remedies"] == {"kinds": [], "env": []}


def test_viewer_cannot_register_agents_or_capture(setup) -> None:
    viewer_api = setup["api_for"](setup["viewer"])
    assert viewer_api.post(f"/api/projects/{setup['project'].pk}/agents/", {"name": "x"},
                           format="json").status_code == 403
    r = viewer_api.post(f"/api/projects/{setup['project'].pk}/captures/",
                        {"agent": setup["agent_id"], "workload": "llama"}, format="json")
    assert r.status_code == 403


def test_non_members_get_404_everywhere(setup) -> None:
    job = setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                            {"agent": setup["agent_id"], "workload": "llama"}, format="json").json()
    outsider = setup["api_for"](setup["outsider"])
    pid = setup["project"].pk
    assert outsider.get(f"/api/projects/{pid}/agents/").status_code == 404
    assert outsider.post(f"/api/projects/{pid}/captures/", {"agent": setup["agent_id"], "workload": "llama"},
                         format="json").status_code == 404
    assert outsider.get(f"/api/captures/{job['id']}/").status_code == 404
    assert outsider.post(f"/api/captures/{job['id']}/cancel/").status_code == 404
    assert outsider.post(f"/api/agents/{setup['agent_id']}/revoke/").status_code == 404


def test_params_outside_the_schema_and_unknown_workloads_are_refused(setup) -> None:
    url = f"/api/projects/{setup['project'].pk}/captures/"
    r = setup["api"].post(url, {"agent": setup["agent_id"], "workload": "llama", "params": {"command": "id"}},
                          format="json")
    assert r.status_code == 400 and "params.command" in str(r.json())
    r = setup["api"].post(url, {"agent": setup["agent_id"], "workload": "llama", "params": {"active": 10**7}},
                          format="json")
    assert r.status_code == 400
    r = setup["api"].post(url, {"agent": setup["agent_id"], "workload": "rm-rf"}, format="json")
    assert r.status_code == 400 and "workload" in r.json()
    assert CaptureJob.objects.count() == 0


def test_agent_token_opens_no_user_endpoint_and_user_token_no_agent_endpoint(setup) -> None:
    agent = agent_client(setup["token"])
    assert agent.get(f"/api/projects/{setup['project'].pk}/").status_code in (401, 403)
    assert agent.get("/api/projects/").status_code in (401, 403)
    assert setup["api"].post("/api/agent/jobs/next/", {}, format="json").status_code in (401, 403)
    assert agent_client("pyag_not-a-token").post("/api/agent/heartbeat/", {},
                                                 format="json").status_code == 401


def test_a_body_that_is_not_an_object_is_a_400_not_a_crash(setup) -> None:
    agent = agent_client(setup["token"])
    for path in ("/api/agent/heartbeat/", "/api/agent/jobs/next/", "/api/agent/register/"):
        answer = agent.post(path, [1, 2], format="json")
        assert answer.status_code == 400, (path, answer.content)
        assert "JSON object" in answer.json()["detail"], answer.content


def test_a_second_agent_cannot_touch_the_first_agents_jobs(setup, make_user) -> None:
    other_owner = make_user("other")
    other_project = project_with(other_owner)
    other_token = setup["api_for"](other_owner).post(
        f"/api/projects/{other_project.pk}/agents/", {"name": "gpu-1"}, format="json").json()["token"]
    job = setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                            {"agent": setup["agent_id"], "workload": "llama"}, format="json").json()
    other = agent_client(other_token)
    assert other.post("/api/agent/jobs/next/", {}, format="json").status_code == 204  # not handed out
    for path in ("status/", "log/", "upload/"):
        assert other.post(f"/api/agent/jobs/{job['id']}/{path}", {"status": "failed"},
                          format="json").status_code == 404
    assert CaptureJob.objects.get(pk=job["id"]).status == JobStatus.QUEUED


def test_a_job_is_claimed_once(setup) -> None:
    setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                      {"agent": setup["agent_id"], "workload": "llama"}, format="json")
    agent = Agent.objects.get(pk=setup["agent_id"])
    first = job_claim_next(agent=agent)
    assert first is not None and first.status == JobStatus.CLAIMED
    assert job_claim_next(agent=agent) is None
    answer = agent_client(setup["token"]).post("/api/agent/jobs/next/", {}, format="json")
    assert answer.status_code == 204


@pytest.mark.django_db(transaction=True)
def test_two_claimers_racing_get_the_job_once(setup) -> None:
    """Two agent processes with one token poll at the same instant: one claims the job, the other gets
    nothing (not an error), whichever wins; repeated to give the race its chances."""
    import threading

    from django.db import connection

    agent = Agent.objects.get(pk=setup["agent_id"])
    for _ in range(20):
        setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                          {"agent": setup["agent_id"], "workload": "llama"}, format="json")
        barrier = threading.Barrier(2)
        got: list[Any] = []

        def claim(barrier: threading.Barrier, got: list[Any]) -> None:
            try:
                barrier.wait()
                got.append(job_claim_next(agent=agent))
            except Exception as exc:  # a lost race must not raise
                got.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=claim, args=(barrier, got)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not [g for g in got if isinstance(g, Exception)], got
        claimed = [g for g in got if g is not None]
        assert len(claimed) == 1 and claimed[0].status == JobStatus.CLAIMED, got


def test_agent_transitions_are_checked(setup) -> None:
    job = setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                            {"agent": setup["agent_id"], "workload": "llama"}, format="json").json()
    agent = agent_client(setup["token"])
    # not claimed yet: nothing may be reported
    assert agent.post(f"/api/agent/jobs/{job['id']}/status/", {"status": "running"},
                      format="json").status_code == 409
    assert agent.post("/api/agent/jobs/next/", {}, format="json").json()["id"] == job["id"]
    assert agent.post(f"/api/agent/jobs/{job['id']}/status/", {"status": "done"},
                      format="json").status_code == 409
    ok = agent.post(f"/api/agent/jobs/{job['id']}/status/", {"status": "running"}, format="json")
    assert ok.status_code == 200 and ok.json() == {"status": "running", "cancel": False}
    setup["api"].post(f"/api/captures/{job['id']}/cancel/")
    logged = agent.post(f"/api/agent/jobs/{job['id']}/log/", {"tail": "x"}, format="json")
    assert logged.json()["cancel"] is True
    beat = agent.post("/api/agent/heartbeat/", {"running": [job["id"]]}, format="json")
    assert beat.json() == {"cancel": [job["id"]]}


def test_revoked_token_is_refused_and_queued_jobs_cancelled(setup) -> None:
    job = setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                            {"agent": setup["agent_id"], "workload": "llama"}, format="json").json()
    assert setup["api"].post(f"/api/agents/{setup['agent_id']}/revoke/").status_code == 200
    assert agent_client(setup["token"]).post("/api/agent/jobs/next/", {}, format="json").status_code == 401
    assert CaptureJob.objects.get(pk=job["id"]).status == JobStatus.CANCELLED
    # the server's reason in the reader's language; the English one stays the API's `message`
    answer = setup["api"].get(f"/api/captures/{job['id']}/?lang=zh-Hans").json()
    assert answer["message"] == "the agent was revoked"
    assert answer["message_localized"] == "采集代理的令牌已被吊销"
    assert answer["message_i18n"] == {"msgid": "the agent was revoked", "params": {}}


def test_job_messages_in_the_readers_language_and_the_agents_own_words_as_they_came(setup, client,
                                                                                     settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    settings.PYPTO_CAPTURE_AGENT_STALE_S = 60
    url = f"/api/projects/{setup['project'].pk}/captures/"
    silent, told = (setup["api"].post(url, {"agent": setup["agent_id"], "workload": "llama"},
                                      format="json").json()["id"] for _ in range(2))
    agent = agent_client(setup["token"])
    for job_id in (silent, told):
        assert agent.post("/api/agent/jobs/next/", {}, format="json").json()["id"] == job_id
    agent.post(f"/api/agent/jobs/{silent}/status/", {"status": "running"}, format="json")
    agent.post(f"/api/agent/jobs/{told}/status/", {"status": "failed", "message": "torch_npu import failed"},
               format="json")
    Agent.objects.filter(pk=setup["agent_id"]).update(last_seen=timezone.now() - timedelta(seconds=61))
    zh = setup["api"].get(f"/api/captures/{silent}/?lang=zh-Hans").json()
    assert zh["status"] == "failed" and zh["message"].startswith("agent npu-1 stopped sending heartbeats at ")
    localized = zh["message_localized"]
    assert localized.startswith("采集代理 npu-1 自 ") and "「运行中」" in localized
    assert "超过 60 秒无请求" in localized
    own = setup["api"].get(f"/api/captures/{told}/?lang=zh-Hans").json()
    assert own["message_localized"] == own["message"] == "torch_npu import failed"
    assert own["message_i18n"] is None
    client.force_login(setup["owner"])
    page = client.get(f"/captures/{silent}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "采集代理 npu-1 自 " in page and "stopped sending heartbeats" not in page
    page = client.get(f"/captures/{silent}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "agent npu-1 stopped sending heartbeats at " in page


def test_pages_render_for_members(setup, client, settings) -> None:
    # pages only: plain static storage, so the test needs no collectstatic manifest
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    client.force_login(setup["owner"])
    pid = setup["project"].pk
    page = client.get(f"/projects/{pid}/agents/")
    assert page.status_code == 200 and b"npu-1" in page.content and b"910B3" in page.content
    form = client.get(f"/projects/{pid}/capture/")
    assert form.status_code == 200 and b"llama" in form.content and b"aic_metrics" in form.content
    made = client.post(f"/projects/{pid}/capture/", {"target": f"{setup['agent_id']}:llama", "active": "2",
                                                     "aic_metrics": "Memory"})
    job = CaptureJob.objects.get()
    assert made.status_code == 302 and job.params["active"] == 2 and job.params["aic_metrics"] == "Memory"
    assert client.get(f"/captures/{job.pk}/").status_code == 200
    # the project page links the agents page, for every member (a viewer sees agents and jobs, read-only)
    client.force_login(setup["viewer"])
    assert f'href="/projects/{pid}/agents/"'.encode() in client.get(f"/projects/{pid}/").content
    assert client.get(f"/projects/{pid}/agents/").status_code == 200
    client.force_login(setup["outsider"])
    assert client.get(f"/projects/{pid}/agents/").status_code == 404
    assert client.get(f"/captures/{job.pk}/").status_code == 404


def test_a_cancelled_upload_is_refused_chunks_and_can_be_deleted(setup,
                                                                 django_capture_on_commit_callbacks) -> None:
    from profiles.models import UploadSession
    from profiles.services import partial_upload_path

    job = setup["api"].post(f"/api/projects/{setup['project'].pk}/captures/",
                            {"agent": setup["agent_id"], "workload": "llama"}, format="json").json()
    agent = agent_client(setup["token"])
    agent.post("/api/agent/jobs/next/", {}, format="json")
    for step in ("running", "uploading"):
        assert agent.post(f"/api/agent/jobs/{job['id']}/status/", {"status": step},
                          format="json").status_code == 200
    opened = agent.post(f"/api/agent/jobs/{job['id']}/upload/", {"filename": "c.tar.gz", "size": 8},
                        format="json")
    assert opened.status_code == 201, opened.content
    url = opened.json()["url"]
    put = agent.put(url, b"1234", content_type="application/octet-stream", HTTP_CONTENT_RANGE="bytes 0-3/8")
    assert put.status_code == 200 and put.json()["offset"] == 4
    setup["api"].post(f"/api/captures/{job['id']}/cancel/")
    put = agent.put(url, b"5678", content_type="application/octet-stream", HTTP_CONTENT_RANGE="bytes 4-7/8")
    assert put.status_code == 409 and put.json()["cancel"] is True and put.json()["status"] == "uploading"
    assert agent.post(url.rstrip("/") + "/complete/", {}, format="json").status_code == 409
    session = UploadSession.objects.get()
    assert session.received == 4
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.delete(url).status_code == 204
    assert not UploadSession.objects.exists() and not partial_upload_path(session).exists()
    assert CaptureJob.objects.get(pk=job["id"]).upload_id is None
    assert agent.delete(url).status_code == 404  # aborting twice is harmless
    ok = agent.post(f"/api/agent/jobs/{job['id']}/status/", {"status": "cancelled"}, format="json")
    assert ok.status_code == 200 and ok.json()["status"] == "cancelled"


def test_claim_sets_a_deadline_and_a_late_job_is_failed_on_read(setup, settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.PYPTO_CAPTURE_GRACE_S = 30
    settings.PYPTO_CAPTURE_DEFAULT_TIMEOUT_S = 1000
    agent = agent_client(setup["token"])
    reg = agent.post("/api/agent/register/", {"hostname": "h1", "workloads": [
        {"name": "llama", "kind": "python", "timeout_s": 120}, {"name": "untimed", "kind": "python"},
        {"name": "vllm", "kind": "vllm", "timeout_s": 100}]}, format="json")
    assert reg.json()["heartbeat_s"] == 15  # a third of the default 300 s window, at most 15
    url = f"/api/projects/{setup['project'].pk}/captures/"
    ids = [setup["api"].post(url, {"agent": setup["agent_id"], "workload": w, "params": p},
                             format="json").json()["id"]
           for w, p in (("llama", {}), ("untimed", {}), ("vllm", {"duration_s": 20}))]
    budgets = {}
    for _ in ids:
        claimed = agent.post("/api/agent/jobs/next/", {}, format="json").json()
        job = CaptureJob.objects.get(pk=claimed["id"])
        budgets[job.workload] = round((job.deadline - job.claimed_at).total_seconds())
    # the reported timeout (else the project default) plus the grace; vLLM: duration + stop + settle waits
    assert budgets == {"llama": 150, "untimed": 1030, "vllm": 2 * 100 + 20 + 30}

    late = ids[0]
    assert agent.post(f"/api/agent/jobs/{late}/status/", {"status": "running"},
                      format="json").status_code == 200
    assert setup["api"].get(f"/api/captures/{late}/").json()["status"] == "running"  # the agent is online
    CaptureJob.objects.filter(pk=late).update(deadline=timezone.now() - timedelta(seconds=1))  # time passes
    answer = setup["api"].get(f"/api/captures/{late}/").json()
    assert answer["status"] == "failed"
    assert "deadline" in answer["message"] and "npu-1 is online" in answer["message"]
    # the agent still running it is told to stop, by its next
    # log post or heartbeat; its late reports change nothing
    assert agent.post(f"/api/agent/jobs/{late}/log/", {"tail": "x"}, format="json").json()["cancel"] is True
    beat = agent.post("/api/agent/heartbeat/", {"running": [late]}, format="json")
    assert beat.json() == {"cancel": [late]}
    r = agent.post(f"/api/agent/jobs/{late}/status/", {"status": "uploading"}, format="json")
    assert r.status_code == 409 and CaptureJob.objects.get(pk=late).status == JobStatus.FAILED
    # the others, within their deadlines and with a live agent, are untouched by reading the list
    listed = {j["id"]: j["status"] for j in setup["api"].get(url).json()}
    assert listed == {late: "failed", ids[1]: "claimed", ids[2]: "claimed"}


def test_a_silent_agents_jobs_fail_once_on_read(setup, settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.PYPTO_CAPTURE_AGENT_STALE_S = 60
    url = f"/api/projects/{setup['project'].pk}/captures/"
    job_id = setup["api"].post(url, {"agent": setup["agent_id"], "workload": "llama"},
                               format="json").json()["id"]
    queued = setup["api"].post(url, {"agent": setup["agent_id"], "workload": "llama"},
                               format="json").json()["id"]
    agent = agent_client(setup["token"])
    agent.post("/api/agent/jobs/next/", {}, format="json")
    agent.post(f"/api/agent/jobs/{job_id}/status/", {"status": "running"}, format="json")
    last = timezone.now() - timedelta(seconds=61)
    Agent.objects.filter(pk=setup["agent_id"]).update(last_seen=last)  # the agent went silent a minute ago
    listed = {j["id"]: j for j in setup["api"].get(url).json()}
    assert listed[job_id]["status"] == "failed" and listed[queued]["status"] == "queued"  # a queued job waits
    assert listed[job_id]["message"].startswith(
        f"agent npu-1 stopped sending heartbeats at {last:%Y-%m-%d %H:%M:%S} UTC")
    finished = CaptureJob.objects.get(pk=job_id).finished_at
    assert setup["api"].get(f"/api/captures/{job_id}/").json()["finished_at"] is not None
    assert CaptureJob.objects.get(pk=job_id).finished_at == finished  # a second read changes nothing
