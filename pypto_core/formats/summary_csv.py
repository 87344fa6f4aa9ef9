"""The smaller summary tables shared by torch_npu (ASCEND_PROFILER_OUTPUT) and msprof
(mindstudio_profiler_output).

Same headers in both, except the memory unit: torch_npu writes MB, msprof KB (docs/formats.md §0.8); each
reader finds the unit in the column name (``Total Reserved(MB)`` / ``(KB)``) instead of assuming it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats import csvtable
from pypto_core.formats.csvtable import ConversionNotes, to_float, to_int, to_ns, to_text
from pypto_core.i18n import msg
from pypto_core.profile import TABLE_SCHEMAS, conform

_UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
_UNIT_RE = re.compile(r"^(?P<base>.*?)\((?P<unit>B|KB|MB|GB)\)$")


def _find(header: list[str], *prefixes: str) -> tuple[str, int] | None:
    """The first column named ``prefix(UNIT)`` for one of ``prefixes``, and its unit in bytes."""
    for prefix in prefixes:
        for h in header:
            m = _UNIT_RE.match(h)
            if m and m.group("base").strip() == prefix:
                return h, _UNIT_BYTES[m.group("unit")]
    return None


def _bytes(arr: pa.ChunkedArray, unit: int, notes: ConversionNotes, column: str) -> pa.ChunkedArray:
    values = to_float(arr, column=column, notes=notes)
    # -1 is "unknown" in npu_module_mem (docs/formats.md §2.4); negative sizes are never real.
    values = pc.if_else(pc.less(values, 0), pa.scalar(None, pa.float64()), values)
    return pc.round(pc.multiply(values, float(unit))).cast(pa.int64())


def _require(path: str | os.PathLike[str], header: list[str], *columns: str) -> None:
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(str(path), msg("required column {column!r} is missing (header: {header})",
                                        column=missing[0], header=", ".join(header[:8])))


def read_memory_record(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """memory_record.csv / memory_record_*.csv → ``memory`` rows (component totals over time)."""
    table = csvtable.read_csv_table(path)
    header = table.column_names
    _require(path, header, "Component", "Timestamp(us)")
    allocated = _find(header, "Total Allocated")
    reserved = _find(header, "Total Reserved")
    active = _find(header, "Total Active")
    if reserved is None:
        raise InputError(str(path), msg("required column {column!r} is missing",
                                        column="Total Reserved(MB|KB)"))
    n = table.num_rows
    cols: dict[str, Any] = {
        "component": to_text(table["Component"]),
        "ts_ns": to_ns(table["Timestamp(us)"], column="Timestamp(us)", notes=notes),
        "allocated_bytes": _bytes(table[allocated[0]], allocated[1], notes, allocated[0]) if allocated
        else pa.nulls(n, pa.int64()), "reserved_bytes": _bytes(table[reserved[0]], reserved[1], notes,
                                                               reserved[0]),
        "device": to_text(table[_first(header, "Device Type", "Device")])
        if _first(header, "Device Type", "Device") else pa.nulls(n, pa.string()),
    }
    if active:
        cols["active_bytes"] = _bytes(table[active[0]], active[1], notes, active[0])
    cols["source"] = pa.array(["memory_record"] * n, pa.string())
    return conform("memory", pa.table(cols))


def read_npu_module_mem(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """npu_module_mem.csv → ``memory`` rows (reserved bytes per CANN module)."""
    table = csvtable.read_csv_table(path)
    header = table.column_names
    _require(path, header, "Component", "Timestamp(us)")
    reserved = _find(header, "Total Reserved")
    if reserved is None:
        raise InputError(str(path), msg("required column {column!r} is missing",
                                        column="Total Reserved(MB|KB)"))
    n = table.num_rows
    device_col = _first(header, "Device", "Device Type")
    cols = {
        "component": to_text(table["Component"]),
        "ts_ns": to_ns(table["Timestamp(us)"], column="Timestamp(us)", notes=notes),
        "allocated_bytes": pa.nulls(n, pa.int64()),
        "reserved_bytes": _bytes(table[reserved[0]], reserved[1], notes, reserved[0]),
        "device": to_text(table[device_col]) if device_col else pa.nulls(n, pa.string()),
        "source": pa.array(["npu_module_mem"] * n, pa.string()),
    }
    return conform("memory", pa.table(cols))


def read_operator_memory(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """operator_memory.csv → ``memory`` rows at each allocation, with the op name, size and lifetime."""
    table = csvtable.read_csv_table(path)
    header = table.column_names
    _require(path, header, "Name", "Allocation Time(us)")
    size = _find(header, "Size")
    allocated = _find(header, "Allocation Total Allocated")
    reserved = _find(header, "Allocation Total Reserved")
    n = table.num_rows
    device_col = _first(header, "Device Type", "Device")
    cols = {
        "component": pa.array(["operator"] * n, pa.string()),
        "ts_ns": to_ns(table["Allocation Time(us)"], column="Allocation Time(us)", notes=notes),
        "allocated_bytes": _bytes(table[allocated[0]], allocated[1], notes, allocated[0]) if allocated
        else pa.nulls(n, pa.int64()),
        "reserved_bytes": _bytes(table[reserved[0]], reserved[1], notes, reserved[0]) if reserved
        else pa.nulls(n, pa.int64()),
        "device": to_text(table[device_col]) if device_col else pa.nulls(n, pa.string()),
        "source": pa.array(["operator_memory"] * n, pa.string()), "op_name": to_text(table["Name"]),
        "size_bytes": _bytes(table[size[0]], size[1], notes, size[0]) if size else pa.nulls(n, pa.int64()),
        "release_ns": (
            to_ns(table["Release Time(us)"], column="Release Time(us)", notes=notes)
            if "Release Time(us)" in header
            else pa.nulls(n, pa.int64())
        ),
    }
    return conform("memory", pa.table(cols))


def _first(header: list[str], *names: str) -> str | None:
    return next((n for n in names if n in header), None)


# step_trace_time.csv columns (µs) → canonical/extra step columns (ns)
_STEP_COLUMNS = {
    "Computing": "computing_ns",
    "Communication(Not Overlapped)": "communication_not_overlapped_ns",
    "Overlapped": "overlapped_ns",
    "Communication": "communication_ns",
    "Free": "free_ns",
    "Stage": "stage_ns",
    "Bubble": "bubble_ns",
    "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_exclude_receive_ns",
    "Preparing": "preparing_ns",
}


def read_step_trace_time(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """step_trace_time.csv → ``steps`` (one row per step; start/end are filled later from the kernels)."""
    table = csvtable.read_csv_table(path)
    header = table.column_names
    _require(path, header, "Step", "Computing", "Free")
    n = table.num_rows
    cols: dict[str, Any] = {"step_id": to_int(table["Step"], column="Step", notes=notes)}
    for src, dst in _STEP_COLUMNS.items():
        if src in header:
            cols[dst] = to_ns(table[src], column=src, notes=notes)
    if "Device_id" in header:
        cols["device_id"] = to_int(table["Device_id"], column="Device_id", notes=notes)
    cols.setdefault("start_ns", pa.nulls(n, pa.int64()))
    cols.setdefault("end_ns", pa.nulls(n, pa.int64()))
    return conform("steps", pa.table(cols))


# msprof step_trace_*.csv (docs/formats.md §1.4): µs columns → extra step columns in ns.
_ITERATION_COLUMNS = {
    "FP Start(us)": "fp_start_ns",
    "BP End(us)": "bp_end_ns",
    "FP to BP Time(us)": "fp_to_bp_ns",
    "Iteration Refresh(us)": "iteration_refresh_ns",
    "Data Aug Bound(us)": "data_aug_bound_ns",
}


def read_msprof_step_trace(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """msprof step_trace_*.csv (``Iteration ID`` rows) → ``steps``.

    An iteration ends at ``Iteration End`` and lasts ``Iteration Time`` (end minus the previous end, per the
    msprof docs), so it starts at their difference; without a time the start is ``FP Start``. The
    ``Reduce Start/Duration`` pairs (one per all-reduce) are summed into ``reduce_ns`` and counted in
    ``reduce_count``; whether they overlap compute is not known here, so ``communication_ns`` stays empty.
    """
    table = csvtable.read_csv_numbered(path)
    header = table.column_names
    _require(path, header, "Iteration ID", "Iteration End(us)")
    n = table.num_rows
    end = to_ns(table["Iteration End(us)"], column="Iteration End(us)", notes=notes)
    cols: dict[str, Any] = {"step_id": to_int(table["Iteration ID"], column="Iteration ID", notes=notes)}
    for src, dst in _ITERATION_COLUMNS.items():
        if src in header:
            cols[dst] = to_ns(table[src], column=src, notes=notes)
    if "Iteration Time(us)" in header:
        cols["iteration_ns"] = to_ns(table["Iteration Time(us)"], column="Iteration Time(us)", notes=notes)
        start = pc.subtract(end, cols["iteration_ns"])
    else:
        start = pa.nulls(n, pa.int64())
    if "fp_start_ns" in cols:
        start = pc.coalesce(start, cols["fp_start_ns"])
    cols["start_ns"] = start
    cols["end_ns"] = end
    reduce_cols = [c for c in header if c.split(" #")[0] == "Reduce Duration(us)"]
    if reduce_cols:
        durations = [pc.fill_null(to_ns(table[c], column=c, notes=notes), 0) for c in reduce_cols]
        present = [pc.cast(pc.is_valid(to_ns(table[c])), pa.int64()) for c in reduce_cols]
        total = durations[0]
        count = present[0]
        for d, p in zip(durations[1:], present[1:]):
            total, count = pc.add(total, d), pc.add(count, p)
        cols["reduce_ns"] = total
        cols["reduce_count"] = count
    if "Model ID" in header:
        cols["model_id"] = to_int(table["Model ID"], column="Model ID", notes=notes)
    if "Device_id" in header:
        cols["device_id"] = to_int(table["Device_id"], column="Device_id", notes=notes)
    return conform("steps", pa.table(cols))


def read_statistic(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """op_statistic / api_statistic: small aggregate tables kept as rows of numbers in the metadata."""
    table = csvtable.read_csv_table(path)
    rows: list[dict[str, Any]] = []
    numeric = {c: to_float(table[c]) for c in table.column_names if csvtable.is_numeric_column(table[c])}
    texts = {c: to_text(table[c]) for c in table.column_names if c not in numeric}
    for i in range(table.num_rows):
        row: dict[str, Any] = {c: a[i].as_py() for c, a in texts.items()}
        row.update({c: a[i].as_py() for c, a in numeric.items()})
        rows.append(row)
    return rows


def read_l2_cache(path: str | os.PathLike[str], notes: ConversionNotes) -> pa.Table:
    """l2_cache.csv → (stream_id, task_id, name, l2_hit_rate, l2_victim_rate) for joining onto kernels."""
    table = csvtable.read_csv_table(path)
    header = table.column_names
    _require(path, header, "Stream Id", "Task Id", "Hit Rate", "Victim Rate")
    return pa.table(
        {
            "stream_id": to_int(table["Stream Id"], column="Stream Id", notes=notes),
            "task_id": to_int(table["Task Id"], column="Task Id", notes=notes),
            "l2_hit_rate": to_float(table["Hit Rate"], column="Hit Rate", notes=notes),
            "l2_victim_rate": to_float(table["Victim Rate"], column="Victim Rate", notes=notes),
        }
    )


def empty(name: str) -> pa.Table:
    return TABLE_SCHEMAS[name].empty_table()


def file_label(path: str | os.PathLike[str]) -> str:
    return Path(path).name
