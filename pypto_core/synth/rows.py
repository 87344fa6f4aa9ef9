"""One placed kernel as a kernel_details.csv / op_summary_*.csv row, in the real column layouts.

docs/formats.md §1.3 and §2.3: kernel_details is op_summary with renamed columns and a leading ``Step Id``;
CANN 8.3.RC1 still writes ``Block Dim``/``Mix Block Dim``, the 2026 msprof/torch_npu write ``Block Num``/
``Mix Block Num``. Start times end in a TAB; shapes are quoted strings that contain their own quotes.
"""

from __future__ import annotations

from pypto_core.synth.kernels import Kernel, Tensor
from pypto_core.synth.schedule import Placed

VARIANTS = ("cann83", "2026")
MODEL_ID_NONE = "4294967295"  # UINT32_MAX: no model id (docs/formats.md §0.4)

_SHAPE_COLUMNS = ["HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                  "Output Data Types", "Output Formats", "Context ID"]
# PipeUtilization on A2/A3 (split cube/vector cores), verbatim from the CANN 8.3.RC1 sample.
PIPE_COLUMNS_SPLIT = ["aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio",
                      "aic_scalar_time(us)", "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio",
                      "aic_mte2_time(us)", "aic_mte2_ratio", "aic_fixpipe_time(us)", "aic_fixpipe_ratio",
                      "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)",
                      "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
                      "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate",
                      "cube_utilization(%)"]
# Coupled chips (310P): no aic_/aiv_ prefix (docs/formats.md §1.3, [DOC]).
PIPE_COLUMNS_COUPLED = ["aicore_time(us)", "total_cycles", "vec_time(us)", "vec_ratio", "mac_time(us)",
                        "mac_ratio", "scalar_time(us)", "scalar_ratio", "mte1_time(us)", "mte1_ratio",
                        "mte2_time(us)", "mte2_ratio", "mte3_time(us)", "mte3_ratio", "icache_miss_rate"]


def block_columns(variant: str) -> list[str]:
    return ["Block Num", "Mix Block Num"] if variant == "2026" else ["Block Dim", "Mix Block Dim"]


def kernel_details_header(variant: str, coupled: bool) -> list[str]:
    return (["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
             "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"] + block_columns(variant)
            + _SHAPE_COLUMNS + (PIPE_COLUMNS_COUPLED if coupled else PIPE_COLUMNS_SPLIT))


def op_summary_header(variant: str, coupled: bool, *, legacy: bool = False) -> list[str]:
    """op_summary's columns; ``legacy``: the CANN <= 7.0 era (``device_N/summary``), without ``Device_id``
    (one file per device), ``OP State`` and ``HF32 Eligible`` (both added around CANN 8.0, docs/formats.md
    §0.9;
    [INF] from the 2023 kernel_details samples, which are op_summary renamed)."""
    if legacy:
        return (["Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "Task Type", "Task Start Time(us)",
                 "Task Duration(us)", "Task Wait Time(us)"] + block_columns("cann83") + _SHAPE_COLUMNS[1:]
                + (PIPE_COLUMNS_COUPLED if coupled else PIPE_COLUMNS_SPLIT))
    return (["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
             "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"] + block_columns(variant)
            + _SHAPE_COLUMNS + (PIPE_COLUMNS_COUPLED if coupled else PIPE_COLUMNS_SPLIT))


def us_text(ns: int) -> str:
    """Epoch µs with 3 decimals, exact (docs/formats.md §0.1)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _r(x: float) -> str:
    return str(round(x, 3))


def _quoted(items: list[str]) -> str:
    return '"' + ";".join(items) + '"'


def _pipes_split(p: Placed, freq_mhz: int) -> list[str]:
    k = p.kernel
    dur_us = p.dur_ns / 1000
    t = dur_us * k.busy
    s = p.ratio_scale
    has_aic = k.core in ("AI_CORE", "MIX_AIC", "MIX_AIV")
    has_aiv = k.core in ("AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
    out: list[str] = []
    if has_aic:
        blocks = k.block_dim
        out += [_r(t), str(int(t * freq_mhz * blocks))]
        for pipe in ("mac", "scalar", "mte1", "mte2", "fixpipe"):
            ratio = min(0.999, k.pipes.get("aic_" + pipe, 0.0) * s)
            out += [_r(t * ratio), _r(ratio)]
        out.append(_r(0.004 * s))
    else:
        out += ["0.0", "0"] + ["0.0"] * 10 + ["0.0"]
    if has_aiv:
        tv = t * (0.98 if has_aic else 1.0)
        blocks = k.mix_block_dim if has_aic else k.block_dim
        out += [_r(tv), str(int(tv * freq_mhz * blocks))]
        for pipe in ("vec", "scalar", "mte2", "mte3"):
            ratio = min(0.999, k.pipes.get("aiv_" + pipe, 0.0) * s)
            out += [_r(tv * ratio), _r(ratio)]
        out.append(_r(0.03 * s))
    else:
        out += ["0.0", "0"] + ["0.0"] * 8 + ["0.0"]
    out.append(f"{t / dur_us * 100:.3f}" if has_aic else "0.000")
    return out


def _pipes_coupled(p: Placed, freq_mhz: int) -> list[str]:
    k = p.kernel
    t = p.dur_ns / 1000 * k.busy
    s = p.ratio_scale
    g = k.pipes.get
    ratios = {"vec": g("aiv_vec", 0.0), "mac": g("aic_mac", 0.0),
              "scalar": max(g("aic_scalar", 0.0), g("aiv_scalar", 0.0)), "mte1": g("aic_mte1", 0.0),
              "mte2": max(g("aic_mte2", 0.0), g("aiv_mte2", 0.0)), "mte3": g("aiv_mte3", 0.0)}
    out = [_r(t), str(int(t * freq_mhz * k.block_dim))]
    for pipe in ("vec", "mac", "scalar", "mte1", "mte2", "mte3"):
        ratio = min(0.999, ratios[pipe] * s)
        out += [_r(t * ratio), _r(ratio)]
    out.append(_r(0.01 * s))
    return out


def static_cells(k: Kernel) -> dict[str, str]:
    """The cells of a kernel row that do not change with its placement in time."""
    mix = k.core.startswith("MIX")
    return {"name": k.name, "op_type": k.op_type, "core": k.core, "block_dim": str(k.block_dim),
            "mix_block_dim": str(k.mix_block_dim), "in_dtypes": ";".join(t.dtype for t in k.inputs),
            "in_fmts": ";".join(t.fmt for t in k.inputs), "out_dtypes": ";".join(t.dtype for t in k.outputs),
            "out_fmts": ";".join(t.fmt for t in k.outputs), "context": "0" if mix else "N/A"}


def csv_cell(text: str) -> str:
    """``text`` as Python's csv writer (QUOTE_MINIMAL, doublequote) writes one cell."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def shapes_cell(tensors: tuple[Tensor, ...]) -> str:
    return _quoted([",".join(map(str, t.shape)) for t in tensors])


def row_cells(static: dict[str, str], *, task_id: str, start: str, dur: str, wait: str, in_shapes: str,
              out_shapes: str, pipes: list[str], legacy: bool = False) -> list[str]:
    """The columns from ``Model ID`` to the end in op_summary order; shared by the per-row reference and the
    step templates of ``templates`` (which pass placeholders), so both write the same layout. ``legacy``:
    the CANN <= 7.0 columns (no ``OP State``/``HF32 Eligible``, no TAB after the start time)."""
    s = static
    if legacy:
        return ([MODEL_ID_NONE, task_id, str(2), s["name"], s["op_type"], s["core"], start, dur, wait,
                 s["block_dim"], s["mix_block_dim"], in_shapes, s["in_dtypes"], s["in_fmts"], out_shapes,
                 s["out_dtypes"], s["out_fmts"], s["context"]] + pipes)
    return ([MODEL_ID_NONE, task_id, str(2), s["name"], s["op_type"], "dynamic", s["core"], start + "\t", dur,
             wait, s["block_dim"], s["mix_block_dim"], "NO", in_shapes, s["in_dtypes"], s["in_fmts"],
             out_shapes, s["out_dtypes"], s["out_fmts"], s["context"]] + pipes)


def kernel_cells(p: Placed, *, device_id: int, freq_mhz: int, coupled: bool,
                 legacy: bool = False) -> list[str]:
    """The columns from ``Model ID`` to the end, in op_summary order without Device_id (shared by both files);
    ``Name``/``Op Name`` and the times are already formatted as the real files write them. The per-row
    reference of the step templates (tests check that both write the same bytes)."""
    k = p.kernel
    return row_cells(static_cells(k), task_id=str(p.task_id), start=us_text(p.start_ns),
                     dur=f"{p.dur_ns / 1000:.3f}", wait=f"{p.wait_ns / 1000:.6f}",
                     in_shapes=shapes_cell(k.inputs), out_shapes=shapes_cell(k.outputs),
                     pipes=_pipes_coupled(p, freq_mhz) if coupled else _pipes_split(p, freq_mhz),
                     legacy=legacy)
