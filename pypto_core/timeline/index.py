"""The timeline index: built once at ingest, memory-mapped by the web app, answers window queries.

Layout of the index folder (every array is a ``.npy`` file opened with ``mmap_mode="r"``):

- ``timeline.json``: base time, lanes, rows (lane, depth), stored levels, counter ranges.
- ``strings.arrow``: interned event names (Arrow IPC, memory-mapped).
- ``events/``: every slice sorted by (lane, depth, start): start, end, running end, name id, source row.
- ``lod/<k>/``: merged bars at 2**k ns per pixel (see ``lod.merge``), for the levels that shrink the data.
- ``counters/``: counter samples sorted by (lane, time).
- ``rowmap/<table>.npy``: source row -> event index; ``flows/``: host op <-> kernel links.
- ``details/<table>.arrow``: the source rows, for an event's details.
- ``critical/``: the critical path of each step (``pypto_core.critical_path``), its segments in time order:
  start, end, kind, lane, event index (-1: none) and step.

Times in answers are int64 ns relative to ``base_ns`` (the earliest event), small enough for a JS Number;
``base_ns`` itself is sent as a string (docs/formats.md §0.1: absolute ns exceed 2**53).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.attribution import TimeAttribution
from pypto_core.critical_path import HOST, KINDS, SYNC_RETURN, TABLES, profile_critical_path
from pypto_core.i18n import DEFAULT_LANGUAGE
from pypto_core.profile import TABLE_SCHEMAS, Profile
from pypto_core.timeline.lanes import Lane, _base_ns, _Interner, counter_columns, slice_tables
from pypto_core.timeline.lod import MAX_DEPTH, Bars, merge, nesting_depth, running_end

CRITICAL_PATH_MAX_KERNELS = 2_000_000
# 2: rows by containment (lod.nesting_depth), lanes with hidden and detail; 3: critical path; 4: device and
# communication lanes above the host's, a Kineto trace's device a GPU and its collectives NCCL/RCCL
INDEX_VERSION = 4
# A level is stored only when it has at most half the bars of the last stored one, so the whole pyramid is
# no bigger than the events, and a query merges on the fly from at most ~2x the bars it returns.
STORE_RATIO = 0.5
# Below 2**6 ns per pixel nothing in an NPU profile merges (kernels and ops last microseconds).
FIRST_LEVEL = 6
# Answer caps: ~45 JSON bytes per bar and ~30 per counter point keep an answer near 150 KB (target < 200 KB).
MAX_BARS = 2500
MAX_COUNTER_POINTS = 1500
DETAIL_BATCH_ROWS = 16384  # rows per compressed batch of details/*.arrow: one event's details read one batch
MAX_LINKS = 64
# A merged run wide enough to carry a label (the viewer writes labels in bars over ~24 px; answers come at up
# to twice the time per pixel of the view) is named by its
# most frequent member ("17 aten::item + 412 others"), counted exactly from its members; at most this many
# members are read per answer (widest runs first), so the label work stays a few ms. A run past the budget
# is labelled with its count alone; its details (``run``) count every member.
LABEL_MIN_PX = 12
LABEL_MEMBERS = 32_768
RUN_TOP_NAMES = 10
_JS_SAFE = 2**53


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def _write_arrow(path: Path, table: pa.Table, compress: bool, *, name: str = "",
                 saved: Path | None = None) -> list[int]:
    """Write ``table`` as Arrow IPC in fixed-size batches; returns the first row of each batch. ``saved``:
    the Parquet file the profile's table ``name`` was loaded from: the columns the load left out are added
    in step."""
    # lz4: about 3x faster to write than zstd here, and one batch decompresses in well under a millisecond
    options = pa.ipc.IpcWriteOptions(compression="lz4" if compress else None)
    schema, batches = _detail_batches(name, table, saved)
    firsts: list[int] = []
    row = 0
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema, options=options) as writer:
        for batch in batches:
            firsts.append(row)
            row += batch.num_rows
            writer.write_batch(_compact(batch))
    return firsts


def _detail_batches(name: str, table: pa.Table,
                    saved: Path | None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The rows of ``table`` for the details, a batch at a time, with the columns of its saved file that it
    lacks (a kernel table's PMU counters, which diagnosis does not load): those are read from the file in
    step, so that they are never all in memory. Canonical columns first, then the file's extra ones in its
    order (as ``conform`` places them)."""
    batches = table.to_batches(max_chunksize=DETAIL_BATCH_ROWS)
    file_schema = pq.read_schema(saved) if name and saved is not None and saved.exists() else None
    missing = [] if file_schema is None else [f for f in file_schema if f.name not in table.column_names]
    if file_schema is None or not missing:
        return table.schema, iter(batches)
    canonical, present = set(TABLE_SCHEMAS[name].names), set(table.column_names)
    order = ([n for n in table.column_names if n in canonical]
             + [n for n in file_schema.names if n in canonical and n not in present]
             + [n for n in file_schema.names if n not in canonical])
    fields = {f.name: f for f in table.schema} | {f.name: f for f in missing}
    schema = pa.schema([fields[n] for n in order])
    feed = _RowFeed(pq.ParquetFile(saved).iter_batches(batch_size=DETAIL_BATCH_ROWS,
                                                       columns=[f.name for f in missing]))

    def joined() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            extra = feed.take(batch.num_rows)  # the same rows: a load keeps the file's row order
            columns = {n: batch.column(n) for n in batch.schema.names}
            columns.update({n: extra.column(n).combine_chunks() for n in extra.column_names})
            yield pa.RecordBatch.from_arrays([columns[n] for n in order], schema=schema)

    return schema, joined()


class _RowFeed:
    """Rows from an iterator of record batches, handed out ``count`` at a time whatever its batch sizes."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._held: pa.Table | None = None

    def take(self, count: int) -> pa.Table:
        pieces: list[pa.Table] = [] if self._held is None else [self._held]
        have = 0 if self._held is None else self._held.num_rows
        while have < count:
            batch = next(self._batches, None)
            if batch is None:
                raise ValueError("the saved table has fewer rows than the loaded one")
            pieces.append(pa.Table.from_batches([batch]))
            have += batch.num_rows
        rows = pa.concat_tables(pieces)
        self._held = rows.slice(count)
        return rows.slice(0, count)


def _compact(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its nested columns copied to buffers of their own: the IPC writer writes a slice of
    an all-null list column with the offsets of the whole column, which made details files of a
    10-million-event profile ~60 GB before compression (and 16 s of lz4)."""
    columns = [pa.nulls(len(col), col.type) if col.null_count == len(col) and len(col)
               else pa.concat_arrays([col]) if pa.types.is_nested(col.type) else col
               for col in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


class _NpyWriter:
    """An ``.npy`` file of a 1-D array written in pieces: a fixed 128-byte header, patched with the final
    length on close (numpy pads its headers with spaces to a multiple of 64 bytes, so this is a plain
    .npy)."""

    HEADER = 128

    def __init__(self, path: Path, dtype: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.dtype = np.dtype(dtype)
        self.count = 0
        self._file = open(path, "wb")
        self._file.write(b"\0" * self.HEADER)

    def write(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array, self.dtype)
        self._file.write(array.data.cast("B"))
        self.count += len(array)

    def close(self) -> None:
        text = "{'descr': %r, 'fortran_order': False, 'shape': (%d,), }" % (self.dtype.str, self.count)
        body = self.HEADER - 10
        self._file.seek(0)
        header = (text.ljust(body - 1) + "\n").encode("latin1")
        self._file.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", body) + header)
        self._file.close()

    def read(self, first: int, count: int) -> np.ndarray:
        """``count`` items from ``first`` of a closed file,
        into ordinary memory (no mapping stays resident)."""
        return np.fromfile(self.path, self.dtype, count=count,
                           offset=self.HEADER + first * self.dtype.itemsize)


class _Columns:
    """Writers for one set of columns (``events/`` or one ``lod/<k>/``)."""

    def __init__(self, folder: Path, columns: dict[str, Any]) -> None:
        self.writers = {name: _NpyWriter(folder / f"{name}.npy", dtype) for name, dtype in columns.items()}
        self.row_counts: list[np.ndarray] = []

    def __getitem__(self, name: str) -> _NpyWriter:
        return self.writers[name]

    def write(self, **arrays: np.ndarray) -> None:
        for name, array in arrays.items():
            self.writers[name].write(array)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        counts = np.concatenate(self.row_counts) if self.row_counts else np.empty(0, np.int64)
        _save(next(iter(self.writers.values())).path.parent / "offsets.npy",
              np.r_[0, np.cumsum(counts)].astype(np.int64))


def _lane_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Order of one lane's events by start, longest first on ties, then source order (stable)."""
    if len(start) == 0:
        return np.empty(0, np.int64)
    lo = int(start.min())
    dur = end - start
    dmax = int(dur.max())
    if (int(start.max()) - lo + 1) * (dmax + 1) < 2**62:  # one int64 key: a single (mostly presorted) sort
        # (start - lo) * (dmax + 1) + (dmax - dur), worked in place: one array beside the times, not four
        key = start - lo
        key *= dmax + 1
        key += dmax
        key -= dur
        del dur
        return np.argsort(key, kind="stable")
    return np.lexsort((-dur, start))


def _bit_length(t: np.ndarray) -> np.ndarray:
    """Bit length of each non-negative int64 (exact: float64 rounding up near a power of two is corrected)."""
    bits = np.frexp(t.astype(np.float64))[1].astype(np.int64)
    bits = np.minimum(bits, 63)
    over = (bits > 0) & (t < np.left_shift(np.int64(1), np.maximum(bits - 1, 0)))
    bits[over] -= 1
    bits[t <= 0] = 0
    return bits


def _break_sizes(start: np.ndarray, end: np.ndarray, endmax: np.ndarray, row_first: np.ndarray) -> np.ndarray:
    """Histogram (by bit length) of the smallest pixel that separates each event from the one before it.

    At ``P`` ns per pixel, event i starts a new bar iff it or the previous event is at least ``P`` long or
    the gap to the previous events' running end is at least ``P`` (``lod.merge``; merging level by level
    equals merging the raw events at once), i.e. iff ``max(dur_i, dur_i-1, gap_i) >= P``. So the bar count
    of every level follows from this one histogram: rows + #{t >= P}.
    """
    hist = np.zeros(65, np.int64)
    if len(start) < 2:
        return hist
    firsts = row_first[1:] - 1  # a row's first event always starts a bar; counted with the rows
    # a slice of events at a time (the histogram adds up): over 15.7 M events at once its temporaries took
    # 600 MB
    for at in range(1, len(start), _BREAK_SLICE):
        hi = min(at + _BREAK_SLICE, len(start))
        dur = end[at - 1:hi] - start[at - 1:hi]
        t = np.maximum(np.maximum(dur[1:], dur[:-1]), start[at:hi] - endmax[at - 1:hi - 1])
        del dur
        mine = firsts[(firsts >= at - 1) & (firsts < hi - 1)]
        t[mine - (at - 1)] = 0
        hist += np.bincount(_bit_length(t), minlength=65)
    return hist


_BREAK_SLICE = 1 << 20


def build_timeline_index(profile: Profile, out_dir: str | os.PathLike[str], *,
                         attribution: TimeAttribution | None = None, saved: Path | None = None) -> Path:
    """Build the timeline index of ``profile`` in ``out_dir`` (replaced if present); returns the folder.
    ``attribution``: the profile's, when diagnosis already computed it (the critical path stands on it).
    ``saved``: the folder ``profile`` was loaded from, when the load left columns out
    (``diagnosis_step_columns``): the event details read those from its files.

    Lane by lane, so that memory stays near one lane's columns whatever the size of the profile: each lane's
    events are sorted on their own and appended to the ``.npy`` files, the level-of-detail bar counts come
    from one histogram per lane (``_break_sizes``), and the stored levels are then merged lane by lane from
    the events read back from disk.
    """
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    base = _base_ns(profile)
    lanes: list[Lane] = []
    interner = _Interner()
    sources = slice_tables(profile, base, lanes, interner)
    strings = interner.finish()

    events = _Columns(tmp / "events", {"start": np.int64, "end": np.int64, "endmax": np.int64,
                                       "name": np.int32, "row": np.int64})
    rows: list[tuple[int, int]] = []  # (lane, depth) per track row
    # (first event, event count, events per track row) per lane
    lane_spans: list[tuple[int, int, np.ndarray]] = []
    breaks = np.zeros(65, np.int64)
    span_end = 0
    slice_lo, slice_hi = None, 0  # the span of the slices, which the first view fits (counters run longer)
    n = 0
    for src in sources:
        lane_of_row, start_all, end_all = src.columns()
        names = interner.ids(src.slot)
        rowmap = np.full(src.num_rows, -1, np.int64)
        key = lane_of_row + 1  # 0: a row without a start
        by_lane = np.argsort(key.astype(np.uint16) if src.lane_count < 2**16 - 1 else key, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(key, minlength=src.lane_count + 1))]
        del key, lane_of_row
        for local in range(src.lane_count):
            source_rows = by_lane[bounds[local + 1]:bounds[local + 2]]
            m = len(source_rows)
            start, end = start_all[source_rows], end_all[source_rows]
            order = _lane_order(start, end)
            # one array reordered at a time, the old one let go before the next (not three beside three)
            source_rows = source_rows[order]
            start = start[order]
            end = end[order]
            del order
            depth = nesting_depth(None, start, end)
            order = np.argsort(depth, kind="stable")  # by depth, then start (a radix sort on uint8)
            per_depth = np.bincount(depth, minlength=MAX_DEPTH)
            del depth
            source_rows = source_rows[order]
            start = start[order]
            end = end[order]
            del order
            depths = np.flatnonzero(per_depth)
            row_counts = per_depth[depths].astype(np.int64)
            row_first = np.r_[0, np.cumsum(row_counts)[:-1]].astype(np.int64)
            endmax = running_end(np.repeat(np.arange(len(depths), dtype=np.int32), row_counts), end)
            if m:
                span_end = max(span_end, int(end.max()))
                slice_hi = max(slice_hi, int(end.max()))
                slice_lo = int(start.min()) if slice_lo is None else min(slice_lo, int(start.min()))
                breaks += _break_sizes(start, end, endmax, row_first)
            lane_spans.append((n, m, row_counts))
            rows.extend((src.first_lane + local, d) for d in depths.tolist())
            events.write(start=start, end=end, endmax=endmax, name=names[source_rows], row=source_rows)
            rowmap[source_rows] = np.arange(n, n + m, dtype=np.int64)
            n += m
            del start, end, endmax, source_rows
        _save(tmp / "rowmap" / f"{src.table}.npy", rowmap)
        del start_all, end_all, names, rowmap, by_lane
    events.row_counts = [rc for _, _, rc in lane_spans]
    events.close()

    counter_lane, counter_t, counter_v = counter_columns(profile, base, lanes)
    counter_ranges: dict[str, list[int]] = {}
    if len(counter_t):
        span_end = max(span_end, int(counter_t.max()))
        by_lane = np.argsort(counter_lane, kind="stable")
        counter_lane = counter_lane[by_lane]
        t_out = _NpyWriter(tmp / "counters" / "t.npy", np.int64)
        v_out = _NpyWriter(tmp / "counters" / "v.npy", np.float64)
        for lane_id in np.unique(counter_lane).tolist():
            lo, hi = np.searchsorted(counter_lane, [lane_id, lane_id + 1])
            picks = by_lane[lo:hi]
            picks = picks[np.argsort(counter_t[picks], kind="stable")]
            t_out.write(counter_t[picks])
            v_out.write(counter_v[picks])
            counter_ranges[str(lane_id)] = [int(lo), int(hi)]
            values = counter_v[picks]
            values = values[~np.isnan(values)]
            if not len(values) or values.min() == values.max():  # never changes: folded away, and listed
                lanes[lane_id].hidden = True
        t_out.close()
        v_out.close()
        del by_lane
    del counter_lane, counter_t, counter_v

    # The levels to store: a level is stored when it has at most STORE_RATIO of the bars of the last stored
    # one, and the top level (a pixel wider than the whole span) if it still shrinks.
    levels: list[int] = []
    at_least = len(rows) + np.cumsum(breaks[::-1])[::-1]  # at_least[b]: rows + #{t of bit length >= b}
    last_stored = n
    k = FIRST_LEVEL
    while n:
        count = int(at_least[k + 1]) if k + 1 < len(at_least) else len(rows)  # t >= 2**k: bit length > k
        top = (1 << k) > span_end
        if count <= STORE_RATIO * last_stored or (top and not levels) or (top and count < last_stored):
            levels.append(k)
            last_stored = count
        if top:
            break
        k += 1

    # The pyramid, lane by lane from the sorted events read back; merging straight from one stored level to
    # the next equals merging through every level in between (see ``_break_sizes``).
    pyramid = {k: _Columns(tmp / "lod" / str(k), {"start": np.int64, "end": np.int64, "endmax": np.int64,
                                                  "count": np.int32, "busy": np.int64, "longest": np.int64})
               for k in levels}
    for first, m, row_counts in lane_spans:
        if not m or not levels:
            continue
        lane_rows = np.repeat(np.arange(len(row_counts), dtype=np.int32), row_counts)
        bars = Bars.from_events(lane_rows, events["start"].read(first, m), events["end"].read(first, m),
                                np.arange(first, first + m, dtype=np.int64))
        del lane_rows
        for k in levels:
            bars = merge(bars, 1 << k)
            pyramid[k].write(start=bars.start, end=bars.end, endmax=running_end(bars.row, bars.end),
                             count=bars.count, busy=bars.busy, longest=bars.longest)
            pyramid[k].row_counts.append(np.bincount(bars.row, minlength=len(row_counts)).astype(np.int64))
        del bars
    for level in pyramid.values():
        level.close()
    if n:
        assert [pyramid[k]["start"].count for k in levels] == [
            int(at_least[k + 1]) if k + 1 < len(at_least) else len(rows) for k in levels]

    # Source rows, for an event's details, written a batch at a time.
    details: dict[str, list[int]] = {}
    for table_name in sorted({src.table for src in sources}):
        (tmp / "details").mkdir(exist_ok=True)
        from_file = saved / f"{table_name}.parquet" if saved is not None else None
        details[table_name] = _write_arrow(tmp / "details" / f"{table_name}.arrow", profile.table(table_name),
                                           compress=True, name=table_name, saved=from_file)

    flows = profile.flows
    flow_kinds: list[str] = []
    if flows.num_rows:
        host_idx = pc.fill_null(flows["host_index"], -1).to_numpy().astype(np.int64)
        kernel_idx = pc.fill_null(flows["kernel_index"], -1).to_numpy().astype(np.int64)
        kinds = pc.dictionary_encode(pc.fill_null(flows["kind"], "").combine_chunks())
        flow_kinds = kinds.dictionary.to_pylist()
        kind = kinds.indices.to_numpy(zero_copy_only=False).astype(np.int16)
        by_host = np.argsort(host_idx, kind="stable")
        _save(tmp / "flows" / "host.npy", host_idx[by_host])
        _save(tmp / "flows" / "kernel.npy", kernel_idx[by_host])
        _save(tmp / "flows" / "kind.npy", kind[by_host])
        by_kernel = np.argsort(kernel_idx[by_host], kind="stable")
        _save(tmp / "flows" / "by_kernel.npy", by_kernel)

    _write_arrow(tmp / "strings.arrow", pa.table({"s": strings}), compress=False)
    # Bounded work: the path needs the attribution and the replay's graph of the whole profile (about 5 s a
    # million kernels, measured), so past this many kernels the index is built without it and says so
    critical, critical_note = None, None
    if profile.kernels.num_rows <= CRITICAL_PATH_MAX_KERNELS:
        critical = _store_critical_path(profile, tmp, base, lanes, [r for r, _ in rows], attribution)
    else:
        critical_note = ("the critical path is computed for profiles of at most "
                         f"{CRITICAL_PATH_MAX_KERNELS:,} "
                         f"kernels; this one has {profile.kernels.num_rows:,}")
    doc = {
        "version": INDEX_VERSION,
        "base_ns": str(base),
        "end_ns": span_end,
        "slice_span": [slice_lo or 0, slice_hi] if slice_lo is not None else [0, span_end],
        "event_count": n,
        "lanes": [ln.to_dict() for ln in lanes],
        "rows": [[int(a), int(b)] for a, b in rows],
        "levels": levels,
        "counter_ranges": counter_ranges,
        "details": details,
        "flow_kinds": flow_kinds,
        "critical": critical,
        "critical_note": critical_note,
    }
    (tmp / "timeline.json").write_text(json.dumps(doc), encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def _store_critical_path(profile: Profile, folder: Path, base: int, lanes: list[Lane],
                         lane_of_row: list[int], attribution: TimeAttribution | None = None
                         ) -> dict[str, Any] | None:
    """Write ``critical/`` (segments placed on the lanes of the events that stand for them); returns the
    steps' windows and the kinds, or None where the replay does not apply."""
    path = profile_critical_path(profile, attribution)
    if path is None:
        return None
    idx = np.full(len(path), -1, np.int64)
    for code, table in enumerate(TABLES):
        rowmap_file = folder / "rowmap" / f"{table}.npy"
        sel = np.flatnonzero(path.table == code)
        if not len(sel) or not rowmap_file.exists():
            continue
        rowmap = np.load(rowmap_file)
        ok = (path.row[sel] >= 0) & (path.row[sel] < len(rowmap))
        idx[sel[ok]] = rowmap[path.row[sel[ok]]]
    offsets = np.load(folder / "events" / "offsets.npy")
    track_lane = np.asarray(lane_of_row, np.int64)
    lane = np.full(len(path), -1, np.int64)
    known = idx >= 0
    if known.any() and len(track_lane):
        lane[known] = track_lane[np.searchsorted(offsets, idx[known], side="right") - 1]
    # host time no call stands for (the step's bookkeeping after its last call): on the host lane the
    # path's other host time is on, else the first host thread
    host = np.isin(path.kind, [HOST, SYNC_RETURN])
    placed = lane[host & known]
    if len(placed):
        fallback = int(np.bincount(placed).argmax())
    else:
        fallback = next((ln.id for ln in lanes if ln.table in ("host_ops", "api_calls")), -1)
    lane[host & ~known] = fallback
    assert np.all(path.start[1:] >= path.end[:-1]), "critical path segments overlap"  # window() relies on it
    out = folder / "critical"
    for name, array in (("start", path.start - base), ("end", path.end - base), ("kind", path.kind),
                        ("lane", lane), ("idx", idx), ("step", path.step)):
        _save(out / f"{name}.npy", array)
    return {"kinds": list(KINDS), "steps": (path.windows - base).tolist(), "step_ids": path.step_ids,
            "device_ns": path.device_ns().tolist()}


def _js_safe(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _JS_SAFE:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_js_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _js_safe(v) for k, v in value.items()}
    return value


def _merge_segments(s: np.ndarray, e: np.ndarray, kind: np.ndarray, lane: np.ndarray, idx: np.ndarray,
                    step: np.ndarray, count: np.ndarray, pixel: int) -> tuple[np.ndarray, ...]:
    """Consecutive segments on one lane and one step, each narrower than ``pixel``, as one (vectorised)."""
    if len(s) < 2:
        return s, e, kind, lane, idx, step, count
    narrow = (e - s) < pixel
    joins = np.r_[False, narrow[1:] & narrow[:-1] & (lane[1:] == lane[:-1]) & (step[1:] == step[:-1])]
    group = np.cumsum(~joins) - 1
    firsts = np.flatnonzero(~joins)
    dur = e - s
    longest = np.lexsort((-dur, group))  # per group, its longest member first
    head = longest[np.r_[True, group[longest][1:] != group[longest][:-1]]]
    return (s[firsts], np.maximum.reduceat(e, firsts), kind[head], lane[head], idx[head], step[firsts],
            np.add.reduceat(count, firsts))


def _segments_dict(s: np.ndarray, e: np.ndarray, kind: np.ndarray, lane: np.ndarray, idx: np.ndarray,
                   depth: np.ndarray, step: np.ndarray, count: np.ndarray) -> dict[str, list[int]]:
    return {"start": s.tolist(), "dur": (e - s).tolist(), "kind": kind.tolist(), "lane": lane.tolist(),
            "idx": idx.tolist(), "depth": depth.tolist(), "step": step.tolist(), "count": count.tolist()}


def _round6(values: np.ndarray) -> list[float | None]:
    return [None if not math.isfinite(v) else float(f"{v:.6g}") for v in values.tolist()]


class TimelineIndex:
    """A built index, memory-mapped: opening reads one small JSON file; arrays load on first use."""

    def __init__(self, directory: Path, doc: dict[str, Any]) -> None:
        self.dir = directory
        self.doc = doc
        self.base_ns = int(doc["base_ns"])
        self.end_ns = int(doc["end_ns"])
        self.lanes = [Lane(**ln) for ln in doc["lanes"]]
        self.rows = np.array(doc["rows"], np.int64).reshape(-1, 2)
        self.levels: list[int] = list(doc["levels"])
        self._arrays: dict[str, np.ndarray] = {}
        self._strings: pa.Array | None = None
        # (start, end, width, lanes) -> the window's answer
        self._cache: OrderedDict[tuple[int, int, int, tuple[int, ...] | None], dict[str, Any]] = OrderedDict()

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> TimelineIndex:
        path = Path(directory)
        doc = json.loads((path / "timeline.json").read_text(encoding="utf-8"))
        if doc.get("version") != INDEX_VERSION:
            raise ValueError(f"{path}: timeline index version {doc.get('version')}, expected {INDEX_VERSION}")
        return cls(path, doc)

    # -- storage ---------------------------------------------------------------------------------------
    def _a(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is None:
            arr = np.load(self.dir / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            self._arrays[name] = arr
        return arr

    def strings(self) -> pa.Array:
        if self._strings is None:
            reader = pa.ipc.open_file(pa.memory_map(str(self.dir / "strings.arrow")))
            self._strings = reader.read_all()["s"].combine_chunks()
        return self._strings

    @property
    def event_count(self) -> int:
        return int(self.doc["event_count"])

    def lane_dicts(self, language: str = DEFAULT_LANGUAGE) -> list[dict[str, Any]]:
        """The lanes named in ``language`` (``Lane.localized``; ids and ``group_id`` never change)."""
        rows_per_lane = np.bincount(self.rows[:, 0], minlength=len(self.lanes)) if len(self.rows) else \
            np.zeros(len(self.lanes), np.int64)
        return [{**ln.localized(language), "rows": int(rows_per_lane[ln.id]) if ln.kind == "slices" else 1}
                for ln in self.lanes]

    # -- window ----------------------------------------------------------------------------------------
    def _slice(self, prefix: str, rows: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices of bars of ``rows`` overlapping [start, end), and the row of each."""
        offsets = self._a(f"{prefix}/offsets")
        starts, endmax = self._a(f"{prefix}/start"), self._a(f"{prefix}/endmax")
        pieces, owners = [], []
        for r in rows.tolist():
            lo, hi = int(offsets[r]), int(offsets[r + 1])
            if lo == hi:
                continue
            a = lo + int(np.searchsorted(endmax[lo:hi], start, side="right"))
            b = lo + int(np.searchsorted(starts[lo:hi], end, side="left"))
            if b > a:
                pieces.append(np.arange(a, b))
                owners.append(np.full(b - a, r, np.int32))
        if not pieces:
            return np.empty(0, np.int64), np.empty(0, np.int32)
        idx, own = np.concatenate(pieces), np.concatenate(owners)
        visible = self._a(f"{prefix}/end")[idx] > start  # drop ones hidden behind an earlier long bar's end
        return idx[visible], own[visible]

    def _bars(self, level: int, rows: np.ndarray, start: int, end: int) -> Bars:
        stored = [k for k in self.levels if k <= level]
        if stored:
            p = f"lod/{stored[-1]}"
            idx, own = self._slice(p, rows, start, end)
            s, e = self._a(f"{p}/start")[idx], self._a(f"{p}/end")[idx]
            longest = self._a(f"{p}/longest")[idx]
            bars = Bars(own, s, e, self._a(f"{p}/count")[idx].astype(np.int64), self._a(f"{p}/busy")[idx],
                        np.zeros(0), longest)
            bars.longest_dur = self._a("events/end")[longest] - self._a("events/start")[longest]
            exact = stored[-1] == level
        else:
            idx, own = self._slice("events", rows, start, end)
            bars = Bars.from_events(own, self._a("events/start")[idx], self._a("events/end")[idx], idx)
            exact = False
        return bars if exact else merge(bars, 1 << level)

    def window(self, start_ns: int | None = None, end_ns: int | None = None, width_px: int = 1000,
               lanes: list[int] | None = None) -> dict[str, Any]:
        """Tracks for [start_ns, end_ns) (ns relative to ``base_ns``) drawn ``width_px`` wide, JSON-ready.

        The time per pixel is rounded up to a power of two and the window aligned to it, so neighbouring
        requests share answers; the level goes up further while the answer would exceed ``MAX_BARS``.
        """
        width = max(1, min(int(width_px), 8192))
        start = 0 if start_ns is None else int(start_ns)
        end = self.end_ns + 1 if end_ns is None else int(end_ns)
        end = max(end, start + 1)
        level = max(0, math.ceil(math.log2(max(1.0, (end - start) / width))))
        pixel = 1 << level
        start, end = (start // pixel) * pixel, -(-end // pixel) * pixel
        wanted = None if lanes is None else tuple(sorted({int(x) for x in lanes}))
        key = (start, end, width, wanted)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]

        n_lanes = len(self.lanes)
        lane_set = set(range(n_lanes)) if wanted is None else {x for x in wanted if 0 <= x < n_lanes}
        rows = (np.flatnonzero(np.isin(self.rows[:, 0], list(lane_set))) if len(self.rows)
                else np.empty(0, np.int64))
        bars = self._bars(level, rows, start, end)
        truncated_level = level
        while len(bars) > MAX_BARS:
            truncated_level += 1
            bars = merge(bars, 1 << truncated_level)

        names = self._a("events/name")[bars.longest] if len(bars) else np.empty(0, np.int32)
        top, top_count = self._run_tops(bars, pixel)
        uniq, local = np.unique(np.r_[names, top[top >= 0]].astype(np.int32), return_inverse=True)
        local = local.reshape(-1)
        top_local = np.full(len(bars), -1, np.int64)
        top_local[top >= 0] = local[len(names):]
        local = local[:len(names)]
        tracks: list[dict[str, Any]] = []
        lane_of_bar = self.rows[bars.row, 0] if len(bars) else np.empty(0, np.int64)
        depth_of_bar = self.rows[bars.row, 1] if len(bars) else np.empty(0, np.int64)
        for lane in sorted(lane_set):
            info = self.lanes[lane]
            if info.kind != "slices":
                continue
            sel = np.flatnonzero(lane_of_bar == lane)
            if not len(sel):
                continue
            tracks.append({
                "lane": lane, "kind": "slices",
                "start": bars.start[sel].tolist(),
                "dur": (bars.end[sel] - bars.start[sel]).tolist(),
                "depth": depth_of_bar[sel].tolist(),
                "name": local[sel].tolist(),
                "count": bars.count[sel].tolist(),
                # a merged run's most frequent member name (index into names, -1: not counted) and its count
                "top": top_local[sel].tolist(),
                "top_count": top_count[sel].tolist(),
                "busy": bars.busy[sel].tolist(),
                "idx": bars.longest[sel].tolist(),
            })
        tracks.extend(self._counter_tracks(lane_set, start, end, pixel, width))
        answer = {
            "version": INDEX_VERSION,
            "base_ns": str(self.base_ns),
            "span_ns": [0, self.end_ns],
            "slice_span_ns": list(self.doc.get("slice_span") or [0, self.end_ns]),  # what the first view fits
            "start_ns": start,
            "end_ns": end,
            "width_px": width,
            "ns_per_px": pixel,
            "bar_ns": 1 << truncated_level,  # > ns_per_px when the cap forced coarser merging
            "names": self.strings().take(pa.array(uniq, pa.int32())).to_pylist() if len(uniq) else [],
            "lanes": self.lane_dicts(),
            "tracks": tracks,
            "bars": len(bars),
        }
        self._cache[key] = answer
        if len(self._cache) > 64:
            self._cache.popitem(last=False)
        return answer

    def _row_first(self, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Index of the first event of each row in ``rows`` starting at or after ``starts`` (a run's first
        member: a run holds the events of its row that start in [run start, run end))."""
        offsets, ev_start = self._a("events/offsets"), self._a("events/start")
        out = np.empty(len(rows), np.int64)
        for i, (r, t) in enumerate(zip(rows.tolist(), starts.tolist())):
            lo, hi = int(offsets[r]), int(offsets[r + 1])
            out[i] = lo + int(np.searchsorted(ev_start[lo:hi], t, side="left"))
        return out

    def _run_tops(self, bars: Bars, pixel: int) -> tuple[np.ndarray, np.ndarray]:
        """Most frequent member name id and its count for the merged runs wide enough for a label (widest
        first, within ``LABEL_MEMBERS``); -1 and 0 elsewhere."""
        top = np.full(len(bars), -1, np.int64)
        top_count = np.zeros(len(bars), np.int64)
        if not len(bars):
            return top, top_count
        wide = np.flatnonzero((bars.count > 1) & (bars.end - bars.start >= LABEL_MIN_PX * pixel))
        wide = wide[np.argsort(-(bars.end[wide] - bars.start[wide]), kind="stable")]
        wide = wide[np.cumsum(bars.count[wide]) <= LABEL_MEMBERS]
        if not len(wide):
            return top, top_count
        first = self._row_first(bars.row[wide], bars.start[wide])
        counts = bars.count[wide]
        # every member's event index, run by run, without a Python loop over members
        owner = np.repeat(np.arange(len(wide)), counts)
        member = np.repeat(first - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(int(counts.sum()))
        names = np.asarray(self._a("events/name")[member], np.int64)
        keys, freq = np.unique(owner * (int(names.max()) + 1) + names, return_counts=True)
        run_of_key = keys // (int(names.max()) + 1)
        best = np.lexsort((-freq, run_of_key))  # per run, the most frequent name first
        head = best[np.r_[True, run_of_key[best][1:] != run_of_key[best][:-1]]]
        top[wide[run_of_key[head]]] = keys[head] % (int(names.max()) + 1)
        top_count[wide[run_of_key[head]]] = freq[head]
        return top, top_count

    def run(self, lane: int, depth: int, start_ns: int, end_ns: int, top: int = RUN_TOP_NAMES,
            language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
        """A merged run's members: the events of row (lane, depth) starting in [start_ns, end_ns), their
        count, busy time, and the top names by count and by total time."""
        match = np.flatnonzero((self.rows[:, 0] == int(lane)) & (self.rows[:, 1] == int(depth)))
        if not len(match):
            raise KeyError(f"no row {depth} on lane {lane}")
        r = int(match[0])
        offsets = self._a("events/offsets")
        lo, hi = int(offsets[r]), int(offsets[r + 1])
        ev_start = self._a("events/start")
        a = lo + int(np.searchsorted(ev_start[lo:hi], int(start_ns), side="left"))
        b = lo + int(np.searchsorted(ev_start[lo:hi], int(end_ns), side="left"))
        names = np.asarray(self._a("events/name")[a:b])
        durs = np.asarray(self._a("events/end")[a:b]) - np.asarray(ev_start[a:b])
        strings = self.strings()
        by_count = np.bincount(names, minlength=1) if len(names) else np.zeros(1, np.int64)
        by_time = np.bincount(names, weights=durs, minlength=1) if len(names) else np.zeros(1)

        def listed(order: np.ndarray) -> list[dict[str, Any]]:
            order = order[by_count[order] > 0][:top]
            picked = strings.take(pa.array(order, pa.int32())).to_pylist() if len(order) else []
            return [{"name": nm, "count": int(by_count[i]), "total_ns": int(by_time[i])}
                    for nm, i in zip(picked, order.tolist())]

        info = self.lanes[int(lane)].localized(language)
        return {
            "lane": int(lane), "depth": int(depth), "lane_name": info["name"], "group": info["group"],
            "count": int(b - a), "distinct_names": int(np.count_nonzero(by_count)),
            "start_ns": int(ev_start[a]) if b > a else int(start_ns),
            "end_ns": int(np.asarray(self._a("events/end")[a:b]).max()) if b > a else int(end_ns),
            "busy_ns": int(durs.sum()),
            "by_count": listed(np.argsort(-by_count, kind="stable")),
            "by_time": listed(np.argsort(-by_time, kind="stable")),
        }

    def critical(self, start_ns: int | None = None, end_ns: int | None = None,
                 width_px: int = 1000) -> dict[str, Any]:
        """The critical path's segments overlapping [start_ns, end_ns) and the steps they belong to.

        Segments narrower than the time per pixel merge with their neighbours on the same lane (the longest
        member's kind and event are kept, ``count`` says how many); the time per pixel doubles until the
        answer holds at most ``MAX_BARS`` segments. ``available`` is false where the profile has no replay
        (no device tasks in steps)."""
        info = self.doc.get("critical")
        if not info:
            empty = np.zeros(0, np.int64)
            return {"available": False, "reason": self.doc.get("critical_note"), "kinds": [], "steps": [],
                    "segments": _segments_dict(*[empty] * 8)}
        width = max(1, min(int(width_px), 8192))
        start = 0 if start_ns is None else int(start_ns)
        end = self.end_ns + 1 if end_ns is None else int(end_ns)
        end = max(end, start + 1)
        c_start, c_end = self._a("critical/start"), self._a("critical/end")
        # segments tile steps that never overlap: starts and ends are both sorted
        a = int(np.searchsorted(c_end, start, side="right"))
        b = int(np.searchsorted(c_start, end, side="left"))
        sel = np.arange(a, max(a, b))
        s, e = np.asarray(c_start[sel]), np.asarray(c_end[sel])
        kind, lane = np.asarray(self._a("critical/kind")[sel]), np.asarray(self._a("critical/lane")[sel])
        idx, step = np.asarray(self._a("critical/idx")[sel]), np.asarray(self._a("critical/step")[sel])
        count = np.ones(len(sel), np.int64)
        pixel = 1 << max(0, math.ceil(math.log2(max(1.0, (end - start) / width))))
        while True:
            s, e, kind, lane, idx, step, count = _merge_segments(s, e, kind, lane, idx, step, count, pixel)
            if len(s) <= MAX_BARS:
                break
            pixel *= 2
        depth = np.zeros(len(s), np.int64)
        has = idx >= 0
        if has.any():
            depth[has] = self.rows[np.searchsorted(self._a("events/offsets"), idx[has], side="right") - 1, 1]
        windows = np.asarray(info["steps"], np.int64).reshape(-1, 2)
        device = np.asarray(info["device_ns"], np.int64)
        ids = info.get("step_ids") or [None] * len(windows)
        shown = np.flatnonzero((windows[:, 1] > start) & (windows[:, 0] < end))
        return {
            "available": True,
            "kinds": info["kinds"],
            "start_ns": start, "end_ns": end, "seg_ns": pixel,
            "steps": [{"step": int(k), "step_id": ids[k], "start_ns": int(windows[k, 0]),
                       "end_ns": int(windows[k, 1]), "device_ns": int(device[k])} for k in shown.tolist()],
            "segments": _segments_dict(s, e, kind, lane, idx, depth, step, count),
        }

    def _counter_tracks(self, lane_set: set[int], start: int, end: int, pixel: int,
                        width: int) -> list[dict[str, Any]]:
        ranges = {int(k): v for k, v in self.doc["counter_ranges"].items() if int(k) in lane_set}
        if not ranges:
            return []
        t_all, v_all = self._a("counters/t"), self._a("counters/v")
        # Buckets of a power-of-two number of pixels, so all counter tracks together stay under the cap.
        px = 1 << max(0, math.ceil(math.log2(max(1.0, len(ranges) * width / MAX_COUNTER_POINTS))))
        bucket_ns = pixel * px
        out = []
        for lane, (lo, hi) in sorted(ranges.items()):
            t = t_all[lo:hi]
            a = max(0, int(np.searchsorted(t, start, side="left")) - 1)  # one sample before: the line enters
            b = min(len(t), int(np.searchsorted(t, end, side="right")) + 1)
            ts, vs = np.asarray(t[a:b]), np.asarray(v_all[lo + a:lo + b])
            if len(ts) > 2 * width // px:
                bucket = (ts - start) // bucket_ns
                first = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
                vmin, vmax = np.fmin.reduceat(vs, first), np.fmax.reduceat(vs, first)
                ts = ts[first]
            else:
                vmin = vmax = vs
            out.append({"lane": lane, "kind": "counter", "t": ts.tolist(), "min": _round6(vmin),
                        "max": _round6(vmax) if vmax is not vmin else None})
        return out

    # -- search and details ----------------------------------------------------------------------------
    def _lane_of_event(self, idx: np.ndarray | int) -> np.ndarray:
        row = np.searchsorted(self._a("events/offsets"), idx, side="right") - 1
        lanes: np.ndarray = self.rows[row, 0]
        return lanes

    def search(self, query: str, limit: int = 100) -> dict[str, Any]:
        """Events whose name contains ``query`` (case-insensitive):
        the total, and the first ``limit`` in time."""
        query = (query or "").strip()
        strings = self.strings()
        if not query or len(strings) == 0:
            return {"query": query, "total": 0, "names": [], "matches": []}
        hits = pc.match_substring(strings, query, ignore_case=True)
        hit_names = np.asarray(hits.to_numpy(zero_copy_only=False))
        name_ids = np.flatnonzero(hit_names)
        if not len(name_ids):
            return {"query": query, "total": 0, "names": [], "matches": []}
        hits = np.flatnonzero(hit_names[self._a("events/name")])
        starts = self._a("events/start")[hits]
        limit = max(0, int(limit))
        if len(hits) > limit:
            pick = np.argpartition(starts, limit - 1)[:limit] if limit else np.empty(0, np.int64)
        else:
            pick = np.arange(len(hits))
        pick = pick[np.argsort(starts[pick], kind="stable")]
        idx = hits[pick]
        lanes = self._lane_of_event(idx) if len(idx) else np.empty(0, np.int64)
        ends = self._a("events/end")[idx]
        names = strings.take(pa.array(self._a("events/name")[idx])).to_pylist() if len(idx) else []
        return {
            "query": query,
            "total": int(len(hits)),
            "names": strings.take(pa.array(name_ids[:100])).to_pylist(),
            "matches": [{"lane": int(ln), "idx": int(i), "name": nm, "start_ns": int(s), "dur_ns": int(e - s)}
                        for ln, i, nm, s, e in zip(lanes.tolist(), idx.tolist(), names, starts[pick].tolist(),
                                                   ends.tolist())],
        }

    def _brief(self, idx: int) -> dict[str, Any]:
        s, e = int(self._a("events/start")[idx]), int(self._a("events/end")[idx])
        name = self.strings()[int(self._a("events/name")[idx])].as_py()
        row = int(np.searchsorted(self._a("events/offsets"), idx, side="right")) - 1
        return {"lane": int(self.rows[row, 0]), "depth": int(self.rows[row, 1]), "idx": int(idx),
                "name": name, "start_ns": s, "dur_ns": e - s}

    def _source_row(self, table: str, row: int) -> dict[str, Any]:
        firsts = self.doc["details"].get(table)
        if not firsts:
            return {}
        batch_no = int(np.searchsorted(firsts, row, side="right")) - 1
        reader = pa.ipc.open_file(pa.memory_map(str(self.dir / "details" / f"{table}.arrow")))
        batch = reader.get_batch(batch_no)
        fields: dict[str, Any] = _js_safe(batch.slice(row - firsts[batch_no], 1).to_pylist()[0])
        return fields

    def _links(self, table: str, row: int) -> list[dict[str, Any]]:
        if not (self.dir / "flows" / "host.npy").exists() or table not in ("host_ops", "kernels"):
            return []
        host, kernel, kind = self._a("flows/host"), self._a("flows/kernel"), self._a("flows/kind")
        if table == "host_ops":
            lo, hi = np.searchsorted(host, [row, row + 1])
            picks, other, direction = np.arange(lo, hi), kernel, "kernel"
        else:
            by_kernel = self._a("flows/by_kernel")
            lo, hi = np.searchsorted(kernel[by_kernel], [row, row + 1])
            picks, other, direction = by_kernel[lo:hi], host, "host_op"
        target_map = self._a(f"rowmap/{'kernels' if direction == 'kernel' else 'host_ops'}")
        links = []
        for p in np.asarray(picks)[:MAX_LINKS].tolist():
            target_row = int(other[p])
            if not 0 <= target_row < len(target_map) or target_map[target_row] < 0:
                continue
            links.append({**self._brief(int(target_map[target_row])), "role": direction,
                          "kind": self.doc["flow_kinds"][int(kind[p])]})
        return links

    def event(self, lane: int | None, idx: int, language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
        """One event: times, its source row, and the host ops or kernels linked to it by flows."""
        idx = int(idx)
        if not 0 <= idx < self.event_count:
            raise KeyError(f"no event {idx}")
        brief = self._brief(idx)
        if lane is not None and int(lane) != brief["lane"]:
            raise KeyError(f"event {idx} is not on lane {lane}")
        info = self.lanes[brief["lane"]]
        shown = info.localized(language)
        row = int(self._a("events/row")[idx])
        return {
            **brief,
            "lane_name": shown["name"],
            "group": shown["group"],
            "table": info.table,
            "row": row,
            "start_abs_ns": str(self.base_ns + brief["start_ns"]),
            "args": self._source_row(info.table, row),
            "links": self._links(info.table, row),
        }
