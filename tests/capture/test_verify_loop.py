"""Verify a fix end to end on CPU (issue 21), with real processes: the live server, a Celery worker and the
``pypto agent``. The NPU cannot exist here: the workload runs against the CPU stand-in of torch_npu
(tests/capture/npu_standin, which writes torch_npu's Kineto export with CPU times as kernel times), so the
times measured are not NPU figures, and the page says so.

The loop: the tiny Llama workload is captured; the norm-fusion diff made against its model file is sent
with a verification job; the agent applies it to a scratch copy of the workload's source; the new profile
is compared with the original automatically; the finding is marked fixed with the change of its kernels.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.test_agent import (  # noqa: F401  (env_for_agent: a fixture)
    LIMIT_S,
    AgentProcess,
    env_for_agent,
    job_row,
    registered,
    runs,
    wait_job,
)
from tests.conftest import wait_until
from tests.web.helpers import project_with

pytest.importorskip("torch")
pytest.importorskip("transformers")

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "workloads" / "llama_src"
STANDIN = HERE / "npu_standin"
SLEEPER = HERE / "workloads" / "sleeper.py"
REPO = HERE.parents[1]
NORM = "norm_launch_overhead"


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def write_config(tmp: Path, source: Path, sleeper_src: Path) -> Path:
    py = sys.executable
    cfg = tmp / "agent.toml"
    cfg.write_text(f"""
state_dir = "{tmp / 'state'}"
name = "cpu-host"
allow_remedies = ["patch", "env"]
allow_env = ["TASK_QUEUE_ENABLE"]

[workloads.tiny-llama]
kind = "python"
command = ["{py}", "{source / 'run.py'}", "4", "{tmp / 'weights'}"]
cwd = "{source}"
source = "{source}"
env = {{ PYTHONPATH = "{REPO}:{STANDIN}" }}
timeout_s = 300

[workloads.sleeper]
kind = "python"
command = ["{py}", "{sleeper_src / 'sleeper.py'}"]
source = "{sleeper_src}"
timeout_s = 300
""")
    return cfg


@pytest.fixture
# (env_for_agent: the fixture imported above, which pyflakes takes for a redefinition)
def loop(transactional_db: None, live_server: Any, make_user, api_for, tmp_path: Path,
         env_for_agent: dict[str, str]) -> Iterator[dict[str, Any]]:  # noqa: F811
    from django.test import Client

    owner = make_user("owner")
    project = project_with(owner)
    api = api_for(owner)
    browser = Client()  # the pages, as a signed-in member sees them
    browser.force_login(owner)
    made = api.post(f"/api/projects/{project.pk}/agents/", {"name": "cpu-host"}, format="json").json()
    source = tmp_path / "llama_src"
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
    sleeper_src = tmp_path / "sleeper_src"
    sleeper_src.mkdir()
    shutil.copy(SLEEPER, sleeper_src / "sleeper.py")
    (sleeper_src / "model.py").write_text("FUSED = False\n")
    agent = AgentProcess(live_server.url, made["token"], write_config(tmp_path, source, sleeper_src),
                         tmp_path / "agent.log", env_for_agent).start()
    try:
        wait_until(lambda: registered(made["id"]), "agent registration", limit_s=LIMIT_S)
        yield {"api": api, "browser": browser, "owner": owner, "server": live_server.url, "project": project,
               "agent_id": made["id"], "agent": agent, "source": source,
               "sleeper_src": sleeper_src, "tmp": tmp_path, "env": env_for_agent,
               "runs": Path(env_for_agent["RUN_COUNTER_FILE"])}
    finally:
        agent.kill()


def wait_ready(profile_id: int, worker: Any) -> Any:
    from profiles.models import Profile

    def finished() -> Any:
        p = Profile.objects.get(pk=profile_id)
        return p if p.status in ("ready", "failed") else None

    profile = wait_until(finished, f"profile {profile_id} through the pipeline", worker, limit_s=LIMIT_S)
    assert profile.status == "ready", profile.error
    return profile


@pytest.mark.slow
@pytest.mark.worker
def test_verify_the_norm_fusion_patch_on_the_agent(loop: dict[str, Any], worker: Any) -> None:
    api, agent = loop["api"], loop["agent"]
    original = tree_digest(loop["source"])
    r = api.post(f"/api/projects/{loop['project'].pk}/captures/",
                 {"agent": loop["agent_id"], "workload": "tiny-llama", "params": {"warmup": 1, "active": 4}},
                 format="json")
    assert r.status_code == 201, r.content
    first = wait_job(r.json()["id"], ("done", "failed", "cancelled"), agent)
    assert first.status == "done", (first.message, agent.tail())
    base = wait_ready(first.profile_id, worker)
    findings = api.get(f"/api/profiles/{base.pk}/findings/").json()
    assert findings["profile"]["device_vendor"] == "ascend"  # the stand-in's kernels
    norm = next(f for f in findings["findings"] if f["rule"] == NORM)

    # the model file: the norm-fusion patch then also comes as a diff against it
    with open(loop["source"] / "modeling_tiny.py", "rb") as fh:
        assert api.post(f"/api/profiles/{base.pk}/model-file/", {"file": fh},
                        format="multipart").status_code == 202

    def diff_made() -> Any:
        names = [a["name"] for a in api.get(f"/api/profiles/{base.pk}/artifacts/").json()]
        return "norm_fusion_patch.diff" in names

    wait_until(diff_made, "the remedies against the model file", worker, limit_s=LIMIT_S)

    # one click: the same workload, the same params (from the capture), the patch applied on the agent
    r = api.post(f"/api/findings/{norm['id']}/verify/", {}, format="json")
    assert r.status_code == 202, r.content
    job = r.json()
    assert job["workload"] == "tiny-llama" and job["params"] == {"warmup": 1, "active": 4}
    patch = next(x for x in job["remedies"] if x["kind"] == "patch")
    assert patch["sha256"] == hashlib.sha256(patch["content"].encode()).hexdigest()
    page = loop["browser"].get(f"/captures/{job['id']}/").content.decode()
    assert patch["sha256"] in page and "TASK_QUEUE_ENABLE=2" in page  # shown before it runs

    done = wait_job(job["id"], ("done", "failed", "cancelled"), agent)
    assert done.status == "done", (done.message, agent.tail())
    applied = f"applied patch norm_fusion_patch.diff (sha256 {patch['sha256'][:12]}): modeling_tiny.py"
    assert applied in done.log_tail
    assert "applied env TASK_QUEUE_ENABLE.env" in done.log_tail and "norms fused: True" in done.log_tail
    assert runs(loop) == 2
    assert tree_digest(loop["source"]) == original  # the original source was never written
    assert not (loop["tmp"] / "state" / "jobs" / str(job["id"]) / "source").exists()  # scratch copy gone
    wait_ready(done.profile_id, worker)

    def verdicts() -> Any:
        v = api.get(f"/api/captures/{job['id']}/").json()["verification"]
        return v if v["verdicts"] else None

    verification = wait_until(verdicts, "the automatic comparison and its verdicts", worker, limit_s=LIMIT_S)
    verdict = verification["verdicts"][0]
    # fixed: the chain is gone (on a busy CPU the fused norms may still wait on the host: the rule then flags
    # only those, a different finding named beside the verdict)
    assert (verdict["rule"], verdict["verdict"], verdict["finding"]) == (NORM, "fixed", norm["id"]), verdict
    assert set(verdict["flagged_after"]) <= {"RmsNorm", "AddRmsNorm"}
    norm_block = next(b for b in verdict["kernels"] if b["block"] == "norm")
    assert {"Rsqrt", "ReduceMean", "Pow"} <= set(norm_block["base_op_types"])  # the unfused chain before
    assert "RmsNorm" in norm_block["new_op_types"] and "Rsqrt" not in norm_block["new_op_types"]  # gone after
    assert isinstance(verdict["measured_saving_us"], float) and verdict["estimated_saving_us"] > 0
    assert verdict["npu_figure"] is False and verdict["measured_on"] == "cpu"

    url = f"/comparisons/{verification['comparison']}/?findings={norm['id']}"
    page = loop["browser"].get(url).content.decode()
    assert "not an NPU figure" in page and "verdict-fixed" in page
    ledger = api.get(f"/api/projects/{loop['project'].pk}/fixes/").json()
    events = next(f for f in ledger["fixes"] if f["rule"] == NORM)["events"]
    # the fused norms still waiting on a busy host are found again in the new profile (the verdict names
    # them): the ledger then lists that finding too, before the fix is recorded as verified
    again = ["found"] if verdict["flagged_after"] else []
    assert [e["event"] for e in events] == ["found", *again, "verified_fixed"]

    # the same from the CLI (waits for the verdicts) and the SDK (a refusal names its code)
    from rest_framework.authtoken.models import Token

    from pypto_core.capture.session import TuningSession
    from pypto_core.capture.verify import VerificationFailed

    token = Token.objects.get_or_create(user=loop["owner"])[0].key
    cli = subprocess.run([sys.executable, "-m", "pypto_core", "verify", str(base.pk), "--findings",
                          str(norm["id"]), "--server", loop["server"], "--token", token, "--timeout-s",
                          str(LIMIT_S)],
                         cwd=REPO, capture_output=True, text=True, timeout=LIMIT_S + 60, env=loop["env"])
    assert cli.returncode == 0, (cli.stderr, agent.tail())
    out = json.loads(cli.stdout)
    assert out["verification"]["verdicts"][0]["verdict"] == "fixed" and out["job"] != job["id"]
    with pytest.raises(VerificationFailed, match=r"refused \(unknown_findings\)"):
        TuningSession("s", loop["tmp"] / "sdk").verify([10**9], profile=base.pk, server=loop["server"],
                                                       token=token)


@pytest.mark.slow
def test_refused_remedies_run_nothing(loop: dict[str, Any]) -> None:
    """Jobs written straight into the database (a compromised server): the agent's config still decides."""
    from captures.models import CaptureJob

    def job(workload: str, kind: str, content: str) -> int:
        remedy = {"kind": kind, "name": "x", "content": content,
                  "sha256": hashlib.sha256(content.encode()).hexdigest()}
        return CaptureJob.objects.create(project=loop["project"], agent_id=loop["agent_id"],
                                         workload=workload, remedies=[remedy]).pk

    outside = "--- a/../escape.py\n+++ b/../escape.py\n@@ -0,0 +1 @@\n+import os\n"
    stale = "--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-FUSED = None\n+FUSED = True\n"
    cases = {
        job("sleeper", "aoe", "{}"): "does not apply aoe remedies",
        job("sleeper", "env", "LD_PRELOAD=/tmp/x.so\n"): "LD_PRELOAD is not in this agent's allow_env",
        job("sleeper", "patch", outside): "outside the workload's source folder",
        job("sleeper", "patch", stale): "does not apply to the workload's source",
    }
    for job_id, reason in cases.items():
        row = wait_job(job_id, ("failed", "done", "cancelled"), loop["agent"])
        assert row.status == "failed", row.message
        assert row.message.startswith("refused: ") and reason in row.message, row.message
    assert runs(loop) == 0  # nothing ran
    assert not (loop["tmp"] / "escape.py").exists()
    assert (loop["sleeper_src"] / "model.py").read_text() == "FUSED = False\n"


@pytest.mark.slow
def test_a_patched_job_cancelled_mid_run_leaves_the_original_untouched(loop: dict[str, Any]) -> None:
    from captures.models import CaptureJob

    content = "--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-FUSED = False\n+FUSED = True\n"
    job_id = CaptureJob.objects.create(project=loop["project"], agent_id=loop["agent_id"], workload="sleeper",
                                       remedies=[{"kind": "patch", "name": "fuse.diff", "content": content,
                                                  "sha256": hashlib.sha256(content.encode()).hexdigest()}]).pk
    scratch = loop["tmp"] / "state" / "jobs" / str(job_id) / "source"
    wait_until(lambda: "tick 3" in job_row(job_id).log_tail, "the patched workload to run", limit_s=LIMIT_S)
    assert (scratch / "model.py").read_text() == "FUSED = True\n"  # the run sees the patch...
    assert (loop["sleeper_src"] / "model.py").read_text() == "FUSED = False\n"  # ...the original does not
    assert loop["api"].post(f"/api/captures/{job_id}/cancel/").status_code == 200
    row = wait_job(job_id, ("cancelled", "failed", "done"), loop["agent"])
    assert row.status == "cancelled", row.message
    assert (loop["sleeper_src"] / "model.py").read_text() == "FUSED = False\n"
    wait_until(lambda: not scratch.exists(), "the scratch copy to be removed", limit_s=60)
