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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.formats.eventscan import scan_file
from pypto_core.profile import conform, empty_table

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


def bind_flow_ends(
    ends: pa.Table, slices: pa.Table, slice_pid: str = "pid", slice_tid: str = "tid"
) -> pa.ChunkedArray:
    """Row index into ``slices`` of the innermost slice on the flow end's (pid, tid) that contains its ts.

    A slice starting exactly at ts wins (that is how torch_npu and Kineto write flows); among nested slices
    starting together, the shortest. ``ends`` needs pid, tid, ts_ns; ``slices`` the named pid/tid columns,
    start_ns and dur_ns. Ends with no containing slice get null.
    """
    result = np.full(ends.num_rows, -1, dtype=np.int64)
    if ends.num_rows and slices.num_rows:
        s_lane = pc.binary_join_element_wise(slices[slice_pid], slices[slice_tid], "\x00")
        e_lane = pc.binary_join_element_wise(ends["pid"], ends["tid"], "\x00")
        lanes = pc.unique(s_lane)
        s_id = pc.fill_null(pc.index_in(s_lane, value_set=lanes), -1).to_numpy()
        e_id = pc.fill_null(pc.index_in(e_lane, value_set=lanes), -1).to_numpy()
        start = pc.fill_null(slices["start_ns"], np.iinfo(np.int64).max).to_numpy()
        end = start + pc.fill_null(slices["dur_ns"], 0).to_numpy()
        ts = pc.fill_null(ends["ts_ns"], np.iinfo(np.int64).min).to_numpy()
        # one sort by (lane, start, longest first): then per lane the last start <= ts is the innermost
        order = np.lexsort((-(end - start), start, s_id))
        s_id_o, start_o, end_o = s_id[order], start[order], end[order]
        lane_lo = np.searchsorted(s_id_o, e_id, side="left")
        lane_hi = np.searchsorted(s_id_o, e_id, side="right")
        # position of ts within its lane: search lane by lane (few lanes, each vectorized)
        pos = np.full(ends.num_rows, -1, dtype=np.int64)
        for lane in np.unique(e_id[e_id >= 0]):
            sel = np.flatnonzero(e_id == lane)
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
    return pa.chunked_array([pa.array(result, pa.int64(), mask=result < 0)])


def _flows(events: pa.Table, host: pa.Table, kernels: pa.Table, api: pa.Table, kinds: tuple[str, ...]) -> tuple[pa.Table, int]:
    """Flow pairs of the given categories -> (host_index | api_index, kernel_index, kind) rows."""
    fl = events
    if fl.num_rows == 0:
        return empty_table("flows").append_column("api_index", pa.array([], pa.int64())), 0
    fl = fl.select(["ph", "cat", "id", "pid", "tid", "ts_ns"])
    starts = fl.filter(pc.equal(fl["ph"], "s"))
    finishes = fl.filter(pc.equal(fl["ph"], "f"))
    host_b = host.select(["_pid_text", "_tid_text", "start_ns", "dur_ns"])
    api_b = api.select(["_pid_text", "_tid_text", "start_ns", "dur_ns"])
    kern_b = kernels.select(["_pid_text", "_tid_text", "start_ns", "dur_ns"])
    s_host = bind_flow_ends(starts, host_b, "_pid_text", "_tid_text")
    s_api = bind_flow_ends(starts, api_b, "_pid_text", "_tid_text")
    f_kern = bind_flow_ends(finishes, kern_b, "_pid_text", "_tid_text")
    starts = starts.append_column("host_index", s_host).append_column("api_index", s_api)
    finishes = finishes.append_column("kernel_index", f_kern)
    # HostToDevice ids equal the CANN API's connection_id; bind by it where the ts does not match
    if api.num_rows and "correlation_text" in api.column_names:
        by_conn = _lookup(starts["id"], api["correlation_text"], pa.array(np.arange(api.num_rows, dtype="int64")))
        starts = starts.set_column(starts.column_names.index("api_index"), "api_index",
                                   pc.coalesce(starts["api_index"], by_conn))
    pairs = starts.select(["cat", "id", "host_index", "api_index"]).join(
        finishes.select(["cat", "id", "kernel_index"]), ["cat", "id"], join_type="full outer"
    )
    bound = pc.and_(pc.is_valid(pairs["kernel_index"]), pc.or_(pc.is_valid(pairs["host_index"]), pc.is_valid(pairs["api_index"])))
    unbound = pairs.num_rows - pc.sum(bound.cast(pa.int64())).as_py() if pairs.num_rows else 0
    pairs = pairs.filter(bound)
    is_api_kind = pc.equal(pairs["cat"], "HostToDevice")
    host_index = pc.if_else(is_api_kind, pa.scalar(None, pa.int64()), pairs["host_index"])
    api_index = pc.if_else(is_api_kind, pairs["api_index"], pa.scalar(None, pa.int64()))
    out = pa.table({"host_index": host_index, "kernel_index": pairs["kernel_index"], "kind": pairs["cat"], "api_index": api_index})
    # a join returns rows in no set order: sort fully so that the same file always gives the same table
    out = out.sort_by([("kernel_index", "ascending"), ("kind", "ascending"), ("host_index", "ascending"), ("api_index", "ascending")])
    return conform("flows", out), int(unbound or 0)


def _steps_from_host(host: pa.Table) -> pa.Table:
    steps = host.filter(pc.starts_with(host["name"], "ProfilerStep#"))
    if steps.num_rows == 0:
        return empty_table("steps")
    step_id = to_int64(pc.utf8_slice_codeunits(steps["name"], len("ProfilerStep#")))
    t = pa.table({"step_id": step_id, "start_ns": steps["start_ns"], "end_ns": pc.add(steps["start_ns"], pc.fill_null(steps["dur_ns"], 0))})
    return conform("steps", t.sort_by("start_ns"))


# ---------------------------------------------------------------------------------------------- reader


_X_COLUMNS = ["name", "cat", "pid", "tid", "ts_ns", "dur_ns", "arg:Task Type", "arg:Physic Stream Id", "arg:Task Id",
              "arg:connection_id", "arg:correlation_id", "arg:level", "arg:Thread Id", "arg:Input Dims",
              "arg:Sequence number", "_seq"]
_PIECE_COLUMNS = {
    **{kind: _X_COLUMNS for kind in (LANE_DEVICE, LANE_HOST, LANE_API, LANE_COMMUNICATION, LANE_OVERLAP, "deferred")},
    "counter": ["name", "pid", "ts_ns", "arg0_key", "arg0_val"],
    "flow": ["ph", "cat", "id", "pid", "tid", "ts_ns"],
    "meta": ["ph", "name", "pid", "tid", "arg:name", "arg:labels"],
}
_FLOW_CATS = ("async_npu", "HostToDevice")
_SLICE_KINDS = (LANE_DEVICE, LANE_HOST, LANE_API, LANE_COMMUNICATION, LANE_OVERLAP)


def read_trace_view(path: str | os.PathLike[str]) -> TraceTables:
    """Read a torch_npu ``trace_view.json`` or an msprof ``msprof_*.json`` timeline.

    Streams: each scanned batch is split by lane into the few columns each table needs (slices of a
    process whose ``process_name`` comes later in the file wait, slimmed, until the end).
    Raises ``InputError`` naming the file when it is empty, not JSON, truncated, or not a chrome trace.
    """
    from pypto_core.formats.eventscan import Pieces

    pieces = Pieces(_PIECE_COLUMNS, ASCEND_ARG_KEYS, extra=(pa.field("_seq", pa.int64()),))
    proc_names: dict[str, str] = {}
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
        pieces.add("counter", batch, pc.equal(ph, "C"))
        pieces.add("flow", batch, pc.and_(pc.is_in(ph, pa.array(["s", "f"])),
                                          pc.fill_null(pc.is_in(batch.column("cat"), pa.array(list(_FLOW_CATS))), False)))
        is_pyfn = pc.fill_null(pc.equal(batch.column("cat"), "python_function"), False)
        state["python_function"] += int(pc.sum(pc.and_(pc.equal(ph, "X"), is_pyfn).cast(pa.int64())).as_py() or 0)
        is_x = pc.and_(pc.equal(ph, "X"), pc.invert(is_pyfn))
        known = {pid: classify_process(name, None) for pid, name in proc_names.items()}
        kind = _lookup(batch.column("pid"), pa.array(list(known), pa.string()), pa.array(list(known.values()), pa.string()))
        for k in _SLICE_KINDS:
            pieces.add(k, batch, pc.and_(is_x, pc.fill_null(pc.equal(kind, k), False)))
        pieces.add("deferred", batch, pc.and_(is_x, pc.is_null(kind)))

    scanned = scan_file(path, ASCEND_ARG_KEYS, on_batch=on_batch)
    meta = pieces.table("meta")
    lanes = lanes_from_metadata(meta)
    slices_by_kind = {k: pieces.table(k) for k in _SLICE_KINDS}
    deferred = pieces.table("deferred")
    if deferred.num_rows:
        dkind = _pid_kind_column(deferred, lanes)
        for k in _SLICE_KINDS:
            late = deferred.filter(pc.fill_null(pc.equal(dkind, k), False))
            if late.num_rows:
                slices_by_kind[k] = pa.concat_tables([slices_by_kind[k], late]).sort_by("_seq")  # file order
    warnings: list[str] = []
    if deferred.num_rows:
        unnamed = int(pc.sum(pc.is_null(dkind).cast(pa.int64())).as_py() or 0)
        if unnamed:
            warnings.append(f"{unnamed} slices on processes the file never names (no process_name) were skipped")
    hints: dict[str, Any] = {
        "events": state["events"],
        "input_bytes": scanned.input_bytes,
        "native_scanner": scanned.native,
        "processes": sorted({n for n in lanes["process_name"].to_pylist() if n}),
        "python_function_events": state["python_function"],
    }
    tables = tables_from_ascend_events(slices_by_kind, pieces.table("flow"), pieces.table("counter"), lanes, hints)
    tables.warnings.extend(warnings)
    return tables


def tables_from_ascend_events(
    slices_by_kind: dict[str, pa.Table], flow_rows: pa.Table, counter_rows: pa.Table, lanes: pa.Table,
    hints: dict[str, Any],
) -> TraceTables:
    """Canonical tables from the lane-split slices, the flow ends and the counter samples."""

    def slices(kind: str) -> pa.Table:
        return slices_by_kind[kind]

    # kernels: Ascend Hardware slices
    dev = slices(LANE_DEVICE)
    stream = pc.coalesce(to_int64(dev["arg:Physic Stream Id"]), to_int64(dev["tid"]))
    kernels = pa.table(
        {
            "name": dev["name"],
            "core_type": dev["arg:Task Type"],
            "stream_id": stream,
            "task_id": to_int64(dev["arg:Task Id"]),
            "start_ns": dev["ts_ns"],
            "dur_ns": dev["dur_ns"],
            "correlation_id": to_int64(dev["arg:connection_id"]),
            "_pid_text": dev["pid"],
            "_tid_text": dev["tid"],
        }
    )

    # host ops: CPU-side framework slices (python_function stack frames were counted, not kept)
    host = slices(LANE_HOST)
    host_ops = pa.table(
        {
            "name": host["name"],
            "pid": to_int64(host["pid"]),
            "tid": to_int64(host["tid"]),
            "start_ns": host["ts_ns"],
            "dur_ns": host["dur_ns"],
            "correlation_id": to_int64(host["arg:correlation_id"]),
            "input_shapes": host["arg:Input Dims"],
            "cat": host["cat"],
            "sequence_number": to_int64(host["arg:Sequence number"]),
            "_pid_text": host["pid"],
            "_tid_text": host["tid"],
        }
    )

    # CANN API calls
    api = slices(LANE_API)
    api_calls = pa.table(
        {
            "name": api["name"],
            "level": api["arg:level"],
            "pid": to_int64(api["pid"]),
            "tid": pc.coalesce(to_int64(api["arg:Thread Id"]), to_int64(api["tid"])),
            "start_ns": api["ts_ns"],
            "dur_ns": api["dur_ns"],
            "correlation_id": to_int64(api["arg:connection_id"]),
            "correlation_text": api["arg:connection_id"],
            "_pid_text": api["pid"],
            "_tid_text": api["tid"],
        }
    )

    flows, unbound = _flows(flow_rows, host_ops, kernels, api_calls, _FLOW_CATS)
    hints["unbound_flows"] = unbound

    # communication: HCCL big ops on the "Group N Communication" threads
    comm = slices(LANE_COMMUNICATION)
    thread_names = _lookup(
        pc.binary_join_element_wise(comm["pid"], comm["tid"], "/"),
        pc.binary_join_element_wise(lanes["pid"], pc.fill_null(lanes["tid"], ""), "/"),
        lanes["thread_name"],
    )
    is_group = pc.fill_null(pc.match_substring_regex(thread_names, r"(?i)communication$"), False)
    big = comm.filter(is_group)
    communication = pa.table(
        {
            "name": big["name"],
            "group": thread_names.filter(is_group),
            "start_ns": big["ts_ns"],
            "elapse_ns": big["dur_ns"],
        }
    )

    ov = slices(LANE_OVERLAP)
    overlap = pa.table({"name": ov["name"], "start_ns": ov["ts_ns"], "dur_ns": ov["dur_ns"]})

    counters = _counters(counter_rows, lanes)

    drop = ["_pid_text", "_tid_text"]
    return TraceTables(
        host_ops=conform("host_ops", host_ops.drop_columns(drop)),
        api_calls=conform("api_calls", api_calls.drop_columns(drop + ["correlation_text"])),
        kernels=conform("kernels", kernels.drop_columns(drop)),
        flows=flows,
        counters=counters,
        steps=_steps_from_host(host_ops),
        communication=conform("communication", communication),
        overlap=overlap,
        lanes=lanes,
        hints=hints,
    )


def _counters(c: pa.Table, lanes: pa.Table) -> pa.Table:
    if c.num_rows == 0:
        return empty_table("counters")
    procs = lanes.filter(pc.is_null(lanes["tid"]))
    t = pa.table(
        {
            "track": c["name"],
            "ts_ns": c["ts_ns"],
            "value": to_float64(c["arg0_val"]),
            "unit": c["arg0_key"],
            "process": _lookup(c["pid"], procs["pid"], procs["process_name"]),
        }
    )
    return conform("counters", t)
