"""CPU stand-in for ``torch_npu`` in the capture tests: the NPU cannot exist on this machine.

What it gives a workload, so that the agent's whole loop (capture, patch, capture again) runs on CPU:

* the fused ops of ``tests/core/remedies/fake_torch_npu`` (written from the documented semantics; loaded
  from there, one definition), each wrapped in ``record_function("torch_npu::NAME")`` so that a profile
  shows it as one device kernel, as the real fused op is;
* ``torch.npu.is_available()`` true, so the SDK picks its ``npu`` backend;
* ``torch_npu.profiler``: records with ``torch.profiler`` on CPU and writes torch_npu's Kineto-compatible
  MSPTI export (docs/formats.md §2.8), every host op that would be an NPU kernel becoming a kernel event whose
  time is the CPU time of that op. Times in such a profile are CPU times, never NPU figures.

Never import this outside tests: the capture tests put its folder on a workload's PYTHONPATH.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

IS_TEST_DOUBLE = True
_OPS_PACKAGE = Path(__file__).resolve().parents[3] / "core" / "remedies" / "fake_torch_npu" / "torch_npu"


def _load_ops() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_pypto_fake_torch_npu_ops", _OPS_PACKAGE / "__init__.py",
        submodule_search_locations=[str(_OPS_PACKAGE)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_ops = _load_ops()
calls = _ops.calls
ACL_FORMAT_ND = _ops.ACL_FORMAT_ND
ACL_FORMAT_FRACTAL_NZ = _ops.ACL_FORMAT_FRACTAL_NZ
get_npu_format = _ops.get_npu_format


def _as_kernel(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(f"torch_npu::{name}"):
            return fn(*args, **kwargs)

    return wrapper


FUSED_OPS = ("npu_rms_norm", "npu_add_rms_norm", "npu_add_layer_norm", "npu_rotary_mul", "scatter_update_",
             "npu_scatter_nd_update_", "npu_format_cast", "npu_prompt_flash_attention",
             "npu_incre_flash_attention", "npu_fused_infer_attention_score", "npu_fusion_attention")
for _name in FUSED_OPS:
    globals()[_name] = _as_kernel(_name, getattr(_ops, _name))

from . import npu, profiler  # noqa: E402,F401  (profiler: imported for its side effect, as the real one)

torch.npu = npu  # type: ignore[attr-defined]  (the real torch_npu registers torch.npu too)
