"""Turn a ``Profile`` into timeline lanes: one per process/thread/stream, with columnar events.

A lane is what one row of the viewer shows: host ops of one thread, CANN API calls of one thread, the kernels
of one device stream, one communication group, the profiler steps, or one counter track. Events come out as
flat numpy columns (lane, start, end, name id, source row) with times relative to one base, so that the
index and the chrome-trace export share the same lane assignment and the same time base.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.profile import Profile


@dataclass
class Lane:
    id: int
    name: str
    group: str  # the process-like heading the lane sits under ("Host process 1234", "NPU 0", ...)
    kind: str  # "slices" or "counter"
    table: str  # the source table ("host_ops", "kernels", ..., "counters", "memory")
    sort: int  # order of groups: steps, host, CANN API, device, communication, counters

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LaneEvents:
    """Every slice of the profile as columns; times are ns relative to ``base_ns``."""

    base_ns: int
    lanes: list[Lane]
    strings: pa.Array  # interned names; ``name`` holds indices into it
    lane: np.ndarray  # int32
    start: np.ndarray  # int64, relative ns
    end: np.ndarray  # int64, relative ns, >= start
    name: np.ndarray  # int32
    row: np.ndarray  # int64, row index in the lane's source table
    counter_lane: np.ndarray  # int32, counter samples: lane id
    counter_t: np.ndarray  # int64, relative ns
    counter_v: np.ndarray  # float64


# Group order in the viewer, top to bottom (host above device, as Perfetto and MindStudio Insight show it).
_SORT = {"steps": 0, "host_ops": 1, "api_calls": 2, "kernels": 3, "communication": 4, "counters": 5, "memory": 6}


def _int_column(table: pa.Table, name: str, fill: int) -> np.ndarray:
    return pc.fill_null(table[name], fill).to_numpy().astype(np.int64, copy=False)


def _group_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique (a, b) pairs and, per row, the index of its pair."""
    if len(a) == 0:
        return np.empty((0, 2), np.int64), np.empty(0, np.int64)
    a_lo, b_lo = int(a.min()), int(b.min())
    b_span = int(b.max()) - b_lo + 1
    if (int(a.max()) - a_lo + 1) * b_span < 2**62:  # one int64 key sorts far faster than unique(axis=0)
        keys, inverse = np.unique((a - a_lo) * b_span + (b - b_lo), return_inverse=True)
        return np.stack([keys // b_span + a_lo, keys % b_span + b_lo], axis=1), inverse.reshape(-1)
    pairs, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    return pairs, inverse.reshape(-1)


class _Interner:
    """Collects string columns and maps them to ids in one shared table."""

    def __init__(self) -> None:
        self._dicts: list[pa.Array] = []
        self._indices: list[np.ndarray] = []

    def add(self, column: pa.ChunkedArray | pa.Array) -> int:
        col = pc.fill_null(column, "")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        encoded = pc.dictionary_encode(col.cast(pa.string()))
        self._dicts.append(encoded.dictionary)
        self._indices.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False))
        return len(self._dicts) - 1

    def finish(self) -> tuple[pa.Array, list[np.ndarray]]:
        if not self._dicts:
            return pa.array([], pa.string()), []
        strings = pc.unique(pa.concat_arrays(self._dicts) if self._dicts else pa.array([], pa.string()))
        ids = []
        for dictionary, indices in zip(self._dicts, self._indices):
            mapping = pc.index_in(dictionary, value_set=strings).to_numpy(zero_copy_only=False).astype(np.int32)
            ids.append(mapping[indices] if len(indices) else np.empty(0, np.int32))
        return strings, ids


def _base_ns(profile: Profile) -> int:
    lows = []
    for name, col in (("kernels", "start_ns"), ("host_ops", "start_ns"), ("api_calls", "start_ns"),
                      ("communication", "start_ns"), ("steps", "start_ns"), ("counters", "ts_ns"),
                      ("memory", "ts_ns")):
        table = profile.table(name)
        if table.num_rows:
            low = pc.min(table[col]).as_py()
            if low is not None:
                lows.append(low)
    return int(min(lows)) if lows else 0


def collect_lanes(profile: Profile) -> LaneEvents:
    """Assign every slice and counter sample of ``profile`` to a lane (columnar, no per-event objects)."""
    base = _base_ns(profile)
    lanes: list[Lane] = []
    interner = _Interner()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]] = []  # lane, start, end, intern slot, row

    def add_slices(table_name: str, table: pa.Table, start: np.ndarray, dur: np.ndarray, names: pa.Array,
                   keys: np.ndarray, key_names: list[tuple[str, str]]) -> None:
        valid = start >= 0
        first_lane = len(lanes)
        for group, lane_name in key_names:
            lanes.append(Lane(len(lanes), lane_name, group, "slices", table_name, _SORT[table_name]))
        slot = interner.add(names)
        rows = np.flatnonzero(valid)
        parts.append(((keys[rows] + first_lane).astype(np.int32), start[rows] - base,
                      start[rows] - base + np.maximum(dur[rows], 0), slot, rows))

    steps = profile.steps
    if steps.num_rows:
        start = _int_column(steps, "start_ns", -1)
        end = _int_column(steps, "end_ns", -1)
        ids = pc.fill_null(steps["step_id"], -1).to_pylist()
        names = pa.array([f"Step {i}" if i >= 0 else "Step" for i in ids], pa.string())
        add_slices("steps", steps, start, np.maximum(end - start, 0), names, np.zeros(steps.num_rows, np.int64),
                   [("Steps", "Profiler steps")])

    host = profile.host_ops
    if host.num_rows:
        pairs, inverse = _group_pairs(_int_column(host, "pid", -1), _int_column(host, "tid", -1))
        add_slices("host_ops", host, _int_column(host, "start_ns", -1), _int_column(host, "dur_ns", 0),
                   host["name"], inverse, [(f"Host process {p}", f"Thread {t}") for p, t in pairs.tolist()])

    api = profile.api_calls
    if api.num_rows:
        pairs, inverse = _group_pairs(_int_column(api, "pid", -1), _int_column(api, "tid", -1))
        add_slices("api_calls", api, _int_column(api, "start_ns", -1), _int_column(api, "dur_ns", 0),
                   api["name"], inverse, [(f"CANN API (process {p})", f"Thread {t}") for p, t in pairs.tolist()])

    kernels = profile.kernels
    if kernels.num_rows:
        pairs, inverse = _group_pairs(_int_column(kernels, "device_id", -1), _int_column(kernels, "stream_id", -1))
        add_slices("kernels", kernels, _int_column(kernels, "start_ns", -1), _int_column(kernels, "dur_ns", 0),
                   kernels["name"], inverse,
                   [(f"NPU {d}" if d >= 0 else "Device", f"Stream {s}" if s >= 0 else "Stream ?")
                    for d, s in pairs.tolist()])

    comm = profile.communication
    if comm.num_rows:
        groups = pc.fill_null(comm["group"], "").combine_chunks()
        encoded = pc.dictionary_encode(groups)
        add_slices("communication", comm, _int_column(comm, "start_ns", -1), _int_column(comm, "elapse_ns", 0),
                   comm["name"], encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                   [("Communication", g or "(no group)") for g in encoded.dictionary.to_pylist()])

    strings, name_ids = interner.finish()
    if parts:
        lane = np.concatenate([p[0] for p in parts])
        start = np.concatenate([p[1] for p in parts])
        end = np.concatenate([p[2] for p in parts])
        name = np.concatenate([name_ids[p[3]][p[4]] for p in parts]).astype(np.int32)
        row = np.concatenate([p[4] for p in parts]).astype(np.int64)
    else:
        lane = np.empty(0, np.int32)
        start = end = row = np.empty(0, np.int64)
        name = np.empty(0, np.int32)

    c_lane, c_t, c_v = [], [], []
    counters = profile.counters
    if counters.num_rows:
        tracks = pc.dictionary_encode(pc.fill_null(counters["track"], "").combine_chunks())
        first = len(lanes)
        for track in tracks.dictionary.to_pylist():
            lanes.append(Lane(len(lanes), track or "(counter)", "Counters", "counter", "counters", _SORT["counters"]))
        c_lane.append(tracks.indices.to_numpy(zero_copy_only=False).astype(np.int32) + first)
        c_t.append(_int_column(counters, "ts_ns", base) - base)
        c_v.append(pc.fill_null(counters["value"], np.nan).to_numpy().astype(np.float64))
    memory = profile.memory
    if memory.num_rows:
        comp = pc.fill_null(memory["component"], "").cast(pa.string())
        dev = pc.fill_null(memory["device"], "").cast(pa.string())
        label = pc.binary_join_element_wise(comp, dev, " ").combine_chunks()
        tracks = pc.dictionary_encode(label)
        first = len(lanes)
        for track in tracks.dictionary.to_pylist():
            lanes.append(Lane(len(lanes), f"{track.strip() or 'memory'} allocated (MB)", "Memory", "counter",
                              "memory", _SORT["memory"]))
        c_lane.append(tracks.indices.to_numpy(zero_copy_only=False).astype(np.int32) + first)
        c_t.append(_int_column(memory, "ts_ns", base) - base)
        c_v.append(pc.fill_null(memory["allocated_bytes"], 0).to_numpy().astype(np.float64) / 1e6)

    return LaneEvents(
        base_ns=base, lanes=lanes, strings=strings, lane=lane, start=start, end=end, name=name, row=row,
        counter_lane=np.concatenate(c_lane) if c_lane else np.empty(0, np.int32),
        counter_t=np.concatenate(c_t) if c_t else np.empty(0, np.int64),
        counter_v=np.concatenate(c_v) if c_v else np.empty(0, np.float64),
    )
