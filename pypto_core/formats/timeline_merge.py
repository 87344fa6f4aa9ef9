"""Merge a chrome-trace timeline (trace_view.json, msprof_*.json) with the tables read from CSVs.

The timeline reader (``pypto_core.formats.chrome_trace.read_trace_view``) yields host ops, API calls,
device tasks, flows, counters and steps. kernel_details.csv carries more per kernel (PMU counters, shapes),
so when both exist the CSV's kernels are kept and the timeline's flows are re-pointed at them by the exact
start time and name (both files print the same µs string for a task, FORMATS.md §2.5).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import numpy as np

from pypto_core.errors import InputError
from pypto_core.profile import ProfileMeta, read_table

_TRACE_TABLES = ("host_ops", "api_calls", "kernels", "flows", "counters", "steps")


def _trace_reader() -> Any | None:
    try:
        module = importlib.import_module("pypto_core.formats.chrome_trace")
    except ModuleNotFoundError as exc:
        if exc.name != "pypto_core.formats.chrome_trace":
            raise
        return None
    return getattr(module, "read_trace_view", None)


def attach_trace(
    paths: Path | Sequence[Path],
    tables: dict[str, pa.Table],
    meta: ProfileMeta,
    usable: list[str],
) -> dict[str, pa.Table]:
    """Read the timeline file(s) (slices in order) and merge them into ``tables``; warnings go to ``meta``."""
    files = [paths] if isinstance(paths, Path) else list(paths)
    files = [p for p in files if p.is_file()]
    if not files:
        return tables
    reader = _trace_reader()
    if reader is None:
        meta.warnings.append(
            f"skipped {files[0].name}: the timeline reader is not available in this build; "
            "host ops, API calls and flows are missing"
        )
        return tables
    parts: list[Any] = []
    for path in files:
        try:
            parts.append(reader(path))
        except InputError as exc:
            meta.warnings.append(f"skipped {path.name}: {exc.reason}")
            continue
        meta.source_files.append(str(path))
        usable.append(path.name)
    if not parts:
        return tables
    trace = _concat_parts(parts)
    for hint in ("device", "device_id", "rank"):
        value = _hint(parts[0], hint)
        if value is not None and getattr(meta, hint, None) is None:
            setattr(meta, hint, value)
    for w in _warnings(parts):
        meta.warnings.append(w)

    merged = dict(tables)
    for name in ("host_ops", "api_calls", "counters"):
        if trace.get(name) is not None and trace[name].num_rows:
            merged[name] = trace[name]
    trace_kernels = trace.get("kernels")
    flows = trace.get("flows")
    if "kernels" in tables and tables["kernels"].num_rows:
        if flows is not None and flows.num_rows and trace_kernels is not None:
            merged["flows"] = repoint_flows(flows, trace_kernels, tables["kernels"])
    else:
        if trace_kernels is not None:
            merged["kernels"] = trace_kernels
        if flows is not None:
            merged["flows"] = flows
    trace_steps = trace.get("steps")
    if trace_steps is not None and trace_steps.num_rows:
        merged["steps"] = merge_steps(tables.get("steps"), trace_steps)
    return merged


def _hint(part: Any, name: str) -> Any:
    for holder in (part, getattr(part, "meta", None), getattr(part, "hints", None)):
        if holder is None:
            continue
        value = holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)
        if value is not None:
            return value
    return None


def _warnings(parts: list[Any]) -> list[str]:
    out: list[str] = []
    for p in parts:
        w = getattr(p, "warnings", None)
        if isinstance(w, list):
            out.extend(str(x) for x in w)
    return out


def _concat_parts(parts: list[Any]) -> dict[str, pa.Table | None]:
    """Slices of one timeline concatenated; flow indices shifted by the kernels/host ops before them."""
    out: dict[str, pa.Table | None] = {}
    for name in _TRACE_TABLES:
        tabs = [getattr(p, name, None) for p in parts]
        tabs = [t for t in tabs if t is not None]
        if not tabs:
            out[name] = None
            continue
        if name == "flows" and len(tabs) > 1:
            shifted = []
            host_off = kernel_off = 0
            for p in parts:
                f = getattr(p, "flows", None)
                if f is not None and f.num_rows:
                    f = f.set_column(f.schema.get_field_index("host_index"), "host_index", pc.add(f["host_index"], host_off))
                    f = f.set_column(f.schema.get_field_index("kernel_index"), "kernel_index", pc.add(f["kernel_index"], kernel_off))
                    shifted.append(f)
                host_off += getattr(p, "host_ops").num_rows if getattr(p, "host_ops", None) is not None else 0
                kernel_off += getattr(p, "kernels").num_rows if getattr(p, "kernels", None) is not None else 0
            tabs = shifted or tabs[:1]
        out[name] = pa.concat_tables(tabs, promote_options="default") if len(tabs) > 1 else tabs[0]
    return out


def repoint_flows(flows: pa.Table, trace_kernels: pa.Table, csv_kernels: pa.Table) -> pa.Table:
    """Flows indexing the timeline's device tasks → indices into the CSV kernels (same start ns and name).

    Flows whose task has no kernel row (SDMA copies, event records: not in kernel_details) are dropped.
    """
    return _repoint(flows, [trace_kernels.select(["start_ns", "name"])], [csv_kernels.select(["start_ns", "name"])])


def repoint_saved_flows(flows_path: Path, trace_kernels_path: Path, csv_kernels_path: Path) -> pa.Table:
    """:func:`repoint_flows` over saved tables, reading the kernels one row group at a time: what is held is
    three integers per kernel (row, start, name code), never the kernel names themselves."""
    flows = read_table(flows_path, "flows")
    return _repoint(flows, _row_groups(trace_kernels_path), _row_groups(csv_kernels_path))


def _row_groups(path: Path) -> Iterator[pa.Table]:
    source = pq.ParquetFile(path, read_dictionary=["name"])
    try:
        for i in range(source.metadata.num_row_groups):
            yield source.read_row_group(i, columns=["start_ns", "name"])
    finally:
        source.close()


def _repoint(flows: pa.Table, trace_chunks: Iterable[pa.Table], csv_chunks: Iterable[pa.Table]) -> pa.Table:
    names = _NameCodes()
    t_keys = _kernel_keys(trace_chunks, names, needed=pc.unique(pc.drop_null(flows["kernel_index"])))
    c_keys = _kernel_keys(csv_chunks, names)
    c_keys = c_keys.group_by(["start_ns", "code"], use_threads=False).aggregate([("row", "min")])
    mapping = t_keys.join(c_keys, ["start_ns", "code"], join_type="inner", use_threads=False).select(
        ["row", "row_min"]
    ).rename_columns(["kernel_index", "csv_index"])
    joined = flows.join(mapping, "kernel_index", join_type="inner", use_threads=False)
    extras = [c for c in flows.column_names if c not in ("host_index", "kernel_index", "kind")]
    columns = {"host_index": joined["host_index"], "kernel_index": joined["csv_index"], "kind": joined["kind"]}
    columns.update({c: joined[c] for c in extras})
    return pa.table(columns)


class _NameCodes:
    """Kernel names as small integer codes: the timeline's names get codes, the CSV's are looked up (a
    name the timeline's flows never reach cannot match)."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def of(self, names: pa.Array | pa.ChunkedArray, *, add: bool) -> pa.Array:
        arr = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
        if not pa.types.is_dictionary(arr.type):
            arr = pc.dictionary_encode(arr)
        values = arr.dictionary.to_pylist()  # the distinct names of one row group: few
        if add:
            lut = [self._codes.setdefault(v, len(self._codes)) for v in values]
        else:
            lut = [self._codes.get(v) for v in values]
        return pa.array(lut, pa.int32()).take(arr.indices)


def _kernel_keys(chunks: Iterable[pa.Table], names: _NameCodes, *, needed: pa.Array | None = None) -> pa.Table:
    """(row, start_ns, code) of the kernels in ``chunks`` (consecutive slices of one table). With
    ``needed`` (the timeline side): only those rows, and their names get codes; without (the CSV side):
    rows whose name has no code are left out."""
    parts: list[pa.Table] = []
    offset = 0
    for chunk in chunks:
        rows = pa.array(np.arange(offset, offset + chunk.num_rows, dtype=np.int64))
        offset += chunk.num_rows
        if needed is not None:
            keep = pc.is_in(rows, value_set=needed)
            chunk, rows = chunk.filter(keep), rows.filter(keep)
        code = names.of(chunk["name"], add=needed is not None)
        parts.append(pa.table({"row": rows, "start_ns": chunk["start_ns"], "code": code}).filter(pc.is_valid(code)))
    schema = pa.schema([("row", pa.int64()), ("start_ns", pa.int64()), ("code", pa.int32())])
    return pa.concat_tables([t.cast(schema) for t in parts]) if parts else schema.empty_table()


def merge_steps(csv_steps: pa.Table | None, trace_steps: pa.Table) -> pa.Table:
    """step_trace_time's breakdown with the timeline's ProfilerStep bounds (by step id)."""
    if csv_steps is None or csv_steps.num_rows == 0:
        return trace_steps
    bounds = trace_steps.select(["step_id", "start_ns", "end_ns"]).rename_columns(["step_id", "t_start", "t_end"])
    keyed = csv_steps.append_column("_row", pa.array(range(csv_steps.num_rows), pa.int64()))
    joined = keyed.join(bounds, "step_id", join_type="left outer", use_threads=False).sort_by("_row")
    joined = joined.set_column(joined.schema.get_field_index("start_ns"), "start_ns", pc.coalesce(joined["t_start"], joined["start_ns"]))
    joined = joined.set_column(joined.schema.get_field_index("end_ns"), "end_ns", pc.coalesce(joined["t_end"], joined["end_ns"]))
    return joined.drop_columns(["_row", "t_start", "t_end"])
