"""Speed and memory benchmarks, printed as JSON by ``pypto bench`` (not timed tests).

Every module in this package that defines ``run(sizes_mb: list[int], workdir) -> dict`` is a benchmark,
found by name (``readers_json``, ``readers_csv``, ``timeline``, ...): adding a module is enough to join.
Each measurement that reports peak memory runs in a fresh subprocess and reads its own VmHWM.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

BenchFn = Callable[[list[int], str], dict[str, Any]]


def registry() -> dict[str, BenchFn]:
    """Benchmark name -> its ``run`` function, for every module here that has one."""
    found: dict[str, BenchFn] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        fn = getattr(module, "run", None)
        if callable(fn):
            found[info.name] = fn
    return found
