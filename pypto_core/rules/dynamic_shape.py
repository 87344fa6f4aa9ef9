"""``dynamic_shape``: operators compiled at run time (advisor ``dynamic_shape_analysis`` and
``timeline_op_dispatch``, docs/formats.md §4.3).

Evidence: no operator with ``OP State`` = static (kernel_details / op_summary, CANN >= 8.0), and/or many
``aclopCompileAndExecute`` / compile API calls on the host (advisor threshold 20).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.attribution import IDLE_BUCKETS
from pypto_core.grouping import code_totals, text_codes, value_flags
from pypto_core.i18n import Message, msg
from pypto_core.intervals import intersect_intervals, outermost
from pypto_core.replay import Change
from pypto_core.rules._util import share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import Workload

SAVING_MODEL = msg("With binary kernels (set_compile_mode(jit_compile=False)) the host compile calls "
                   "disappear: saving = the compile calls' time while the device is idle (attribution idle "
                   "buckets); compile time hidden under device work saves nothing.")


def _shape_advice(workload: Workload) -> Message:
    """How to keep the input shapes few, the one place it is chosen: what varies is the sequence length for
    a transformer, the image or batch size for other models (a CNN), and unknown when the workload is."""
    if workload.is_sequence_model():
        return msg("pad varying sequence lengths to a few buckets.")
    if workload.kind in ("training", "inference_other"):
        return msg("keep the input shapes fixed from step to step: resize or pad images to a few fixed sizes "
                   "and keep the batch size constant (DataLoader drop_last=True).")
    return msg("keep the input shapes to a few fixed sizes (pad or bucket whatever varies between steps).")


def _description(calls: int, compile_ns: int, host_calls_recorded: bool, shapes: Message) -> Message:
    """What was seen, then the advice that follows from it: compilations on the host (what they cost is the
    saving); none, though the host's API calls were recorded (the dynamic kernels are prebuilt binaries, and
    compiling cost nothing here); or none recorded at all (not known)."""
    if calls:
        return msg("The host compiled {calls} operators while the model ran ({ms:.1f} ms). Online "
                   "compilation stalls the device. Call torch_npu.npu.set_compile_mode(jit_compile=False) "
                   "to use the prebuilt binary kernels (the default on A2/A3 in recent torch_npu), keep "
                   "ACL_OP_COMPILER_CACHE_MODE=enable, and {shapes}", calls=calls, ms=compile_ns / 1e6,
                   shapes=shapes)
    if host_calls_recorded:
        return msg("Every operator ran as a dynamic-shape kernel, and the host compiled none while the model "
                   "ran: these are the prebuilt binary kernels (jit_compile=False), so compiling cost this "
                   "run no time. Dynamic kernels skip shape-specialised tiling; to keep the shapes the "
                   "kernels see few, {shapes}", shapes=shapes)
    return msg("Every operator ran as a dynamic-shape kernel. This profile records no host API calls "
               "(AscendCL: torch_npu records them from profiler_level Level1 up, in trace_view.json or the "
               "db export; this upload holds neither), so whether the host compiled operators while the "
               "model ran is not known. If it did, call torch_npu.npu.set_compile_mode(jit_compile=False) "
               "to use the prebuilt binary kernels, keep ACL_OP_COMPILER_CACHE_MODE=enable, and {shapes}",
               shapes=shapes)


_COMPILE = re.compile(r"(?i)compile")


@rule("dynamic_shape", title=msg("Operators compiled at run time (dynamic shapes)"),
      saving_model=SAVING_MODEL,
      thresholds={
          "min_compile_calls": Threshold(20, "advisor MAX_OP_COMPILE_NUM (docs/formats.md §4.3)"),
          "min_dynamic_share": Threshold(1.0, "advisor: no static operator at all"),
      },
      blocks=(), remedies=(),
      needs=("kernels.op_state", "api_calls.name", "api_calls.start_ns", "api_calls.dur_ns"),
      vendors=("ascend",), explains="host_launch_bound")
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    dynamic_share = None
    if "op_state" in g.kernels.column_names:
        # counted on codes: a handful of states, no text per kernel
        codes, states = text_codes(g.kernels["op_state"], narrow=True)
        per_state, _ = code_totals(codes, len(states), rows=codes >= 0)  # a slice at a time: no 8-byte copy
        known = int(sum(n for s, n in zip(states, per_state.tolist()) if s != ""))
        if known:
            dyn = int(sum(n for s, n in zip(states, per_state.tolist()) if s.lower() == "dynamic"))
            dynamic_share = dyn / known
    api = ctx.profile.api_calls
    compile_calls, compile_ns = 0, 0
    stalled = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    compiles = stalled
    if api.num_rows:
        # the names matched once each, not per call (4.3 M calls' text was 110 MB on a 5 GB folder)
        codes, names = text_codes(api["name"])
        is_compile = pa.array(value_flags(names, _COMPILE.search)[codes])
        cs = (pc.filter(pc.fill_null(api["start_ns"], 0), is_compile).to_numpy(zero_copy_only=False)
              .astype(np.int64))
        cd = (pc.filter(pc.fill_null(api["dur_ns"], 0), is_compile).to_numpy(zero_copy_only=False)
              .astype(np.int64))
        # One compilation is one outermost call: CANN records opCompile inside aclopCompileAndExecute, and the
        # advisor counts the outer call against its threshold of 20.
        top = outermost(cs, cs + cd)
        compile_calls, compile_ns = int(top.sum()), int(cd[top].sum())
        # what compiling costs the run: the compile calls' time while the device had nothing to run
        a = g.attribution
        if a is not None and compile_calls:
            compiles = (cs[top], cs[top] + cd[top])
            stalled = intersect_intervals(*compiles, *a.intervals(*IDLE_BUCKETS))
    all_dynamic = dynamic_share is not None and dynamic_share >= cfg["min_dynamic_share"]
    many_compiles = compile_calls >= cfg["min_compile_calls"]
    if not (all_dynamic or many_compiles):
        return
    ctx.emit(
        # "static" is OP State's word for a kernel compiled for its shapes: the prebuilt binary kernels the
        # advice turns to are the dynamic-shape ones, so the title never calls static ones precompiled
        title=(msg("No operator runs as a static-shape kernel (OP State is dynamic for all)") if all_dynamic
               else msg("{calls} operator compilations during the run", calls=compile_calls)),
        description=_description(compile_calls, compile_ns, api.num_rows > 0, _shape_advice(g.workload)),
        ops=[],
        evidence={"dynamic_op_share": round(dynamic_share, 4) if dynamic_share is not None else None,
                  "compile_api_calls": compile_calls, "compile_time_us": us(compile_ns),
                  "compile_call_threshold": cfg["min_compile_calls"],
                  "compile_time_share": share(compile_ns, ctx.total_ns)},
        kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=float(compile_ns), intervals=stalled,
        change=Change(host_removed=compiles),  # the host no longer compiles
        saving_model=SAVING_MODEL,
        details={"env": {"ACL_OP_COMPILER_CACHE_MODE": "enable"},
                 "code": "torch_npu.npu.set_compile_mode(jit_compile=False)"},
    )
