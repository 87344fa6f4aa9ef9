"""SQLite exports → a saved profile: torch_npu ``ascend_pytorch_profiler_*.db`` (+ ``analysis.db``) and msprof
``msprof_*.db``.

Both share msprof's schema (docs/formats.md §1.5, §2.7): times are INTEGER ns since the epoch (torch_npu's
``PYTORCH_API.startNs`` is TEXT holding the same digits), text columns are ids into ``STRING_IDS``, and
column names drift (``blockDim``→``blockNum``, ``waitNs`` only in older files). Each table is optional;
what is missing is simply absent, what is broken becomes a warning.

The big tables (kernels, host ops, API calls, flows, counters, memory) are streamed into Parquet, in one
of two ways that write the same tables:

- natively, where ``sqlite_fetch`` can be built (a C compiler and Python's libsqlite3): its C loop fetches
  the rows straight into Arrow columns, text as ids that Arrow resolves per distinct value through
  STRING_IDS (read once); the order is found from the order keys alone and is mostly the file's own (TASK
  and CANN_API are written by start time: no sort; PYTORCH_API nearly, ``row_order`` puts it right a window
  at a time); the PMU metrics are pivoted in one scan of their table's pages into a temporary file; the
  flows are joined in numpy.
- through SQL (Python's sqlite3), for everything else and for any table holding a value the native fetch
  does not take (``Mismatch``: text where ids or times are): SQLite orders, joins through STRING_IDS,
  pivots and numbers the flows (its sorts and temporary indexes spill to temporary files), and each block
  of fetched rows becomes Arrow arrays at once.

Either way memory stays bounded by a block, a few row groups, SQLite's caches and a few integers per
kernel, host op and API call (the order, the connection ids the flows join).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats import parquet_sink, sqlite_fetch
from pypto_core.formats.csvtable import ConversionNotes, to_float, to_int, to_ns, to_text
from pypto_core.formats.parquet_sink import write_parquet_stream
from pypto_core.formats.row_order import ascending, by_first_column
from pypto_core.formats.shapes import parse_name_lists, parse_shapes
from pypto_core.formats.sqlite_fetch import (
    CODE,
    INT64,
    TEXT_INT,
    Declined,
    IdMap,
    Mismatch,
    NativeDb,
    read_only_uri,
    table_reading,
)
from pypto_core.i18n import Message, msg
from pypto_core.limits import current_limits
from pypto_core.memory import release_freed_memory
from pypto_core.profile import (
    STREAM_ENCODING,
    TABLE_SCHEMAS,
    Profile,
    ProfileMeta,
    conform,
    empty_table,
    save_tables,
)

# Rows fetched from SQLite per block, then turned into Arrow arrays at once: a block of kernel rows (about
# 20 values each, shapes text included) is a few tens of MB as Python objects. Read at call time, so that a
# test can make it tiny.
FETCH_ROWS = 20_000
# Rows per block of the native fetch (sqlite_fetch): its blocks are Arrow columns from the start, so bigger
# blocks only amortise the per-block work (a block of kernel rows is about 10 MB). Also read at call time.
NATIVE_FETCH_ROWS = 64 * 1024
# SQLite's page cache, which also sizes its sorter's in-memory runs before they spill (vdbesort.c) and the
# temporary indexes of the joins, for the main and the temp database. On a 300 MB simulated db (449 k
# kernels): 16 MiB gave a 388 MB peak, 64 MiB 533 MB for 4% less time, the 2 MiB default was slower.
_CACHE_KIB = 16 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


class _Connection(sqlite3.Connection):
    """A connection to one export, with the moment (``time.monotonic``) its reading must stop."""

    deadline: float = 0.0


def connect(path: str | os.PathLike[str]) -> _Connection:
    """Open read-only (never modify an upload), or ``InputError`` for empty / non-SQLite / corrupt files."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(str(p), msg("cannot read file ({error})", error=exc.strerror or str(exc))) from exc
    if size == 0:
        raise InputError(str(p), msg("file is empty (0 bytes)"))
    if not is_sqlite(p):
        raise InputError(str(p), msg("not an SQLite database (wrong file header)"))
    try:
        conn = sqlite3.connect(read_only_uri(p), uri=True, factory=_Connection)
        conn.execute("pragma query_only = on")
        conn.execute("pragma trusted_schema = off")  # no function of the file's schema runs
        conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(str(p), msg("corrupt SQLite database ({error})", error=str(exc))) from exc
    conn.deadline = _only_tables(conn)
    return conn


# SQLite authorizer codes (sqlite3.h): a recursive common table expression (a view over one made a 12 KB file
# yield 10 M rows); anything read through a view or a trigger is refused, so only stored rows are read.
_SQLITE_RECURSIVE = 33


def _only_tables(conn: sqlite3.Connection) -> float:
    """Reads of stored tables only, within the time budget of ``pypto_core.limits`` (else the query stops
    and :func:`refusal` names the reason); the deadline (``time.monotonic``)."""
    # ``source`` names the view or trigger a read comes through (or the readers' own CTE, allowed).
    computed = {r[0] for r in conn.execute(
        "select name from sqlite_master where type in ('view', 'trigger')")}

    def authorize(action: int, _arg1: str | None, _arg2: str | None, _db: str | None,
                  source: str | None) -> int:
        if source in computed or action == _SQLITE_RECURSIVE:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    conn.set_authorizer(authorize)
    deadline = time.monotonic() + current_limits().sqlite_seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 100_000)
    return deadline


def refusal(exc: sqlite3.DatabaseError) -> Message:
    """The reason for a query stopped by :func:`_only_tables`, or the database's own message."""
    text = str(exc)
    if "not authorized" in text or "prohibited" in text:
        return msg("only stored tables are read: a table the readers need is a view, or the query is "
                   "recursive")
    if "interrupted" in text:
        return msg("reading took longer than the limit of {seconds:g} s",
                   seconds=current_limits().sqlite_seconds)
    return msg("unexpected database content ({error})", error=text)


def _tables(conn: sqlite3.Connection) -> set[str]:
    """The stored tables (not views, not virtual tables: a view may compute any number of rows)."""
    return {r[0] for r in conn.execute("select name from sqlite_master where type = 'table' "
                                       "and coalesce(sql, '') not like 'create virtual%'")}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'pragma table_info("{table}")')]


def _array(values: Sequence[Any]) -> pa.Array:
    """One fetched column as Arrow, its type inferred; text where the values mix types."""
    try:
        return pa.array(list(values))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def blocks(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Iterator[pa.Table]:
    """The rows of ``sql`` as Arrow tables of at most ``FETCH_ROWS`` rows each (types inferred per block):
    only one block's Python rows exist at a time."""
    cur = conn.execute(sql, tuple(params))
    names = [d[0] for d in cur.description]
    try:
        while True:
            rows = cur.fetchmany(FETCH_ROWS)
            if not rows:
                return
            yield pa.table([_array(col) for col in zip(*rows)], names=names)
    finally:
        cur.close()


def query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> pa.Table:
    """Run ``sql`` and return its rows as one Arrow table: for the small tables only (steps, metadata,
    analysis.db), whose types are inferred over the whole result."""
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    columns: list[list[Any]] = [[] for _ in names]
    while True:
        rows = cur.fetchmany(FETCH_ROWS)
        if not rows:
            break
        for i, col in enumerate(zip(*rows)):
            columns[i].extend(col)
    return pa.table([_array(col) for col in columns], names=names)


def _str_join(alias: str, column: str) -> tuple[str, str]:
    """SQL select expression and join clause that resolve an id column through STRING_IDS."""
    j = f"s_{alias}"
    return f"{j}.value", f"left join STRING_IDS {j} on {j}.id = {column}"


def _pick(cols: list[str], *names: str) -> str | None:
    return next((n for n in names if n in cols), None)


def _rowid(conn: sqlite3.Connection, table: str, alias: str) -> str:
    """``alias.rowid``: the tie-breaker that keeps rows with equal start times in file order; ``null`` for a
    view or a WITHOUT ROWID table, which have none."""
    try:
        conn.execute(f'select rowid from "{table}" limit 0')
    except sqlite3.OperationalError:
        return "null"
    return f"{alias}.rowid"


def _stream(dest: Path, schema: pa.Schema, tables: Iterable[pa.Table]) -> int:
    """``tables`` (each conformed to ``schema``) into one Parquet file, written even when empty."""
    return write_parquet_stream(
        (pa.Table.from_arrays([t[f.name].cast(f.type) for f in schema], schema=schema) for t in tables),
        dest, schema=schema, **STREAM_ENCODING)


# ------------------------------------------------------------------------------------------------ kernels

# canonical column <- COMPUTE_TASK_INFO id column resolved through STRING_IDS
_KERNEL_TEXT = (("name", "name"), ("op_type", "opType"), ("core_type", "taskType"),
                ("input_shapes", "inputShapes"),
                ("input_dtypes", "inputDataTypes"), ("input_formats", "inputFormats"),
                ("output_shapes", "outputShapes"), ("output_dtypes", "outputDataTypes"),
                ("output_formats", "outputFormats"), ("op_state", "opState"),
                ("hf32_eligible", "hf32Eligible"))
_KERNEL_EXTRA_TYPES = {"op_state": pa.string(), "hf32_eligible": pa.string(), "model_id": pa.int64()}
# The kernel order: by start (nulls last, as Arrow sorts), compute tasks before hcom ops that start at the
# same time, then file order.
_KERNEL_ORDER = "start_ns is null, start_ns, _src, _r1, _r2"
_PMU_COUNT = "pmu_values"  # the non-null PMU values of a task, to check the one-pass pivot
_TEXT_COLUMNS = frozenset(c for c, _ in _KERNEL_TEXT)


@dataclass
class _Part:
    """One source of kernel rows (compute tasks, hcom ops): its select expressions by canonical column (text
    resolved through STRING_IDS), its FROM clause with those joins, and its order keys (``src`` between the
    sources, then the rowids ``r1``, ``r2``); for the native fetch also the STRING_IDS id expression of each
    text column, the FROM clause without the joins (its loop order fixed: TASK outermost, so that rows come
    in TASK's file order) and the task id that PMU metrics attach to."""

    exprs: dict[str, str]
    source: str
    src: int
    r1: str
    r2: str
    ids: dict[str, str]
    table: str
    task_id: str = "null"

    @property
    def keys(self) -> str:
        return f"{self.src} as _src, {self.r1} as _r1, {self.r2} as _r2"

    def native_select(self, columns: Sequence[str]) -> str:
        """``columns`` (text as STRING_IDS ids) and the order keys, without the joins to STRING_IDS."""
        cols = [f"{(self.ids if c in _TEXT_COLUMNS else self.exprs).get(c, 'null')} as {c}" for c in columns]
        return f"select {', '.join(cols)}, {self.keys} from {self.table}"


@dataclass
class _KernelSql:
    """The kernel rows of one file as SQL: each source (compute tasks, hcom ops) one select of ``columns``
    plus the order keys, and the PMU metrics pivoted into ``pmu_<i>`` columns. ``rowid_keys``: every order
    key is a real rowid (else the native fetch, whose query differs, could order ties otherwise)."""

    columns: list[str] = field(default_factory=list)
    parts: list[_Part] = field(default_factory=list)
    pmu: list[str] = field(default_factory=list)
    pmu_ids: list[list[Any]] = field(default_factory=list)  # the STRING_IDS ids of each metric name
    pmu_rowid: str = "null"
    rowid_keys: bool = True
    has_pmu: bool = False  # TASK_PMU_INFO and a compute task to attach its metrics to

    def pmu_columns(self) -> list[str]:
        return [f"pmu_{j}" for j in range(len(self.pmu))]

    def union(self, columns: Sequence[str], pmu: str = "") -> str:
        selects = []
        for i, part in enumerate(self.parts):
            cols = [f"{part.exprs.get(c, 'null')} as {c}" for c in columns]
            if pmu:
                cols += [f"pm.{c} as {c}" if i == 0 else f"null as {c}"
                         for c in self.pmu_columns() + [_PMU_COUNT]]
            join = f" left join ({pmu}) pm on pm.gid = t.globalTaskId" if pmu and i == 0 else ""
            selects.append(f"select {', '.join(cols)}, {part.keys} from {part.source}{join}")
        return " union all ".join(selects)

    def native_sql(self) -> tuple[str, list[tuple[str, int, bool]]]:
        """Every kernel row in :meth:`rows_sql`'s order for the native fetch: text as STRING_IDS ids (no
        joins), the PMU metrics left out, and the order keys. Also (name, kind, whether text) of each column
        of it (and of each part's :meth:`_Part.native_select`)."""
        union = " union all ".join(part.native_select(self.columns) for part in self.parts)
        sql = f"select * from ({union}) order by {_KERNEL_ORDER}"
        kinds = [(c, CODE, True) if c in _TEXT_COLUMNS else (c, INT64, False) for c in self.columns]
        return sql, kinds + [(k, INT64, False) for k in ("_src", "_r1", "_r2")]

    def rows_sql(self, exact: bool) -> tuple[str, list[Any]]:
        """Every kernel row in the final order, and the parameters of the PMU pivot."""
        if not self.pmu:
            union = self.union(self.columns)
            return f"select {', '.join(self.columns)} from ({union}) order by {_KERNEL_ORDER}", []
        pivot, params = self._exact_pivot() if exact else self._pivot()
        names = self.columns + self.pmu_columns() + [_PMU_COUNT]
        union = self.union(self.columns, pivot)
        return f"select {', '.join(names)} from ({union}) order by {_KERNEL_ORDER}", params

    def _pivot(self) -> tuple[str, list[Any]]:
        """One pass grouped by task: each metric's non-null value where a task has at most one, and the count
        of non-null values, which tells (``_check_single_values``) where a task has several."""
        cases, params = [], []
        for j, ids in enumerate(self.pmu_ids):
            marks = ", ".join("?" * len(ids))
            cases.append(f"max(case when p.name in ({marks}) then p.value end) as pmu_{j}")
            params += ids
        every = [i for ids in self.pmu_ids for i in ids]
        marks = ", ".join("?" * len(every))
        cases.append(f"count(case when p.name in ({marks}) then p.value end) as {_PMU_COUNT}")
        params += every
        return (f"select p.globalTaskId as gid, {', '.join(cases)} from TASK_PMU_INFO p "
                "group by p.globalTaskId"), params

    def _exact_pivot(self) -> tuple[str, list[Any]]:
        """Two passes: the first non-null value (file order) of each task's metric, then one column each."""
        # min(rowid) makes the bare column v that of the first row of its group (SQLite's documented rule)
        first = (f"select p.globalTaskId as gid, s.value as metric, p.value as v, min({self.pmu_rowid}) "
                 "from TASK_PMU_INFO p left join STRING_IDS s on s.id = p.name where p.value is not null "
                 "group by p.globalTaskId, s.value")
        cases = [f"max(case when metric = ? then v end) as pmu_{j}" for j in range(len(self.pmu))]
        sql = f"select gid, {', '.join(cases)}, 0 as {_PMU_COUNT} from ({first}) group by gid"
        return sql, list(self.pmu)

    def numbering_sql(self) -> str:
        """(kernel_index, connection id) of every kernel row, numbered in :meth:`rows_sql`'s order."""
        return (f"select row_number() over (order by {_KERNEL_ORDER}) - 1 as kernel_index, "
                f"connection_id as cid from ({self.union(['start_ns', 'connection_id'])})")

    def schema(self) -> pa.Schema:
        base = TABLE_SCHEMAS["kernels"]
        extras = [pa.field(c, _KERNEL_EXTRA_TYPES[c]) for c in self.columns if c in _KERNEL_EXTRA_TYPES]
        return pa.schema(list(base) + extras + [pa.field(m, pa.float64()) for m in self.pmu])


def _kernel_sql(conn: sqlite3.Connection, tables: set[str]) -> _KernelSql:
    """TASK ⋈ COMPUTE_TASK_INFO (compute kernels) plus COMMUNICATION_OP (hcom ops)."""
    ks = _KernelSql()
    if {"TASK", "COMPUTE_TASK_INFO"} <= tables:
        c_cols = _columns(conn, "COMPUTE_TASK_INFO")
        t_cols = _columns(conn, "TASK")
        exprs = {"start_ns": "t.startNs", "dur_ns": "t.endNs - t.startNs", "stream_id": "t.streamId",
                 "task_id": "t.taskId", "device_id": "t.deviceId", "connection_id": "t.connectionId"}
        joins, ids = [], {}
        for canonical, src in _KERNEL_TEXT:
            if src in c_cols:
                expr, join = _str_join(canonical, f"c.{src}")
                exprs[canonical] = expr
                joins.append(join)
                ids[canonical] = f"c.{src}"
        block = _pick(c_cols, "blockNum", "blockDim", "block_dim")
        mix = _pick(c_cols, "mixBlockNum", "mixBlockDim")
        if block:
            exprs["block_dim"] = f"c.{block}"
        if mix:
            exprs["mix_block_dim"] = f"c.{mix}"
        if "waitNs" in c_cols:
            exprs["wait_ns"] = "c.waitNs"
        if "modelId" in t_cols:
            exprs["model_id"] = "t.modelId"
        tasks = "TASK t join COMPUTE_TASK_INFO c on c.globalTaskId = t.globalTaskId"
        rowids = _rowid(conn, "TASK", "t"), _rowid(conn, "COMPUTE_TASK_INFO", "c")
        ks.parts.append(_Part(exprs, f"{tasks} {' '.join(joins)}", 0, *rowids, ids,
                              tasks.replace(" join ", " cross join ", 1), "t.globalTaskId"))
        ks.rowid_keys = "null" not in rowids
        ks.columns = list(exprs)
        # without a compute task, no metric columns (nothing to attach them to)
        ks.has_pmu = ("TASK_PMU_INFO" in tables
                      and conn.execute(f"select 1 from {tasks} limit 1").fetchone() is not None)
    if "COMMUNICATION_OP" in tables:
        o_cols = _columns(conn, "COMMUNICATION_OP")
        name_expr, name_join = _str_join("opname", "o.opName")
        type_expr, type_join = _str_join("optype", "o.opType")
        exprs = {"name": name_expr, "op_type": type_expr, "start_ns": "o.startNs",
                 "dur_ns": "o.endNs - o.startNs", "connection_id": "o.connectionId"}
        if "waitNs" in o_cols:
            exprs["wait_ns"] = "o.waitNs"
        if "deviceId" in o_cols:
            exprs["device_id"] = "o.deviceId"
        exprs["core_type"] = "'COMMUNICATION'"
        rowid = _rowid(conn, "COMMUNICATION_OP", "o")
        ks.parts.append(_Part(exprs, f"COMMUNICATION_OP o {name_join} {type_join}", 1, rowid, "null",
                              {"name": "o.opName", "op_type": "o.opType"}, "COMMUNICATION_OP o"))
        ks.rowid_keys = ks.rowid_keys and rowid != "null"
        ks.columns += [c for c in exprs if c not in ks.columns]
    return ks


def _pmu_pivot(conn: sqlite3.Connection, ks: _KernelSql) -> None:
    """TASK_PMU_INFO (one row per metric per task) pivoted in SQL into one column per metric name, the
    first non-null value (file order) of each task's metric; the metric columns follow the kernel columns,
    by name, and a metric named like a kernel column is left out."""
    reserved = set(TABLE_SCHEMAS["kernels"].names) | (set(ks.columns) & set(_KERNEL_EXTRA_TYPES))
    ids: dict[str, list[Any]] = {}
    for nid, value in conn.execute("select s.id, s.value from STRING_IDS s "
                                   "where s.id in (select distinct name from TASK_PMU_INFO)"):
        if value is not None and str(value) not in reserved:
            ids.setdefault(str(value), []).append(nid)
    ks.pmu = sorted(ids)
    ks.pmu_ids = [ids[name] for name in ks.pmu]
    ks.pmu_rowid = _rowid(conn, "TASK_PMU_INFO", "p")


class _SeveralValues(Exception):
    """A task has more than one non-null value of a metric: the one-pass pivot cannot tell the first."""


def _check_single_values(raw: pa.Table, ks: _KernelSql) -> None:
    found = [pc.cast(pc.is_valid(raw[col]), pa.int64()) for col in ks.pmu_columns()]
    for more in found[1:]:
        found[0] = pc.add(found[0], more)
    counted = pc.fill_null(raw[_PMU_COUNT].cast(pa.int64()), 0)
    if pc.any(pc.greater(counted, found[0])).as_py():
        raise _SeveralValues()


def _canonical_kernel_block(raw: pa.Table, notes: ConversionNotes, ks: _KernelSql, exact: bool) -> pa.Table:
    if not ks.pmu:
        return _canonical_kernels(raw, notes)
    if not exact:
        _check_single_values(raw, ks)
    table = _canonical_kernels(raw.drop_columns(ks.pmu_columns() + [_PMU_COUNT]), notes)
    for name, col in zip(ks.pmu, ks.pmu_columns()):
        table = table.append_column(name, _metric_values(raw[col], name, notes))
    return table


def _metric_values(a: pa.ChunkedArray, name: str, notes: ConversionNotes) -> pa.ChunkedArray:
    """A PMU metric as float64: integers rounded to the nearest (as SQLite converts them), text read as a
    number or left empty with a warning (TASK_PMU_INFO.value is NUMERIC: text there is not a number)."""
    if pa.types.is_integer(a.type):
        return pc.cast(a, pa.float64(), safe=False)
    return to_float(a, column=name, notes=notes)


def write_kernels(conn: sqlite3.Connection, ks: _KernelSql, dest: Path, notes: ConversionNotes,
                  native: _Native | None = None) -> int:
    """Every kernel row, in start order, into ``dest``; the rows written. With ``native``, fetched and
    pivoted in C (:func:`_write_kernels_native`) unless the file holds values it does not take. Else in SQL:
    the PMU metrics are pivoted in one pass; a file where a task repeats a metric is written again with the
    two-pass pivot that keeps the first value (not so in the samples: one row per task and metric, as the
    format describes)."""
    if not ks.parts:
        return _stream(dest, TABLE_SCHEMAS["kernels"], [])
    kept = dict(notes.bad_values)
    if native is not None and ks.rowid_keys and (
            not ks.has_pmu or _rowid(conn, "TASK_PMU_INFO", "p") != "null"):
        try:
            return _write_kernels_native(conn, ks, native, dest, notes)
        except Mismatch:
            notes.bad_values = dict(kept)
    if ks.has_pmu:
        _pmu_pivot(conn, ks)
    for exact in (False, True):
        sql, params = ks.rows_sql(exact)
        try:
            return _stream(dest, ks.schema(), (_canonical_kernel_block(raw, notes, ks, exact)
                                               for raw in blocks(conn, sql, params)))
        except _SeveralValues:
            notes.bad_values = dict(kept)  # the notes of the abandoned pass are counted again
    raise AssertionError("unreachable: the exact pass raises no _SeveralValues")


def _canonical_kernels(raw: pa.Table, notes: ConversionNotes) -> pa.Table:
    cols: dict[str, Any] = {}
    for c in raw.column_names:
        a = raw[c]
        if c in ("input_shapes", "output_shapes"):
            parsed, bad, example = parse_shapes(_text_cells(a))
            notes.add(c, bad, example)
            cols[c] = parsed
        elif c in ("input_dtypes", "input_formats", "output_dtypes", "output_formats"):
            cols[c] = parse_name_lists(_text_cells(a))
        elif c in ("model_id", "stream_id", "task_id"):
            cols[c] = to_int(a, column=c, notes=notes)
        elif c == "connection_id":
            cols["correlation_id"] = to_int(a, column=c, notes=notes, none_values=())
        elif pa.types.is_string(a.type) or pa.types.is_dictionary(a.type):
            cols[c] = to_text(a)
        else:
            cols[c] = a
    if "core_type" in cols:
        ct = cols["core_type"].cast(pa.string())
        cols["core_type"] = pc.if_else(pc.equal(ct, "HCCL"), pa.scalar("COMMUNICATION"), ct)
    return conform("kernels", pa.table(cols))


def _text_cells(a: pa.ChunkedArray) -> pa.ChunkedArray:
    """Text as the shape and name-list parsers take it: a dictionary as it is (its distinct values are
    parsed once), anything else as strings."""
    return a if pa.types.is_dictionary(a.type) else a.cast(pa.string())


def _globaltid_split(gt: pa.Array | pa.ChunkedArray) -> tuple[pa.Array | pa.ChunkedArray,
                                                              pa.Array | pa.ChunkedArray]:
    gt = gt.cast(pa.int64())
    return pc.shift_right(gt, 32), pc.bit_wise_and(gt, 0xFFFFFFFF)


# ------------------------------------------------------------------------------- host ops, API calls, flows


def _host_sql(conn: sqlite3.Connection) -> tuple[str, str, str]:
    """PYTORCH_API's select list, source (with its STRING_IDS joins) and order (``startNs`` is TEXT)."""
    cols = _columns(conn, "PYTORCH_API")
    name_expr, name_join = _str_join("name", "p.name")
    select = ("cast(p.startNs as text) as s, cast(p.endNs as text) as e, p.globalTid as gt, "
              f"p.connectionId as cid, {name_expr} as name")
    source = f"PYTORCH_API p {name_join}"
    if "inputShapes" in cols:
        shapes, shape_join = _str_join("shapes", "p.inputShapes")
        select += f", {shapes} as input_shapes"
        source += f" {shape_join}"
    return select, source, f"cast(p.startNs as integer), {_rowid(conn, 'PYTORCH_API', 'p')}"


def _host_block(raw: pa.Table, notes: ConversionNotes) -> pa.Table:
    start = to_ns(raw["s"].cast(pa.string()), column="PYTORCH_API.startNs", notes=notes, unit_ns=1)
    end = to_ns(raw["e"].cast(pa.string()), column="PYTORCH_API.endNs", notes=notes, unit_ns=1)
    pid, tid = _globaltid_split(raw["gt"])
    out = {"name": raw["name"], "pid": pid, "tid": tid, "start_ns": start, "dur_ns": pc.subtract(end, start),
           "correlation_id": raw["cid"].cast(pa.int64())}
    if "input_shapes" in raw.column_names:
        out["input_shapes"] = raw["input_shapes"]
    return conform("host_ops", pa.table(out))


def write_host_ops(conn: sqlite3.Connection, dest: Path, notes: ConversionNotes,
                   native: _Native | None = None) -> int:
    """PYTORCH_API by start time into ``dest``; the rows written (with ``native``, fetched in C unless the
    file holds values it does not take)."""
    schema = TABLE_SCHEMAS["host_ops"]
    if "PYTORCH_API" not in _tables(conn):
        return _stream(dest, schema, [])
    if native is not None and _rowid(conn, "PYTORCH_API", "p") != "null":
        try:
            return _write_host_ops_native(conn, native, dest)
        except Mismatch:
            pass
    select, source, order = _host_sql(conn)
    return _stream(dest, schema, (_host_block(raw, notes) for raw in
                                  blocks(conn, f"select {select} from {source} order by {order}")))


def _api_block(raw: pa.Table) -> pa.Table:
    pid, tid = _globaltid_split(raw["gt"])
    return conform("api_calls", pa.table({
        "name": raw["name"], "level": raw["level"], "pid": pid, "tid": tid,
        "start_ns": raw["s"].cast(pa.int64()),
        "dur_ns": pc.subtract(raw["e"].cast(pa.int64()), raw["s"].cast(pa.int64())),
        "correlation_id": raw["cid"].cast(pa.int64()),
    }))


def write_api_calls(conn: sqlite3.Connection, dest: Path, native: _Native | None = None) -> int:
    """CANN_API by start time into ``dest``; the rows written (with ``native``, fetched in C unless the
    file holds values it does not take)."""
    tables = _tables(conn)
    schema = TABLE_SCHEMAS["api_calls"]
    if "CANN_API" not in tables:
        return _stream(dest, schema, [])
    if native is not None and _rowid(conn, "CANN_API", "a") != "null":
        try:
            return _write_api_calls_native(conn, native, dest, tables)
        except Mismatch:
            pass
    name_expr, name_join = _str_join("name", "a.name")
    level = "e.name as level" if "ENUM_API_TYPE" in tables else "cast(a.type as text) as level"
    level_join = "left join ENUM_API_TYPE e on e.id = a.type" if "ENUM_API_TYPE" in tables else ""
    sql = (f"select {name_expr} as name, {level}, a.globalTid as gt, a.startNs as s, a.endNs as e, "
           f"a.connectionId as cid from CANN_API a {name_join} {level_join} "
           f"order by a.startNs, {_rowid(conn, 'CANN_API', 'a')}")
    return _stream(dest, schema, (_api_block(raw) for raw in blocks(conn, sql)))


def write_flows(conn: sqlite3.Connection, ks: _KernelSql, dest: Path, native: _Native | None = None) -> int:
    """Host op → kernel links (PYTORCH_API.connectionId → CONNECTION_IDS → TASK.connectionId) into ``dest``,
    by row index into host_ops and kernels: both numbered in SQL in the order they were written, or where
    both were read natively, joined in numpy on the connection ids kept as they were written."""
    tables = _tables(conn)
    schema = TABLE_SCHEMAS["flows"]
    if not ({"CONNECTION_IDS", "PYTORCH_API"} <= tables and ks.parts):
        return _stream(dest, schema, [])
    joined = _native_flows(conn, native) if native is not None else None
    if joined is not None:
        step = parquet_sink.ROW_GROUP_ROWS
        return _stream(dest, schema, (joined.slice(i, step) for i in range(0, joined.num_rows, step)))
    _, source, order = _host_sql(conn)
    sql = (f"with h as (select row_number() over (order by {order}) - 1 as host_index, p.connectionId as cid "
           f"from {source}), k as ({ks.numbering_sql()}) "
           "select h.host_index as host_index, k.kernel_index as kernel_index from h "
           "join CONNECTION_IDS l on l.id = h.cid join k on k.cid = l.connectionId "
           "order by h.host_index, k.kernel_index")

    def flows(raw: pa.Table) -> pa.Table:
        return pa.table({"host_index": raw["host_index"].cast(pa.int64()),
                         "kernel_index": raw["kernel_index"].cast(pa.int64()),
                         "kind": pa.array(["async_npu"] * raw.num_rows, pa.string())})

    return _stream(dest, schema, (flows(raw) for raw in blocks(conn, sql)))


# ------------------------------------------------------------------------------------------- native fetch
# The big tables fetched by sqlite_fetch's C loop instead of row by row through sqlite3: the same queries
# without the STRING_IDS joins (text comes as positions in STRING_IDS, resolved in Arrow per distinct
# value), the PMU pivot as one scan in file order, the flows joined in numpy. The first value a table holds
# that the C loop does not take (sqlite_fetch.Mismatch) sends that table back to the SQL path, so both
# write the same Parquet (tests/core/formats/test_db_native.py).


@dataclass
class _Native:
    """The native fetch of one export: its own connection and STRING_IDS read once (``ids`` -> ``texts``,
    the ids mapped in C to their positions). ``kernel_cids`` / ``host_cids``: the connection ids of the
    kernels and host ops as they were written, where they were read this way (what the flows join)."""

    db: NativeDb
    ids: np.ndarray
    strings: IdMap
    texts: pa.Array
    kernel_cids: pa.ChunkedArray | None = None
    host_cids: pa.ChunkedArray | None = None

    def text(self, codes: pa.Array) -> pa.DictionaryArray:
        """The text of ``codes`` (STRING_IDS positions) as a dictionary of the values it uses, in order of
        first appearance (as a dictionary encoding of the text itself has them)."""
        used = pc.drop_null(pc.unique(codes))
        return pa.DictionaryArray.from_arrays(pc.index_in(codes, value_set=used), self.texts.take(used))

    def decode(self, codes: pa.Array) -> pa.Array:
        return self.texts.take(codes)

    def close(self) -> None:
        self.strings.close()
        self.db.close()


def _open_native(p: Path, conn: _Connection) -> _Native | None:
    """The native fetch of ``p`` with the time budget of ``conn``; None where it cannot be used: no C
    compiler or libsqlite3, or no STRING_IDS of distinct integer ids to text (a repeated id would repeat
    the rows of the SQL joins)."""
    if not sqlite_fetch.available() or "STRING_IDS" not in _tables(conn):
        return None
    try:
        rows = conn.execute("select id, value from STRING_IDS").fetchall()
    except sqlite3.DatabaseError:
        return None  # the SQL path meets it again, and says what it is
    if not all(type(i) is int and (v is None or type(v) is str) for i, v in rows):
        return None
    ids = np.fromiter((i for i, _ in rows), np.int64, len(rows))
    strings = IdMap(ids)
    if strings.size != len(rows):
        strings.close()
        return None
    try:
        db = NativeDb(p, conn.deadline, _CACHE_KIB)
    except sqlite3.DatabaseError:
        strings.close()
        return None
    return _Native(db, ids, strings, pa.array([v for _, v in rows], pa.string()))


_KEYS = [("start", INT64, None), ("r1", INT64, None), ("r2", INT64, None), ("task", INT64, None)]


@dataclass
class _KernelOrder:
    """Where the kernel rows go in the written order (``_KERNEL_ORDER``), found from the order keys alone:
    ``rows`` in all; ``positions`` (until the PMU pivot has used them) those of the compute tasks in the
    order their :meth:`_Part.native_select` gives them, ``tasks`` their task ids. ``in_file_order``: the
    compute tasks come in the written order as they are (TASK is written by start time: so in the samples
    and the profiler's files), then only the hcom ops need placing: ``hcom`` their (late, start) keys in
    their order."""

    rows: int
    positions: np.ndarray
    tasks: np.ndarray
    in_file_order: bool
    hcom: tuple[np.ndarray, np.ndarray]


def _keys(native: _Native, part: _Part) -> dict[str, np.ndarray]:
    """The order keys of ``part``'s rows (start, r1, r2, task id; ``late`` where start is null), as its
    native select gives them."""
    start = part.exprs.get("start_ns", "null")
    sql = f"select {start}, {part.r1}, {part.r2}, {part.task_id} from {part.table}"
    table = pa.Table.from_batches(list(native.db.blocks(sql, _KEYS, 1 << 20)),
                                  pa.schema([(n, pa.int64()) for n, _, _ in _KEYS]))
    out = {name: pc.fill_null(table[name], 0).to_numpy() for name in table.column_names}
    out["late"] = pc.is_null(table["start"]).to_numpy(zero_copy_only=False).astype(np.int8)
    return out


def _kernel_order(ks: _KernelSql, native: _Native) -> _KernelOrder:
    parts = {part.src: part for part in ks.parts}
    compute = _keys(native, parts[0]) if 0 in parts else None
    hcom = _keys(native, parts[1]) if 1 in parts else None
    empty = np.zeros(0, np.int64)
    if hcom is not None:  # in their written order (start, then file order)
        by_order = np.lexsort((hcom["r1"], hcom["start"], hcom["late"]))
        hcom = {name: values[by_order] for name, values in hcom.items()}
    h_late, h_start = (hcom["late"], hcom["start"]) if hcom is not None else (empty.astype(np.int8), empty)
    if compute is None:
        return _KernelOrder(len(h_late), empty, empty, True, (h_late, h_start))
    c_late, c_start = compute["late"], compute["start"]
    rows = len(c_late) + len(h_late)
    in_order = ascending(c_late, c_start, compute["r1"], compute["r2"])
    if in_order:
        # the hcom ops before each compute task: those with an earlier start (a tie puts compute first)
        timed = int((h_late == 0).sum())
        before = np.where(c_late == 0, np.searchsorted(h_start[:timed], c_start, "left"), timed)
        positions = np.arange(len(c_late), dtype=np.int64) + before
    else:
        src = np.concatenate([np.zeros(len(c_late), np.int8), np.ones(len(h_late), np.int8)])
        r1 = np.concatenate([compute["r1"], hcom["r1"] if hcom is not None else empty])
        r2 = np.concatenate([compute["r2"], np.zeros(len(h_late), np.int64)])
        starts, lates = np.concatenate([c_start, h_start]), np.concatenate([c_late, h_late])
        order = np.lexsort((r2, r1, src, starts, lates))
        every = np.empty(rows, np.int64)
        every[order] = np.arange(rows, dtype=np.int64)
        positions = every[:len(c_late)]
    return _KernelOrder(rows, positions, compute["task"], in_order, (h_late, h_start))


def _native_pmu(conn: sqlite3.Connection, ks: _KernelSql, native: _Native, order: _KernelOrder,
                spill: Path) -> tuple[sqlite_fetch.Pivoted, list[int]]:
    """TASK_PMU_INFO pivoted in one scan in file order (as :func:`_pmu_pivot` and the SQL pivots do), into a
    temporary file in ``spill``: its values by kernel row in the written order, and the code there of each
    metric of ``ks.pmu`` (set here). A task id on several compute rows is a ``Mismatch`` (the SQL path
    repeats its metrics on each)."""
    count = len(order.tasks)
    with IdMap(order.tasks, order.positions) as tasks:
        order.tasks = order.positions = np.zeros(0, np.int64)  # no longer needed: their memory goes
        if tasks.size != count:
            raise Mismatch("globalTaskId")
        # each id maps to the position of the first id of its name: ids sharing a name fill one column
        first: dict[str | None, int] = {}
        texts = native.texts.to_pylist()
        positions = np.array([first.setdefault(v, i) for i, v in enumerate(texts)], np.int32)
        stored = table_reading(conn, "TASK_PMU_INFO", ("globalTaskId", "name", "value"))
        with IdMap(native.ids, positions) as metric_of:
            pivoted = native.db.pivot("select globalTaskId, name, value from TASK_PMU_INFO order by rowid",
                                      tasks, metric_of, len(positions), spill, stored, slots=order.rows)
    reserved = set(TABLE_SCHEMAS["kernels"].names) | (set(ks.columns) & set(_KERNEL_EXTRA_TYPES))
    metrics = {native.texts[j].as_py(): j for j in pivoted.codes()}
    ks.pmu = sorted(name for name in metrics if name is not None and name not in reserved)
    return pivoted, [metrics[name] for name in ks.pmu]


def _row_keys(rows: pa.RecordBatch | pa.Table) -> list[np.ndarray]:
    """(late, start, src, r1, r2) of fetched kernel rows: the written order, without nulls to place."""
    start = rows.column("start_ns")
    late = pc.is_null(start).to_numpy(zero_copy_only=False).astype(np.int8)
    return [late, pc.fill_null(start, 0).to_numpy()] + [
        pc.fill_null(rows.column(k), 0).to_numpy() for k in ("_src", "_r1", "_r2")]


def _kernel_rows(ks: _KernelSql, native: _Native, order: _KernelOrder,
                 columns: list[tuple[str, int, IdMap | None]]) -> Iterator[pa.RecordBatch]:
    """The kernel rows in the written order, a block at a time: where the compute tasks come in that order
    (:attr:`_KernelOrder.in_file_order`), fetched as they are with the hcom ops put in their places (their
    order checked as they come), else sorted by SQLite."""
    if not order.in_file_order:
        sql, _ = ks.native_sql()
        yield from native.db.blocks(sql, columns, NATIVE_FETCH_ROWS)
        return
    parts = {part.src: part for part in ks.parts}
    hcom = _hcom_in_order(native, parts[1], ks.columns, columns) if 1 in parts else None
    h_late, h_start = order.hcom
    timed, taken = int((h_late == 0).sum()), 0
    if 0 in parts:
        last: list[np.ndarray] | None = None
        for block in native.db.blocks(parts[0].native_select(ks.columns), columns, NATIVE_FETCH_ROWS):
            keys = _row_keys(block)
            late, start = int(keys[0][-1]), int(keys[1][-1])
            checked = keys if last is None else [np.concatenate([a[-1:], b]) for a, b in zip(last, keys)]
            if not ascending(checked[0], checked[1], checked[3], checked[4]):
                raise Mismatch("TASK order")  # not the order the keys said: sort in SQL instead
            last = keys
            upto = int(np.searchsorted(h_start[:timed], start, "left")) if late == 0 else timed
            if hcom is None or upto == taken:
                yield block
                continue
            merged = pa.concat_tables([pa.Table.from_batches([block]), hcom.slice(taken, upto - taken)])
            taken = upto
            yield merged.take(np.lexsort(_row_keys(merged)[::-1])).combine_chunks().to_batches()[0]
    if hcom is not None:
        for rest in range(taken, hcom.num_rows, NATIVE_FETCH_ROWS):
            yield hcom.slice(rest, NATIVE_FETCH_ROWS).combine_chunks().to_batches()[0]


def _hcom_in_order(native: _Native, part: _Part, names: list[str],
                   columns: list[tuple[str, int, IdMap | None]]) -> pa.Table:
    """The hcom ops (few: one per collective) in their written order."""
    rows = pa.Table.from_batches(list(native.db.blocks(part.native_select(names), columns, 1 << 20)),
                                 pa.schema([(n, sqlite_fetch.ARROW_TYPES[k]) for n, k, _ in columns]))
    return rows.take(np.lexsort(_row_keys(rows)[::-1]))


def _write_kernels_native(conn: sqlite3.Connection, ks: _KernelSql, native: _Native, dest: Path,
                          notes: ConversionNotes) -> int:
    """:func:`write_kernels` with the native fetch; raises ``Mismatch`` (``dest`` removed) for a value
    it does not take."""
    order = _kernel_order(ks, native)
    pivoted, metrics = _native_pmu(conn, ks, native, order, dest.parent) if ks.has_pmu else (None, [])
    _, kinds = ks.native_sql()
    columns = [(name, kind, native.strings if text else None) for name, kind, text in kinds]
    cids: list[pa.Array] = []
    written = 0

    def canonical(raw: pa.RecordBatch) -> pa.Table:
        nonlocal written
        cols = {c: native.text(raw.column(c)) if c in _TEXT_COLUMNS else raw.column(c) for c in ks.columns}
        hcom = pc.equal(raw.column("_src"), 1)
        if "core_type" in cols and pc.any(hcom).as_py():
            decoded = native.decode(raw.column("core_type"))
            cols["core_type"] = pc.if_else(hcom, pa.scalar("COMMUNICATION"), decoded)
        table = _canonical_kernels(pa.table(cols), notes)
        for name, code in zip(ks.pmu, metrics):  # the metrics are in the written order already
            assert pivoted is not None
            table = table.append_column(name, pivoted.values(code, written, raw.num_rows))
        written += raw.num_rows
        cids.extend(table["correlation_id"].chunks)
        return table

    try:
        rows = _stream(dest, ks.schema(),
                       (canonical(raw) for raw in _kernel_rows(ks, native, order, columns)))
    finally:
        if pivoted is not None:
            pivoted.close()
    native.kernel_cids = pa.chunked_array(cids, pa.int64())
    return rows


# A column of a natively read table: (name in the blocks, kind, id map, the table's column).
_Column = tuple[str, int, "IdMap | None", str]


def _write_in_order(conn: sqlite3.Connection, native: _Native, dest: Path, schema: pa.Schema, table: str,
                    columns: list[_Column], order: str, convert: Callable[[pa.RecordBatch], pa.Table],
                    started: Callable[[], None]) -> int:
    """``table``'s rows converted into ``dest``, by ``row_order.by_first_column``, or where its reader
    declines, through SQLite ``order by`` ``order`` (``started()`` before each attempt)."""
    try:
        started()
        return _stream(dest, schema, (convert(raw) for raw in by_first_column(
            conn, native.db, table, columns, NATIVE_FETCH_ROWS)))
    except Declined:
        pass
    sql = f"select {', '.join(c for _, _, _, c in columns)} from {table} order by {order}"
    started()
    return _stream(dest, schema, (convert(raw) for raw in native.db.blocks(
        sql, [(n, k, m) for n, k, m, _ in columns], NATIVE_FETCH_ROWS)))


def _write_host_ops_native(conn: sqlite3.Connection, native: _Native, dest: Path) -> int:
    """:func:`write_host_ops` with the native fetch: the times as plain digits (TEXT in torch_npu's files)
    are what ``to_ns`` makes of them, anything else is a ``Mismatch``."""
    shapes = "inputShapes" in _columns(conn, "PYTORCH_API")
    columns: list[_Column] = [("s", TEXT_INT, None, "startNs"), ("e", TEXT_INT, None, "endNs"),
                              ("gt", INT64, None, "globalTid"), ("cid", INT64, None, "connectionId"),
                              ("name", CODE, native.strings, "name")]
    columns += [("input_shapes", CODE, native.strings, "inputShapes")] if shapes else []
    cids: list[pa.Array] = []

    def canonical(raw: pa.RecordBatch) -> pa.Table:
        pid, tid = _globaltid_split(raw.column("gt"))
        start, cid = raw.column("s"), raw.column("cid")
        out = {"name": native.decode(raw.column("name")), "pid": pid, "tid": tid, "start_ns": start,
               "dur_ns": pc.subtract(raw.column("e"), start), "correlation_id": cid}
        if shapes:
            out["input_shapes"] = native.decode(raw.column("input_shapes"))
        cids.append(cid)
        return conform("host_ops", pa.table(out))

    rows = _write_in_order(conn, native, dest, TABLE_SCHEMAS["host_ops"], "PYTORCH_API", columns,
                           "cast(startNs as integer), rowid", canonical, cids.clear)
    native.host_cids = pa.chunked_array(cids, pa.int64())
    return rows


def _enum_names(conn: sqlite3.Connection, table: str) -> tuple[np.ndarray, pa.Array] | None:
    """A small id -> name table (ENUM_API_TYPE) as ids and names; None unless distinct integer ids to text."""
    rows = conn.execute(f"select id, name from {table}").fetchall()
    if not all(type(i) is int and (v is None or type(v) is str) for i, v in rows):
        return None
    if len({i for i, _ in rows}) != len(rows):
        return None
    return np.array([i for i, _ in rows], np.int64), pa.array([v for _, v in rows], pa.string())


def _write_api_calls_native(conn: sqlite3.Connection, native: _Native, dest: Path, tables: set[str]) -> int:
    """:func:`write_api_calls` with the native fetch."""
    enum = _enum_names(conn, "ENUM_API_TYPE") if "ENUM_API_TYPE" in tables else None
    if "ENUM_API_TYPE" in tables and enum is None:
        raise Mismatch("ENUM_API_TYPE.id")
    with IdMap(enum[0] if enum else np.zeros(0, np.int64)) as levels:
        columns: list[_Column] = [("s", INT64, None, "startNs"), ("name", CODE, native.strings, "name"),
                                  ("level", CODE if enum else INT64, levels if enum else None, "type"),
                                  ("gt", INT64, None, "globalTid"), ("e", INT64, None, "endNs"),
                                  ("cid", INT64, None, "connectionId")]

        def canonical(raw: pa.RecordBatch) -> pa.Table:
            level = raw.column("level")
            pid, tid = _globaltid_split(raw.column("gt"))
            start = raw.column("s")
            return conform("api_calls", pa.table({
                "name": native.decode(raw.column("name")),
                "level": enum[1].take(level) if enum else level.cast(pa.string()), "pid": pid, "tid": tid,
                "start_ns": start, "dur_ns": pc.subtract(raw.column("e"), start),
                "correlation_id": raw.column("cid")}))

        return _write_in_order(conn, native, dest, TABLE_SCHEMAS["api_calls"], "CANN_API", columns,
                               "startNs, rowid", canonical, lambda: None)


def _native_flows(conn: sqlite3.Connection, native: _Native) -> pa.Table | None:
    """The flows of :func:`write_flows`, joined in numpy: (host index, kernel index) for every host op and
    every CONNECTION_IDS row linking its connection id to a kernel's, ordered by both indexes. None where
    the kernels or host ops were not read natively, CONNECTION_IDS holds other than integers, or the join
    would hold many more rows than its inputs (then the SQL join streams it)."""
    if native.kernel_cids is None or native.host_cids is None:
        return None
    columns: list[tuple[str, int, IdMap | None]] = [("id", INT64, None), ("cid", INT64, None)]
    schema = pa.schema([("id", pa.int64()), ("cid", pa.int64())])
    stored = table_reading(conn, "CONNECTION_IDS", ["id", "connectionId"])
    try:
        try:
            if stored is None:
                raise Declined("CONNECTION_IDS is not a plain rowid table")
            blocks = list(native.db.table_blocks(stored, columns, 1 << 20))  # its pages (any order will do)
        except Declined:
            blocks = list(native.db.blocks("select id, connectionId from CONNECTION_IDS", columns, 1 << 20))
    except Mismatch:
        return None
    links = pa.Table.from_batches(blocks, schema)
    del blocks
    kernels, hosts = _ids(native.kernel_cids), _ids(native.host_cids)
    native.kernel_cids = native.host_cids = None  # their memory goes once read
    links = links.filter(pc.and_(pc.is_valid(links["id"]), pc.is_valid(links["cid"])))
    pairs = _join_links(hosts, links["id"].to_numpy(), links["cid"].to_numpy(), kernels)
    if pairs is None:
        return None
    return pa.table({"host_index": pairs[0], "kernel_index": pairs[1],
                     "kind": pa.repeat(pa.scalar("async_npu"), len(pairs[0]))})


def _ids(ids: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(row indexes, ids) of the rows with an id (a null joins nothing, as in SQL)."""
    whole = ids.combine_chunks()
    if whole.null_count == 0:
        return np.arange(len(whole), dtype=np.int64), whole.to_numpy()
    present = np.flatnonzero(whole.is_valid().to_numpy(zero_copy_only=False))
    return present, whole.to_numpy(zero_copy_only=False)[present].astype(np.int64)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of range(s, s + c) for each (s, c)."""
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()), dtype=np.int64)


def _join_links(host: tuple[np.ndarray, np.ndarray], link_id: np.ndarray, link_cid: np.ndarray,
                kernel: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """host ⋈ links (host id = link id) ⋈ kernels (link cid = kernel id) as (host index, kernel index) pairs,
    sorted; a pair repeats once per link that makes it, as SQL's join. None past the size it may take."""
    (h_rows, h_ids), (k_rows, k_ids) = host, kernel
    order = np.argsort(k_ids, kind="stable")
    k_rows, k_ids = k_rows[order], k_ids[order]
    del order
    first = np.searchsorted(k_ids, link_cid, "left")
    per_link = np.searchsorted(k_ids, link_cid, "right") - first  # the kernels each link reaches
    order = np.argsort(link_id, kind="stable")
    link_id, first, per_link = link_id[order], first[order], per_link[order]
    del order
    lo = np.searchsorted(link_id, h_ids, "left")
    per_host = np.searchsorted(link_id, h_ids, "right") - lo
    del link_id, h_ids
    reached = np.concatenate([[0], np.cumsum(per_link)])
    total = int((reached[lo + per_host] - reached[lo]).sum())
    del reached
    if total > 4 * (len(h_rows) + len(k_rows) + len(per_link)) + (1 << 20):
        return None
    link = _ranges(lo, per_host)  # each host's links, host after host
    hosts = np.repeat(h_rows, per_host)
    del lo, per_host, h_rows
    counts = per_link[link]
    hosts = np.repeat(hosts, counts)
    kernels = k_rows[_ranges(first[link], counts)]
    del link, counts
    # a host reaching kernels through several links: its pairs come link by link
    if np.any((hosts[1:] == hosts[:-1]) & (kernels[1:] < kernels[:-1])):
        order = np.lexsort((kernels, hosts))
        hosts, kernels = hosts[order], kernels[order]
    return hosts, kernels


# ---------------------------------------------------------------------------------------- memory, counters


def _memory_record_block(raw: pa.Table) -> pa.Table:
    return pa.table({
        "component": raw["component"], "ts_ns": raw["ts"].cast(pa.int64()),
        "allocated_bytes": raw["a"].cast(pa.int64()), "reserved_bytes": raw["r"].cast(pa.int64()),
        "device": pc.cast(raw["dev"], pa.string()),
        "active_bytes": raw["act"].cast(pa.int64()),
        "source": pa.array(["memory_record"] * raw.num_rows, pa.string()),
    })


def _module_mem_block(raw: pa.Table) -> pa.Table:
    reserved = raw["r"].cast(pa.float64())
    reserved = pc.if_else(pc.less(reserved, 0), pa.scalar(None, pa.float64()), reserved)
    return pa.table({
        "component": raw["component"], "ts_ns": raw["ts"].cast(pa.int64()),
        "reserved_bytes": reserved.cast(pa.int64()), "device": pc.cast(raw["dev"], pa.string()),
        "source": pa.array(["npu_module_mem"] * raw.num_rows, pa.string()),
    })


def _conformed(name: str, schema: pa.Schema, table: pa.Table) -> pa.Table:
    """``table`` conformed, with the columns of ``schema`` that it lacks as nulls."""
    table = conform(name, table)
    return pa.table([table[f.name] if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
                     for f in schema], schema=schema)


def write_memory(conn: sqlite3.Connection, dest: Path) -> int:
    """MEMORY_RECORD then NPU_MODULE_MEM, each in file order, into ``dest``; the rows written."""
    tables = _tables(conn)
    schema = TABLE_SCHEMAS["memory"]
    if "MEMORY_RECORD" in tables:
        schema = schema.append(pa.field("active_bytes", pa.int64()))
    if tables & {"MEMORY_RECORD", "NPU_MODULE_MEM"}:
        schema = schema.append(pa.field("source", pa.string()))

    def parts() -> Iterator[pa.Table]:
        if "MEMORY_RECORD" in tables:
            comp, join = _str_join("comp", "m.component")
            sql = (f"select {comp} as component, m.timestamp as ts, m.totalAllocated as a, "
                   "m.totalReserved as r, m.totalActive as act, m.deviceId as dev "
                   f"from MEMORY_RECORD m {join} order by {_rowid(conn, 'MEMORY_RECORD', 'm')}")
            yield from (_conformed("memory", schema, _memory_record_block(raw)) for raw in blocks(conn, sql))
        if "NPU_MODULE_MEM" in tables:
            mod = "e.name" if "ENUM_MODULE" in tables else "cast(m.moduleId as text)"
            join = "left join ENUM_MODULE e on e.id = m.moduleId" if "ENUM_MODULE" in tables else ""
            sql = (f"select {mod} as component, m.timestampNs as ts, m.totalReserved as r, m.deviceId as dev "
                   f"from NPU_MODULE_MEM m {join} order by {_rowid(conn, 'NPU_MODULE_MEM', 'm')}")
            yield from (_conformed("memory", schema, _module_mem_block(raw)) for raw in blocks(conn, sql))

    return _stream(dest, schema, parts())


def write_counters(conn: sqlite3.Connection, dest: Path) -> int:
    """AI Core frequency and HBM bandwidth samples as counter tracks into ``dest``; the rows written."""
    tables = _tables(conn)
    schema = TABLE_SCHEMAS["counters"]

    def parts() -> Iterator[pa.Table]:
        if "AICORE_FREQ" in tables:
            sql = ("select deviceId as d, cast(timestampNs as integer) as ts, freq as v from AICORE_FREQ "
                   f"order by {_rowid(conn, 'AICORE_FREQ', 'AICORE_FREQ')}")
            for raw in blocks(conn, sql):
                yield conform("counters", pa.table({
                    "track": pc.binary_join_element_wise("AI Core Freq (MHz) dev ",
                                                         pc.cast(raw["d"], pa.string()), ""),
                    "ts_ns": raw["ts"].cast(pa.int64()), "value": raw["v"].cast(pa.float64())}))
        if "HBM" in tables:
            # the direction (read / write) is a STRING_IDS id: named, as the timeline's lanes are read
            named = "STRING_IDS" in tables
            kind = "coalesce(s.value, cast(HBM.type as text))" if named else "HBM.type"
            join = "left join STRING_IDS s on s.id = HBM.type" if named else ""
            sql = (f"select HBM.deviceId as d, HBM.hbmId as h, {kind} as t, HBM.timestampNs as ts, "
                   f"HBM.bandwidth as v from HBM {join} order by {_rowid(conn, 'HBM', 'HBM')}")
            for raw in blocks(conn, sql):
                track = pc.binary_join_element_wise("HBM ", pc.cast(raw["h"], pa.string()), " ",
                                                    pc.cast(raw["t"], pa.string()), " (bytes/s) dev ",
                                                    pc.cast(raw["d"], pa.string()), "")
                yield conform("counters", pa.table({"track": track, "ts_ns": raw["ts"].cast(pa.int64()),
                                                    "value": raw["v"].cast(pa.float64())}))

    return _stream(dest, schema, parts())


# ---------------------------------------------------------------------------------- meta, steps, analysis.db


def read_meta(conn: sqlite3.Connection, meta: ProfileMeta) -> None:
    tables = _tables(conn)
    if "NPU_INFO" in tables:
        names = sorted({r[0] for r in conn.execute("select name from NPU_INFO") if r[0]})
        if names:
            meta.device = names[0]
    if "RANK_DEVICE_MAP" in tables:
        row = conn.execute("select rankId, deviceId from RANK_DEVICE_MAP").fetchone()
        if row:
            meta.rank = meta.rank if meta.rank is not None else _int(row[0])
            meta.device_id = _int(row[1])
    if "META_DATA" in tables:
        md = {str(k): v for k, v in conn.execute("select name, value from META_DATA")}
        if "ENV_VARIABLES" in md:
            try:
                md["ENV_VARIABLES"] = json.loads(md["ENV_VARIABLES"])
            except (TypeError, ValueError):
                pass
        meta.extra["db_metadata"] = md
        if str(md.get("SIMULATED", "")).strip().lower() in ("true", "1", "yes"):
            meta.simulated = True  # our simulator's mark (pypto_core.synth.profiler_db); never in real files
    if "SESSION_TIME_INFO" in tables:
        row = conn.execute("select startTimeNs, endTimeNs from SESSION_TIME_INFO").fetchone()
        if row:
            meta.extra["session_start_ns"], meta.extra["session_end_ns"] = _int(row[0]), _int(row[1])


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_steps(conn: sqlite3.Connection) -> pa.Table:
    if "STEP_TIME" not in _tables(conn):
        return conform("steps", pa.table({}))
    raw = query(conn, "select id, startNs, endNs from STEP_TIME order by startNs")
    return conform("steps", pa.table({"step_id": to_int(raw["id"], none_values=()),
                                      "start_ns": raw["startNs"].cast(pa.int64()),
                                      "end_ns": raw["endNs"].cast(pa.int64())}))


# analysis.db StepTraceTime (µs) → step columns (ns)
_STEP_TRACE = {
    "computing": "computing_ns", "communication_not_overlapped": "communication_not_overlapped_ns",
    "overlapped": "overlapped_ns", "communication": "communication_ns", "free": "free_ns",
    "stage": "stage_ns", "bubble": "bubble_ns",
    "communication_not_overlapped_and_exclude_receive": "communication_not_overlapped_exclude_receive_ns",
    "preparing": "preparing_ns",
}


def read_analysis_db(path: Path, steps: pa.Table, meta: ProfileMeta,
                     notes: ConversionNotes) -> tuple[pa.Table, pa.Table]:
    """analysis.db: per-step breakdown merged into ``steps``; CommAnalyzerTime → ``communication``."""
    conn = connect(path)
    try:
        tables = _tables(conn)
        comm = conform("communication", pa.table({}))
        if "StepTraceTime" in tables:
            cols = [c for c in _columns(conn, "StepTraceTime") if c in _STEP_TRACE]
            # Values are stored as REAL by the profiler: read them as numbers (their text form may be
            # 1.7e+15).
            reals = ", ".join(f"cast({c} as real) as {c}" for c in cols)
            raw = query(conn, f"select cast(step as text) as step, {reals} from StepTraceTime")
            breakdown = {"step_id": to_int(raw["step"].cast(pa.string()), none_values=())}
            for c in cols:
                breakdown[_STEP_TRACE[c]] = to_ns(raw[c], column=c, notes=notes)
            bt = pa.table(breakdown)
            if steps.num_rows:
                keep = steps.drop_columns([c for c in bt.column_names
                                           if c != "step_id" and c in steps.column_names])
                keyed = keep.append_column("_row", pa.array(range(keep.num_rows), pa.int64()))
                steps = keyed.join(bt, "step_id", join_type="left outer", use_threads=False)
                steps = steps.sort_by("_row").drop_columns(["_row"])
            else:
                steps = bt
        if "CommAnalyzerTime" in tables:
            raw = query(conn, "select hccl_op_name as name, group_name as grp, cast(step as text) as step, "
                              "cast(start_timestamp as real) as st, cast(elapse_time as real) as el, "
                              "cast(transit_time as real) as tr, cast(wait_time as real) as wa, "
                              "cast(synchronization_time as real) as sy, cast(idle_time as real) as idl, "
                              "type "
                              "from CommAnalyzerTime")
            step = pc.replace_substring_regex(raw["step"].cast(pa.string()), "^step", "")
            ms = 1_000_000
            comm = conform("communication", pa.table({
                "name": raw["name"], "group": raw["grp"], "step_id": to_int(step, none_values=()),
                "start_ns": to_ns(raw["st"], column="start_timestamp", notes=notes),
                "elapse_ns": to_ns(raw["el"], unit_ns=ms, notes=notes, column="elapse_time"),
                "transit_ns": to_ns(raw["tr"], unit_ns=ms, notes=notes, column="transit_time"),
                "wait_ns": to_ns(raw["wa"], unit_ns=ms, notes=notes, column="wait_time"),
                "synchronization_ns": to_ns(raw["sy"], unit_ns=ms, notes=notes,
                                            column="synchronization_time"),
                "idle_ns": to_ns(raw["idl"], unit_ns=ms, notes=notes, column="idle_time"),
                "kind": raw["type"],
            }))
        meta.source_files.append(str(path))
        return conform("steps", steps), comm
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------- the whole file


def write_profiler_db(path: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                      fmt: str = "ascend_pt_db", meta: ProfileMeta | None = None,
                      analysis_db: Path | None = None, rank_hint: int | None = None) -> ProfileMeta:
    """One SQLite export (plus an optional analysis.db) streamed into a saved profile folder (as
    ``Profile.save`` writes it) with bounded memory; ``Profile.load(folder)`` gives the profile. ``meta``
    (filled in and returned) may carry what the files beside the db said; ``rank_hint``: the rank where
    nothing states it. A failed read leaves no folder behind."""
    p, out = Path(path), Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write_db(p, out, fmt, meta or ProfileMeta(format=fmt, source=str(p)), analysis_db, rank_hint)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise


def _write_db(p: Path, out: Path, fmt: str, meta: ProfileMeta, analysis_db: Path | None,
              rank_hint: int | None) -> ProfileMeta:
    meta.format = fmt
    notes = ConversionNotes()
    conn = connect(p)
    native = None
    try:
        try:
            # bigger page cache and sorter runs (the defaults are 2 MB); the temp database holds the
            # materialised subqueries and automatic indexes of the pivot and the flow joins
            conn.execute(f"pragma cache_size = -{_CACHE_KIB}")
            conn.execute(f"pragma temp.cache_size = -{_CACHE_KIB}")
            read_meta(conn, meta)
            native = _open_native(p, conn)
            ks = _kernel_sql(conn, _tables(conn))
            # each table's freed blocks handed back before the next one's (the flows' join comes last)
            rows = write_kernels(conn, ks, out / "kernels.parquet", notes, native)
            release_freed_memory()
            rows += write_host_ops(conn, out / "host_ops.parquet", notes, native)
            rows += write_api_calls(conn, out / "api_calls.parquet", native)
            release_freed_memory()
            write_flows(conn, ks, out / "flows.parquet", native)
            write_memory(conn, out / "memory.parquet")
            write_counters(conn, out / "counters.parquet")
            steps = read_steps(conn)
        except sqlite3.DatabaseError as exc:
            raise InputError(str(p), refusal(exc)) from exc
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            # values no profile holds (text where times are, numbers past int64): the file, not a crash
            raise InputError(str(p), msg("unexpected database content ({error})", error=str(exc))) from exc
    finally:
        if native is not None:
            native.close()
        conn.close()
    meta.source_files.append(str(p))
    communication = empty_table("communication")
    if analysis_db is not None and analysis_db.is_file():
        try:
            steps, communication = read_analysis_db(analysis_db, steps, meta, notes)
        except InputError as exc:
            meta.warnings.append(exc.skipped(analysis_db.name))
        except sqlite3.DatabaseError as exc:
            meta.warnings.append(InputError(str(analysis_db), str(exc)).skipped(analysis_db.name))
    meta.warnings.extend(notes.warnings(p))
    if rows == 0:
        raise InputError(str(p), msg("database holds no tasks, operators or API calls "
                                     "(TASK/COMPUTE_TASK_INFO, PYTORCH_API, CANN_API are missing or empty)"))
    if meta.rank is None:
        meta.rank = rank_hint
    save_tables(out, meta, {"steps": steps, "communication": communication})
    return meta


def read_profiler_db(path: str | os.PathLike[str], *, fmt: str = "ascend_pt_db",
                     meta: ProfileMeta | None = None, analysis_db: Path | None = None) -> Profile:
    """One SQLite export (plus an optional analysis.db) → ``Profile``: :func:`write_profiler_db` into a
    temporary folder, then loaded (one way of reading for both)."""
    tmp = Path(tempfile.mkdtemp(prefix="pypto_db_"))
    try:
        write_profiler_db(path, tmp, fmt=fmt, meta=meta, analysis_db=analysis_db)
        return Profile.load(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_ascend_pt_db(path: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                       rank_hint: int | None = None) -> ProfileMeta:
    """A torch_npu db export (``*_ascend_pt`` folder or the ``ascend_pytorch_profiler_*.db`` itself, with the
    ``analysis.db`` beside it) streamed into a saved profile folder; the folder's profiler_info and
    metadata fill the meta."""
    from pypto_core.formats.ascend_pt import output_dir, read_profiler_info
    from pypto_core.formats.detect import _DB_GLOB

    p = Path(path)
    if p.is_file():
        return write_profiler_db(p, folder, fmt="ascend_pt_db", analysis_db=p.parent / "analysis.db",
                                 rank_hint=rank_hint)
    meta = ProfileMeta(format="ascend_pt_db", source=str(p))
    read_profiler_info(p, meta)
    out = output_dir(p)
    dbs = sorted(f for f in out.iterdir() if f.is_file() and _DB_GLOB.match(f.name))
    if not dbs:
        raise InputError(str(p), msg("no ascend_pytorch_profiler_*.db in this folder"))
    return write_profiler_db(dbs[0], folder, fmt="ascend_pt_db", meta=meta, analysis_db=out / "analysis.db",
                             rank_hint=rank_hint)


def write_msprof_db(path: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                    rank_hint: int | None = None) -> ProfileMeta:
    """A lone ``msprof_*.db`` streamed into a saved profile folder."""
    return write_profiler_db(path, folder, fmt="msprof_db", rank_hint=rank_hint)
