"""The agent's remedy policy (issue 21) on real files and the real patch(1): what it refuses before anything
runs, and that an applied patch lands in a scratch copy, never in the workload's source."""

from __future__ import annotations

import difflib
import hashlib
import sys
from pathlib import Path

import pytest

from pypto_core.capture.agent_config import RemedyPolicy, Workload, load_config
from pypto_core.capture.remedy_apply import (
    ENV_AOE_CONFIG,
    RemedyRefused,
    applied_workload,
    check_remedies,
    diff_paths,
)
from pypto_core.errors import InputError

ORIGINAL = "def answer():\n    return 41\n"
FIXED = "def answer():\n    return 42\n"


def remedy(kind: str, content: str, name: str = "fix", sha256: str | None = None) -> dict:
    return {"kind": kind, "name": name, "content": content,
            "sha256": sha256 or hashlib.sha256(content.encode()).hexdigest()}


def unified(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "model.py").write_text(ORIGINAL)
    (tmp_path / "outside.py").write_text(ORIGINAL)
    return root


def workload(src: Path | None) -> Workload:
    cwd = src if src else None
    return Workload(name="w", kind="python", command=(sys.executable, f"{src}/run.py" if src else "run.py"),
                    cwd=cwd, source=src, env={"PYTHONPATH": f"{src}/pkg:/elsewhere"} if src else {})


ALL = RemedyPolicy(kinds=("env", "patch", "aoe"), env=("TASK_QUEUE_ENABLE",))


def test_a_kind_the_agent_does_not_allow_is_refused(src: Path) -> None:
    with pytest.raises(RemedyRefused, match="does not apply patch remedies .*allow_remedies: env"):
        check_remedies([remedy("patch", unified(ORIGINAL, FIXED, "pkg/model.py"))],
                       RemedyPolicy(kinds=("env",), env=("TASK_QUEUE_ENABLE",)), workload(src))
    with pytest.raises(RemedyRefused, match="allow_remedies: none"):
        check_remedies([remedy("env", "TASK_QUEUE_ENABLE=2\n")], RemedyPolicy(), workload(src))
    with pytest.raises(RemedyRefused, match="unknown kind 'shell'"):
        check_remedies([remedy("shell", "id")], ALL, workload(src))


def test_env_only_listed_names_and_matching_sha256(src: Path) -> None:
    with pytest.raises(RemedyRefused, match="LD_PRELOAD is not in this agent's allow_env"):
        check_remedies([remedy("env", "TASK_QUEUE_ENABLE=2\nLD_PRELOAD=/tmp/x.so\n")], ALL, workload(src))
    with pytest.raises(RemedyRefused, match="does not match its sha256"):
        check_remedies([remedy("env", "TASK_QUEUE_ENABLE=2\n", sha256="0" * 64)], ALL, workload(src))
    with pytest.raises(RemedyRefused, match="not a NAME=value line"):
        check_remedies([remedy("env", "TASK_QUEUE_ENABLE=2; rm -rf /\nA B\n")], ALL, workload(src))
    checked = check_remedies([remedy("env", "# fused launch queue\nTASK_QUEUE_ENABLE=2\n")], ALL,
                             workload(src))
    notes: list[str] = []
    run = applied_workload(workload(src), checked, src.parent / "job", notes.append)
    assert run.env["TASK_QUEUE_ENABLE"] == "2" and run.cwd == src  # no patch: nothing copied or moved
    assert notes == [f"applied env fix (sha256 {checked[0].sha256[:12]}): TASK_QUEUE_ENABLE=2"]


@pytest.mark.parametrize("path,reason", [
    ("../outside.py", "outside the workload's source folder"),
    ("pkg/../../outside.py", "outside the workload's source folder"),
])
def test_a_patch_outside_source_is_refused_before_anything_runs(src: Path, path: str, reason: str) -> None:
    with pytest.raises(RemedyRefused, match=reason):
        check_remedies([remedy("patch", unified(ORIGINAL, FIXED, path))], ALL, workload(src))
    absolute = f"--- {src.parent}/outside.py\n+++ {src.parent}/outside.py\n" \
               "@@ -1,2 +1,2 @@\n def answer():\n" \
               "-    return 41\n+    return 42\n"
    with pytest.raises(RemedyRefused, match="outside the workload's source folder"):
        check_remedies([remedy("patch", absolute)], ALL, workload(src))
    assert (src.parent / "outside.py").read_text() == ORIGINAL


def test_a_patch_through_a_symlink_is_refused(src: Path) -> None:
    (src / "link").symlink_to(src.parent)
    with pytest.raises(RemedyRefused, match="through a symlink"):
        check_remedies([remedy("patch", unified(ORIGINAL, FIXED, "link/outside.py"))], ALL, workload(src))


def test_a_patch_that_does_not_apply_is_refused_and_nothing_is_written(src: Path) -> None:
    stale = unified("def answer():\n    return 7\n", FIXED, "pkg/model.py")
    with pytest.raises(RemedyRefused, match="does not apply to the workload's source"):
        check_remedies([remedy("patch", stale)], ALL, workload(src))
    with pytest.raises(RemedyRefused, match="not a unified diff"):
        check_remedies([remedy("patch", "just text\n")], ALL, workload(src))
    with pytest.raises(RemedyRefused, match="declares no source folder"):
        check_remedies([remedy("patch", unified(ORIGINAL, FIXED, "pkg/model.py"))], ALL, workload(None))
    assert (src / "pkg" / "model.py").read_text() == ORIGINAL
    assert sorted(p.name for p in src.rglob("*")) == ["model.py", "pkg"]  # no .orig, no .rej


def test_a_patch_is_applied_to_a_scratch_copy_and_the_run_points_there(src: Path, tmp_path: Path) -> None:
    diff = unified(ORIGINAL, FIXED, "pkg/model.py")
    assert diff_paths(diff) == ["pkg/model.py"]
    checked = check_remedies([remedy("patch", diff, name="answer.diff")], ALL, workload(src))
    notes: list[str] = []
    job = tmp_path / "job"
    job.mkdir()
    run = applied_workload(workload(src), checked, job, notes.append)
    scratch = job / "source"
    assert (scratch / "pkg" / "model.py").read_text() == FIXED
    assert (src / "pkg" / "model.py").read_text() == ORIGINAL  # the original is never written
    assert run.cwd == scratch and run.command[1] == f"{scratch}/run.py" and run.source == src
    assert run.env["PYTHONPATH"] == f"{scratch}/pkg:/elsewhere"
    assert any(n.startswith("applied patch answer.diff (sha256 ")
               and n.endswith("pkg/model.py") for n in notes)
    assert "  patch: patching file pkg/model.py" in notes


def test_aoe_only_where_the_host_has_it(src: Path, tmp_path: Path) -> None:
    config = '{"tune_ops_type": ["MatMulV2"]}'
    with pytest.raises(RemedyRefused, match="this host has no AOE"):
        check_remedies([remedy("aoe", config)], ALL, workload(src), which=lambda name: None)
    checked = check_remedies([remedy("aoe", config)], ALL, workload(src),
                             which=lambda name: f"/usr/bin/{name}")
    run = applied_workload(workload(src), checked, tmp_path, lambda _: None)
    assert Path(run.env[ENV_AOE_CONFIG]).read_text() == config


def test_config_policy_is_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text('allow_remedies = ["env", "rootkit"]\n[workloads.a]\ncommand = "true"\n')
    with pytest.raises(InputError, match="allow_remedies: unknown kinds rootkit"):
        load_config(cfg)
    cfg.write_text('allow_remedies = ["env"]\nallow_env = ["TASK QUEUE"]\n[workloads.a]\ncommand = "true"\n')
    with pytest.raises(InputError, match="allow_env"):
        load_config(cfg)
    cfg.write_text(f'allow_remedies = ["patch"]\n[workloads.a]\ncommand = "true"\nsource = "{tmp_path}"\n')
    config = load_config(cfg)
    assert config.remedies.public() == {"kinds": ["patch"], "env": []}
    assert config.workloads["a"].source == tmp_path and config.public_workloads()[0]["patchable"] is True
    assert RemedyPolicy() == load_config_default(tmp_path)


def load_config_default(tmp_path: Path) -> RemedyPolicy:
    cfg = tmp_path / "plain.toml"
    cfg.write_text('[workloads.a]\ncommand = "true"\n')
    return load_config(cfg).remedies  # nothing allowed unless the config says so
