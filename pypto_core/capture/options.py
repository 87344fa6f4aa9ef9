"""Capture options: the whitelist of profiler settings a capture may ask for.

The same schema is enforced on both sides of a remote capture: the server refuses a job whose params fall
outside it, and the agent checks again before running anything (a compromised or buggy server cannot
smuggle other settings through). Values and defaults follow torch_npu's ``_ExperimentalConfig`` and
``schedule`` (docs/domain.md §3.2, docs/formats.md §2.2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from pypto_core.errors import PyptoError

# torch_npu.profiler.ProfilerLevel members (docs/formats.md §2.2 "Levels").
PROFILER_LEVELS = ("Level_none", "Level0", "Level1", "Level2")
# torch_npu.profiler.AiCMetrics members (docs/domain.md §3.2 and §6); only one group per run.
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)
EXPORT_TYPES = ("text", "db")

# Environment variables the SDK reads when a workload runs under the agent.
ENV_DIR = "PYPTO_CAPTURE_DIR"
ENV_OPTIONS = "PYPTO_CAPTURE_OPTIONS"


class OptionsError(PyptoError):
    """Capture params outside the whitelist schema."""


# name -> (type, allowed values or (min, max)); anything not listed here is refused.
PARAMS_SCHEMA: dict[str, tuple[type, tuple[Any, ...]]] = {
    "profiler_level": (str, PROFILER_LEVELS),
    "aic_metrics": (str, AIC_METRICS),
    "l2_cache": (bool, (False, True)),
    "record_shapes": (bool, (False, True)),
    "profile_memory": (bool, (False, True)),
    "with_stack": (bool, (False, True)),
    "with_modules": (bool, (False, True)),
    "data_simplification": (bool, (False, True)),
    "export_type": (str, EXPORT_TYPES),
    # schedule(wait, warmup, active, repeat, skip_first) in profiler steps
    "wait": (int, (0, 1000)),
    "warmup": (int, (0, 1000)),
    "active": (int, (0, 1000)),  # 0: no schedule, the whole block is recorded
    "repeat": (int, (1, 100)),
    "skip_first": (int, (0, 10000)),
    # for vLLM workloads: how long the running server is profiled
    "duration_s": (int, (1, 3600)),
}


@dataclass(frozen=True)
class CaptureOptions:
    """Profiler settings. Defaults are the light ones: Level1 with PipeUtilization, which is what the rules
    need (docs/domain.md §3.2), without memory or stacks (trace bloat, a known cost of stack capture)."""

    profiler_level: str = "Level1"
    aic_metrics: str = "PipeUtilization"
    l2_cache: bool = False
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    with_modules: bool = False
    data_simplification: bool = True
    export_type: str = "text"
    wait: int = 0
    warmup: int = 0
    active: int = 0
    repeat: int = 1
    skip_first: int = 0
    duration_s: int = 10

    @property
    def scheduled(self) -> bool:
        """True when only some steps are recorded (the caller marks steps with ``Profiler.step()``)."""
        return self.active > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_env(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes: Any) -> CaptureOptions:
        return validate_params({**self.to_dict(), **changes})


def validate_params(params: Mapping[str, Any] | None) -> CaptureOptions:
    """Return the options for ``params``, or raise ``OptionsError`` naming the first offending key."""
    if params is None:
        return CaptureOptions()
    if not isinstance(params, Mapping):
        raise OptionsError("params must be a JSON object")
    clean: dict[str, Any] = {}
    for key, value in params.items():
        if key not in PARAMS_SCHEMA:
            raise OptionsError(f"params.{key}: not an allowed capture option")
        kind, allowed = PARAMS_SCHEMA[key]
        # bool is an int in Python; never let True pass as a step count or 1 as a flag
        if type(value) is not kind:
            raise OptionsError(f"params.{key}: must be {kind.__name__}, got {type(value).__name__}")
        if kind is int:
            lo, hi = allowed
            if not lo <= value <= hi:
                raise OptionsError(f"params.{key}: must be between {lo} and {hi}, got {value}")
        elif value not in allowed:
            raise OptionsError(f"params.{key}: must be one of {', '.join(map(str, allowed))}, got {value!r}")
        clean[key] = value
    return CaptureOptions(**clean)


def options_from_env(environ: Mapping[str, str] | None = None) -> CaptureOptions | None:
    """The options the agent handed to this process, or None when not running under the agent."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_OPTIONS)
    if raw is None:
        return None
    try:
        params = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionsError(f"{ENV_OPTIONS}: not JSON ({exc})") from exc
    return validate_params(params)


def schema_description() -> list[dict[str, Any]]:
    """The whitelist as data, for the capture form and the API docs."""
    defaults = CaptureOptions()
    out = []
    for f in fields(CaptureOptions):
        kind, allowed = PARAMS_SCHEMA[f.name]
        item: dict[str, Any] = {"name": f.name, "type": kind.__name__, "default": getattr(defaults, f.name)}
        if kind is int:
            item["min"], item["max"] = allowed
        elif kind is str:
            item["choices"] = list(allowed)
        out.append(item)
    return out
