"""``torch_npu.profiler`` of the CPU stand-in: torch.profiler on CPU, written as torch_npu's MSPTI Kineto
export (docs/formats.md §2.8) with the host ops that would run on the NPU as kernel events.

The kernel of an op is given the op's CPU start and duration; the device stream is idle wherever the host
was between ops, which is what an eager NPU run launched op by op looks like. A ``torch_npu::NAME``
annotation (one of the stand-in's fused ops) is one kernel, and nothing inside it is another.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.profiler as _tprof

# aten op -> the Ascend op type it runs as in eager mode (docs/domain.md §3.1); the outermost mapped op is the
# kernel
ATEN_KERNELS = {
    "aten::linear": "MatMulV2", "aten::matmul": "MatMulV2", "aten::mm": "MatMulV2", "aten::addmm": "MatMulV2",
    "aten::bmm": "BatchMatMulV2", "aten::add": "Add", "aten::add_": "Add", "aten::mul": "Mul",
    "aten::mul_": "Mul", "aten::div": "RealDiv", "aten::div_": "RealDiv", "aten::pow": "Pow",
    "aten::mean": "ReduceMean", "aten::sum": "ReduceSum", "aten::rsqrt": "Rsqrt", "aten::neg": "Neg",
    "aten::cat": "ConcatD", "aten::silu": "Swish", "aten::_to_copy": "Cast", "aten::copy_": "TensorMove",
    "aten::clone": "TensorMove", "aten::cos": "Cos", "aten::sin": "Sin", "aten::embedding": "GatherV2",
    "aten::index_select": "GatherV2", "aten::argmax": "ArgMaxV2", "aten::softmax": "SoftmaxV2",
    "aten::_softmax": "SoftmaxV2", "aten::fill_": "Fill", "aten::masked_fill": "MaskedFill",
    "aten::where": "Select", "aten::arange": "Range",
    "aten::scaled_dot_product_attention": "FlashAttentionScore",
}
FUSED_KERNELS = {
    "npu_rms_norm": "RmsNorm", "npu_add_rms_norm": "AddRmsNorm", "npu_add_layer_norm": "AddLayerNorm",
    "npu_rotary_mul": "RotaryMul", "scatter_update_": "ScatterUpdate",
    "npu_scatter_nd_update_": "ScatterNdUpdate", "npu_format_cast": "TransData",
    "npu_prompt_flash_attention": "PromptFlashAttention", "npu_incre_flash_attention": "IncreFlashAttention",
    "npu_fused_infer_attention_score": "FusedInferAttentionScore",
    "npu_fusion_attention": "FlashAttentionScore",
}
_CUBE = {"MatMulV2", "BatchMatMulV2", "FlashAttentionScore", "PromptFlashAttention", "IncreFlashAttention",
         "FusedInferAttentionScore"}
DEVICE_PID, STREAM = 0, 2


class _Names:
    """``ProfilerLevel.Level1`` and the like: the stand-in accepts every name the SDK passes."""

    def __getattr__(self, name: str) -> str:
        return name


ProfilerLevel = AiCMetrics = ExportType = _Names()


class ProfilerActivity:
    CPU = "CPU"
    NPU = "NPU"


class _ExperimentalConfig:
    def __init__(self, **kwargs: Any) -> None:
        self.options = kwargs


schedule = _tprof.schedule


def kernel_name(event: dict[str, Any]) -> str | None:
    name = str(event.get("name", ""))
    if event.get("cat") == "user_annotation" and name.startswith("torch_npu::"):
        return FUSED_KERNELS.get(name.split("::", 1)[1])
    if event.get("cat") == "cpu_op":
        return ATEN_KERNELS.get(name)
    return None


def to_npu_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """The CPU trace with a kernel (and its launch) for each op that would run on the NPU."""
    events = trace.get("traceEvents", [])
    ops = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")),
                 key=lambda e: (e.get("pid"), e.get("tid"), float(e["ts"]), -float(e.get("dur", 0))))
    added: list[dict[str, Any]] = []
    covered_until: dict[tuple[Any, Any], float] = {}
    correlation = 1
    for op in ops:
        thread = (op.get("pid"), op.get("tid"))
        start, dur = float(op["ts"]), float(op.get("dur", 0))
        if start < covered_until.get(thread, float("-inf")):
            continue  # inside an op that is already one kernel
        name = kernel_name(op)
        if name is None:
            continue
        covered_until[thread] = start + dur
        external = (op.get("args") or {}).get("External id")
        added.append({"ph": "X", "cat": "privateuse1_runtime", "name": "aclnnLaunch", "pid": op.get("pid"),
                      "tid": op.get("tid"), "ts": start, "dur": 0, "args": {"correlation": correlation}})
        added.append({"ph": "X", "cat": "kernel", "name": name, "pid": DEVICE_PID, "tid": STREAM, "ts": start,
                      "dur": dur, "args": {"streamId": STREAM, "stream": STREAM, "device": 0,
                                           "type": "KERNEL_AICORE" if name in _CUBE else "KERNEL_AIVEC",
                                           "correlation": correlation, "External id": external}})
        correlation += 1
    added.append({"ph": "M", "name": "process_name", "pid": DEVICE_PID, "tid": 0, "args": {"name": "NPU"}})
    added.append({"ph": "M", "name": "process_labels", "pid": DEVICE_PID, "tid": 0,
                  "args": {"labels": "Ascend NPU (CPU stand-in: times are CPU times)"}})
    return {**trace, "traceEvents": events + added}


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              **_: Any) -> Callable[[Any], None]:
    def handler(prof: Any) -> None:
        out = Path(dir_name)
        out.mkdir(parents=True, exist_ok=True)
        fd, raw = tempfile.mkstemp(suffix=".json", dir=out)
        os.close(fd)
        try:
            prof.export_chrome_trace(raw)
            trace = json.loads(Path(raw).read_text())
        finally:
            os.unlink(raw)
        name = f"{worker_name or 'standin'}.{int(time.time() * 1000)}.pt.trace.json"
        (out / name).write_text(json.dumps(to_npu_trace(trace)))

    return handler


def profile(*, activities: Any = None, schedule: Any = None, on_trace_ready: Any = None,
            record_shapes: bool = False, profile_memory: bool = False, with_stack: bool = False,
            with_modules: bool = False, experimental_config: Any = None) -> Any:
    return _tprof.profile(activities=[_tprof.ProfilerActivity.CPU], schedule=schedule,
                          on_trace_ready=on_trace_ready, record_shapes=record_shapes,
                          profile_memory=profile_memory, with_stack=with_stack, with_modules=with_modules)
