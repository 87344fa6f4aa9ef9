"""What this host has, as the agent reports it: NPU SKU (npu-smi), CANN version, torch_npu, torch, GPU.

Every probe is best-effort and bounded: a missing tool or package is reported as absent, never an error.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

# Where CANN installs by default; ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH point at the active one (set by
# set_env.sh). The version is in ascend_toolkit_install.info ("version=8.0.RC2") or version.cfg.
_CANN_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest")
_CANN_VERSION_FILES = ("ascend_toolkit_install.info", "version.cfg", "compiler/version.info",
                       "runtime/version.info")
_NPU_SMI_TIMEOUT_S = 10


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_npu_smi(text: str) -> list[dict[str, Any]]:
    """NPU rows of ``npu-smi info``: ``| 0     910B3               | OK            | 93.4 ...``."""
    devices = []
    for line in text.splitlines():
        m = re.match(r"^\|\s*(\d+)\s+([0-9A-Za-z_]+)\s*\|\s*(\w+)\s*\|", line)
        if m and not m.group(2).isdigit():
            devices.append({"id": int(m.group(1)), "sku": m.group(2), "health": m.group(3)})
    return devices


def npu_devices() -> list[dict[str, Any]]:
    exe = shutil.which("npu-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=_NPU_SMI_TIMEOUT_S,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_npu_smi(out.stdout)


def parse_cann_version(text: str) -> str | None:
    m = re.search(r"(?:^|\n)\s*(?:version|Version)\s*[=:]\s*\"?([0-9][0-9A-Za-z.\-]*)", text)
    return m.group(1) if m else None


def cann_version(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    roots = [env[k] for k in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH") if env.get(k)] + list(_CANN_ROOTS)
    for root in roots:
        for name in _CANN_VERSION_FILES:
            path = Path(root) / name
            if path.is_file():
                try:
                    version = parse_cann_version(path.read_text(encoding="utf-8", errors="replace"))
                except OSError:
                    continue
                if version:
                    return version
        # .../ascend-toolkit/8.0.RC2 when "latest" is a link to it
        resolved = Path(root).resolve()
        if resolved.name[:1].isdigit():
            return resolved.name
    return None


def gpus() -> list[dict[str, Any]]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=_NPU_SMI_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            found.append({"id": int(parts[0]), "name": parts[1],
                          "memory": parts[2] if len(parts) > 2 else ""})
    return found


def capabilities() -> dict[str, Any]:
    """The host's capture capabilities, as JSON for the server's agents page."""
    npus = npu_devices()
    gpu_list = gpus()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "npu": npus,
        "npu_sku": npus[0]["sku"] if npus else None,
        "cann": cann_version(),
        "torch": package_version("torch"),
        "torch_npu": package_version("torch_npu"),
        "gpu": gpu_list,
        "msprof": shutil.which("msprof") is not None,
        "aoe": shutil.which("aoe") is not None,  # AOE remedies apply only where it is
        "backend": "npu" if npus and package_version("torch_npu") else ("cuda" if gpu_list else "cpu"),
    }
