"""Running one configured workload for a job: a Python program under the SDK's profiler, a program under
msprof, or a running vLLM(-Ascend) server profiled through its /start_profile and /stop_profile endpoints.

Each run writes into its own output folder and a log file; it stops early when ``cancel`` is set or the
workload's timeout passes (the whole process group is killed, so a workload's children go too).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pypto_core.capture.agent_config import Workload
from pypto_core.capture.options import ENV_DIR, ENV_OPTIONS, CaptureOptions
from pypto_core.errors import PyptoError

_POLL_S = 0.2
_KILL_GRACE_S = 5.0
_VLLM_HTTP_TIMEOUT_S = 60.0


class WorkloadFailed(PyptoError):
    """The workload did not produce a profile; the message says why."""


class WorkloadCancelled(PyptoError):
    """The job was cancelled while its workload ran."""


@dataclass
class RunContext:
    workload: Workload
    params: dict[str, Any]  # validated against the whitelist schema
    options: CaptureOptions
    output_dir: Path
    log: IO[str]  # the job's log file (text, line-buffered)
    cancel: threading.Event

    def note(self, message: str) -> None:
        self.log.write(f"[pypto agent] {message}\n")
        self.log.flush()


def run_workload(ctx: RunContext) -> list[Path]:
    """Run the workload; returns what it wrote into ``ctx.output_dir`` (never empty)."""
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    kind = ctx.workload.kind
    if kind == "python":
        _run_process(ctx, python_command(ctx.workload), capture_env(ctx))
    elif kind == "msprof":
        _run_process(ctx, msprof_command(ctx.workload, ctx.options, ctx.output_dir),
                     workload_env(ctx.workload))
    elif kind == "vllm":
        copy_into(profile_vllm(ctx), ctx.output_dir)
    else:  # agent_config refuses other kinds; kept for a config built by hand
        raise WorkloadFailed(f"unknown workload kind {kind!r}")
    written = sorted(ctx.output_dir.iterdir())
    if not written:
        raise WorkloadFailed(
            "the workload finished but wrote no profile"
            + (" (does it use pypto_core.capture.Profiler, or set wrap = true?)" if kind == "python" else "")
        )
    return written


# -- commands and environments -------------------------------------------------------------------------


def workload_env(workload: Workload) -> dict[str, str]:
    return {**os.environ, **workload.env}


def capture_env(ctx: RunContext) -> dict[str, str]:
    """The SDK reads the job's folder and options from these (``Profiler`` in the workload's process)."""
    env = workload_env(ctx.workload)
    env[ENV_DIR] = str(ctx.output_dir)
    env[ENV_OPTIONS] = json.dumps(ctx.params, sort_keys=True)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def python_command(workload: Workload) -> list[str]:
    cmd = list(workload.command)
    if not workload.wrap:
        return cmd
    # wrap: [python, script, args...] -> [python, -m, pypto_core.capture.runner, script, args...]
    if Path(cmd[0]).name.startswith("python"):
        return [cmd[0], "-m", "pypto_core.capture.runner", *cmd[1:]]
    return [sys.executable, "-m", "pypto_core.capture.runner", *cmd]


def msprof_command(workload: Workload, options: CaptureOptions, output_dir: Path) -> list[str]:
    """``msprof --output=DIR [collection switches] <app>`` (docs/formats.md §1.1 CLI) from the whitelisted
    options."""
    level_task_time = {"Level_none": "off", "Level0": "l0", "Level1": "l1", "Level2": "l1"}
    args = [workload.msprof, f"--output={output_dir}",
            f"--task-time={level_task_time[options.profiler_level]}"]
    if options.profiler_level in ("Level1", "Level2"):
        args.append("--ascendcl=on")
    if options.profiler_level == "Level2":
        args.append("--runtime-api=on")
    if options.aic_metrics == "AiCoreNone":
        args.append("--ai-core=off")
    else:
        args += ["--ai-core=on", "--aic-mode=task-based", f"--aic-metrics={options.aic_metrics}"]
    if options.l2_cache:
        args.append("--l2=on")
    if options.profile_memory:
        args.append("--sys-hardware-mem=on")
    if options.export_type == "db":
        args.append("--type=db")
    return [*args, *workload.command]


# -- processes -----------------------------------------------------------------------------------------


def _run_process(ctx: RunContext, command: list[str], env: dict[str, str]) -> None:
    ctx.note("running " + " ".join(command))
    try:
        proc = subprocess.Popen(
            command,
            cwd=str(ctx.workload.cwd) if ctx.workload.cwd else None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=ctx.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so cancel reaches its children
        )
    except OSError as exc:
        raise WorkloadFailed(f"cannot start {command[0]}: {exc.strerror or exc}") from exc
    deadline = time.monotonic() + ctx.workload.timeout_s
    while proc.poll() is None:
        if ctx.cancel.is_set():
            _kill_group(proc)
            raise WorkloadCancelled("cancelled")
        if time.monotonic() > deadline:
            _kill_group(proc)
            raise WorkloadFailed(f"timed out after {ctx.workload.timeout_s} s")
        ctx.cancel.wait(_POLL_S)
    if proc.returncode != 0:
        raise WorkloadFailed(f"the workload exited with status {proc.returncode}")


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    for sig, wait_s in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, _KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


# -- vLLM ----------------------------------------------------------------------------------------------


def _post(url: str, timeout_s: float) -> None:
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (URL from the agent's config)
        resp.read()


def _folder_state(paths: list[Path]) -> tuple[int, int]:
    count = size = 0
    for root in paths:
        items = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for item in items:
            try:
                size += item.stat().st_size
                count += 1
            except OSError:
                pass
    return count, size


def profile_vllm(ctx: RunContext, *, post: Callable[[str, float], None] = _post) -> list[Path]:
    """Profile a running vLLM server for ``duration_s`` without restarting it.

    vLLM writes into its own ``VLLM_TORCH_PROFILER_DIR`` (on Ascend, ``*_ascend_pt`` folders parsed when
    the profiler stops, which can take minutes: vllm-ascend issue #1210), so the new entries there are
    the job's output once they stop changing.
    """
    w = ctx.workload
    assert w.profile_dir is not None
    w.profile_dir.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in w.profile_dir.iterdir()}
    ctx.note(f"POST {w.url}/start_profile")
    try:
        post(f"{w.url}/start_profile", _VLLM_HTTP_TIMEOUT_S)
    except (urllib.error.URLError, OSError) as exc:
        raise WorkloadFailed(
            f"{w.url}/start_profile failed ({getattr(exc, 'reason', exc)}); is the server running with "
            "VLLM_TORCH_PROFILER_DIR set?"
        ) from exc
    load = None
    try:
        if w.load_command:
            ctx.note("load: " + " ".join(w.load_command))
            load = subprocess.Popen(
                list(w.load_command), cwd=str(w.cwd) if w.cwd else None, env=workload_env(w),
                stdin=subprocess.DEVNULL, stdout=ctx.log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        if ctx.cancel.wait(ctx.options.duration_s):
            raise WorkloadCancelled("cancelled")
    finally:
        if load is not None and load.poll() is None:
            _kill_group(load)
        ctx.note(f"POST {w.url}/stop_profile")
        try:
            # stop_profile returns once the trace is written; torch_npu may parse for minutes
            post(f"{w.url}/stop_profile", float(w.timeout_s))
        except (urllib.error.URLError, OSError) as exc:
            ctx.note(f"stop_profile failed: {getattr(exc, 'reason', exc)}")
    deadline = time.monotonic() + w.timeout_s
    last, stable_since = (-1, -1), time.monotonic()
    while True:
        new = sorted(p for p in w.profile_dir.iterdir() if p.name not in before)
        state = _folder_state(new)
        if state != last:
            last, stable_since = state, time.monotonic()
        elif new and time.monotonic() - stable_since >= w.settle_s:
            break
        if ctx.cancel.is_set():
            raise WorkloadCancelled("cancelled")
        if time.monotonic() > deadline:
            raise WorkloadFailed(f"{w.profile_dir}: no complete profile within {w.timeout_s} s of "
                                 "stop_profile")
        time.sleep(_POLL_S)
    ctx.note(f"vLLM wrote {len(new)} entr{'y' if len(new) == 1 else 'ies'}: {', '.join(p.name for p in new)}")
    return new


def copy_into(paths: list[Path], folder: Path) -> None:
    """Copy outputs written elsewhere (vLLM's folder) into the job's folder."""
    for path in paths:
        target = folder / path.name
        if path.is_dir():
            shutil.copytree(path, target, symlinks=False, dirs_exist_ok=True)
        else:
            shutil.copy2(path, target)
