"""Merge a chrome-trace timeline (trace_view.json, msprof_*.json) with the tables read from CSVs.

The timeline (``chrome_trace.write_trace_view``) yields host ops, API calls, device tasks, flows, counters
and steps. kernel_details.csv carries more per kernel (PMU counters, shapes), so when both exist the CSV's
kernels are kept and the timeline's flows are re-pointed at them by the exact start time and name (both
files print the same µs string for a task, FORMATS.md §2.5). Everything here works on saved Parquet
tables, one row group at a time, so that a folder of any size is merged in bounded memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.errors import InputError
from pypto_core.formats.chrome_trace import write_trace_view
from pypto_core.formats.parquet_sink import concat_parquet, row_groups
from pypto_core.memory import release_freed_memory
from pypto_core.profile import (TIME_COLUMNS, ProfileMeta, empty_table, parquet_dictionary_columns, read_table,
                                save_tables)

_STREAMED = ("host_ops", "api_calls", "kernels", "counters")  # the timeline tables written batch by batch


class SavedTimeline:
    """A folder's timeline file(s) (an msprof timeline may be sliced: in slice order) streamed into
    ``scratch`` as one saved table set, before the folder's other files are read: the timeline is the
    biggest phase, so what the smaller ones keep afterwards cannot stack under its peak."""

    def __init__(self, paths: Sequence[Path], scratch: Path) -> None:
        self.folder = scratch / "timeline"
        self.read: list[tuple[Path, ProfileMeta]] = []
        self.skipped: list[str] = []
        parts: list[Path] = []
        for i, path in enumerate(paths):
            dest = scratch / f"slice_{i}"
            try:
                self.read.append((path, write_trace_view(path, dest)))
                parts.append(dest)
            except InputError as exc:
                self.skipped.append(f"skipped {path.name}: {exc.reason}")
            release_freed_memory()
        if len(parts) == 1:
            os.replace(parts[0], self.folder)
        elif parts:
            _concat_slices(parts, self.folder)

    def merge(self, out: Path, tables: dict[str, pa.Table], meta: ProfileMeta, usable: list[str]) -> None:
        """Into the profile being written at ``out`` (its kernel table, if any, already there; ``tables``,
        its small tables): host ops, API calls and counters taken; the timeline's device tasks only where
        the CSVs gave no kernel (otherwise its flows are re-pointed at the CSV's kernels); its
        ProfilerStep bounds joined onto the steps. Warnings, sources and hints go to ``meta``."""
        meta.warnings.extend(self.skipped)
        if not self.read:
            return
        for path, _ in self.read:
            meta.source_files.append(str(path))
            usable.append(path.name)
        first = self.read[0][1]
        for hint in ("device", "device_id", "rank"):
            if getattr(meta, hint) is None:
                setattr(meta, hint, getattr(first, hint))
        for _, slice_meta in self.read:
            meta.warnings.extend(slice_meta.warnings)
        csv_kernels = out / "kernels.parquet"
        has_csv_kernels = csv_kernels.exists() and pq.ParquetFile(csv_kernels).metadata.num_rows > 0
        for name in ("host_ops", "api_calls", "counters") + (() if has_csv_kernels else ("kernels", "flows")):
            if (self.folder / f"{name}.parquet").exists():
                os.replace(self.folder / f"{name}.parquet", out / f"{name}.parquet")
        if has_csv_kernels:
            tables["flows"] = repoint_saved_flows(self.folder / "flows.parquet", self.folder / "kernels.parquet",
                                                  csv_kernels)
        trace_steps = read_table(self.folder / "steps.parquet", "steps")
        if trace_steps.num_rows:
            tables["steps"] = merge_steps(tables.get("steps"), trace_steps)


def _concat_slices(parts: list[Path], dest: Path) -> None:
    """Timeline slices saved one after another: the streamed tables concatenated row group by row group,
    the flows' row indices shifted by the rows of the slices before them."""
    dest.mkdir(parents=True)
    rows = {name: [pq.ParquetFile(p / f"{name}.parquet").metadata.num_rows if (p / f"{name}.parquet").exists()
                   else 0 for p in parts] for name in _STREAMED}
    for name in _STREAMED:
        present = [p / f"{name}.parquet" for p in parts if (p / f"{name}.parquet").exists()]
        if present:
            concat_parquet(present, dest / f"{name}.parquet", dictionary_columns=parquet_dictionary_columns,
                           statistics_columns=TIME_COLUMNS)
    flows, steps = [], []
    shifts = {"host_index": "host_ops", "kernel_index": "kernels", "api_index": "api_calls"}
    for i, part in enumerate(parts):
        f = read_table(part / "flows.parquet", "flows")
        for column, table in shifts.items():
            if column in f.column_names:
                f = f.set_column(f.schema.get_field_index(column), column,
                                 pc.add(f[column], sum(rows[table][:i])))
        flows.append(f)
        steps.append(read_table(part / "steps.parquet", "steps"))
    save_tables(dest, ProfileMeta(), {"flows": pa.concat_tables(flows, promote_options="default"),
                                      "steps": pa.concat_tables(steps, promote_options="default")})
    for name in _STREAMED:
        if not (dest / f"{name}.parquet").exists():
            save_tables(dest, ProfileMeta(), {name: empty_table(name)})


def repoint_flows(flows: pa.Table, trace_kernels: pa.Table, csv_kernels: pa.Table) -> pa.Table:
    """Flows indexing the timeline's device tasks → indices into the CSV kernels (same start ns and name).

    Flows whose task has no kernel row (SDMA copies, event records: not in kernel_details) are dropped.
    """
    return _repoint(flows, [trace_kernels.select(["start_ns", "name"])], [csv_kernels.select(["start_ns", "name"])])


def repoint_saved_flows(flows_path: Path, trace_kernels_path: Path, csv_kernels_path: Path) -> pa.Table:
    """:func:`repoint_flows` over saved tables, reading the kernels one row group at a time: what is held is
    three integers per kernel (row, start, name code), never the kernel names themselves."""
    flows = read_table(flows_path, "flows")
    columns = {"columns": ["start_ns", "name"], "read_dictionary": ["name"]}
    return _repoint(flows, row_groups(trace_kernels_path, **columns), row_groups(csv_kernels_path, **columns))


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
