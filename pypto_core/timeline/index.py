"""The timeline index: built once at ingest, memory-mapped by the web app, answers window queries.

Layout of the index folder (every array is a ``.npy`` file opened with ``mmap_mode="r"``):

- ``timeline.json``: base time, lanes, rows (lane, depth), stored levels, counter ranges.
- ``strings.arrow``: interned event names (Arrow IPC, memory-mapped).
- ``events/``: every slice sorted by (lane, depth, start): start, end, running end, name id, source row.
- ``lod/<k>/``: merged bars at 2**k ns per pixel (see ``lod.merge``), for the levels that shrink the data.
- ``counters/``: counter samples sorted by (lane, time).
- ``rowmap/<table>.npy``: source row -> event index; ``flows/``: host op <-> kernel links.
- ``details/<table>.arrow``: the source rows, for an event's details.

Times in answers are int64 ns relative to ``base_ns`` (the earliest event), small enough for a JS Number;
``base_ns`` itself is sent as a string (FORMATS.md §0.1: absolute ns exceed 2**53).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.profile import Profile
from pypto_core.timeline.lanes import Lane, collect_lanes
from pypto_core.timeline.lod import MAX_DEPTH, Bars, merge, nesting_depth, running_end

INDEX_VERSION = 1
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
_JS_SAFE = 2**53


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def _write_arrow(path: Path, table: pa.Table, compress: bool) -> list[int]:
    """Write ``table`` as Arrow IPC in fixed-size batches; returns the first row of each batch."""
    # lz4: about 3x faster to write than zstd here, and one batch decompresses in well under a millisecond
    options = pa.ipc.IpcWriteOptions(compression="lz4" if compress else None)
    firsts: list[int] = []
    row = 0
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=DETAIL_BATCH_ROWS):
            firsts.append(row)
            row += batch.num_rows
            writer.write_batch(batch)
    return firsts


def build_timeline_index(profile: Profile, out_dir: str | os.PathLike[str]) -> Path:
    """Build the timeline index of ``profile`` in ``out_dir`` (replaced if present); returns the folder."""
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    ev = collect_lanes(profile)
    # Sort by lane and start, longest first on ties so parents precede children; then give each event a depth.
    order = np.lexsort((ev.start - ev.end, ev.start, ev.lane))
    lane, start, end, name, row = ev.lane[order], ev.start[order], ev.end[order], ev.name[order], ev.row[order]
    depth = nesting_depth(lane, start, end)
    order = np.lexsort((start, depth, lane))  # stable: keeps parents first among equal starts
    lane, start, end, name, row, depth = (a[order] for a in (lane, start, end, name, row, depth))
    n = len(start)

    row_key = lane.astype(np.int64) * MAX_DEPTH + depth
    row_first = np.flatnonzero(np.r_[True, row_key[1:] != row_key[:-1]]) if n else np.empty(0, np.int64)
    offsets = np.r_[row_first, n].astype(np.int64)
    track_row = np.repeat(np.arange(len(row_first), dtype=np.int32), np.diff(offsets))

    _save(tmp / "events" / "start.npy", start)
    _save(tmp / "events" / "end.npy", end)
    _save(tmp / "events" / "endmax.npy", running_end(track_row, end))
    _save(tmp / "events" / "name.npy", name)
    _save(tmp / "events" / "row.npy", row)
    _save(tmp / "events" / "offsets.npy", offsets)

    span_end = int(end.max()) if n else 0
    if len(ev.counter_t):
        span_end = max(span_end, int(ev.counter_t.max()))

    # The pyramid: each level merges the previous one further (merging is associative).
    levels: list[int] = []
    bars = Bars.from_events(track_row, start, end, np.arange(n, dtype=np.int64))
    last_stored = n
    k = FIRST_LEVEL
    while n:
        merged = merge(bars, 1 << k)
        top = (1 << k) > span_end
        if len(merged) <= STORE_RATIO * last_stored or (top and not levels) or (top and len(merged) < last_stored):
            d = tmp / "lod" / str(k)
            _save(d / "start.npy", merged.start)
            _save(d / "end.npy", merged.end)
            _save(d / "endmax.npy", running_end(merged.row, merged.end))
            _save(d / "count.npy", merged.count.astype(np.int32))
            _save(d / "busy.npy", merged.busy)
            _save(d / "longest.npy", merged.longest)
            _save(d / "offsets.npy", np.searchsorted(merged.row, np.arange(len(row_first) + 1)).astype(np.int64))
            levels.append(k)
            last_stored = len(merged)
        bars = merged
        if top:
            break
        k += 1

    counter_ranges: dict[str, list[int]] = {}
    if len(ev.counter_t):
        c_order = np.lexsort((ev.counter_t, ev.counter_lane))
        c_lane = ev.counter_lane[c_order]
        _save(tmp / "counters" / "t.npy", ev.counter_t[c_order])
        _save(tmp / "counters" / "v.npy", ev.counter_v[c_order])
        for lane_id in np.unique(c_lane).tolist():
            lo, hi = np.searchsorted(c_lane, [lane_id, lane_id + 1])
            counter_ranges[str(lane_id)] = [int(lo), int(hi)]

    # Source row -> event index, per source table; and the host op <-> kernel links.
    details: dict[str, list[int]] = {}
    for table_name in sorted({ln.table for ln in ev.lanes if ln.kind == "slices"}):
        source = profile.table(table_name)
        rowmap = np.full(source.num_rows, -1, np.int64)
        mine = np.flatnonzero(np.isin(lane, [ln.id for ln in ev.lanes if ln.table == table_name]))
        rowmap[row[mine]] = mine
        _save(tmp / "rowmap" / f"{table_name}.npy", rowmap)
        (tmp / "details").mkdir(exist_ok=True)
        details[table_name] = _write_arrow(tmp / "details" / f"{table_name}.arrow", source, compress=True)

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

    _write_arrow(tmp / "strings.arrow", pa.table({"s": ev.strings}), compress=False)
    doc = {
        "version": INDEX_VERSION,
        "base_ns": str(ev.base_ns),
        "end_ns": span_end,
        "event_count": n,
        "lanes": [ln.to_dict() for ln in ev.lanes],
        "rows": [[int(a), int(b)] for a, b in zip(lane[row_first].tolist(), depth[row_first].tolist())],
        "levels": levels,
        "counter_ranges": counter_ranges,
        "details": details,
        "flow_kinds": flow_kinds,
    }
    (tmp / "timeline.json").write_text(json.dumps(doc), encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


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
        self._cache: OrderedDict[tuple, dict] = OrderedDict()

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> "TimelineIndex":
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

    def lane_dicts(self) -> list[dict[str, Any]]:
        rows_per_lane = np.bincount(self.rows[:, 0], minlength=len(self.lanes)) if len(self.rows) else \
            np.zeros(len(self.lanes), np.int64)
        return [{**ln.to_dict(), "rows": int(rows_per_lane[ln.id]) if ln.kind == "slices" else 1}
                for ln in self.lanes]

    # -- window ----------------------------------------------------------------------------------------
    def _slice(self, prefix: str, rows: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices of bars of ``rows`` overlapping [start, end), and the row of each."""
        offsets, starts, endmax = self._a(f"{prefix}/offsets"), self._a(f"{prefix}/start"), self._a(f"{prefix}/endmax")
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

        lane_set = set(range(len(self.lanes))) if wanted is None else {x for x in wanted if 0 <= x < len(self.lanes)}
        rows = np.flatnonzero(np.isin(self.rows[:, 0], list(lane_set))) if len(self.rows) else np.empty(0, np.int64)
        bars = self._bars(level, rows, start, end)
        truncated_level = level
        while len(bars) > MAX_BARS:
            truncated_level += 1
            bars = merge(bars, 1 << truncated_level)

        names = self._a("events/name")[bars.longest] if len(bars) else np.empty(0, np.int32)
        uniq, local = np.unique(names, return_inverse=True)
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
                "name": local.reshape(-1)[sel].tolist(),
                "count": bars.count[sel].tolist(),
                "busy": bars.busy[sel].tolist(),
                "idx": bars.longest[sel].tolist(),
            })
        tracks.extend(self._counter_tracks(lane_set, start, end, pixel, width))
        answer = {
            "version": INDEX_VERSION,
            "base_ns": str(self.base_ns),
            "span_ns": [0, self.end_ns],
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

    def _counter_tracks(self, lane_set: set[int], start: int, end: int, pixel: int, width: int) -> list[dict]:
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
        return self.rows[row, 0]

    def search(self, query: str, limit: int = 100) -> dict[str, Any]:
        """Events whose name contains ``query`` (case-insensitive): the total, and the first ``limit`` in time."""
        query = (query or "").strip()
        strings = self.strings()
        if not query or len(strings) == 0:
            return {"query": query, "total": 0, "names": [], "matches": []}
        hit_names = np.asarray(pc.match_substring(strings, query, ignore_case=True).to_numpy(zero_copy_only=False))
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
        return {"lane": int(self.rows[row, 0]), "depth": int(self.rows[row, 1]), "idx": int(idx), "name": name,
                "start_ns": s, "dur_ns": e - s}

    def _source_row(self, table: str, row: int) -> dict[str, Any]:
        firsts = self.doc["details"].get(table)
        if not firsts:
            return {}
        batch_no = int(np.searchsorted(firsts, row, side="right")) - 1
        reader = pa.ipc.open_file(pa.memory_map(str(self.dir / "details" / f"{table}.arrow")))
        batch = reader.get_batch(batch_no)
        return _js_safe(batch.slice(row - firsts[batch_no], 1).to_pylist()[0])

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

    def event(self, lane: int | None, idx: int) -> dict[str, Any]:
        """One event: times, its source row, and the host ops or kernels linked to it by flows."""
        idx = int(idx)
        if not 0 <= idx < self.event_count:
            raise KeyError(f"no event {idx}")
        brief = self._brief(idx)
        if lane is not None and int(lane) != brief["lane"]:
            raise KeyError(f"event {idx} is not on lane {lane}")
        info = self.lanes[brief["lane"]]
        row = int(self._a("events/row")[idx])
        return {
            **brief,
            "lane_name": info.name,
            "group": info.group,
            "table": info.table,
            "row": row,
            "start_abs_ns": str(self.base_ns + brief["start_ns"]),
            "args": self._source_row(info.table, row),
            "links": self._links(info.table, row),
        }
