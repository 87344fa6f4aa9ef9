"""The real ``pypto agent`` process against a live server: capture end to end, refusals, revoke, a killed
agent mid-upload, cancel. Waiting is polling with a ceiling, never a timed assertion.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.web.helpers import project_with

pytest.importorskip("torch")

WORKLOADS = Path(__file__).resolve().parent / "workloads"
REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 240.0
POLL_S = 2  # the agents' long poll: the server holds a request for a job up to this long


class AgentProcess:
    def __init__(self, server: str, token: str, config: Path, log: Path, env: dict[str, str]) -> None:
        self.args = [sys.executable, "-m", "pypto_core", "agent", "--server", server, "--token", token,
                     "--config", str(config), "--poll-s", str(POLL_S), "--retry-max-s", "1",
                     "--log-interval-s", "0.3", "--chunk-bytes", "4096"]
        self.log, self.env = log, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, cwd=REPO, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


@pytest.fixture
def env_for_agent(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["RUN_COUNTER_FILE"] = str(tmp_path / "runs.txt")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONWARNINGS"] = "ignore"
    return env


def write_config(tmp_path: Path) -> Path:
    py = sys.executable
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f"""
state_dir = "{tmp_path / 'state'}"
name = "test-host"

[workloads.tiny-llama]
kind = "python"
command = ["{py}", "{WORKLOADS / 'tiny_llama.py'}", "4"]
description = "random tiny Llama, 4 tokens"
timeout_s = 300

[workloads.matmul]
kind = "python"
command = ["{py}", "{WORKLOADS / 'matmul_steps.py'}"]
timeout_s = 120

[workloads.sleeper]
kind = "python"
command = ["{py}", "{WORKLOADS / 'sleeper.py'}"]
timeout_s = 300
""")
    return cfg


@pytest.fixture
def deployment(transactional_db: None, live_server: Any, make_user, api_for, tmp_path: Path,
               env_for_agent: dict[str, str]) -> Iterator[dict[str, Any]]:
    owner = make_user("owner")
    project = project_with(owner)
    api = api_for(owner)
    made = api.post(f"/api/projects/{project.pk}/agents/", {"name": "npu-host"}, format="json").json()
    agents: list[AgentProcess] = []

    def start_agent(token: str | None = None, **extra_env: str) -> AgentProcess:
        agent = AgentProcess(live_server.url, token or made["token"], write_config(tmp_path),
                             tmp_path / f"agent{len(agents)}.log", {**env_for_agent, **extra_env})
        agents.append(agent.start())
        return agent

    yield {"api": api, "project": project, "agent_id": made["id"], "token": made["token"],
           "start_agent": start_agent, "runs": Path(env_for_agent["RUN_COUNTER_FILE"]), "tmp": tmp_path}
    for agent in agents:
        agent.kill()


def registered(agent_id: int) -> bool:
    from captures.models import Agent

    return bool(Agent.objects.get(pk=agent_id).workloads)


def job_row(job_id: int) -> Any:
    from captures.models import CaptureJob

    return CaptureJob.objects.select_related("upload", "profile").get(pk=job_id)


def wait_job(job_id: int, statuses: tuple[str, ...], agent: AgentProcess) -> Any:
    def reached() -> Any:
        job = job_row(job_id)
        return job if job.status in statuses else None

    try:
        return wait_until(reached, f"job {job_id} to reach {statuses}", limit_s=LIMIT_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\njob: {job_row(job_id).__dict__}\nagent log:\n{agent.tail()}") from None


def capture(d: dict[str, Any], workload: str, params: dict[str, Any] | None = None) -> int:
    r = d["api"].post(f"/api/projects/{d['project'].pk}/captures/",
                      {"agent": d["agent_id"], "workload": workload, "params": params or {}}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def runs(d: dict[str, Any]) -> int:
    return len(d["runs"].read_text().split()) if d["runs"].exists() else 0


@pytest.mark.slow
@pytest.mark.worker
def test_capture_end_to_end_tiny_llama(deployment: dict[str, Any], worker: Any) -> None:
    from profiles.models import Profile

    agent = deployment["start_agent"]()
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    caps = job_row_agent(deployment["agent_id"]).capabilities
    assert caps["torch"] and caps["backend"] == "cpu" and caps["npu"] == []

    job_id = capture(deployment, "tiny-llama", {"warmup": 1, "active": 2, "record_shapes": True})
    job = wait_job(job_id, ("done", "failed", "cancelled"), agent)
    assert job.status == "done", (job.message, agent.tail())
    assert "generated" in job.log_tail and "running" in job.log_tail
    assert runs(deployment) == 1
    assert job.upload.status == "complete" and job.upload.filename == f"capture-{job_id}.tar.gz"
    assert Profile.objects.filter(project=deployment["project"]).count() == 1

    # the page links the profile; the profile enters the normal pipeline
    detail = deployment["api"].get(f"/api/captures/{job_id}/").json()
    assert detail["profile"] == job.profile_id
    assert detail["profile_url"].endswith(f"/profiles/{job.profile_id}/")

    def finished() -> Any:
        p = Profile.objects.get(pk=job.profile_id)
        return p if p.status in ("ready", "failed") else None

    profile = wait_until(finished, "the pipeline", worker, limit_s=LIMIT_S)
    assert profile.status == "ready", profile.error
    findings = deployment["api"].get(f"/api/profiles/{profile.pk}/findings/")
    assert findings.status_code == 200 and findings.json()["profile"]["format"] == "kineto"


def job_row_agent(agent_id: int) -> Any:
    from captures.models import Agent

    return Agent.objects.get(pk=agent_id)


@pytest.mark.slow
def test_agent_refuses_unknown_workloads_and_bad_params(deployment: dict[str, Any]) -> None:
    """A compromised server writes jobs straight into its database: the agent still refuses them."""
    from captures.models import CaptureJob

    agent = deployment["start_agent"]()
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    kw = {"project": deployment["project"], "agent_id": deployment["agent_id"]}
    unknown = CaptureJob.objects.create(workload="rm-rf", **kw)
    bad = CaptureJob.objects.create(workload="matmul", params={"active": 3, "shell": "id"}, **kw)
    unknown = wait_job(unknown.pk, ("failed",), agent)
    bad = wait_job(bad.pk, ("failed",), agent)
    assert "not in this agent's config" in unknown.message
    assert "params.shell" in bad.message
    assert runs(deployment) == 0  # nothing ran


@pytest.mark.slow
def test_revoked_token_stops_the_agent(deployment: dict[str, Any]) -> None:
    agent = deployment["start_agent"]()
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    assert deployment["api"].post(f"/api/agents/{deployment['agent_id']}/revoke/").status_code == 200
    wait_until(lambda: agent.proc.poll() is not None, "the agent to stop", limit_s=LIMIT_S)
    assert agent.proc.returncode == 1 and "refused" in agent.tail()
    again = deployment["start_agent"]()  # a restart with the revoked token is refused at once
    wait_until(lambda: again.proc.poll() is not None, "the agent to stop", limit_s=LIMIT_S)
    assert again.proc.returncode == 1


@pytest.mark.slow
@pytest.mark.worker
def test_killed_agent_resumes_its_upload_and_the_job_finishes_once(deployment: dict[str, Any],
                                                                   worker: Any) -> None:
    """The profile the resumed upload made is diagnosed before the test ends: the session's worker, when an
    earlier test in this process started it, takes the new profile's task, and a worker still writing when the
    test's database is flushed deadlocks the flush (CI, 9cee8be)."""
    from profiles.models import Profile, UploadSession

    hold = deployment["tmp"] / "hold"
    hold.touch()  # the agent pauses after each chunk while this exists
    agent = deployment["start_agent"](PYPTO_AGENT_HOLD_FILE=str(hold))
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    job_id = capture(deployment, "matmul", {"active": 4})

    def mid_upload() -> bool:
        job = job_row(job_id)
        return (job.status == "uploading" and job.upload is not None
                and 0 < job.upload.received < job.upload.size)

    try:
        wait_until(mid_upload, "the upload to start", limit_s=LIMIT_S)
    except AssertionError:
        raise AssertionError(agent.tail()) from None
    agent.kill()  # SIGKILL: no cleanup, the ledger and upload state stay as they were
    received = job_row(job_id).upload.received
    hold.unlink()
    second = deployment["start_agent"]()
    job = wait_job(job_id, ("done", "failed"), second)
    assert job.status == "done", (job.message, second.tail())
    assert runs(deployment) == 1  # the workload ran once
    assert UploadSession.objects.filter(project=deployment["project"]).count() == 1
    assert job.upload.received == job.upload.size > received
    assert Profile.objects.filter(project=deployment["project"]).count() == 1
    assert "resuming its upload" in second.tail()

    def settled() -> Any:
        p = Profile.objects.get(pk=job.profile_id)
        return p if p.status in ("ready", "failed") else None

    profile = wait_until(settled, "the pipeline", worker, limit_s=LIMIT_S)
    assert profile.status == "ready", profile.error


@pytest.mark.slow
def test_cancel_during_the_upload_aborts_it(deployment: dict[str, Any]) -> None:
    """A cancel while the agent uploads (4 KiB chunks, held mid-way): the next chunk is refused with the
    cancelled state, the agent deletes the open upload and the job ends cancelled, with no profile."""
    from profiles.models import Profile, UploadSession
    from profiles.services import partial_upload_path

    hold = deployment["tmp"] / "hold"
    hold.touch()
    agent = deployment["start_agent"](PYPTO_AGENT_HOLD_FILE=str(hold))
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    job_id = capture(deployment, "matmul", {"active": 4})

    def mid_upload() -> Any:
        job = job_row(job_id)
        midway = job.status == "uploading" and job.upload and 0 < job.upload.received < job.upload.size
        return job if midway else None

    try:
        job = wait_until(mid_upload, "the upload to start", limit_s=LIMIT_S)
    except AssertionError:
        raise AssertionError(agent.tail()) from None
    partial = partial_upload_path(job.upload)
    assert partial.exists()
    r = deployment["api"].post(f"/api/captures/{job_id}/cancel/")
    assert r.status_code == 200 and r.json()["status"] == "uploading" and r.json()["cancel_requested"] is True
    hold.unlink()  # the agent sends its next chunk (or hears the cancel in a heartbeat first)
    job = wait_job(job_id, ("cancelled", "failed", "done"), agent)
    assert job.status == "cancelled", (job.message, agent.tail())
    assert "cancelled" in job.message and job.profile_id is None and job.upload_id is None
    assert not UploadSession.objects.filter(project=deployment["project"]).exists()
    assert not Profile.objects.filter(project=deployment["project"]).exists()
    wait_until(lambda: not partial.exists(), "the partial upload to be removed", limit_s=30)
    assert runs(deployment) == 1
    assert agent.proc.poll() is None  # the agent goes on serving jobs


@pytest.mark.slow
def test_a_killed_agents_job_fails_after_the_staleness_window_and_is_not_rerun(
    deployment: dict[str, Any], settings: Any
) -> None:
    """SIGKILL during a long workload: the server fails the job once the agent has been silent for the
    (shortened) window, naming the agent; the agent restarted later does not run it again."""
    settings.PYPTO_CAPTURE_AGENT_STALE_S = 4  # the live server runs in this process: it reads this setting
    agent = deployment["start_agent"]()
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    job_id = capture(deployment, "sleeper")
    pid = None
    try:
        # alive and heartbeating (told every 1 s): running well past the window is fine
        wait_until(lambda: "tick 40" in job_row(job_id).log_tail, "the workload to run 8 s", limit_s=LIMIT_S)
        pid = int(deployment["runs"].read_text().split()[0])
        detail = deployment["api"].get(f"/api/captures/{job_id}/").json()
        assert detail["status"] == "running", detail
        agent.kill()
        assert deployment["api"].get(f"/api/captures/{job_id}/").json()["status"] == "running"  # not yet

        def failed() -> Any:
            answer = deployment["api"].get(f"/api/captures/{job_id}/").json()  # the check runs on read
            return answer if answer["status"] != "running" else None

        answer = wait_until(failed, "the server to fail the job", limit_s=60)
        assert answer["status"] == "failed", answer
        assert answer["message"].startswith("agent npu-host stopped sending heartbeats at "), \
            answer["message"]
        assert answer["finished_at"] is not None
    finally:
        if pid is not None:  # the workload runs in its own session: the agent's SIGKILL did not reach it
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    second = deployment["start_agent"]()
    wait_until(lambda: "not run twice" in second.tail(), "the restarted agent to settle the job",
               limit_s=LIMIT_S)
    job = job_row(job_id)
    assert job.status == "failed" and "stopped sending heartbeats" in job.message  # kept, not overwritten
    assert runs(deployment) == 1 and second.proc.poll() is None


@pytest.mark.slow
def test_cancel_stops_the_running_workload(deployment: dict[str, Any]) -> None:
    agent = deployment["start_agent"]()
    wait_until(lambda: registered(deployment["agent_id"]), "agent registration", limit_s=LIMIT_S)
    job_id = capture(deployment, "sleeper")
    wait_until(lambda: "tick 3" in job_row(job_id).log_tail, "the workload to run", limit_s=LIMIT_S)
    pid = int(deployment["runs"].read_text().split()[0])
    r = deployment["api"].post(f"/api/captures/{job_id}/cancel/")
    assert r.status_code == 200 and r.json()["cancel_requested"] is True
    job = wait_job(job_id, ("cancelled", "failed", "done"), agent)
    assert job.status == "cancelled", (job.message, agent.tail())
    wait_until(lambda: not _alive(pid), "the workload process to end", limit_s=60)
    # a queued job cancelled before any agent polls never runs. The killed agent's last long poll can still
    # be held by the server for up to POLL_S, and a job made then is handed to it (the long poll working:
    # CI once saw "claimed" here on a loaded machine); past that, no agent is asking
    agent.kill()
    time.sleep(POLL_S + 2)
    queued = capture(deployment, "sleeper")
    deployment["api"].post(f"/api/captures/{queued}/cancel/")
    assert job_row(queued).status == "cancelled" and runs(deployment) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of a killed group counts as gone
    try:
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except OSError:
        return False
