"""The remedies a verification job brings (issue 21), checked against the agent's own policy and applied.

A job may carry remedies: ``{"kind": "env"|"patch"|"aoe", "name", "content", "sha256", ...}``. What may be
applied is this host's decision (``allow_remedies`` / ``allow_env`` and each workload's ``source`` in the
agent config), never the server's. ``check_remedies`` refuses the whole job, with the reason, before
anything runs: a kind the config does not allow, an env variable it does not list, content whose sha256
does not match, a patch touching a path outside the workload's ``source`` (or through a symlink), a patch
that does not apply (``patch --dry-run`` on the original, which it does not write), AOE on a host without
it. ``applied_workload`` then makes the run's own copy: patches go into a scratch copy of ``source`` and
the workload's cwd, command and environment are pointed there; the original is never written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pypto_core.capture.agent_config import REMEDY_KINDS, RemedyPolicy, Workload
from pypto_core.errors import PyptoError

MAX_REMEDIES = 20
MAX_CONTENT_BYTES = 1024 * 1024
PATCH_TIMEOUT_S = 60
ENV_AOE_CONFIG = "PYPTO_AOE_TUNE_OPS_FILE"  # where an aoe remedy's tuning config is handed to the workload
_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,127})=([^\x00\r\n]*)$")
_DIFF_TARGET = re.compile(r"^\+\+\+ (\S+)")
_DIFF_SOURCE = re.compile(r"^--- (\S+)")


class RemedyRefused(PyptoError):
    """The agent will not apply this job's remedies; the message is the reason the page shows."""


@dataclass(frozen=True)
class Remedy:
    kind: str
    name: str
    content: str
    sha256: str
    env: tuple[tuple[str, str], ...] = ()  # env: the parsed settings
    paths: tuple[str, ...] = ()  # patch: the files it changes, relative to the source root

    def describe(self) -> str:
        if self.kind == "env":
            what = ", ".join(f"{k}={v}" for k, v in self.env)
        else:
            what = ", ".join(self.paths) if self.kind == "patch" else "operator tuning config"
        return f"{self.kind} {self.name} (sha256 {self.sha256[:12]}): {what}"


def check_remedies(raw: Any, policy: RemedyPolicy, workload: Workload, *,
                   which: Callable[[str], str | None] = shutil.which) -> list[Remedy]:
    """The job's remedies, each checked; ``RemedyRefused`` names the first that this host will not apply."""
    if raw in (None, []):
        return []
    if not isinstance(raw, list) or len(raw) > MAX_REMEDIES:
        raise RemedyRefused(f"remedies must be a list of at most {MAX_REMEDIES}")
    return [_check_one(item, i, policy, workload, which) for i, item in enumerate(raw)]


def _check_one(item: Any, i: int, policy: RemedyPolicy, workload: Workload,
               which: Callable[[str], str | None]) -> Remedy:
    if not isinstance(item, dict) or not isinstance(item.get("content"), str):
        raise RemedyRefused(f"remedies[{i}]: not a remedy (kind, name, content, sha256)")
    kind, name, content = str(item.get("kind", "")), str(item.get("name", ""))[:200], item["content"]
    label = f"remedy {name!r}" if name else f"remedies[{i}]"
    if kind not in REMEDY_KINDS:
        raise RemedyRefused(f"{label}: unknown kind {kind!r}")
    if kind not in policy.kinds:
        allowed = ", ".join(policy.kinds) or "none"
        raise RemedyRefused(f"{label}: this agent does not apply {kind} remedies (its allow_remedies: "
                            f"{allowed})")
    data = content.encode("utf-8")
    if len(data) > MAX_CONTENT_BYTES:
        raise RemedyRefused(f"{label}: larger than {MAX_CONTENT_BYTES} bytes")
    digest = hashlib.sha256(data).hexdigest()
    if str(item.get("sha256", "")).lower() != digest:
        raise RemedyRefused(f"{label}: its content does not match its sha256")
    base = Remedy(kind=kind, name=name, content=content, sha256=digest)
    if kind == "env":
        return dataclasses.replace(base, env=_env_settings(content, policy, label))
    if kind == "patch":
        return dataclasses.replace(base, paths=_check_patch(content, workload, label, which))
    if which("aoe") is None:
        raise RemedyRefused(f"{label}: this host has no AOE (aoe is not on PATH)")
    return base


def _env_settings(content: str, policy: RemedyPolicy, label: str) -> tuple[tuple[str, str], ...]:
    settings = []
    for line in content.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _ENV_LINE.match(line.strip())
        if not m:
            raise RemedyRefused(f"{label}: not a NAME=value line: {line[:80]!r}")
        if m[1] not in policy.env:
            listed = ", ".join(policy.env) or "none"
            raise RemedyRefused(f"{label}: {m[1]} is not in this agent's allow_env (allowed: {listed})")
        settings.append((m[1], m[2]))
    if not settings:
        raise RemedyRefused(f"{label}: sets no variable")
    return tuple(settings)


def diff_paths(content: str) -> list[str]:
    """The files a unified diff changes, as ``patch -p1``
    would name them (the ``+++`` side, a/ b/ stripped)."""
    paths: list[str] = []
    lines = content.split("\n")
    for k, line in enumerate(lines):
        m = _DIFF_TARGET.match(line)
        source = _DIFF_SOURCE.match(lines[k - 1]) if k else None
        if not m or source is None:
            continue
        target = m[1] if m[1] != "/dev/null" else source[1]
        if target.startswith("/"):
            paths.append(target)  # absolute: refused by the caller, never stripped into something relative
            continue
        parts = PurePosixPath(target).parts
        paths.append(str(PurePosixPath(*parts[1:])) if len(parts) > 1 else target)
    return paths


def _check_patch(content: str, workload: Workload, label: str,
                 which: Callable[[str], str | None]) -> tuple[str, ...]:
    source = workload.source
    if source is None:
        raise RemedyRefused(f"{label}: workload {workload.name!r} declares no source folder, so no patch "
                            "applies")
    if which("patch") is None:
        raise RemedyRefused(f"{label}: this host has no patch(1)")
    paths = diff_paths(content)
    if not paths:
        raise RemedyRefused(f"{label}: not a unified diff (no ---/+++ file headers)")
    for rel in paths:
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\\" in rel or not pure.parts:
            raise RemedyRefused(f"{label}: touches {rel!r}, outside the workload's source folder")
        # every component must be a real folder or file inside source: a symlink could lead out of it
        at = source
        for part in pure.parts:
            at = at / part
            if at.is_symlink():
                raise RemedyRefused(f"{label}: touches {rel!r} through a symlink")
        if not at.resolve().is_relative_to(source):
            raise RemedyRefused(f"{label}: touches {rel!r}, outside the workload's source folder")
    # --dry-run on the original: patch reads it and writes nothing
    ok, output = _run_patch(source, content, dry_run=True)
    if not ok:
        raise RemedyRefused(f"{label}: does not apply to the workload's source ({_last_line(output)})")
    return tuple(paths)


def _run_patch(folder: Path, content: str, *, dry_run: bool) -> tuple[bool, str]:
    args = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "--reject-file=-", "-d",
            str(folder)]
    if dry_run:
        args.append("--dry-run")
    try:
        done = subprocess.run(args, input=content, capture_output=True, text=True, timeout=PATCH_TIMEOUT_S,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "patch failed"


def applied_workload(workload: Workload, remedies: list[Remedy], job_dir: Path,
                     note: Callable[[str], None]) -> Workload:
    """The workload to run with ``remedies`` applied; patches into ``job_dir/source``, a scratch copy.

    ``note`` is told exactly what was applied (the job's log)."""
    if not remedies:
        return workload
    env = dict(workload.env)
    changes: dict[str, Any] = {}
    patches = [r for r in remedies if r.kind == "patch"]
    if patches:
        assert workload.source is not None  # check_remedies refused it otherwise
        scratch = job_dir / "source"
        if scratch.exists():
            shutil.rmtree(scratch)
        shutil.copytree(workload.source, scratch, symlinks=True)
        note(f"copied {workload.source} to a scratch copy; the original is not written")
        for remedy in patches:
            ok, output = _run_patch(scratch, remedy.content, dry_run=False)
            if not ok:
                raise RemedyRefused(f"remedy {remedy.name!r}: does not apply ({_last_line(output)})")
            note(f"applied {remedy.describe()}")
            for line in output.splitlines():
                note(f"  patch: {line}")
        changes.update(_moved(workload, workload.source, scratch))
        env = changes.pop("env", env)
    for remedy in remedies:
        if remedy.kind == "env":
            env.update(remedy.env)
            note(f"applied {remedy.describe()}")
        elif remedy.kind == "aoe":
            config = job_dir / f"aoe-{remedy.sha256[:12]}.json"
            config.write_text(remedy.content, encoding="utf-8")
            env[ENV_AOE_CONFIG] = str(config)
            note(f"applied {remedy.describe()}: {ENV_AOE_CONFIG}={config.name}")
    return dataclasses.replace(workload, env=env, **changes)


def _moved(workload: Workload, old: Path, new: Path) -> dict[str, Any]:
    """cwd, command arguments and env values that point into ``old``, pointed into ``new`` instead."""
    def move(text: str) -> str:
        if text == str(old) or text.startswith(str(old) + os.sep):
            return str(new) + text[len(str(old)):]
        return text

    return {
        "cwd": Path(move(str(workload.cwd))) if workload.cwd else None,
        "command": tuple(move(part) for part in workload.command),
        "env": {key: os.pathsep.join(move(part) for part in value.split(os.pathsep))
                for key, value in workload.env.items()},
    }
