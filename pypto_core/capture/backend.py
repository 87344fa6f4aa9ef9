"""Which profiler to build: torch_npu.profiler on an NPU host, torch.profiler on CUDA or CPU elsewhere.

torch and torch_npu are imported here only when a capture starts, never at import time: the server and
the engine install without them (torch_npu is the ``npu`` extra).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from pypto_core.capture.options import CaptureOptions
from pypto_core.errors import PyptoError

BACKENDS = ("npu", "cuda", "cpu")


def detect_backend() -> str:
    """``npu`` when torch_npu imports and sees a device,
    else ``cuda`` when CUDA is available, else ``cpu``."""
    if importlib.util.find_spec("torch") is None:
        raise PyptoError("capture needs PyTorch: pip install 'pypto[capture]' (or 'pypto[npu]' on Ascend)")
    import torch

    if importlib.util.find_spec("torch_npu") is not None:
        try:
            importlib.import_module("torch_npu")
            if torch.npu.is_available():  # torch.npu: added by torch_npu
                return "npu"
        except Exception:  # noqa: BLE001  a broken CANN install must not stop a CPU/GPU capture
            pass
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def build_profiler(backend: str, options: CaptureOptions, output_dir: Path, worker_name: str) -> Any:
    """An unstarted profiler object (``start()``, ``step()``, ``stop()``) writing into ``output_dir``."""
    if backend == "npu":
        return _build_npu(options, output_dir, worker_name)
    if backend in ("cuda", "cpu"):
        return _build_torch(backend, options, output_dir, worker_name)
    raise PyptoError(f"unknown capture backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def _schedule_kwargs(options: CaptureOptions) -> dict[str, int]:
    return {
        "wait": options.wait,
        "warmup": options.warmup,
        "active": options.active,
        "repeat": options.repeat,
        "skip_first": options.skip_first,
    }


def _build_npu(options: CaptureOptions, output_dir: Path, worker_name: str) -> Any:
    import torch_npu  # noqa: F401  (registers torch.npu)

    npu_prof = importlib.import_module("torch_npu.profiler")
    export = {"text": "Text", "db": "Db"}[options.export_type]
    experimental = npu_prof._ExperimentalConfig(
        profiler_level=getattr(npu_prof.ProfilerLevel, options.profiler_level),
        aic_metrics=getattr(npu_prof.AiCMetrics, options.aic_metrics),
        l2_cache=options.l2_cache,
        data_simplification=options.data_simplification,
        export_type=getattr(npu_prof.ExportType, export),
    )
    return npu_prof.profile(
        activities=[npu_prof.ProfilerActivity.CPU, npu_prof.ProfilerActivity.NPU],
        schedule=npu_prof.schedule(**_schedule_kwargs(options)) if options.scheduled else None,
        # writes {worker_name}_{timestamp}_ascend_pt/ (docs/formats.md §2.1) and parses it on the way out
        on_trace_ready=npu_prof.tensorboard_trace_handler(str(output_dir), worker_name=worker_name),
        record_shapes=options.record_shapes,
        profile_memory=options.profile_memory,
        with_stack=options.with_stack,
        with_modules=options.with_modules,
        experimental_config=experimental,
    )


def _build_torch(backend: str, options: CaptureOptions, output_dir: Path, worker_name: str) -> Any:
    import torch.profiler as tprof

    activities = [tprof.ProfilerActivity.CPU]
    if backend == "cuda":
        activities.append(tprof.ProfilerActivity.CUDA)
    # the NPU-only options (level, AI Core metrics, L2 cache, export type) have no meaning here
    return tprof.profile(
        activities=activities,
        schedule=tprof.schedule(**_schedule_kwargs(options)) if options.scheduled else None,
        # writes {worker_name}.{time_ms}.pt.trace.json (docs/formats.md §3.1)
        on_trace_ready=tprof.tensorboard_trace_handler(str(output_dir), worker_name=worker_name),
        record_shapes=options.record_shapes,
        profile_memory=options.profile_memory,
        with_stack=options.with_stack,
        with_modules=options.with_modules,
    )
