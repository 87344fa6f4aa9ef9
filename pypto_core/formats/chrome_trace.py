"""torch_npu ``trace_view.json`` and msprof ``msprof_*.json``: the Ascend chrome-trace timelines.

Both are bare JSON arrays (docs/formats.md §1.2, §2.5) with string ``ts`` (µs, 3 decimals: kept exact
to the ns by ``eventscan``), ``M`` metadata naming each pid/tid lane, ``X`` slices, ``C`` counters and
``s``/``f`` flow pairs. Which table a slice belongs to is decided by its lane (process name), not by
its own fields:

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
calls, kernels, counters) batch by batch into a saved profile folder and spills what the flows are built
from (``flow_binding``), so that memory does not grow with the file. Both run one conversion
(``_convert``), the tables' batches going to a ``TableSink`` either way, the flows bound by the same code
(over one bucket in memory, over buckets of spill files in a folder).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.formats.early_names import early_process_names
from pypto_core.formats.eventscan import Pieces, scan_file
from pypto_core.formats.flow_binding import (
    NO_START,
    NO_TS,
    SPAN,
    BucketedSpans,
    RowOrder,
    Spill,
    SpillDir,
    TimeSample,
    bind_on_lanes,  # noqa: F401 (re-exported: its rule is documented there)
    first_rows,
    hash_part,
    split_to,
)
from pypto_core.formats.prefetch import map_ahead
from pypto_core.formats.table_sink import TableSink, Transform
from pypto_core.grouping import group_rows
from pypto_core.i18n import Text, msg
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
    warnings: list[Text] = field(default_factory=list)  # what could not be read, for ProfileMeta.warnings


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


def _label_free(name: str) -> bool:
    """Whether a process's table follows from its name alone (not from its ``process_labels``)."""
    return classify_process(name, None) == classify_process(name, "CPU")


def _pid_kind_column(events: pa.Table, lanes: pa.Table) -> pa.ChunkedArray:
    """Per event, the kind of its process (by pid), or null when the pid was never named."""
    procs = lanes.filter(pc.is_null(lanes["tid"]))
    return _lookup(events["pid"], procs["pid"], procs["kind"])


def _lookup(keys: pa.ChunkedArray, domain: pa.Array | pa.ChunkedArray,
            values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    domain = domain.combine_chunks() if isinstance(domain, pa.ChunkedArray) else domain
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    idx = pc.index_in(keys, value_set=domain)
    return pc.take(values, idx)


class _LaneIds:
    """Small integer ids for the pid/tid lanes (a trace has a few dozen): what flow ends bind on, 4 bytes
    a slice instead of the pid and tid text. A null pid or tid is a lane of its own."""

    def __init__(self) -> None:
        self._ids: dict[str | None, int] = {}

    def of(self, pid: pa.ChunkedArray | pa.Array | pa.DictionaryArray,
           tid: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """Per row, the lane id of its (pid, tid); ``pid`` may come dictionary-encoded already."""
        pid_codes, pids = _encoded(pid)
        tid_codes, tids = _encoded(tid)
        if not len(pid_codes):
            return np.zeros(0, np.int32)
        first, group = group_rows(pid_codes, tid_codes)  # the distinct pairs, a handful
        keys = [None if pids[a] is None or tids[b] is None else f"{pids[a]}\x00{tids[b]}"
                for a, b in zip(pid_codes[first].tolist(), tid_codes[first].tolist())]
        ids = np.array([self._ids.setdefault(k, len(self._ids)) for k in keys], np.int32)
        lanes: np.ndarray = ids[group]
        return lanes


def _encoded(column: pa.ChunkedArray | pa.Array | pa.DictionaryArray) -> tuple[np.ndarray, list[Any]]:
    """(code per row, text per code) of a text column, a null being a text of its own (None)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type) and column.null_count:  # nulls masked, not a text of their own
        column = column.dictionary_decode()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column, null_encoding="encode")
    return column.indices.to_numpy(zero_copy_only=False), column.dictionary.to_pylist()


def _text_codes(column: pa.ChunkedArray | pa.Array, values: tuple[str, ...]) -> np.ndarray:
    """Per row, the index of its text in ``values``, or -1 (another text, or null)."""
    found = pc.index_in(column, value_set=pa.array(values, pa.string()))
    codes: np.ndarray = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int8)
    return codes


def _kinds_of(pids: list[str | None], early: dict[str | None, str | None],
              names: dict[str | None, str | None]) -> np.ndarray:
    """Per pid (in ``pids``' order), the index in ``_SLICE_KINDS`` of the table its slices go to, -1 for
    none, ``_UNNAMED`` for a pid the file has not named (yet): by the name it was last given, else by the
    one found ahead."""
    out = np.empty(len(pids), np.int8)
    for i, pid in enumerate(pids):
        if pid in names:
            kind: str | None = classify_process(names[pid], None)
        else:
            kind = early.get(pid)
        out[i] = _UNNAMED if kind is None else _SLICE_KINDS.index(kind) if kind in _SLICE_KINDS else -1
    return out


# per flow end (``s`` or ``f`` event) the few numbers pairing and binding need, 31 bytes instead of its
# cat, id, pid and tid text (a trace has one flow per kernel); spilled as scanned
_END = np.dtype([("cat", "i1"),  # index in _FLOW_CATS
                 ("text", "?"),  # id holds a code of _FlowIds (an id that is not an integer)
                 ("valid", "?"),
                 ("lane", "<i4"),  # _LaneIds
                 ("hi", "<i8"),  # an integer id's digits before its last 18 (0 for shorter ones and text ids)
                 ("id", "<i8"),  # its last 18 digits, or a text id's code
                 ("ts", "<i8")])  # ns, null -> NO_TS
_KEY = np.dtype([("text", "?"), ("valid", "?"), ("hi", "<i8"), ("id", "<i8")])  # a CANN API's connection_id
_KEY_ROW = np.dtype([("text", "?"), ("valid", "?"), ("hi", "<i8"), ("id", "<i8"), ("row", "<i8")])
# a flow end bound to its slices (-1: none), in the hash partition of its id
_BOUND_S = np.dtype([("cat", "i1"), ("text", "?"), ("valid", "?"), ("hi", "<i8"), ("id", "<i8"),
                     ("host", "<i8"), ("api", "<i8")])
_BOUND_F = np.dtype([("cat", "i1"), ("text", "?"), ("valid", "?"), ("hi", "<i8"), ("id", "<i8"),
                     ("kernel", "<i8")])
_FLOW = np.dtype([("kernel", "<i8"), ("host", "<i8"), ("api", "<i8"), ("cat", "i1")])  # a flows row, -1: null


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
        valid = np.asarray(pc.is_valid(text).to_numpy(zero_copy_only=False))
        small = _small_integer_ids(text)
        if small is not None:  # the common case: every id an integer of at most 19 digits
            return small[0], small[1], np.zeros(len(text), bool), valid
        digits = pc.if_else(pc.match_substring_regex(text, _CANONICAL_INT), text, None)
        low = pc.cast(pc.utf8_slice_codeunits(digits, -18), pa.int64())
        high_text = pc.utf8_slice_codeunits(digits, 0, -18)
        high = pc.cast(pc.if_else(pc.equal(high_text, ""), "0", high_text), pa.int64())
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

    def ends(self, rows: pa.Table, lanes: np.ndarray) -> np.ndarray:
        """The flow ends (``_END`` records) of ``s`` or ``f`` rows (cat, id, ts_ns) on ``lanes``."""
        out = np.empty(rows.num_rows, _END)
        out["hi"], out["id"], out["text"], out["valid"] = self.encode(rows["id"])
        out["cat"] = _text_codes(rows["cat"], _FLOW_CATS)
        out["lane"] = lanes
        out["ts"] = pc.fill_null(rows["ts_ns"], NO_TS).to_numpy()
        return out

    def keys(self, text: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The CANN APIs' connection_id (``_KEY`` records): HostToDevice flow ids. A text id gets a code even
        if no flow has it yet: it then matches no flow end, as the text would not."""
        out = np.empty(len(text), _KEY)
        out["hi"], out["id"], out["text"], out["valid"] = self.encode(text)
        return out


# The integer text an id keeps as numbers: no sign or leading zero (so that the numbers give the same text
# back), at most 36 digits (two int64 of 18). Other ids, "007" or "1.5", match as text.
_CANONICAL_INT = r"^(0|[1-9][0-9]{0,35})$"
_LOW = 10**18  # an id's last 18 digits are its ``id``, the digits before them its ``hi``


def _small_integer_ids(text: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """(hi, id) of ids that are all canonical integers of at most 19 digits (or null), as ``_CANONICAL_INT``
    splits them; None for any other text. A cast to int64 and back that gives every text again proves them
    canonical: a third of the regex's time (the sign aside: "-5" casts back to itself)."""
    try:
        values = pc.cast(text, pa.int64())
    except pa.ArrowInvalid:  # not an integer, or more than 19 digits
        return None
    if not pc.all(pc.equal(pc.cast(values, pa.string()), text)).as_py():  # "007", "+5"; all null: None
        return None
    numbers = pc.fill_null(values, 0).to_numpy()
    if len(numbers) and numbers.min() < 0:
        return None
    hi, low = np.divmod(numbers, _LOW)
    return hi, low


# Threads that bind and pair the flows beside the caller's: the three tables' bindings, and then the id
# partitions' pairings, run side by side (numpy's sorts and searches and Arrow's join release the GIL). Each
# holds one bucket or partition at a time, so memory grows by at most that many of them.
FLOW_THREADS = 2


def _flows(starts: Spill, finishes: Spill, host: _Finished, api: _Finished, kernels: _Finished,
           sample: TimeSample, spills: SpillDir, folder: Path | None) -> tuple[pa.Table | None, int]:
    """Flow pairs (``s`` / ``f`` ends, paired by cat and id) -> (host_index | api_index, kernel_index, kind)
    rows, sorted; and how many pairs could not be bound. The table is None once written into ``folder``.

    Out of core (see ``flow_binding``): the ends are bound to the slices time bucket by time bucket, then
    paired per hash partition of their id (with the CANN APIs' connection_id, by which HostToDevice ends
    bind where the ts does not match), and the rows come out kernel-row range by range. The steps run in
    ``FLOW_THREADS`` threads besides this one: the buckets of the ends and of each table's spans are made
    side by side, the finishes are bound to the kernels while the starts are bound to the host ops and the
    APIs, and the partitions are paired a few at a time; the result does not depend on which thread ran
    what, since every piece lands in its own spill and the rows are sorted fully in the end."""
    sink = TableSink("flows", folder)
    sink.add(_empty_flows())
    n_kernels = kernels.spans.rows
    n_ends = len(starts) + len(finishes)
    if n_ends == 0:
        return sink.finish(), 0
    tables = {"host": host, "api": api, "kernel": kernels}
    bounds = sample.bounds(spills.buckets(n_ends + sum(t.spans.rows for t in tables.values())))
    # partitions and ranges of half the size when two are worked on at once: the memory stays as bounded
    spread = FLOW_THREADS if spills.on_disk else 1
    parts = spills.buckets(n_ends + api.keys.rows) * spread
    ranges = spills.buckets(n_kernels) * spread
    width = max(1, -(-n_kernels // ranges))
    out_parts = spills.parts(_FLOW, ranges)
    unbound = 0
    with ThreadPoolExecutor(max_workers=FLOW_THREADS, thread_name_prefix="pypto-flows") as pool:
        by_time = [pool.submit(_by_time, ends, bounds, spills) for ends in (starts, finishes)]
        spans = {k: pool.submit(BucketedSpans, t.spans, t.rows, bounds, spills) for k, t in tables.items()}
        keys = pool.submit(_api_keys_by_part, api, spills, parts)
        s_at, f_at = (f.result() for f in by_time)
        on = {k: f.result() for k, f in spans.items()}
        a_parts = keys.result()
        f_bound = pool.submit(_bind_finishes, f_at, on["kernel"], spills, parts)
        s_parts = _bind_starts(pool, s_at, on["host"], on["api"], spills, parts)
        f_parts = f_bound.result()
        for rows, missed in map_ahead(pool, lambda p: _pair_part(s_parts[p], f_parts[p], a_parts[p]),
                                      range(parts), ahead=FLOW_THREADS):
            unbound += missed
            split_to(out_parts, rows, rows["kernel"] // width)
        for table in map_ahead(pool, lambda r: _flow_rows(out_parts[r].read(remove=True)), range(ranges),
                               ahead=FLOW_THREADS):
            sink.add(table)
    return sink.finish(), unbound


def _ends_copy(ends: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``dtype`` records with the id fields of the flow ends ``ends``, the bound rows to fill in."""
    out = np.empty(len(ends), dtype)
    for c in ("cat", "text", "valid", "hi", "id"):
        out[c] = ends[c]
    return out


def _bind_starts(pool: Executor, s_at: list[Spill], host: BucketedSpans, api: BucketedSpans, spills: SpillDir,
                 parts: int) -> list[Spill]:
    """The flow starts bucket by bucket, bound to their host op (in ``pool``) and their API (here), split
    into the id partitions (``_BOUND_S`` records)."""
    s_parts = spills.parts(_BOUND_S, parts)
    for k, bucket in enumerate(s_at):
        s = bucket.read(remove=True)
        on_host = pool.submit(host.bind, k, s["lane"], s["ts"])
        bs = _ends_copy(s, _BOUND_S)
        bs["api"] = api.bind(k, s["lane"], s["ts"])
        bs["host"] = on_host.result()
        split_to(s_parts, bs, _id_part(parts, bs))
    host.remove()
    api.remove()
    return s_parts


def _bind_finishes(f_at: list[Spill], kernels: BucketedSpans, spills: SpillDir, parts: int) -> list[Spill]:
    """The flow finishes bucket by bucket, bound to their kernel, split into the id partitions
    (``_BOUND_F`` records)."""
    f_parts = spills.parts(_BOUND_F, parts)
    for k, bucket in enumerate(f_at):
        f = bucket.read(remove=True)
        bf = _ends_copy(f, _BOUND_F)
        bf["kernel"] = kernels.bind(k, f["lane"], f["ts"])
        split_to(f_parts, bf, _id_part(parts, bf))
    kernels.remove()
    return f_parts


def _api_keys_by_part(api: _Finished, spills: SpillDir, parts: int) -> list[Spill]:
    """The CANN APIs' connection_id with their final rows (``_KEY_ROW`` records), split into the id
    partitions."""
    a_parts = spills.parts(_KEY_ROW, parts)
    offset = 0
    for chunk in api.keys.chunks():
        rec = np.empty(len(chunk), _KEY_ROW)
        for c in ("text", "valid", "hi", "id"):
            rec[c] = chunk[c]
        rec["row"] = api.rows.final(np.arange(offset, offset + len(chunk), dtype=np.int64))
        offset += len(chunk)
        split_to(a_parts, rec, _id_part(parts, rec))
    api.keys.remove()
    return a_parts


def _pair_part(s: Spill, f: Spill, apis: Spill) -> tuple[np.ndarray, int]:
    """:func:`_pair` of one id partition's spills, which are removed once read."""
    return _pair(s.read(remove=True), f.read(remove=True), apis.read(remove=True))


def _empty_flows() -> pa.Table:
    return empty_table("flows").append_column("api_index", pa.array([], pa.int64()))


def _by_time(ends: Spill, bounds: np.ndarray, spills: SpillDir) -> list[Spill]:
    """The flow ends split into the time buckets of their ts."""
    if not len(bounds):
        return [ends]
    parts = spills.parts(_END, len(bounds) + 1)
    for chunk in ends.chunks():
        split_to(parts, chunk, np.searchsorted(bounds, chunk["ts"], side="right"))
    ends.remove()
    return parts


def _id_part(parts: int, rec: np.ndarray) -> np.ndarray:
    """The hash partition of each record's id (invalid ids, which pair with nothing, all together)."""
    valid = rec["valid"]
    return hash_part(parts, rec["text"] & valid, np.where(valid, rec["hi"], 0), np.where(valid, rec["id"], 0))


def _pair(s: np.ndarray, f: np.ndarray, apis: np.ndarray) -> tuple[np.ndarray, int]:
    """The bound flows (``_FLOW`` records) of one partition's ends, and how many pairs were not bound."""
    api_index = _by_connection(s, apis)
    start_side = pa.table({
        "cat": np.ascontiguousarray(s["cat"]), "text": np.ascontiguousarray(s["text"]),
        "hi": np.ascontiguousarray(s["hi"]), "id": pa.array(np.ascontiguousarray(s["id"]), mask=~s["valid"]),
        "host_index": _nullable(s["host"]), "api_index": _nullable(api_index),
    })
    finish_side = pa.table({
        "cat": np.ascontiguousarray(f["cat"]), "text": np.ascontiguousarray(f["text"]),
        "hi": np.ascontiguousarray(f["hi"]), "id": pa.array(np.ascontiguousarray(f["id"]), mask=~f["valid"]),
        "kernel_index": _nullable(f["kernel"]),
    })
    pairs = start_side.join(finish_side, ["cat", "text", "hi", "id"], join_type="full outer")
    bound = pc.and_(pc.is_valid(pairs["kernel_index"]),
                    pc.or_(pc.is_valid(pairs["host_index"]), pc.is_valid(pairs["api_index"])))
    n_pairs = pairs.num_rows
    pairs = pairs.filter(bound)
    out = np.empty(pairs.num_rows, _FLOW)
    out["cat"] = pairs["cat"].to_numpy()
    for c in ("kernel", "host", "api"):
        out[c] = pc.fill_null(pairs[f"{c}_index"], -1).to_numpy()
    return out, n_pairs - len(out)


def _nullable(rows: np.ndarray) -> pa.Array:
    return pa.array(np.ascontiguousarray(rows), pa.int64(), mask=rows < 0)


def _flow_rows(rec: np.ndarray) -> pa.Table:
    """``_FLOW`` records -> flows rows, sorted fully (a join returns rows in no set order: the same file
    must always give the same table). A HostToDevice flow links its API, an async_npu one its host op."""
    is_api_kind = rec["cat"] == _FLOW_CATS.index("HostToDevice")
    kind = pa.DictionaryArray.from_arrays(rec["cat"].astype(np.int32), pa.array(list(_FLOW_CATS)))
    out = pa.table({"host_index": _nullable(np.where(is_api_kind, -1, rec["host"])),
                    "kernel_index": np.ascontiguousarray(rec["kernel"]),
                    "kind": kind.cast(pa.string()),
                    "api_index": _nullable(np.where(is_api_kind, rec["api"], -1))})
    out = out.sort_by([("kernel_index", "ascending"), ("kind", "ascending"), ("host_index", "ascending"),
                       ("api_index", "ascending")])
    return conform("flows", out)


def _by_connection(s: np.ndarray, apis: np.ndarray) -> np.ndarray:
    """Per start (``_BOUND_S``), its API row: the one bound by ts, else the first API (in table order) whose
    connection_id is the start's id (HostToDevice ids are: by it where the ts does not match)."""
    api_index = s["api"]
    need = np.flatnonzero((api_index < 0) & s["valid"])
    apis = apis[apis["valid"]]
    if not (len(need) and len(apis)):
        return api_index
    api_index = api_index.copy()
    domain, fits = _packed_ids(apis)
    if fits.all():  # the common case: one int64 per id, a stable sort and a binary search
        keys, fits = _packed_ids(s[need])  # a longer id equals none of the APIs'
        order = np.argsort(apis["row"], kind="stable")  # the first API in table order wins
        hit = first_rows(keys[fits], domain[order])
        api_index[need[fits]] = np.where(hit >= 0, apis["row"][order][np.maximum(hit, 0)], -1)
        return api_index
    key = ["text", "hi", "id"]  # ids of more than 19 digits: a hash join on the parts
    first = pa.table({c: np.ascontiguousarray(apis[c]) for c in (*key, "row")})
    first = first.group_by(key, use_threads=False).aggregate([("row", "min")])
    ends = pa.table({c: np.ascontiguousarray(s[c][need]) for c in key}).append_column("end", pa.array(need))
    hit = ends.join(first, key, join_type="inner", use_threads=False)
    api_index[hit["end"].to_numpy()] = hit["row_min"].to_numpy()
    return api_index


def _packed_ids(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Valid ids (``text``, ``hi``, ``id``) as one int64 each, and whether that is exact: integers of up
    to 19 digits (hi <= 8) as their value, text codes as negatives."""
    hi = rec["hi"]
    fits = hi <= 8
    return np.where(rec["text"], -1 - rec["id"], np.where(fits, hi, 0) * 10**18 + rec["id"]), fits


def steps_from_host(host: pa.Table) -> pa.Table:
    """The ``ProfilerStep#N`` host ops (name, start_ns, dur_ns; others are ignored) -> the steps table."""
    if host.num_rows == 0:
        return empty_table("steps")
    steps = host.filter(pc.starts_with(host["name"], "ProfilerStep#"))
    if steps.num_rows == 0:
        return empty_table("steps")
    step_id = to_int64(pc.utf8_slice_codeunits(steps["name"], len("ProfilerStep#")))
    end = pc.add(steps["start_ns"], pc.fill_null(steps["dur_ns"], 0))
    t = pa.table({"step_id": step_id, "start_ns": steps["start_ns"], "end_ns": end})
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


def _renaming(pid: Spill, names: pa.Array) -> Transform:
    """A transform for the counters seen chunk by chunk, in order: ``process`` becomes ``names[pid]``."""
    seen = 0

    def apply(chunk: pa.Table) -> pa.Table:
        nonlocal seen
        ids = pid.read(seen, chunk.num_rows)
        seen += chunk.num_rows
        return chunk.set_column(chunk.column_names.index("process"), "process", names.take(pa.array(ids)))

    return apply


class _Counters:
    """The counter samples, streamed into a ``TableSink`` as they are scanned. Their ``process`` is the
    name the file gives their pid in the end (its last ``process_name``), which may come after the samples:
    each row's int32 pid id is spilled, and the column is rewritten at the end if a name given earlier was
    not the last."""

    def __init__(self, folder: Path | None, spills: SpillDir) -> None:
        self.sink = TableSink("counters", folder)
        self._pid_ids: dict[str | None, int] = {}
        self._given: dict[str | None, set[str | None]] = {}  # per pid, the names its rows were written with
        self._pid = spills.spill(np.dtype("<i4"))

    def add(self, c: pa.Table, names: dict[str | None, str | None]) -> None:
        enc = pc.dictionary_encode(c["pid"].combine_chunks(), null_encoding="encode")
        pids = enc.dictionary.to_pylist()
        for pid in pids:
            self._given.setdefault(pid, set()).add(names.get(pid))
        process = pa.array([names.get(pid) for pid in pids], pa.string()).take(enc.indices)
        self.sink.add(_counter_rows(c, process))
        ids = np.array([self._pid_ids.setdefault(pid, len(self._pid_ids)) for pid in pids], np.int32)
        self._pid.add(ids[enc.indices.to_numpy(zero_copy_only=False)])

    def finish(self, names: dict[str | None, str | None]) -> pa.Table | None:
        """The table (None once its Parquet file is written), ``names`` being the file's last ones."""
        transform = None
        if any(given != {names.get(pid)} for pid, given in self._given.items()):
            final = pa.array([names.get(pid) for pid in self._pid_ids], pa.string())  # in id order
            transform = _renaming(self._pid, final)
        table = self.sink.finish(transform)
        self._pid.remove()
        return table

    def abort(self) -> None:
        self.sink.abort()


class _Finished(NamedTuple):
    table: pa.Table | None  # None once its Parquet file is written
    spans: Spill  # SPAN records, streamed rows then late ones
    keys: Spill  # the CANN APIs' connection_id (_KEY records), in the same order (empty for other tables)
    rows: RowOrder  # the final row of each of those


class _SliceTable:
    """One big slice table (host_ops, api_calls, kernels): its rows go to a ``TableSink`` as they are
    scanned; what the flows bind on (``SPAN`` records: 20 bytes a row) and for the CANN APIs their
    connection_id (HostToDevice flow ids) are spilled, with the bucket sample of their starts."""

    def __init__(self, name: str, folder: Path | None, rows: Callable[[pa.Table], pa.Table], spills: SpillDir,
                 sample: TimeSample, id_column: str | None = None) -> None:
        self.sink = TableSink(name, folder)
        self._rows = rows
        self._id_column = id_column
        self._spans = spills.spill(SPAN)
        self._keys = spills.spill(_KEY)
        self._sample = sample

    @property
    def count(self) -> int:
        return self.sink.rows

    def add(self, slices: pa.Table, lanes: np.ndarray, ids: _FlowIds) -> None:
        """Slices as scanned, on their ``lanes`` (``_LaneIds``)."""
        self.sink.add(self._rows(slices))
        self._keep(slices, lanes, ids)

    def _keep(self, slices: pa.Table, lanes: np.ndarray, ids: _FlowIds) -> None:
        spans = np.empty(slices.num_rows, SPAN)
        spans["lane"] = lanes
        spans["start"] = pc.fill_null(slices["ts_ns"], NO_START).to_numpy()
        spans["dur"] = pc.fill_null(slices["dur_ns"], 0).to_numpy()
        self._spans.add(spans)
        self._sample.add(spans["start"])
        if self._id_column is not None:
            self._keys.add(ids.keys(slices[self._id_column]))

    def finish(self, late: pa.Table, at: np.ndarray, lanes: _LaneIds, ids: _FlowIds) -> _Finished:
        """The table, its spans and keys, with the ``late`` slices (classified at the end) put before row
        ``at`` of the rows streamed."""
        n = self.count
        rows = self._rows(late)
        if late.num_rows:
            self._keep(late, lanes.of(late["pid"], late["tid"]), ids)
        transform = None
        if n and late.num_rows:
            transform = _inserting(rows, at, n)
        else:  # nothing streamed: the late rows are the table (without any: its columns, extras included)
            self.sink.add(rows)
        table = self.sink.finish(transform)
        self._spans.close()
        self._keys.close()
        return _Finished(table, self._spans, self._keys, RowOrder(n, at if late.num_rows else at[:0]))

    def abort(self) -> None:
        self.sink.abort()


class _Retained:
    """Slimmed slices that wait for the end of the file (the lanes' names): in memory, or in an Arrow IPC
    file of the spill folder (a communication lane grows with the file: ~7 MB a GB)."""

    def __init__(self, spills: SpillDir) -> None:
        self._path = spills.path / "retained.arrows" if spills.path is not None else None
        self._parts: list[pa.Table] = []
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def add(self, part: pa.RecordBatch) -> None:
        if self._path is None:
            self._parts.append(pa.Table.from_batches([part]))
            return
        if self._writer is None:
            self._writer = pa.ipc.new_stream(str(self._path), part.schema)
        self._writer.write_batch(part)

    def chunks(self) -> Iterator[pa.Table]:
        if self._path is None:
            yield from self._parts
            self._parts = []
            return
        if self._writer is None:
            return
        self.close()
        with pa.ipc.open_stream(str(self._path)) as reader:
            for batch in reader:
                yield pa.Table.from_batches([batch])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _by_seq(chunks: Iterator[pa.Table], late: pa.Table) -> Iterator[pa.Table]:
    """The retained chunks (in file order) with the ``late`` rows (classified at the end, in file order)
    merged in by ``_seq``."""
    late_seq = late["_seq"].to_numpy() if late.num_rows else np.empty(0, np.int64)
    j = 0
    for chunk in chunks:
        k = int(np.searchsorted(late_seq, chunk["_seq"][-1].as_py(), side="right")) if chunk.num_rows else j
        if k > j:
            chunk = pa.concat_tables([chunk, late.slice(j, k - j)]).sort_by("_seq")
            j = k
        yield chunk
    if j < late.num_rows:
        yield late.slice(j)


# ---------------------------------------------------------------------------------------------- reader


_X_COLUMNS = ["name", "cat", "pid", "tid", "ts_ns", "dur_ns", "arg:Task Type", "arg:Physic Stream Id",
              "arg:Task Id", "arg:connection_id", "arg:correlation_id", "arg:level", "arg:Thread Id",
              "arg:Input Dims",
              "arg:Sequence number", "_seq"]
_STREAMED = {LANE_HOST: "host_ops", LANE_API: "api_calls", LANE_DEVICE: "kernels"}  # the big tables
_AT = {kind: f"_at_{kind}" for kind in _STREAMED}  # per unnamed slice: rows of each big table before it
_PIECE_COLUMNS = {
    LANE_COMMUNICATION: ["name", "pid", "tid", "ts_ns", "dur_ns", "_seq"],
    LANE_OVERLAP: ["name", "ts_ns", "dur_ns", "_seq"],
    "deferred": _X_COLUMNS + list(_AT.values()),
    "meta": ["ph", "name", "pid", "tid", "arg:name", "arg:labels"],
}
_COUNTER_COLUMNS = ["name", "pid", "ts_ns", "arg0_key", "arg0_val"]
_FLOW_COLUMNS = ["cat", "id", "ts_ns"]  # the lanes come from the batch's (pid, tid) groups
# what write_trace_view writes as it reads (flows and communication: at the end, bucket by bucket)
_STREAMED_TABLES = (*_STREAMED.values(), "counters", "flows", "communication")
_PIECE_EXTRA = (pa.field("_seq", pa.int64()), *(pa.field(c, pa.int64()) for c in _AT.values()))
_FLOW_CATS = ("async_npu", "HostToDevice")
_SLICE_KINDS = (LANE_DEVICE, LANE_HOST, LANE_API, LANE_COMMUNICATION, LANE_OVERLAP)
_PHASES = ("M", "C", "s", "f", "X")  # the event phases the reader asks about
_CATS = (*_FLOW_CATS, "python_function")  # the categories it asks about
_UNNAMED = -2  # kind code of a pid no process_name (yet) names; -1: named, but not a slice table's


def read_trace_view(path: str | os.PathLike[str]) -> TraceTables:
    """Read a torch_npu ``trace_view.json`` or an msprof ``msprof_*.json`` timeline.

    Raises ``InputError`` naming the file when it is empty, not JSON, truncated, or not a chrome trace.
    """
    return _convert(Path(path), None)


def read_trace_file(path: str | os.PathLike[str]) -> Profile:
    """A lone timeline file (``trace_view.json`` or ``msprof_*.json`` without its folder) as a Profile."""
    p = Path(path)
    tt = _convert(p, None)
    tables = {name: getattr(tt, name) for name in TABLE_NAMES if hasattr(tt, name)}
    return Profile(meta=_trace_meta(p, tt), **tables)


def write_trace_view(
    path: str | os.PathLike[str], folder: str | os.PathLike[str], *, rank_hint: int | None = None
) -> ProfileMeta:
    """Read a timeline straight into a saved profile folder (as ``Profile.save`` writes it).

    Host ops, API calls, kernels and counters are streamed into their Parquet files batch by batch; what
    the flows bind on (~20 bytes a slice, ~31 a flow end) and the communication lane are spilled to a
    temporary folder inside ``folder`` and bound in buckets of bounded size at the end (see
    ``flow_binding``), so that peak memory does not grow with the file (a 5 GB trace peaks near 0.4 GB).
    ``Profile.load(folder)`` then gives the profile of :func:`read_trace_file`. ``rank_hint``: the rank when
    the file does not state it (from its name, as ``open_profile`` does). A failed read leaves no folder
    behind.
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
    spills = SpillDir(folder)
    sample = TimeSample()
    big = {
        LANE_HOST: _SliceTable("host_ops", folder, _host_rows, spills, sample),
        LANE_API: _SliceTable("api_calls", folder, _api_rows, spills, sample, id_column="arg:connection_id"),
        LANE_DEVICE: _SliceTable("kernels", folder, _kernel_rows, spills, sample),
    }
    counters = _Counters(folder, spills)
    flow_ids = _FlowIds()
    flow_starts, flow_finishes = spills.spill(_END), spills.spill(_END)
    communication = _Retained(spills)  # until the lanes are named: which threads are "Group N Communication"
    steps: list[pa.Table] = []
    proc_names: dict[str | None, str | None] = {}
    # names found ahead, searched for only when a slice of a not-yet-named process turns up (torch_npu names
    # its host process after its events): its slices then stream instead of waiting. A trace that names its
    # processes first never pays the extra read.
    early: dict[str | None, str | None] = {}
    state = {"events": 0, "python_function": 0, "searched": False}

    def on_batch(batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        seq = np.arange(state["events"], state["events"] + n, dtype=np.int64)
        batch = batch.append_column("_seq", pa.array(seq))
        state["events"] += n
        # what each row is, as small codes compared in numpy: a few hash lookups a row, not a string
        # comparison per question asked
        ph = _text_codes(batch.column("ph"), _PHASES)
        cat = _text_codes(batch.column("cat"), _CATS)
        is_m = ph == _PHASES.index("M")
        if is_m.any():
            pieces.add("meta", batch, is_m)
            m = batch.filter(is_m & (_text_codes(batch.column("name"), ("process_name",)) == 0))
            proc_names.update(zip(m.column("pid").to_pylist(), m.column("arg:name").to_pylist()))
        is_c = ph == _PHASES.index("C")
        if is_c.any():
            counters.add(pa.Table.from_batches([batch.select(_COUNTER_COLUMNS).filter(is_c)]), proc_names)
        is_flow = (cat >= 0) & (cat < len(_FLOW_CATS))
        is_pyfn = cat == _CATS.index("python_function")
        is_x = ph == _PHASES.index("X")
        state["python_function"] += int(np.count_nonzero(is_x & is_pyfn))
        is_x &= ~is_pyfn
        pids = pc.dictionary_encode(batch.column("pid"), null_encoding="encode")
        pid_names = pids.dictionary.to_pylist()
        kinds = _kinds_of(pid_names, early, proc_names)
        pid_rows = pids.indices.to_numpy(zero_copy_only=False)
        kind = kinds[pid_rows]
        if not state["searched"] and (is_x & (kind == _UNNAMED)).any():
            state["searched"] = True
            ahead = early_process_names(p, _label_free)
            early.update({pid: classify_process(name, None) for pid, name in ahead.items()})
            kind = _kinds_of(pid_names, early, proc_names)[pid_rows]
        masks = {k: is_x & (kind == i) for i, k in enumerate(_SLICE_KINDS)}
        if folder is None:  # the overlap lanes are not a table of a saved profile
            pieces.add(LANE_OVERLAP, batch, masks[LANE_OVERLAP])
        if masks[LANE_COMMUNICATION].any():
            communication.add(batch.select(_PIECE_COLUMNS[LANE_COMMUNICATION]).filter(masks[LANE_COMMUNICATION]))
        deferred = is_x & (kind == _UNNAMED)
        if deferred.any():
            for k, table in big.items():  # where each will go: after the rows of each big table before it
                before = np.cumsum(masks[k], dtype=np.int64)
                batch = batch.append_column(_AT[k], pa.array(table.count + before))
            pieces.add("deferred", batch, deferred)
        ends = {end: is_flow & (ph == _PHASES.index(end)) for end in ("s", "f")}
        if not any(m.any() for m in (*ends.values(), *(masks[k] for k in big))):
            return
        lanes = lane_ids.of(pids, batch.column("tid"))
        for end, kept in (("s", flow_starts), ("f", flow_finishes)):
            if ends[end].any():
                rows = pa.Table.from_batches([batch.select(_FLOW_COLUMNS).filter(ends[end])])
                kept.add(flow_ids.ends(rows, lanes[ends[end]]))
        for k, table in big.items():
            if masks[k].any():
                slices = pa.Table.from_batches([batch.select(_X_COLUMNS).filter(masks[k])])
                table.add(slices, lanes[masks[k]], flow_ids)
                if k == LANE_HOST:
                    steps.append(_step_rows(slices))

    try:
        scanned = scan_file(p, ASCEND_ARG_KEYS, on_batch=on_batch)
        lanes = lanes_from_metadata(pieces.table("meta"))
        deferred = pieces.table("deferred")
        dkind = _pid_kind_column(deferred, lanes)
        late = {k: deferred.filter(pc.fill_null(pc.equal(dkind, k), False)) for k in _SLICE_KINDS}
        done = {k: table.finish(late[k].select(_X_COLUMNS), late[k][_AT[k]].to_numpy(), lane_ids, flow_ids)
                for k, table in big.items()}
        counter_table = counters.finish(proc_names)
        flows, unbound = _flows(flow_starts, flow_finishes, done[LANE_HOST], done[LANE_API],
                                done[LANE_DEVICE], sample, spills, folder)
        comm_sink = TableSink("communication", folder)
        comm_sink.add(empty_table("communication"))
        late_comm = late[LANE_COMMUNICATION].select(_PIECE_COLUMNS[LANE_COMMUNICATION])
        for chunk in _by_seq(communication.chunks(), late_comm):
            comm_sink.add(_communication(chunk, lanes))
        comm_table = comm_sink.finish()
    except BaseException:
        big_sinks: list[_SliceTable | _Counters] = [*big.values(), counters]
        for sink in big_sinks:
            sink.abort()
        raise
    finally:
        communication.close()
        spills.remove()
    ov = pieces.table(LANE_OVERLAP)
    if late[LANE_OVERLAP].num_rows:
        ov = pa.concat_tables([ov, late[LANE_OVERLAP].select(_PIECE_COLUMNS[LANE_OVERLAP])]).sort_by("_seq")
    steps.append(_step_rows(late[LANE_HOST]))
    warnings: list[Text] = []
    unnamed = int(pc.sum(pc.is_null(dkind).cast(pa.int64())).as_py() or 0) if deferred.num_rows else 0
    if unnamed:
        warnings.append(msg("{n} slices on processes the file never names (no process_name) were skipped",
                            n=unnamed))
    tables = TraceTables(
        flows=flows if flows is not None else empty_table("flows"),
        counters=counter_table if counter_table is not None else empty_table("counters"),
        steps=steps_from_host(pa.concat_tables(steps).sort_by("_seq")),
        communication=comm_table if comm_table is not None else empty_table("communication"),
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
