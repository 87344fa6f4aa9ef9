"""SQLite query results straight into Arrow columns, without a Python object per value.

The loop is ``_sqlitefetch.c`` (built and loaded by ``native.load_library``): it steps a SELECT and writes
each value into preallocated column buffers, which become Arrow arrays as they are. Python's ``sqlite3``
makes a tuple per row and an object per value (about 10 s for the 3.5 M PMU rows of a 100 MB export); this
makes none. Columns are fetched as one of four kinds (:data:`INT64`, :data:`DOUBLE`, :data:`TEXT_INT`,
:data:`CODE`); a value outside its column's kind raises :class:`Mismatch`, and the caller then reads that
table through ``sqlite3`` as before, so odd files read as they always did.

The C side opens its own read-only connection with the safety of ``ascend_db.connect`` (immutable, query
only, untrusted schema, an authorizer that refuses views, triggers and recursion, the time budget as a
progress handler). It needs the libsqlite3 that Python's own ``_sqlite3`` uses, loaded here with
RTLD_GLOBAL; where there is none to load, no C compiler, or ``PYPTO_NO_NATIVE`` is set, :func:`available`
is False and the readers use ``sqlite3`` alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from pypto_core.formats.native import load_library

# Column kinds (as in _sqlitefetch.c).
INT64 = 0  # INTEGER -> int64
DOUBLE = 1  # INTEGER up to 2^53 or REAL -> float64
TEXT_INT = 2  # INTEGER, or TEXT of plain decimal digits (torch_npu's PYTORCH_API.startNs) -> int64
CODE = 3  # an id looked up in an :class:`IdMap` -> its int32 code; null where the map lacks it (a left join)

_ERROR, _MISMATCH, _UNSUPPORTED = -1, -2, -3
_SRC = Path(__file__).with_name("_sqlitefetch.c")
_ARROW_TYPES = {INT64: pa.int64(), DOUBLE: pa.float64(), TEXT_INT: pa.int64(), CODE: pa.int32()}
_NUMPY_TYPES = {INT64: np.int64, DOUBLE: np.float64, TEXT_INT: np.int64, CODE: np.int32}


class Mismatch(Exception):
    """A value the native fetch does not take (its storage class is not the column's kind)."""

    def __init__(self, column: str) -> None:
        super().__init__(f"column {column!r} holds a value of another type")
        self.column = column


def _load_sqlite() -> bool:
    """Make libsqlite3's symbols global (the C file is linked against none): the copy Python's ``_sqlite3``
    mapped, else the system's. False where none loads."""
    names: list[str] = []
    try:
        with open("/proc/self/maps") as maps:  # sqlite3 is imported: its library is mapped, if it has one
            names += [line.split()[-1] for line in maps if "libsqlite3" in line.rsplit("/", 1)[-1]][:1]
    except OSError:
        pass
    names.append("libsqlite3.dylib" if sys.platform == "darwin" else "libsqlite3.so.0")
    found = ctypes.util.find_library("sqlite3")
    if found:
        names.append(found)
    for name in names:
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return True
        except OSError:
            continue
    return False


def _build() -> ctypes.CDLL | None:
    if os.environ.get("PYPTO_NO_NATIVE") or not _load_sqlite():
        return None
    flags = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
    lib = load_library(_SRC, "sqlitefetch", flags)
    if lib is None:
        return None
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    signatures = {
        "sf_map_new": (p, [p, p, i64]), "sf_map_size": (i32, [p]), "sf_map_free": (None, [p]),
        "sf_open": (p, [ctypes.c_char_p, ctypes.c_double, ctypes.c_int]), "sf_errmsg": (ctypes.c_char_p, [p]),
        "sf_failed": (ctypes.c_int, [p]), "sf_close": (None, [p]), "sf_prepare": (p, [p, ctypes.c_char_p]),
        "sf_column_count": (ctypes.c_int, [p]), "sf_finalize": (None, [p]),
        "sf_fetch": (i64, [p, ctypes.c_int, p, p, p, p, p, i64, p]),
        "sf_pivot": (i64, [p, p, p, i64, i32, p, p, p]), "sf_free": (None, [p]),
        "sf_raw_open": (p, [ctypes.c_char_p, i64, ctypes.c_double]), "sf_raw_errmsg": (ctypes.c_char_p, [p]),
        "sf_raw_close": (None, [p]), "sf_raw_pivot": (i64, [p, p, p, p, i64, i32, p, p, p]),
    }
    try:
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
    except AttributeError:
        return None
    return lib


_LIB: ctypes.CDLL | None | bool = False  # False = not tried yet


def _library() -> ctypes.CDLL | None:
    global _LIB
    if _LIB is False:
        _LIB = _build()
    return _LIB  # type: ignore[return-value]


def available() -> bool:
    """Whether the native fetch can be used here (a C compiler and a loadable libsqlite3)."""
    return _library() is not None


def _lib() -> ctypes.CDLL:
    lib = _library()
    if lib is None:
        raise RuntimeError("the native SQLite fetch is not available (check available() first)")
    return lib


def _address(arr: np.ndarray) -> int:
    return int(arr.ctypes.data)


class IdMap:
    """Integer ids -> int32 codes, held in C (the lookups happen inside the fetch loop): ``codes[i]`` for
    ``ids[i]``, or without ``codes`` 0, 1, 2, ... in the order of the ids' first occurrence. A repeated id
    keeps its first code; ``size`` counts the distinct ids. Close it (or use it as a context manager)."""

    def __init__(self, ids: np.ndarray, codes: np.ndarray | None = None) -> None:
        keys = np.ascontiguousarray(ids, dtype=np.int64)
        values = None if codes is None else np.ascontiguousarray(codes, dtype=np.int32)
        if values is not None and (len(values) != len(keys) or (len(values) and int(values.min()) < 0)):
            raise ValueError("one non-negative code per id")
        self._handle: int | None = _lib().sf_map_new(_address(keys), None if values is None else _address(values),
                                                     len(keys))
        if not self._handle:
            raise MemoryError("cannot build an id map")
        self.size = int(_lib().sf_map_size(self._handle))

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise ValueError("id map is closed")
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            _lib().sf_map_free(self._handle)
            self._handle = None

    def __enter__(self) -> IdMap:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _array(kind: int, data: np.ndarray, valid: np.ndarray, nulls: int, rows: int) -> pa.Array:
    """A fetched column as Arrow, sharing the buffers (no copy)."""
    bitmap = pa.py_buffer(valid) if nulls else None
    return pa.Array.from_buffers(_ARROW_TYPES[kind], rows, [bitmap, pa.py_buffer(data)], null_count=nulls)


def read_only_uri(path: Path) -> str:
    """The read-only, immutable URI of ``path`` (SQLite takes no lock and never writes beside it)."""
    return f"file:{quote(path.resolve().as_posix())}?mode=ro&immutable=1"


@dataclass(frozen=True)
class StoredTable:
    """Where a table's rows are in the file, for the table reader of ``_sqlitefetch.c``: its root page and
    the record positions of the columns read (``table_reading`` finds them)."""

    root: int
    positions: tuple[int, ...]


def table_reading(conn: sqlite3.Connection, table: str, columns: Sequence[str]) -> StoredTable | None:
    """``columns`` of the stored ``table`` as the table reader finds them in each record, or None where they
    are not stored there as plain values (a rowid alias, a generated column) or the table is not there."""
    row = conn.execute("select rootpage from sqlite_master where type = 'table' and name = ?", (table,)).fetchone()
    if row is None or type(row[0]) is not int:
        return None
    info = conn.execute(f'pragma table_xinfo("{table}")').fetchall()  # cid, name, type, notnull, default, pk, hidden
    if any(r[6] for r in info):
        return None  # generated columns are not stored (or not where the declared order says)
    names = [str(r[1]) for r in info]
    if any(c not in names or info[names.index(c)][5] for c in columns):
        return None  # an INTEGER PRIMARY KEY is the rowid, stored as NULL in the record
    return StoredTable(row[0], tuple(names.index(c) for c in columns))


class NativeDb:
    """One read-only connection of the C side to a database file."""

    def __init__(self, path: Path, deadline: float, cache_kib: int) -> None:
        lib = _lib()
        self.path, self.deadline = path, deadline
        self._handle: int | None = lib.sf_open(read_only_uri(path).encode(), deadline, cache_kib)
        if not self._handle:
            raise MemoryError("cannot open a native SQLite connection")
        if lib.sf_failed(self._handle):
            message = self._message()
            self.close()
            raise sqlite3.DatabaseError(message)

    def _message(self) -> str:
        raw: bytes = _lib().sf_errmsg(self._handle)
        return raw.decode(errors="replace")

    def _error(self) -> sqlite3.DatabaseError:
        # the messages of sqlite3's own exceptions ("interrupted", "not authorized", ...), which
        # ascend_db.refusal reads
        return sqlite3.OperationalError(self._message())

    def close(self) -> None:
        if self._handle is not None:
            _lib().sf_close(self._handle)
            self._handle = None

    def __enter__(self) -> NativeDb:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _prepare(self, sql: str, ncols: int) -> int:
        lib = _lib()
        stmt: int | None = lib.sf_prepare(self._handle, sql.encode())
        if not stmt:
            raise self._error()
        if lib.sf_column_count(stmt) != ncols:
            lib.sf_finalize(stmt)
            raise ValueError(f"the query has {ncols} column kinds for another number of columns: {sql}")
        return stmt

    def blocks(self, sql: str, columns: Sequence[tuple[str, int, IdMap | None]],
               rows: int) -> Iterator[pa.RecordBatch]:
        """The rows of ``sql`` as Arrow record batches of at most ``rows`` rows; ``columns``: (name, kind, the
        :class:`IdMap` of a :data:`CODE` column) for each column of the query, in order. Raises
        :class:`Mismatch` for a value outside its column's kind and ``sqlite3.OperationalError`` with
        SQLite's message where the query fails (interrupted, not authorized, a corrupt page)."""
        lib, n = _lib(), len(columns)
        stmt = self._prepare(sql, n)
        kinds = np.array([kind for _, kind, _ in columns], np.int32)
        maps = (ctypes.c_void_p * n)(*[m.handle if m is not None else None for _, _, m in columns])
        names = [name for name, _, _ in columns]
        bad = np.zeros(1, np.int32)
        try:
            while True:
                data = [np.empty(rows, _NUMPY_TYPES[kind]) for kind in kinds.tolist()]
                valid = [np.empty((rows + 7) // 8, np.uint8) for _ in range(n)]
                nulls = np.zeros(n, np.int64)
                got = lib.sf_fetch(stmt, n, _address(kinds), maps, (ctypes.c_void_p * n)(*map(_address, data)),
                                   (ctypes.c_void_p * n)(*map(_address, valid)), _address(nulls), rows,
                                   _address(bad))
                if got == _MISMATCH:
                    raise Mismatch(names[int(bad[0])])
                if got == _ERROR:
                    raise self._error()
                if got == 0:
                    return
                yield pa.RecordBatch.from_arrays(
                    [_array(int(kinds[c]), data[c], valid[c], int(nulls[c]), got) for c in range(n)], names=names)
        finally:
            lib.sf_finalize(stmt)

    def pivot(self, sql: str, tasks: IdMap, metrics: IdMap, columns: int,
              stored: StoredTable | None = None) -> dict[int, pa.Array]:
        """The first non-null value (in the query's order) of each (task, metric) of ``sql``'s rows (task id,
        metric id, value), by metric code of ``metrics`` (below ``columns``): a float64 array indexed by the
        task codes of ``tasks`` (0, 1, 2, ...) for every metric that occurs, even with no value of a known
        task. Rows of unknown metrics are skipped. ``stored``: the same rows read from the table's pages
        (rowid order: ``sql`` must order by rowid), with ``sql`` run where the reader does not take the file.
        Raises as :meth:`blocks` (the column named "task", "metric" or "value")."""
        lib = _lib()
        args = (tasks.handle, metrics.handle, tasks.size, columns)
        if stored is not None:
            reader = lib.sf_raw_open(str(self.path.resolve()).encode(), stored.root, self.deadline)
            if not reader:
                raise MemoryError("cannot open the table reader")
            try:
                positions = (ctypes.c_int32 * 3)(*stored.positions)
                found = _pivoted(tasks.size, columns, lambda values, valid, bad: lib.sf_raw_pivot(
                    reader, positions, *args, values, valid, bad), lambda: lib.sf_raw_errmsg(reader))
            finally:
                lib.sf_raw_close(reader)
            if found is not None:
                return found
        stmt = self._prepare(sql, 3)
        try:
            found = _pivoted(tasks.size, columns,
                             lambda values, valid, bad: lib.sf_pivot(stmt, *args, values, valid, bad),
                             lambda: lib.sf_errmsg(self._handle))
        finally:
            lib.sf_finalize(stmt)
        if found is None:
            raise AssertionError("unreachable: only the table reader declines a file")
        return found


def _pivoted(slots: int, columns: int, run: Callable[[Any, Any, int], int],
             message: Callable[[], bytes]) -> dict[int, pa.Array] | None:
    """Run a C pivot (``run(values, valid, bad)``) and wrap what it allocated as Arrow arrays; None where the
    table reader declined the file."""
    values, valid = (ctypes.c_void_p * columns)(), (ctypes.c_void_p * columns)()
    bad = np.zeros(1, np.int32)
    got = run(values, valid, _address(bad))
    out = {}
    for j in range(columns):  # wrapped whatever happened: what C allocated is freed with the arrays
        data = pa.foreign_buffer(values[j], 8 * max(slots, 1), base=_Allocation(values[j])) if values[j] else None
        bitmap = pa.foreign_buffer(valid[j], max((slots + 7) // 8, 1), base=_Allocation(valid[j])) \
            if valid[j] else None
        if data is None or bitmap is None:
            continue
        present = int(np.unpackbits(np.frombuffer(bitmap, np.uint8), count=slots, bitorder="little").sum())
        out[j] = pa.Array.from_buffers(pa.float64(), slots, [bitmap, data], null_count=slots - present)
    if got == _UNSUPPORTED:
        return None
    if got == _MISMATCH:
        raise Mismatch(("task", "metric", "value")[int(bad[0])])
    if got == _ERROR:
        raise sqlite3.OperationalError(message().decode(errors="replace"))
    return out


class _Allocation:
    """Memory the C side allocated, handed to Arrow: freed with the last array that uses it."""

    def __init__(self, address: int) -> None:
        self.address = address

    def __del__(self) -> None:
        lib = _library()
        if lib is not None:
            lib.sf_free(self.address)
