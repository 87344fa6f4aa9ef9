"""Build and load the readers' small C scanners (``_eventscan.c``, ``_csvscan.c``) on first use.

Each C file is compiled with the system C compiler (``$CC`` or ``cc``) into ``$PYPTO_CACHE`` (default
``~/.cache/pypto``, or a temp-dir cache where that is read-only), named by a hash of its source and the
platform so an edited source is rebuilt, and loaded with ctypes (which releases the GIL during calls).
Where no compiler is available, or ``PYPTO_NO_NATIVE`` is set, :func:`load_library` returns None and the
readers use their pure-Python / pyarrow paths.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("PYPTO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pypto")
    return Path(base)


def _compile(src: Path, lib_path: Path, flags: Sequence[str] = ()) -> bool:
    """Build ``src`` with the system C compiler (and ``flags``); False where that is not possible."""
    tmp = None
    try:
        lib_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib_path.parent)
        os.close(fd)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", *flags, "-o", tmp, str(src)], check=True,
                       capture_output=True, timeout=120)
        os.replace(tmp, lib_path)  # atomic: concurrent workers never load a half-written library
        tmp = None
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def load_library(src: Path, stem: str, flags: Sequence[str] = ()) -> ctypes.CDLL | None:
    """The compiled ``src`` (cached as ``{stem}-{hash}.so``), or None without a compiler / with
    PYPTO_NO_NATIVE. ``flags``: more compiler arguments (part of the hash)."""
    if os.environ.get("PYPTO_NO_NATIVE"):
        return None
    try:
        source = src.read_bytes()
    except OSError:
        return None
    build = f"{sys.platform}-{platform.machine()}{' '.join(flags)}".encode()
    digest = hashlib.sha256(source + build).hexdigest()[:16]
    lib_path = None
    # a read-only home falls back to /tmp
    for base in (cache_dir(), Path(tempfile.gettempdir()) / "pypto-cache"):
        candidate = base / f"{stem}-{digest}.so"
        if candidate.exists() or _compile(src, candidate, flags):
            lib_path = candidate
            break
    if lib_path is None:
        return None
    try:
        return ctypes.CDLL(str(lib_path))
    except OSError:
        return None
