"""Merge a chrome-trace timeline (trace_view.json, msprof_*.json) with the tables read from CSVs.

The timeline (``chrome_trace.write_trace_view``) yields host ops, API calls, device tasks, flows, counters
and steps. kernel_details.csv carries more per kernel (PMU counters, shapes), so when both exist the CSV's
kernels are kept and the timeline's flows are re-pointed at them by the exact start time and name (both
files print the same µs string for a task, docs/formats.md §2.5). Everything here works on saved Parquet
tables, a bounded piece at a time, so that a folder of any size is merged in bounded memory.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.errors import InputError
from pypto_core.formats.chrome_trace import write_trace_view
from pypto_core.formats.parquet_sink import concat_parquet, pieces, write_parquet_stream
from pypto_core.i18n import Text
from pypto_core.memory import release_freed_memory
from pypto_core.profile import STREAM_ENCODING, ProfileMeta, empty_table, read_table, save_tables

_STREAMED = ("host_ops", "api_calls", "kernels", "counters")  # the timeline tables written batch by batch


class SavedTimeline:
    """A folder's timeline file(s) (an msprof timeline may be sliced: in slice order) streamed into
    ``scratch`` as one saved table set, before the folder's other files are read: the timeline is the
    biggest phase, so what the smaller ones keep afterwards cannot stack under its peak."""

    def __init__(self, paths: Sequence[Path], scratch: Path) -> None:
        self.folder = scratch / "timeline"
        self.read: list[tuple[Path, ProfileMeta]] = []
        self.skipped: list[Text] = []
        parts: list[Path] = []
        for i, path in enumerate(paths):
            dest = scratch / f"slice_{i}"
            try:
                self.read.append((path, write_trace_view(path, dest)))
                parts.append(dest)
            except InputError as exc:
                self.skipped.append(exc.skipped(path.name))
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
        trace_files = (self.folder / "flows.parquet", self.folder / "kernels.parquet")
        if has_csv_kernels and all(f.exists() for f in trace_files):
            repoint_saved_flows(self.folder / "flows.parquet", self.folder / "kernels.parquet", csv_kernels,
                                out / "flows.parquet")
        trace_steps = read_table(self.folder / "steps.parquet", "steps")
        if trace_steps.num_rows:
            tables["steps"] = merge_steps(tables.get("steps"), trace_steps)


def _concat_slices(parts: list[Path], dest: Path) -> None:
    """Timeline slices saved one after another: the streamed tables concatenated piece by piece,
    the flows' row indices shifted by the rows of the slices before them."""
    dest.mkdir(parents=True)
    rows = {name: [pq.ParquetFile(p / f"{name}.parquet").metadata.num_rows if (p / f"{name}.parquet").exists()
                   else 0 for p in parts] for name in _STREAMED}
    for name in _STREAMED:
        present = [p / f"{name}.parquet" for p in parts if (p / f"{name}.parquet").exists()]
        if present:
            concat_parquet(present, dest / f"{name}.parquet", **STREAM_ENCODING)
    shifts = {"host_index": "host_ops", "kernel_index": "kernels", "api_index": "api_calls"}
    with_flows = [i for i, p in enumerate(parts) if (p / "flows.parquet").exists()]

    def shifted(n: int, flows: pa.Table) -> pa.Table:
        i = with_flows[n]
        for column, table in shifts.items():
            if column in flows.column_names:
                flows = flows.set_column(flows.schema.get_field_index(column), column,
                                         pc.add(flows[column], sum(rows[table][:i])))
        return flows

    if with_flows:
        concat_parquet([parts[i] / "flows.parquet" for i in with_flows], dest / "flows.parquet",
                       transform=shifted, **STREAM_ENCODING)
    steps = [read_table(part / "steps.parquet", "steps") for part in parts]
    save_tables(dest, ProfileMeta(), {"steps": pa.concat_tables(steps, promote_options="default")})
    for name in (*_STREAMED, "flows"):
        if not (dest / f"{name}.parquet").exists():
            save_tables(dest, ProfileMeta(), {name: empty_table(name)})


def repoint_flows(flows: pa.Table, trace_kernels: pa.Table, csv_kernels: pa.Table) -> pa.Table:
    """Flows indexing the timeline's device tasks → indices into the CSV kernels (same start ns and name),
    in the flows' order.

    Flows whose task has no kernel row (SDMA copies, event records: not in kernel_details) are dropped.
    """
    mapping = _kernel_mapping(lambda: [trace_kernels.select(["start_ns", "name"])],
                              lambda: [csv_kernels.select(["start_ns", "name"])])
    return _repointed(flows, mapping)


def repoint_saved_flows(flows_path: Path, trace_kernels_path: Path, csv_kernels_path: Path,
                        dest: Path) -> int:
    """:func:`repoint_flows` over saved tables into ``dest`` (the rows written), a piece at a time: what is
    held is the mapping from timeline task to CSV kernel (8 bytes a task), and while it is built the keys of
    one time range, never the kernel names or the flows themselves."""
    columns = {"columns": ["start_ns", "name"], "read_dictionary": ["name"]}
    mapping = _kernel_mapping(lambda: pieces(trace_kernels_path, **columns),
                              lambda: pieces(csv_kernels_path, **columns))
    return write_parquet_stream((_repointed(chunk, mapping) for chunk in pieces(flows_path)), dest,
                                **STREAM_ENCODING)


# Keys (start, name code) sorted at once: ~80 bytes each while sorted, so a range of at most this many
# keys a side bounds the mapping's memory (tests make it small to cross ranges).
MAPPING_KEYS = 1 << 20

_Chunks = Callable[[], Iterable[pa.Table]]  # a fresh pass over a kernel table's (start_ns, name) pieces


def _kernel_mapping(trace: _Chunks, csv: _Chunks) -> np.ndarray:
    """Per timeline task (row), the first CSV kernel row with the same start ns and name, or -1.

    Equal keys have equal starts, so the start range is cut into ranges of about ``MAPPING_KEYS`` tasks
    (even widths: kernels come at a steady pace) and each range is matched on its own, both tables read
    once per range. Within one, a sort of both sides' keys, CSV rows first among equals: each run of equal
    keys then starts with its first CSV row, if it has one (a sort holds ~80 bytes a key and returns it;
    Arrow's hash group-by and join held ~3x that).
    """
    names = _NameCodes()
    rows, lo, hi = _row_count_and_span(trace())
    mapping = np.full(rows, -1, dtype=np.int64)
    if lo is None or hi is None:
        return mapping
    ranges = max(1, -(-rows // MAPPING_KEYS))
    edges = [lo + (hi + 1 - lo) * i // ranges for i in range(ranges + 1)]  # Python ints: exact
    for first, last in itertools.pairwise(edges):
        t_row, t_start, t_code = _keys_in(trace(), names, first, last, add=True)
        c_row, c_start, c_code = _keys_in(csv(), names, first, last, add=False)
        if len(t_row) and len(c_row):
            _match(mapping, t_row, t_start, t_code, c_row, c_start, c_code)
    return mapping


def _row_count_and_span(chunks: Iterable[pa.Table]) -> tuple[int, int | None, int | None]:
    rows, lo, hi = 0, None, None
    for chunk in chunks:
        rows += chunk.num_rows
        span = pc.min_max(chunk["start_ns"]).as_py()
        if span["min"] is not None:
            lo = span["min"] if lo is None else min(lo, span["min"])
            hi = span["max"] if hi is None else max(hi, span["max"])
    return rows, lo, hi


def _match(mapping: np.ndarray, t_row: np.ndarray, t_start: np.ndarray, t_code: np.ndarray,
           c_row: np.ndarray, c_start: np.ndarray, c_code: np.ndarray) -> None:
    start = np.concatenate([c_start, t_start])
    code = np.concatenate([c_code, t_code])
    # the row, with the timeline's rows after the CSV's among equal keys (rows stay below 2**40)
    tagged = np.concatenate([c_row, t_row + (1 << 40)])
    del c_start, t_start, c_code, t_code
    order = np.lexsort((tagged, code, start))
    start, code, tagged = start[order], code[order], tagged[order]
    del order
    first = np.empty(len(tagged), bool)
    first[0] = True
    first[1:] = (start[1:] != start[:-1]) | (code[1:] != code[:-1])
    del start, code
    is_trace = tagged >= (1 << 40)
    run = np.cumsum(first) - 1
    run_csv_row = np.where(is_trace[first], -1, tagged[first])  # each run's first CSV row, or -1 for none
    mapping[tagged[is_trace] - (1 << 40)] = run_csv_row[run[is_trace]]


def _keys_in(chunks: Iterable[pa.Table], names: _NameCodes, first: int, last: int, *,
             add: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, start_ns, name code) of the kernels in ``chunks`` (consecutive pieces of one table) that start
    in [first, last) and have a name code. ``add`` (the timeline side): every name gets a code; otherwise
    (the CSV side) a name the timeline never had matches nothing and is left out."""
    rows: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    offset = 0
    for chunk in chunks:
        known = pc.is_valid(chunk["start_ns"]).to_numpy(zero_copy_only=False)  # a null start matches nothing
        start = pc.fill_null(chunk["start_ns"], 0).to_numpy()
        code = pc.fill_null(names.of(chunk["name"], add=add), -1).to_numpy()
        keep = np.flatnonzero(known & (start >= first) & (start < last) & (code >= 0))
        rows.append(keep + offset)
        starts.append(start[keep])
        codes.append(code[keep].astype(np.int32))
        offset += chunk.num_rows
    if not rows:
        return np.array([], np.int64), np.array([], np.int64), np.array([], np.int32)
    return np.concatenate(rows), np.concatenate(starts), np.concatenate(codes)


def _repointed(flows: pa.Table, mapping: np.ndarray) -> pa.Table:
    """``flows`` with kernel_index through ``mapping``; flows with no CSV kernel dropped."""
    index = pc.fill_null(flows["kernel_index"], -1).to_numpy()
    inside = (index >= 0) & (index < len(mapping))
    csv_index = np.where(inside, mapping[np.where(inside, index, 0)], -1)
    column = flows.schema.get_field_index("kernel_index")
    out = flows.set_column(column, "kernel_index", pa.array(csv_index, pa.int64()))
    return out.filter(pa.array(csv_index >= 0))


class _NameCodes:
    """Kernel names as small integer codes: the timeline's names get codes, the CSV's are looked up (a
    name the timeline never has cannot match)."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def of(self, names: pa.Array | pa.ChunkedArray, *, add: bool) -> pa.Array:
        arr = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
        if not pa.types.is_dictionary(arr.type):
            arr = pc.dictionary_encode(arr)
        values = arr.dictionary.to_pylist()  # the distinct names of one row group: few
        lut: list[int | None]
        if add:
            lut = [self._codes.setdefault(v, len(self._codes)) for v in values]
        else:
            lut = [self._codes.get(v) for v in values]
        return pa.array(lut, pa.int32()).take(arr.indices)


def merge_steps(csv_steps: pa.Table | None, trace_steps: pa.Table) -> pa.Table:
    """step_trace_time's breakdown with the timeline's ProfilerStep bounds (by step id)."""
    if csv_steps is None or csv_steps.num_rows == 0:
        return trace_steps
    bounds = trace_steps.select(["step_id", "start_ns", "end_ns"]).rename_columns(
        ["step_id", "t_start", "t_end"])
    keyed = csv_steps.append_column("_row", pa.array(range(csv_steps.num_rows), pa.int64()))
    joined = keyed.join(bounds, "step_id", join_type="left outer", use_threads=False).sort_by("_row")
    for column, bound in (("start_ns", "t_start"), ("end_ns", "t_end")):
        joined = joined.set_column(joined.schema.get_field_index(column), column,
                                   pc.coalesce(joined[bound], joined[column]))
    return joined.drop_columns(["_row", "t_start", "t_end"])
