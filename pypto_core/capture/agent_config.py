"""The agent's own TOML config: the only workloads it will ever run.

The server names a workload; the agent looks the name up here. Commands, working directories and
environments come from this file alone, so the dashboard can never make a host run anything else.

    state_dir = "/var/lib/pypto-agent"        # optional; job ledger, packed archives, upload state
    name = "npu-host-1"                       # optional; shown on the agents page

    [workloads.llama-decode]
    kind = "python"                           # python | msprof | vllm
    command = ["python", "decode.py", "--tokens", "32"]   # a list, or a string split like a shell would
    cwd = "/srv/bench"
    env = { HF_HOME = "/data/hf" }
    timeout_s = 900
    wrap = false        # true: run the script inside the SDK's Profiler (for scripts that do not use it)
    # optional: the only folder a patch remedy may touch (in a scratch copy, never here)
    source = "/srv/bench"

    [workloads.om-infer]
    kind = "msprof"                           # a non-Python program under msprof
    command = ["./infer", "--model", "model.om"]

    [workloads.vllm]
    kind = "vllm"                             # a running vLLM(-Ascend) server, profiled for duration_s
    url = "http://127.0.0.1:8000"
    profile_dir = "/data/vllm-profile"        # the server's VLLM_TORCH_PROFILER_DIR
    load_command = ["python", "send_requests.py"]   # optional: traffic while profiling

Remedies a verification job may bring (issue 21) are this host's decision, listed at the top level; none
by default. ``remedy_apply`` checks every job against these before anything runs:

    allow_remedies = ["env", "patch"]        # env | patch | aoe
    allow_env = ["TASK_QUEUE_ENABLE", "PYTORCH_NPU_ALLOC_CONF"]   # the only variables an env remedy may set
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from pypto_core.errors import InputError

KINDS = ("python", "msprof", "vllm")
REMEDY_KINDS = ("env", "patch", "aoe")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
DEFAULT_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    command: tuple[str, ...] = ()
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = DEFAULT_TIMEOUT_S
    description: str = ""
    wrap: bool = False
    msprof: str = "msprof"
    url: str = ""
    profile_dir: Path | None = None
    load_command: tuple[str, ...] = ()
    settle_s: float = 5.0
    source: Path | None = None  # the root a patch remedy may touch (applied to a scratch copy of it)

    def public(self) -> dict[str, Any]:
        """What the server may know: never the command, environment or paths."""
        return {"name": self.name, "kind": self.kind, "description": self.description,
                "timeout_s": self.timeout_s, "patchable": self.source is not None}


@dataclass(frozen=True)
class RemedyPolicy:
    """What this host lets a verification job change: remedy kinds, and for ``env`` the variable names."""

    kinds: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    def public(self) -> dict[str, Any]:
        return {"kinds": list(self.kinds), "env": list(self.env)}


@dataclass(frozen=True)
class AgentConfig:
    path: Path
    workloads: dict[str, Workload]
    state_dir: Path
    name: str | None = None
    remedies: RemedyPolicy = field(default_factory=RemedyPolicy)

    def public_workloads(self) -> list[dict[str, Any]]:
        return [w.public() for w in self.workloads.values()]


def _command(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        parts = shlex.split(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        raise ValueError(f"{where}: must be a string or a list of strings")
    if not parts:
        raise ValueError(f"{where}: is empty")
    return tuple(parts)


def _workload(name: str, raw: Any, base: Path) -> Workload:
    where = f"workloads.{name}"
    if not _NAME.match(name):
        raise ValueError(f"{where}: a name is letters, digits, '_', '-', '.' (at most 100)")
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a table")
    known = {
        "kind", "command", "cwd", "env", "timeout_s", "description", "wrap", "msprof", "url", "profile_dir",
        "load_command", "settle_s", "source",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{where}: unknown keys {', '.join(unknown)}")
    kind = raw.get("kind", "python")
    if kind not in KINDS:
        raise ValueError(f"{where}.kind: must be one of {', '.join(KINDS)}")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str)
                                            and isinstance(v, str) for k, v in env.items()):
        raise ValueError(f"{where}.env: must be a table of strings")
    timeout = raw.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"{where}.timeout_s: must be a positive integer")
    cwd = raw.get("cwd")
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "cwd": (base / os.path.expanduser(cwd)).resolve() if cwd else None,
        "env": dict(env),
        "timeout_s": timeout,
        "description": str(raw.get("description", "")),
        "wrap": bool(raw.get("wrap", False)),
        "msprof": str(raw.get("msprof", "msprof")),
        "settle_s": float(raw.get("settle_s", 5.0)),
    }
    if raw.get("source") is not None:
        if not isinstance(raw["source"], str) or not raw["source"]:
            raise ValueError(f"{where}.source: must be a folder path")
        source = (base / os.path.expanduser(raw["source"])).resolve()
        if not source.is_dir():
            raise ValueError(f"{where}.source: {source} is not a folder")
        fields["source"] = source
    if kind == "vllm":
        if not raw.get("url") or not raw.get("profile_dir"):
            raise ValueError(f"{where}: a vllm workload needs url and profile_dir")
        fields["url"] = str(raw["url"]).rstrip("/")
        fields["profile_dir"] = (base / os.path.expanduser(str(raw["profile_dir"]))).resolve()
        if raw.get("load_command") is not None:
            fields["load_command"] = _command(raw["load_command"], f"{where}.load_command")
    else:
        if "command" not in raw:
            raise ValueError(f"{where}: needs a command")
        fields["command"] = _command(raw["command"], f"{where}.command")
    return Workload(**fields)


def load_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read and check the agent config; ``InputError`` names the file and the bad key."""
    cfg_path = Path(path).expanduser().resolve()
    try:
        raw = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(str(cfg_path), f"cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(cfg_path), f"not valid TOML ({exc})") from exc
    base = cfg_path.parent
    try:
        tables = raw.get("workloads", {})
        if not isinstance(tables, dict) or not tables:
            raise ValueError("workloads: at least one [workloads.NAME] table is needed")
        workloads = {name: _workload(name, spec, base) for name, spec in tables.items()}
    except ValueError as exc:
        raise InputError(str(cfg_path), str(exc)) from exc
    try:
        policy = _remedy_policy(raw)
    except ValueError as exc:
        raise InputError(str(cfg_path), str(exc)) from exc
    state_dir = raw.get("state_dir")
    state = (base / os.path.expanduser(state_dir)).resolve() if state_dir \
        else Path.home() / ".pypto" / "agent"
    return AgentConfig(path=cfg_path, workloads=workloads, state_dir=state, name=raw.get("name"),
                       remedies=policy)


def _remedy_policy(raw: dict[str, Any]) -> RemedyPolicy:
    kinds = raw.get("allow_remedies", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise ValueError("allow_remedies: must be a list of remedy kinds")
    unknown = sorted(set(kinds) - set(REMEDY_KINDS))
    if unknown:
        raise ValueError(f"allow_remedies: unknown kinds {', '.join(unknown)} "
                         f"(known: {', '.join(REMEDY_KINDS)})")
    env = raw.get("allow_env", [])
    if not isinstance(env, list) or not all(isinstance(v, str) and _ENV_NAME.match(v) for v in env):
        raise ValueError("allow_env: must be a list of environment variable names")
    return RemedyPolicy(kinds=tuple(dict.fromkeys(kinds)), env=tuple(dict.fromkeys(env)))
