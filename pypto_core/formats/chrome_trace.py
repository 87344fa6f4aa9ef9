"""torch_npu ``trace_view.json`` and msprof ``msprof_*.json``: the Ascend chrome-trace timelines.

Both are bare JSON arrays (FORMATS.md §1.2, §2.5) with string ``ts`` (µs, 3 decimals: kept exact to the ns
by ``eventscan``), ``M`` metadata naming each pid/tid lane, ``X`` slices, ``C`` counters and ``s``/``f`` flow
pairs. Which table a slice belongs to is decided by its lane (process name), not by its own fields:

=====================  ==========================================================================
process name           becomes
=====================  ==========================================================================
Ascend Hardware        kernels (tid = stream; args Task Type / Task Id / connection_id)
Python, CPU-labelled   host_ops (cpu_op, user_annotation, enqueue/dequeue; python_function is counted,
                       not kept: it is a stack sample, not an operator); ProfilerStep#N -> steps
CANN                   api_calls (args level, connection_id)
HCCL / Communication   communication (the "Group N Communication" threads; Plane tasks repeat device tasks)
Overlap Analysis       overlap (Computing / Communication / Communication(Not Overlapped) / Free)
any ``C`` event        counters (track = event name, value = first args value, unit = its key)
=====================  ==========================================================================

Flows: ``async_npu`` (host op -> kernel) and ``HostToDevice`` (CANN API -> device task) pairs are bound
to slices that start exactly at the flow's ts on the flow's lane (the profiler writes them so); a pair
whose end cannot be bound is counted in ``hints["unbound_flows"]``, never guessed.

``read_trace_view`` gives the tables in memory; ``write_trace_view`` streams the big ones (host ops, API
calls, kernels, counters) batch by batch into a saved profile folder, so that memory does not grow with the
file. Both run one conversion (``_convert``), the tables' batches going to a ``TableSink`` either way.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.formats.eventscan import Pieces, scan_file
from pypto_core.formats.table_sink import TableSink, Transform
from pypto_core.profile import TABLE_NAMES, Profile, ProfileMeta, conform, empty_table, save_tables

# args keys the Ascend readers use (everything else in args is skipped by the scanner, not parsed)
ASCEND_ARG_KEYS: tuple[str, ...] = (
    "name",  # M events: process_name / thread_name
    "labels",  # M process_labels: CPU / NPU
    "Task Type",
    "Physic Stream Id",
    "Task Id",
    "connection_id",
    "correlation_id",  # enqueue/dequeue
    "level",  # CANN api level: acl, runtime, node, ...
    "Thread Id",
    "Input Dims",
    "Sequence number",
    "data_type",  # HCCL big ops
    "alg_type",
    "count",
)

LANE_DEVICE = "device"
LANE_HOST = "host"
LANE_API = "api"
LANE_COMMUNICATION = "communication"
LANE_OVERLAP = "overlap"
LANE_COUNTER = "counter"
LANE_OTHER = "other"

_DEVICE_PROCESSES = {"ascend hardware", "npu"}
_API_PROCESSES = {"cann"}
_COMM_PROCESSES = {"hccl", "communication"}
_OVERLAP_PROCESSES = {"overlap analysis"}
_HOST_PROCESSES = {"python", "cpu"}
_HOST_SKIPPED_CATS = ("python_function",)  # Python stack frames: numerous, and not operators


@dataclass
class TraceTables:
    """The canonical tables one Ascend timeline file yields (schemas of ``pypto_core.profile``)."""

    host_ops: pa.Table = field(default_factory=lambda: empty_table("host_ops"))
    api_calls: pa.Table = field(default_factory=lambda: empty_table("api_calls"))
    kernels: pa.Table = field(default_factory=lambda: empty_table("kernels"))
    flows: pa.Table = field(default_factory=lambda: empty_table("flows"))
    counters: pa.Table = field(default_factory=lambda: empty_table("counters"))
    steps: pa.Table = field(default_factory=lambda: empty_table("steps"))
    communication: pa.Table = field(default_factory=lambda: empty_table("communication"))
    overlap: pa.Table = field(default_factory=lambda: pa.table({"name": pa.array([], pa.string()),
                                                                "start_ns": pa.array([], pa.int64()),
                                                                "dur_ns": pa.array([], pa.int64())}))
    lanes: pa.Table = field(default_factory=lambda: _lanes_schema().empty_table())
    hints: dict[str, Any] = field(default_factory=dict)  # event counts, input bytes, what was skipped
    warnings: list[str] = field(default_factory=list)  # what could not be read, for ProfileMeta.warnings


def _lanes_schema() -> pa.Schema:
    return pa.schema(
        [
            ("pid", pa.string()),
            ("tid", pa.string()),
            ("process_name", pa.string()),
            ("thread_name", pa.string()),
            ("process_label", pa.string()),
            ("kind", pa.string()),
        ]
    )


# ---------------------------------------------------------------------------------------------- helpers


def to_int64(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Integer text -> int64; anything else (non-numeric pids like "Spans", floats, > int64) -> null."""
    if pa.types.is_integer(col.type):
        return col.cast(pa.int64())
    try:
        return col.cast(pa.int64())  # the common case: every value is an integer (or null)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    ok = pc.match_substring_regex(col, r"^-?[0-9]{1,18}$")
    return pc.if_else(ok, col, pa.scalar(None, pa.string())).cast(pa.int64())


def to_float64(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Number text -> float64; non-numbers -> null."""
    try:
        return col.cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    ok = pc.match_substring_regex(col, r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$")
    return pc.if_else(ok, col, pa.scalar(None, pa.string())).cast(pa.float64())


def lanes_from_metadata(events: pa.Table) -> pa.Table:
    """The pid/tid lanes named by ``M`` events (process_name, process_labels, thread_name)."""
    meta = events.filter(pc.equal(events["ph"], "M"))
    kind = meta["name"]
    procs = meta.filter(pc.equal(kind, "process_name")).select(["pid", "arg:name"])
    labels = meta.filter(pc.equal(kind, "process_labels")).select(["pid", "arg:labels"])
    threads = meta.filter(pc.equal(kind, "thread_name")).select(["pid", "tid", "arg:name"])
    proc_name = dict(zip(procs["pid"].to_pylist(), procs["arg:name"].to_pylist()))  # one row per process
    proc_label = dict(zip(labels["pid"].to_pylist(), labels["arg:labels"].to_pylist()))
    rows: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for pid, name in proc_name.items():
        rows[(pid, None)] = {"pid": pid, "tid": None, "process_name": name, "thread_name": None}
    for pid, tid, name in zip(*(threads[c].to_pylist() for c in ("pid", "tid", "arg:name"))):
        rows[(pid, tid)] = {"pid": pid, "tid": tid, "process_name": proc_name.get(pid), "thread_name": name}
    out = []
    for row in rows.values():
        label = proc_label.get(row["pid"])
        row["process_label"] = label
        row["kind"] = classify_process(row["process_name"], label)
        out.append(row)
    return pa.Table.from_pylist(out, schema=_lanes_schema())


def classify_process(name: str | None, label: str | None) -> str:
    """Which table a process's slices feed (see the module docstring)."""
    n = (name or "").strip().lower()
    if n in _DEVICE_PROCESSES:
        return LANE_DEVICE
    if n in _API_PROCESSES:
        return LANE_API
    if n in _COMM_PROCESSES:
        return LANE_COMMUNICATION
    if n in _OVERLAP_PROCESSES:
        return LANE_OVERLAP
    if n in _HOST_PROCESSES:
        return LANE_HOST
    if (label or "").upper() == "CPU" and n not in ("python gc", "mstx"):
        return LANE_HOST
    return LANE_OTHER


def _pid_kind_column(events: pa.Table, lanes: pa.Table) -> pa.ChunkedArray:
    """Per event, the kind of its process (by pid), or null when the pid was never named."""
    procs = lanes.filter(pc.is_null(lanes["tid"]))
    return _lookup(events["pid"], procs["pid"], procs["kind"])


def _lookup(keys: pa.ChunkedArray, domain: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    domain = domain.combine_chunks() if isinstance(domain, pa.ChunkedArray) else domain
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    idx = pc.index_in(keys, value_set=domain)
    return pc.take(values, idx)


_WALK_BACK = 16  # how many earlier siblings to step over looking for the enclosing slice (nesting depth)
_NO_START = np.iinfo(np.int64).max  # a slice without ts never contains a flow end
_NO_TS = np.iinfo(np.int64).min  # a flow end without ts is never inside a slice


def bind_on_lanes(end_lane: np.ndarray, end_ts: np.ndarray, lane: np.ndarray, start: np.ndarray,
                  dur: np.ndarray) -> np.ndarray:
    """Per flow end, the row of the innermost slice on its lane that contains its ts, or -1.

    A slice starting exactly at ts wins (that is how torch_npu and Kineto write flows); among nested slices
    starting together, the shortest. Lanes are integer ids (an end on lane -1 is never bound); nulls are
    already filled (ts: int64 min, start: int64 max, dur: 0)."""
    result = np.full(len(end_lane), -1, dtype=np.int64)
    if not (len(end_lane) and len(lane)):
        return result
    s_id, e_id, ts = lane, end_lane, end_ts
    # one sort by (lane, start, longest first): then per lane the last start <= ts is the innermost
    order = np.lexsort((-dur, start, s_id))
    s_id_o, start_o = s_id[order], start[order]
    end_o = start_o + dur[order]
    lane_lo = np.searchsorted(s_id_o, e_id, side="left")
    lane_hi = np.searchsorted(s_id_o, e_id, side="right")
    # position of ts within its lane: search lane by lane (few lanes, each vectorized)
    pos = np.full(len(e_id), -1, dtype=np.int64)
    for one in np.unique(e_id[e_id >= 0]):
        sel = np.flatnonzero(e_id == one)
        lo, hi = lane_lo[sel[0]], lane_hi[sel[0]]
        pos[sel] = lo + np.searchsorted(start_o[lo:hi], ts[sel], side="right") - 1
    cand = pos.copy()
    for _ in range(_WALK_BACK):
        valid = (cand >= lane_lo) & (cand < lane_hi) & (e_id >= 0)
        inside = np.zeros_like(valid)
        inside[valid] = (start_o[cand[valid]] <= ts[valid]) & (ts[valid] <= end_o[cand[valid]])
        done = valid & inside & (result < 0)
        result[done] = order[cand[done]]
        cand = np.where(valid & ~inside & (result < 0), cand - 1, -1)
        if not (cand >= 0).any():
            break
    return result


class _LaneIds:
    """Small integer ids for the pid/tid lanes (a trace has a few dozen): what flow ends bind on, 4 bytes
    a slice instead of the pid and tid text. A null pid or tid is a lane of its own."""

    def __init__(self) -> None:
        self._ids: dict[str | None, int] = {}

    def of(self, pid: pa.ChunkedArray | pa.Array, tid: pa.ChunkedArray | pa.Array) -> np.ndarray:
        key = pc.binary_join_element_wise(pid, tid, "\x00")
        if isinstance(key, pa.ChunkedArray):
            key = key.combine_chunks()
        enc = pc.dictionary_encode(key, null_encoding="encode")
        ids = [self._ids.setdefault(k, len(self._ids)) for k in enc.dictionary.to_pylist()]
        return np.array(ids, np.int32)[enc.indices.to_numpy(zero_copy_only=False)]


@dataclass
class _Spans:
    """Per slice of one table, in its row order, what flow ends bind on."""

    lane: np.ndarray  # int32 _LaneIds
    start: np.ndarray  # int64 ns, null -> _NO_START
    dur: np.ndarray  # int64 ns, null -> 0

    @classmethod
    def of(cls, slices: pa.Table, lanes: _LaneIds) -> "_Spans":
        return cls(lanes.of(slices["pid"], slices["tid"]),
                   pc.fill_null(slices["ts_ns"], _NO_START).to_numpy(),
                   pc.fill_null(slices["dur_ns"], 0).to_numpy())

    def bind(self, ends: "_Ends") -> pa.Array:
        """Row of the slice each flow end is bound to, or null."""
        row = bind_on_lanes(ends.lane, ends.ts, self.lane, self.start, self.dur)
        return pa.array(row, pa.int64(), mask=row < 0)


@dataclass
class _Ends:
    """Flow ends (``s`` or ``f`` events) as the few numbers pairing and binding need: 21 bytes an end
    instead of its cat, id, pid and tid text (a trace has one flow per kernel)."""

    cat: np.ndarray  # int8: index in _FLOW_CATS
    id_hi: np.ndarray  # int64: an integer id's digits before its last 18 (0 for shorter ones and text ids)
    id: np.ndarray  # int64: its last 18 digits, or a text id's code
    id_is_text: np.ndarray  # bool: id holds a code of _FlowIds (an id that is not an integer)
    id_valid: np.ndarray  # bool
    lane: np.ndarray  # int32 _LaneIds
    ts: np.ndarray  # int64 ns, null -> _NO_TS

    @classmethod
    def concat(cls, parts: list["_Ends"]) -> "_Ends":
        if not parts:
            return cls(*(np.array([], dt) for dt in (np.int8, np.int64, np.int64, bool, bool, np.int32, np.int64)))
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("cat", "id_hi", "id", "id_is_text", "id_valid", "lane", "ts")))

    def __len__(self) -> int:
        return len(self.ts)


class _FlowIds:
    """Flow ids as numbers: integer text as its value in two int64 (the digits before the last 18, and
    those: torch_npu's HostToDevice ids have 20 digits, its async_npu ids are ns times), any other text as
    a code of its own (kept apart by ``id_is_text``), so that pairs and HostToDevice links match exactly as
    the text would."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def encode(
        self, text: pa.Array | pa.ChunkedArray, *, add: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(id_hi, id, id_is_text, id_valid) of each text; ``add=False``: a text never seen is not valid."""
        text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        digits = pc.if_else(pc.match_substring_regex(text, _CANONICAL_INT), text, None)
        low = pc.cast(pc.utf8_slice_codeunits(digits, -18), pa.int64())
        high_text = pc.utf8_slice_codeunits(digits, 0, -18)
        high = pc.cast(pc.if_else(pc.equal(high_text, ""), "0", high_text), pa.int64())
        valid = np.asarray(pc.is_valid(text).to_numpy(zero_copy_only=False))
        is_text = valid & np.asarray(pc.is_null(digits).to_numpy(zero_copy_only=False))
        ids = pc.fill_null(low, 0).to_numpy()
        ids_hi = pc.fill_null(high, 0).to_numpy()
        if is_text.any():
            ids = ids.copy()
            rows = np.flatnonzero(is_text)
            for row, value in zip(rows, text.take(pa.array(rows)).to_pylist()):
                code = self._codes.setdefault(value, len(self._codes)) if add else self._codes.get(value)
                if code is None:
                    valid[row] = False
                else:
                    ids[row] = code
        return ids_hi, ids, is_text, valid

    def ends(self, rows: pa.Table, lanes: _LaneIds) -> _Ends:
        ids_hi, ids, is_text, valid = self.encode(rows["id"])
        cat = pc.index_in(rows["cat"], value_set=pa.array(list(_FLOW_CATS))).to_numpy(zero_copy_only=False)
        return _Ends(cat.astype(np.int8), ids_hi, ids, is_text, valid, lanes.of(rows["pid"], rows["tid"]),
                     pc.fill_null(rows["ts_ns"], _NO_TS).to_numpy())


# The integer text an id keeps as numbers: no sign or leading zero (so that the numbers give the same text
# back), at most 36 digits (two int64 of 18). Other ids, "007" or "1.5", match as text.
_CANONICAL_INT = r"^(0|[1-9][0-9]{0,35})$"


def _flows(starts: _Ends, finishes: _Ends, ids: _FlowIds, host: _Spans, api: _Spans, kernels: _Spans,
           api_connection: pa.Array) -> tuple[pa.Table, int]:
    """Flow pairs (``s`` / ``f`` ends, paired by cat and id) -> (host_index | api_index, kernel_index, kind)
    rows; and how many pairs could not be bound. ``api_connection``: the CANN APIs' connection_id text,
    in api_calls order."""
    if len(starts) + len(finishes) == 0:
        return empty_table("flows").append_column("api_index", pa.array([], pa.int64())), 0
    api_index = api.bind(starts)
    # HostToDevice ids equal the CANN API's connection_id; bind by it where the ts does not match
    if len(api_connection):
        by_conn = _first_rows_by_key(_pair_keys(starts.id_hi, starts.id, starts.id_is_text, starts.id_valid),
                                     _pair_keys(*ids.encode(api_connection, add=False)))
        api_index = pc.coalesce(api_index, by_conn)
    start_side = pa.table({
        "cat": starts.cat, "text": starts.id_is_text, "hi": starts.id_hi,
        "id": pa.array(starts.id, mask=~starts.id_valid),
        "host_index": host.bind(starts), "api_index": api_index,
    })
    finish_side = pa.table({
        "cat": finishes.cat, "text": finishes.id_is_text, "hi": finishes.id_hi,
        "id": pa.array(finishes.id, mask=~finishes.id_valid),
        "kernel_index": kernels.bind(finishes),
    })
    pairs = start_side.join(finish_side, ["cat", "text", "hi", "id"], join_type="full outer")
    bound = pc.and_(pc.is_valid(pairs["kernel_index"]), pc.or_(pc.is_valid(pairs["host_index"]), pc.is_valid(pairs["api_index"])))
    unbound = pairs.num_rows - pc.sum(bound.cast(pa.int64())).as_py() if pairs.num_rows else 0
    pairs = pairs.filter(bound)
    kind = pa.DictionaryArray.from_arrays(pairs["cat"].combine_chunks().cast(pa.int32()),
                                          pa.array(list(_FLOW_CATS))).cast(pa.string())
    is_api_kind = pc.equal(kind, "HostToDevice")
    host_index = pc.if_else(is_api_kind, pa.scalar(None, pa.int64()), pairs["host_index"])
    api_index = pc.if_else(is_api_kind, pairs["api_index"], pa.scalar(None, pa.int64()))
    out = pa.table({"host_index": host_index, "kernel_index": pairs["kernel_index"], "kind": kind, "api_index": api_index})
    # a join returns rows in no set order: sort fully so that the same file always gives the same table
    out = out.sort_by([("kernel_index", "ascending"), ("kind", "ascending"), ("host_index", "ascending"), ("api_index", "ascending")])
    return conform("flows", out), int(unbound or 0)


def _pair_keys(ids_hi: np.ndarray, ids: np.ndarray, is_text: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """One comparable key per id (structured: validity, text flag, then the value); an invalid id's key
    matches nothing valid."""
    keys = np.empty(len(ids), dtype=[("bad", np.int8), ("text", np.int8), ("hi", np.int64), ("id", np.int64)])
    keys["bad"], keys["text"] = ~valid, is_text
    keys["hi"], keys["id"] = np.where(valid, ids_hi, 0), np.where(valid, ids, 0)
    return keys


def _first_rows_by_key(keys: np.ndarray, domain: np.ndarray) -> pa.Array:
    """For each key, the first row of ``domain`` with the same key (null where none, or an invalid key)."""
    if not len(domain):
        return pa.nulls(len(keys), pa.int64())
    order = np.argsort(domain, kind="stable")  # equal keys keep their order: the first row comes first
    ordered = domain[order]
    pos = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
    hit = (ordered[pos] == keys) & (keys["bad"] == 0)
    return pa.array(order[pos], pa.int64(), mask=~hit)


def steps_from_host(host: pa.Table) -> pa.Table:
    """The ``ProfilerStep#N`` host ops (name, start_ns, dur_ns; others are ignored) -> the steps table."""
    if host.num_rows == 0:
        return empty_table("steps")
    steps = host.filter(pc.starts_with(host["name"], "ProfilerStep#"))
    if steps.num_rows == 0:
        return empty_table("steps")
    step_id = to_int64(pc.utf8_slice_codeunits(steps["name"], len("ProfilerStep#")))
    t = pa.table({"step_id": step_id, "start_ns": steps["start_ns"], "end_ns": pc.add(steps["start_ns"], pc.fill_null(steps["dur_ns"], 0))})
    return conform("steps", t.sort_by("start_ns"))


# ---------------------------------------------------------------------------------------------- rows


def _kernel_rows(dev: pa.Table) -> pa.Table:
    """Ascend Hardware slices -> kernels."""
    return conform("kernels", pa.table({
        "name": dev["name"],
        "core_type": dev["arg:Task Type"],
        "stream_id": pc.coalesce(to_int64(dev["arg:Physic Stream Id"]), to_int64(dev["tid"])),
        "task_id": to_int64(dev["arg:Task Id"]),
        "start_ns": dev["ts_ns"],
        "dur_ns": dev["dur_ns"],
        "correlation_id": to_int64(dev["arg:connection_id"]),
    }))


def _host_rows(host: pa.Table) -> pa.Table:
    """CPU-side framework slices -> host_ops (python_function stack frames were counted, not kept)."""
    return host_op_rows(host, host["arg:correlation_id"], host["arg:Input Dims"])


def host_op_rows(raw: pa.Table, correlation: pa.ChunkedArray, input_shapes: pa.ChunkedArray) -> pa.Table:
    """Host-op slices (scanned columns) -> canonical host_ops rows. The chrome-trace formats differ only in
    the arg that links an op to its kernels (``correlation_id``, Kineto's ``External id``) and in where the
    input shapes are."""
    return conform("host_ops", pa.table({
        "name": raw["name"],
        "pid": to_int64(raw["pid"]),
        "tid": to_int64(raw["tid"]),
        "start_ns": raw["ts_ns"],
        "dur_ns": raw["dur_ns"],
        "correlation_id": to_int64(correlation),
        "input_shapes": input_shapes,
        "cat": raw["cat"],
        "sequence_number": to_int64(raw["arg:Sequence number"]),
    }))


def _api_rows(api: pa.Table) -> pa.Table:
    """CANN slices -> api_calls."""
    return conform("api_calls", pa.table({
        "name": api["name"],
        "level": api["arg:level"],
        "pid": to_int64(api["pid"]),
        "tid": pc.coalesce(to_int64(api["arg:Thread Id"]), to_int64(api["tid"])),
        "start_ns": api["ts_ns"],
        "dur_ns": api["dur_ns"],
        "correlation_id": to_int64(api["arg:connection_id"]),
    }))


def _step_rows(host: pa.Table) -> pa.Table:
    """The ProfilerStep#N host slices (name, start_ns, dur_ns, _seq): kept for the steps table."""
    rows = host.filter(pc.fill_null(pc.starts_with(host["name"], "ProfilerStep#"), False))
    return pa.table({"name": rows["name"], "start_ns": rows["ts_ns"], "dur_ns": rows["dur_ns"],
                     "_seq": rows["_seq"]})


def _communication(comm: pa.Table, lanes: pa.Table) -> pa.Table:
    """HCCL big ops on the "Group N Communication" threads."""
    thread_names = _lookup(
        pc.binary_join_element_wise(comm["pid"], comm["tid"], "/"),
        pc.binary_join_element_wise(lanes["pid"], pc.fill_null(lanes["tid"], ""), "/"),
        lanes["thread_name"],
    )
    is_group = pc.fill_null(pc.match_substring_regex(thread_names, r"(?i)communication$"), False)
    big = comm.filter(is_group)
    return conform("communication", pa.table({
        "name": big["name"],
        "group": thread_names.filter(is_group),
        "start_ns": big["ts_ns"],
        "elapse_ns": big["dur_ns"],
    }))


def _counter_rows(c: pa.Table, process: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``C`` events -> counters (track = event name, value = first args value, unit = its key)."""
    return conform("counters", pa.table({"track": c["name"], "ts_ns": c["ts_ns"],
                                         "value": to_float64(c["arg0_val"]), "unit": c["arg0_key"],
                                         "process": process}))


# ------------------------------------------------------------------------------------- streamed tables


def _merge_order(n: int, at: np.ndarray) -> np.ndarray:
    """Indices into ``n`` rows followed by ``len(at)`` late rows that put late row j before row ``at[j]``
    (``at`` sorted; late rows with the same ``at`` keep their order)."""
    is_late = np.zeros(n + len(at), dtype=bool)
    is_late[at + np.arange(len(at))] = True
    order = np.empty(n + len(at), dtype=np.int64)
    order[~is_late] = np.arange(n)
    order[is_late] = n + np.arange(len(at))
    return order


def _inserting(late: pa.Table, at: np.ndarray, total: int) -> Transform:
    """A transform for a table of ``total`` rows seen chunk by chunk, in order (the whole in-memory table, or
    a Parquet file's row groups one by one): it puts ``late`` row j before row ``at[j]``, so that slices
    classified at the end land in file order."""
    seen = 0

    def apply(chunk: pa.Table) -> pa.Table:
        nonlocal seen
        lo, hi = seen, seen + chunk.num_rows
        seen = hi
        a = int(np.searchsorted(at, lo, side="left"))
        b = len(at) if hi >= total else int(np.searchsorted(at, hi, side="left"))
        if a == b:
            return chunk
        merged = pa.concat_tables([chunk, late.slice(a, b - a)])
        return merged.take(_merge_order(chunk.num_rows, at[a:b] - lo))

    return apply


def _renaming(pid: np.ndarray, names: pa.Array) -> Transform:
    """A transform for the counters seen chunk by chunk, in order: ``process`` becomes ``names[pid]``."""
    seen = 0

    def apply(chunk: pa.Table) -> pa.Table:
        nonlocal seen
        ids = pid[seen:seen + chunk.num_rows]
        seen += chunk.num_rows
        return chunk.set_column(chunk.column_names.index("process"), "process", names.take(pa.array(ids)))

    return apply


class _Counters:
    """The counter samples, streamed into a ``TableSink`` as they are scanned. Their ``process`` is the
    name the file gives their pid in the end (its last ``process_name``), which may come after the samples:
    each row keeps an int32 pid id, and the column is rewritten at the end if a name given earlier was not
    the last."""

    def __init__(self, folder: Path | None) -> None:
        self.sink = TableSink("counters", folder)
        self._pid_ids: dict[str | None, int] = {}
        self._given: dict[str | None, set[str | None]] = {}  # per pid, the names its rows were written with
        self._pid: list[np.ndarray] = []

    def add(self, c: pa.Table, names: dict[str | None, str | None]) -> None:
        enc = pc.dictionary_encode(c["pid"].combine_chunks(), null_encoding="encode")
        pids = enc.dictionary.to_pylist()
        for pid in pids:
            self._given.setdefault(pid, set()).add(names.get(pid))
        process = pa.array([names.get(pid) for pid in pids], pa.string()).take(enc.indices)
        self.sink.add(_counter_rows(c, process))
        ids = np.array([self._pid_ids.setdefault(pid, len(self._pid_ids)) for pid in pids], np.int32)
        self._pid.append(ids[enc.indices.to_numpy(zero_copy_only=False)])

    def finish(self, names: dict[str | None, str | None]) -> pa.Table | None:
        """The table (None once its Parquet file is written), ``names`` being the file's last ones."""
        transform = None
        if any(given != {names.get(pid)} for pid, given in self._given.items()):
            final = pa.array([names.get(pid) for pid in self._pid_ids], pa.string())  # in id order
            transform = _renaming(np.concatenate(self._pid), final)
        return self.sink.finish(transform)

    def abort(self) -> None:
        self.sink.abort()


class _Finished(NamedTuple):
    table: pa.Table | None  # None once its Parquet file is written
    spans: _Spans
    ids: pa.Array


class _SliceTable:
    """One big slice table (host_ops, api_calls, kernels): its rows go to a ``TableSink`` as they are
    scanned; what stays in memory is what the flows bind on (``_Spans``: 20 bytes a row), and for the CANN
    APIs their connection_id text (HostToDevice flow ids)."""

    def __init__(self, name: str, folder: Path | None, rows: Callable[[pa.Table], pa.Table],
                 id_column: str | None = None) -> None:
        self.sink = TableSink(name, folder)
        self._rows = rows
        self._id_column = id_column
        self._spans: list[_Spans] = []
        self._ids: list[pa.Array] = []

    @property
    def count(self) -> int:
        return self.sink.rows

    def add(self, slices: pa.Table, lanes: _LaneIds) -> None:
        self.sink.add(self._rows(slices))
        self._keep(slices, lanes)

    def _keep(self, slices: pa.Table, lanes: _LaneIds) -> None:
        self._spans.append(_Spans.of(slices, lanes))
        if self._id_column is not None:
            self._ids.append(slices[self._id_column].combine_chunks())

    def finish(self, late: pa.Table, at: np.ndarray, lanes: _LaneIds) -> _Finished:
        """The table, its spans and ids, with the ``late`` slices (classified at the end) put before row
        ``at`` of the rows streamed."""
        n = self.count
        rows = self._rows(late)
        self._keep(late, lanes)
        transform = None
        if n and late.num_rows:
            transform = _inserting(rows, at, n)
        else:  # nothing streamed: the late rows are the table (without any: its columns, extras included)
            self.sink.add(rows)
        table = self.sink.finish(transform)
        spans = _Spans(*(np.concatenate([getattr(part, f) for part in self._spans])
                         for f in ("lane", "start", "dur")))
        ids = pa.concat_arrays(self._ids) if self._id_column is not None else pa.array([], pa.string())
        if late.num_rows:  # back in file order
            order = _merge_order(n, at)
            spans = _Spans(spans.lane[order], spans.start[order], spans.dur[order])
            ids = ids.take(order) if self._id_column is not None else ids
        self._spans, self._ids = [], []
        return _Finished(table, spans, ids)

    def abort(self) -> None:
        self.sink.abort()


# ---------------------------------------------------------------------------------------------- reader


_X_COLUMNS = ["name", "cat", "pid", "tid", "ts_ns", "dur_ns", "arg:Task Type", "arg:Physic Stream Id", "arg:Task Id",
              "arg:connection_id", "arg:correlation_id", "arg:level", "arg:Thread Id", "arg:Input Dims",
              "arg:Sequence number", "_seq"]
_STREAMED = {LANE_HOST: "host_ops", LANE_API: "api_calls", LANE_DEVICE: "kernels"}  # the big tables
_KEPT = (LANE_COMMUNICATION, LANE_OVERLAP)  # small: kept until the end, slimmed to what they need
_AT = {kind: f"_at_{kind}" for kind in _STREAMED}  # per unnamed slice: rows of each big table before it
_PIECE_COLUMNS = {
    LANE_COMMUNICATION: ["name", "pid", "tid", "ts_ns", "dur_ns", "_seq"],
    LANE_OVERLAP: ["name", "ts_ns", "dur_ns", "_seq"],
    "deferred": _X_COLUMNS + list(_AT.values()),
    "meta": ["ph", "name", "pid", "tid", "arg:name", "arg:labels"],
}
_COUNTER_COLUMNS = ["name", "pid", "ts_ns", "arg0_key", "arg0_val"]
_FLOW_COLUMNS = ["cat", "id", "pid", "tid", "ts_ns"]
_STREAMED_TABLES = (*_STREAMED.values(), "counters")  # what write_trace_view writes as it reads
_PIECE_EXTRA = (pa.field("_seq", pa.int64()), *(pa.field(c, pa.int64()) for c in _AT.values()))
_FLOW_CATS = ("async_npu", "HostToDevice")
_SLICE_KINDS = (LANE_DEVICE, LANE_HOST, LANE_API, LANE_COMMUNICATION, LANE_OVERLAP)


def read_trace_view(path: str | os.PathLike[str]) -> TraceTables:
    """Read a torch_npu ``trace_view.json`` or an msprof ``msprof_*.json`` timeline.

    Raises ``InputError`` naming the file when it is empty, not JSON, truncated, or not a chrome trace.
    """
    return _convert(Path(path), None)


def read_trace_file(path: str | os.PathLike[str]) -> Profile:
    """A lone timeline file (``trace_view.json`` or ``msprof_*.json`` without its folder) as a Profile."""
    p = Path(path)
    tt = _convert(p, None)
    return Profile(meta=_trace_meta(p, tt), **{name: getattr(tt, name) for name in TABLE_NAMES if hasattr(tt, name)})


def write_trace_view(
    path: str | os.PathLike[str], folder: str | os.PathLike[str], *, rank_hint: int | None = None
) -> ProfileMeta:
    """Read a timeline straight into a saved profile folder (as ``Profile.save`` writes it).

    Host ops, API calls, kernels and counters are streamed into their Parquet files batch by batch; what
    stays in memory until the end is what the flows bind on (~20 bytes a slice) and the small tables (a
    2 GB trace peaks near 0.6 GB). ``Profile.load(folder)`` then gives the profile of
    :func:`read_trace_file`. ``rank_hint``: the rank when the file does not state it (from its name, as
    ``open_profile`` does). A failed read leaves no folder behind.
    """
    p, out = Path(path), Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    try:
        tt = _convert(p, out)
        meta = _trace_meta(p, tt)
        if meta.rank is None and rank_hint is not None:
            meta.rank = rank_hint
        small = {name: getattr(tt, name, None) for name in TABLE_NAMES if name not in _STREAMED_TABLES}
        save_tables(out, meta, {name: t if t is not None else empty_table(name) for name, t in small.items()})
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return meta


def _trace_meta(p: Path, tt: TraceTables) -> ProfileMeta:
    """What a lone timeline file says of its profile: format by its name, the reader's warnings, its hints
    (events, input_bytes, processes, ...) in ``extra`` and the device / rank ones it found as fields."""
    meta = ProfileMeta(format="ascend_pt" if "trace_view" in p.name else "msprof", source=str(p),
                       source_files=[str(p)], warnings=list(tt.warnings), extra=dict(tt.hints))
    for hint in ("device", "device_id", "rank"):
        if tt.hints.get(hint) is not None:
            setattr(meta, hint, tt.hints[hint])
    return meta


def _convert(p: Path, folder: Path | None) -> TraceTables:
    """The timeline's tables; with ``folder``, host_ops, api_calls, kernels and counters are written there
    (and left empty in the result).

    Each scanned batch is split by lane: the big tables' slices become canonical rows at once; slices of a
    process whose ``process_name`` comes later in the file wait, slimmed, until the end, and are then put
    back in file order.
    """
    pieces = Pieces(_PIECE_COLUMNS, ASCEND_ARG_KEYS, extra=_PIECE_EXTRA)
    lane_ids = _LaneIds()
    big = {
        LANE_HOST: _SliceTable("host_ops", folder, _host_rows),
        LANE_API: _SliceTable("api_calls", folder, _api_rows, id_column="arg:connection_id"),
        LANE_DEVICE: _SliceTable("kernels", folder, _kernel_rows),
    }
    counters = _Counters(folder)
    flow_ids = _FlowIds()
    flow_starts: list[_Ends] = []
    flow_finishes: list[_Ends] = []
    steps: list[pa.Table] = []
    proc_names: dict[str | None, str | None] = {}
    state = {"events": 0, "python_function": 0}

    def on_batch(batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        batch = batch.append_column("_seq", pa.array(np.arange(state["events"], state["events"] + n, dtype=np.int64)))
        state["events"] += n
        ph = pc.fill_null(batch.column("ph"), "")
        is_m = pc.equal(ph, "M")
        if pc.any(is_m).as_py():
            pieces.add("meta", batch, is_m)
            m = batch.filter(pc.and_(is_m, pc.equal(batch.column("name"), "process_name")))
            proc_names.update(zip(m.column("pid").to_pylist(), m.column("arg:name").to_pylist()))
        counter_rows = batch.select(_COUNTER_COLUMNS).filter(pc.equal(ph, "C"))
        if counter_rows.num_rows:
            counters.add(pa.Table.from_batches([counter_rows]), proc_names)
        is_flow = pc.fill_null(pc.is_in(batch.column("cat"), pa.array(list(_FLOW_CATS))), False)
        for end, kept in (("s", flow_starts), ("f", flow_finishes)):
            rows = batch.select(_FLOW_COLUMNS).filter(pc.and_(pc.equal(ph, end), is_flow))
            if rows.num_rows:
                kept.append(flow_ids.ends(pa.Table.from_batches([rows]), lane_ids))
        is_pyfn = pc.fill_null(pc.equal(batch.column("cat"), "python_function"), False)
        state["python_function"] += int(pc.sum(pc.and_(pc.equal(ph, "X"), is_pyfn).cast(pa.int64())).as_py() or 0)
        is_x = pc.and_(pc.equal(ph, "X"), pc.invert(is_pyfn))
        known = {pid: classify_process(name, None) for pid, name in proc_names.items()}
        kind = _lookup(batch.column("pid"), pa.array(list(known), pa.string()), pa.array(list(known.values()), pa.string()))
        masks = {k: pc.and_(is_x, pc.fill_null(pc.equal(kind, k), False)) for k in _SLICE_KINDS}
        for k in _KEPT:
            pieces.add(k, batch, masks[k])
        deferred = pc.and_(is_x, pc.is_null(kind))
        if pc.any(deferred).as_py():
            for k, table in big.items():  # where each will go: after the rows of each big table before it
                before = np.cumsum(masks[k].to_numpy(zero_copy_only=False), dtype=np.int64)
                batch = batch.append_column(_AT[k], pa.array(table.count + before))
            pieces.add("deferred", batch, deferred)
        for k, table in big.items():
            slices = pa.Table.from_batches([batch.select(_X_COLUMNS).filter(masks[k])])
            if slices.num_rows:
                table.add(slices, lane_ids)
                if k == LANE_HOST:
                    steps.append(_step_rows(slices))

    try:
        scanned = scan_file(p, ASCEND_ARG_KEYS, on_batch=on_batch)
        lanes = lanes_from_metadata(pieces.table("meta"))
        deferred = pieces.table("deferred")
        dkind = _pid_kind_column(deferred, lanes)
        late = {k: deferred.filter(pc.fill_null(pc.equal(dkind, k), False)) for k in _SLICE_KINDS}
        done = {k: table.finish(late[k].select(_X_COLUMNS), late[k][_AT[k]].to_numpy(), lane_ids)
                for k, table in big.items()}
        counter_table = counters.finish(proc_names)
    except BaseException:
        for sink in (*big.values(), counters):
            sink.abort()
        raise
    kept = {k: pieces.table(k) for k in _KEPT}
    for k in _KEPT:
        if late[k].num_rows:
            late_rows = late[k].select(_PIECE_COLUMNS[k])
            kept[k] = pa.concat_tables([kept[k], late_rows]).sort_by("_seq")  # file order
    steps.append(_step_rows(late[LANE_HOST]))
    warnings: list[str] = []
    unnamed = int(pc.sum(pc.is_null(dkind).cast(pa.int64())).as_py() or 0) if deferred.num_rows else 0
    if unnamed:
        warnings.append(f"{unnamed} slices on processes the file never names (no process_name) were skipped")
    flows, unbound = _flows(_Ends.concat(flow_starts), _Ends.concat(flow_finishes), flow_ids,
                            done[LANE_HOST].spans, done[LANE_API].spans, done[LANE_DEVICE].spans,
                            done[LANE_API].ids)
    ov = kept[LANE_OVERLAP]
    tables = TraceTables(
        flows=flows,
        counters=counter_table if counter_table is not None else empty_table("counters"),
        steps=steps_from_host(pa.concat_tables(steps).sort_by("_seq")),
        communication=_communication(kept[LANE_COMMUNICATION], lanes),
        overlap=pa.table({"name": ov["name"], "start_ns": ov["ts_ns"], "dur_ns": ov["dur_ns"]}),
        lanes=lanes,
        hints={
            "events": state["events"],
            "input_bytes": scanned.input_bytes,
            "native_scanner": scanned.native,
            "processes": sorted({n for n in lanes["process_name"].to_pylist() if n}),
            "python_function_events": state["python_function"],
            "unbound_flows": unbound,
        },
        warnings=warnings,
    )
    for k, name in _STREAMED.items():
        if done[k].table is not None:
            setattr(tables, name, done[k].table)
    return tables
