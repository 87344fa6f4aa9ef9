"""SQLite query results straight into Arrow columns, without a Python object per value.

The loop is ``_sqlitefetch.c`` (built and loaded by ``native.load_library``): it steps a SELECT and writes
each value into preallocated column buffers, which become Arrow arrays as they are. Python's ``sqlite3``
makes a tuple per row and an object per value (about 10 s for the 3.5 M PMU rows of a 100 MB export); this
makes none. Columns are fetched as one of four kinds (:data:`INT64`, :data:`DOUBLE`, :data:`TEXT_INT`,
:data:`CODE`); a value outside its column's kind raises :class:`Mismatch`, and the caller then reads that
table through ``sqlite3`` as before, so odd files read as they always did.

Two more things the C side does: a pivot of (task, metric, value) rows into one column per metric, kept
in a temporary file and read back a range at a time (:meth:`NativeDb.pivot`, :class:`Pivoted`), and a
reader of a stored table's pages (:meth:`NativeDb.table_blocks`) for the scans SQLite's virtual machine is
slow at (it declines, :class:`Declined`, what it does not take, and SQLite reads it).

The C side opens its own read-only connection with the safety of ``ascend_db.connect`` (immutable, query
only, untrusted schema, an authorizer that refuses views, triggers and recursion, the time budget as a
progress handler); the page reader reads only stored tables found through that schema, checks every offset
against its page and the file, and keeps to the same time budget. It needs the libsqlite3 that Python's own
``_sqlite3`` uses, loaded here with RTLD_GLOBAL; where there is none to load, no C compiler, or
``PYPTO_NO_NATIVE`` is set, :func:`available` is False and the readers use ``sqlite3`` alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from pypto_core.formats.native import load_library

# Column kinds (as in _sqlitefetch.c).
INT64 = 0  # INTEGER -> int64
DOUBLE = 1  # INTEGER (rounded to the nearest float64) or REAL -> float64
TEXT_INT = 2  # INTEGER, or TEXT of plain decimal digits (torch_npu's PYTORCH_API.startNs) -> int64
CODE = 3  # an id looked up in an :class:`IdMap` -> its int32 code; null where the map lacks it (a left join)

_ERROR, _MISMATCH, _UNSUPPORTED, _SCATTERED = -1, -2, -3, -4
# The pivot's file is written through a pool of chunks: 64 Ki values (512 KiB) each, 64 of them (32 MiB).
PIVOT_CHUNK = 64 * 1024
PIVOT_POOL = 64
_SRC = Path(__file__).with_name("_sqlitefetch.c")
ARROW_TYPES = {INT64: pa.int64(), DOUBLE: pa.float64(), TEXT_INT: pa.int64(), CODE: pa.int32()}


class Declined(Exception):
    """The table reader does not take this table's pages (see ``_sqlitefetch.c``): read it through SQLite."""


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
        "sf_pivot": (i64, [p, p, p, i64, i32, p, p, ctypes.c_int, i64, i32, p]), "sf_free": (None, [p]),
        "sf_raw_open": (p, [ctypes.c_char_p, i64, ctypes.c_double]), "sf_raw_errmsg": (ctypes.c_char_p, [p]),
        "sf_raw_close": (None, [p]),
        "sf_raw_pivot": (i64, [p, p, p, p, i64, i32, p, p, ctypes.c_int, i64, i32, p]),
        "sf_raw_fetch": (i64, [p, ctypes.c_int, p, p, p, p, p, p, i64, p]),
        "sf_raw_seek": (ctypes.c_int, [p, i64]),
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


class _ClosedOnExit:
    """A handle on C memory that ``with`` releases (``close()`` frees it once)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class IdMap(_ClosedOnExit):
    """Integer ids -> int32 codes, held in C (the lookups happen inside the fetch loop): ``codes[i]`` for
    ``ids[i]``, or without ``codes`` 0, 1, 2, ... in the order of the ids' first occurrence. A repeated id
    keeps its first code; ``size`` counts the distinct ids. Close it (or use it as a context manager)."""

    def __init__(self, ids: np.ndarray, codes: np.ndarray | None = None) -> None:
        keys = np.ascontiguousarray(ids, dtype=np.int64)
        values = None if codes is None else np.ascontiguousarray(codes, dtype=np.int32)
        if values is not None and (len(values) != len(keys) or (len(values) and int(values.min()) < 0)):
            raise ValueError("one non-negative code per id")
        codes_at = None if values is None else _address(values)
        self._handle: int | None = _lib().sf_map_new(_address(keys), codes_at, len(keys))
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


def _fetched(run: Callable[..., int], columns: Sequence[tuple[str, int, IdMap | None]], rows: int,
             message: Callable[[], bytes]) -> Iterator[pa.RecordBatch]:
    """Blocks of a C fetch (``run(ncols, kinds, maps, data, valid, nulls, cap, bad)``) as record batches."""
    n = len(columns)
    kinds = np.array([kind for _, kind, _ in columns], np.int32)
    maps = (ctypes.c_void_p * n)(*[m.handle if m is not None else None for _, _, m in columns])
    names = [name for name, _, _ in columns]
    bad = np.zeros(1, np.int32)
    while True:
        # in Arrow's pool, which gives freed memory back (pypto_core.memory), not malloc's heap
        data = [pa.allocate_buffer(rows * ARROW_TYPES[kind].bit_width // 8) for kind in kinds.tolist()]
        valid = [pa.allocate_buffer((rows + 7) // 8) for _ in range(n)]
        nulls = np.zeros(n, np.int64)
        got = run(n, _address(kinds), maps, (ctypes.c_void_p * n)(*[b.address for b in data]),
                  (ctypes.c_void_p * n)(*[b.address for b in valid]), _address(nulls), rows, _address(bad))
        if got == _MISMATCH:
            raise Mismatch(names[int(bad[0])])
        if got == _UNSUPPORTED:
            raise Declined(message().decode(errors="replace"))
        if got == _ERROR:
            raise sqlite3.OperationalError(message().decode(errors="replace"))
        if got == 0:
            return
        yield pa.RecordBatch.from_arrays(
            [_array(int(kinds[c]), data[c], valid[c], int(nulls[c]), got) for c in range(n)], names=names)


def _array(kind: int, data: pa.Buffer, valid: pa.Buffer, nulls: int, rows: int) -> pa.Array:
    """A fetched column as Arrow, sharing the buffers (no copy)."""
    return pa.Array.from_buffers(ARROW_TYPES[kind], rows, [valid if nulls else None, data], null_count=nulls)


def read_only_uri(path: Path) -> str:
    """The read-only, immutable URI of ``path`` (SQLite takes no lock and never writes beside it)."""
    return f"file:{quote(path.resolve().as_posix())}?mode=ro&immutable=1"


@dataclass(frozen=True)
class StoredTable:
    """Where a table's rows are in the file, for the table reader of ``_sqlitefetch.c``: its root page and
    the record positions of the columns read, -1 for the rowid (``table_reading`` finds them)."""

    root: int
    positions: tuple[int, ...]


ROWID = "rowid"  # a column name for table_reading: the rowid itself


def table_reading(conn: sqlite3.Connection, table: str, columns: Sequence[str]) -> StoredTable | None:
    """``columns`` of the stored ``table`` as the table reader finds them in each record (:data:`ROWID` or an
    INTEGER PRIMARY KEY: the rowid), or None where they are not stored there as plain values (a generated
    column, another primary key) or the table is not a plain rowid table."""
    row = conn.execute("select rootpage, sql from sqlite_master where type = 'table' and name = ?",
                       (table,)).fetchone()
    if row is None or type(row[0]) is not int or "without rowid" in str(row[1]).lower():
        return None
    # cid, name, type, notnull, default, pk, hidden
    info = conn.execute(f'pragma table_xinfo("{table}")').fetchall()
    if any(r[6] for r in info):
        return None  # generated columns are not stored (or not where the declared order says)
    names = [str(r[1]) for r in info]
    keys = [r for r in info if r[5]]
    # the rowid's other name: a lone INTEGER PRIMARY KEY (not DESC, which SQLite keeps as a plain column)
    alias = keys[0][1] if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER" and " desc" not in str(
        row[1]).lower() else None
    positions = []
    for c in columns:
        if c == ROWID or c == alias:
            positions.append(-1)
        elif c not in names or info[names.index(c)][5]:
            return None  # another kind of primary key: where SQLite keeps it is not this reader's business
        else:
            positions.append(names.index(c))
    return StoredTable(row[0], tuple(positions))


class NativeDb(_ClosedOnExit):
    """One read-only connection of the C side to a database file."""

    def __init__(self, path: Path, deadline: float, cache_kib: int) -> None:
        lib = _lib()
        self.path, self.deadline = path, deadline
        # how the last pivot read its rows: "pages" (the table reader), "sqlite" (the query), or "declined"
        # (the table reader did not take the table, then the query read it)
        self.pivot_read = ""
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
        lib = _lib()
        stmt = self._prepare(sql, len(columns))
        try:
            yield from _fetched(lambda *args: lib.sf_fetch(stmt, *args), columns, rows,
                                lambda: lib.sf_errmsg(self._handle))
        finally:
            lib.sf_finalize(stmt)

    def table_blocks(self, stored: StoredTable, columns: Sequence[tuple[str, int, IdMap | None]],
                     rows: int, start: int | None = None) -> Iterator[pa.RecordBatch]:
        """As :meth:`blocks`, the rows of a stored table read from its pages in rowid order (``columns``: one
        for each of ``stored.positions``), from rowid ``start`` on. Raises :class:`Declined` where the reader
        does not take them (perhaps after some blocks: read the table again through SQLite)."""
        lib = _lib()
        reader = lib.sf_raw_open(str(self.path.resolve()).encode(), stored.root, self.deadline)
        if not reader:
            raise MemoryError("cannot open the table reader")
        positions = (ctypes.c_int32 * len(columns))(*stored.positions)
        try:
            got = lib.sf_raw_seek(reader, start) if start is not None else 0
            if got == _ERROR:
                raise sqlite3.OperationalError(lib.sf_raw_errmsg(reader).decode(errors="replace"))
            if got < 0 and start is not None:
                raise Declined(lib.sf_raw_errmsg(reader).decode(errors="replace"))
            yield from _fetched(lambda n, *args: lib.sf_raw_fetch(reader, n, positions, *args), columns, rows,
                                lambda: lib.sf_raw_errmsg(reader))
        finally:
            lib.sf_raw_close(reader)

    def pivot(self, sql: str, tasks: IdMap, metrics: IdMap, columns: int, spill: Path,
              stored: StoredTable | None = None, slots: int | None = None) -> Pivoted:
        """The first non-null value (in the query's order) of each (task, metric) of ``sql``'s rows (task id,
        metric id, value), by metric code of ``metrics`` (below ``columns``): ``slots`` values (default
        ``tasks.size``) indexed by the task codes of ``tasks``, for every metric that occurs, even with no
        value of a known task. Rows of unknown metrics are skipped. The values wait in a temporary file in
        ``spill`` (:class:`Pivoted`). ``stored``: the same rows read from the table's pages (rowid order:
        ``sql`` must order by rowid), with ``sql`` run where the reader does not take the file. Raises as
        :meth:`blocks` (the column named "task", "metric" or "value"; "order" for rows in an order that
        would read the file back and forth)."""
        lib = _lib()
        slots = tasks.size if slots is None else slots
        args = (tasks.handle, metrics.handle, slots, columns)
        if stored is not None:
            reader = lib.sf_raw_open(str(self.path.resolve()).encode(), stored.root, self.deadline)
            if not reader:
                raise MemoryError("cannot open the table reader")
            try:
                positions = (ctypes.c_int32 * 3)(*stored.positions)
                found = _pivoted(slots, columns, spill, lambda valid, seen, fd, bad: lib.sf_raw_pivot(
                    reader, positions, *args, valid, seen, fd, PIVOT_CHUNK, PIVOT_POOL, bad),
                    lambda: lib.sf_raw_errmsg(reader))
            finally:
                lib.sf_raw_close(reader)
            if found is not None:
                self.pivot_read = "pages"
                return found
        self.pivot_read = "sqlite" if stored is None else "declined"
        stmt = self._prepare(sql, 3)
        try:
            found = _pivoted(slots, columns, spill, lambda valid, seen, fd, bad: lib.sf_pivot(
                stmt, *args, valid, seen, fd, PIVOT_CHUNK, PIVOT_POOL, bad),
                lambda: lib.sf_errmsg(self._handle))
        finally:
            lib.sf_finalize(stmt)
        if found is None:
            raise AssertionError("unreachable: only the table reader declines a file")
        return found


class Pivoted:
    """What a pivot found: for each metric code, its values (in a temporary file, unlinked: nothing is left
    behind) and its validity bitmap (in memory), read a range at a time. Close it to drop the file."""

    def __init__(self, file: IO[bytes], slots: int, columns: dict[int, tuple[int, pa.Buffer]]) -> None:
        self._file, self.slots, self._columns = file, slots, columns
        self._stride = -(-max(slots, 1) // PIVOT_CHUNK) * PIVOT_CHUNK * 8  # bytes per column in the file

    def codes(self) -> list[int]:
        return sorted(self._columns)

    def values(self, code: int, start: int, length: int) -> pa.Array:
        """Values ``start`` .. ``start + length`` of metric ``code`` as float64 (null where none)."""
        place, bitmap = self._columns[code]
        head = start % 8  # the bitmap is sliced at a byte, the values read from the same row on
        want = (length + head) * 8
        data = os.pread(self._file.fileno(), want, place * self._stride + (start - head) * 8)
        if len(data) < want:  # chunks never written (no value there) read as holes or past the end
            data += bytes(want - len(data))
        buffers = [bitmap.slice((start - head) // 8), pa.py_buffer(data)]
        return pa.Array.from_buffers(pa.float64(), length, buffers, offset=head)

    def close(self) -> None:
        self._file.close()


def _pivoted(slots: int, columns: int, spill: Path, run: Callable[[Any, Any, int, int], int],
             message: Callable[[], bytes]) -> Pivoted | None:
    """Run a C pivot (``run(valid, seen_as, fd, bad)``) into a new temporary file in ``spill``: what it
    found, or None where the table reader declined the file."""
    valid = (ctypes.c_void_p * columns)()
    seen_as = np.full(columns, -1, np.int32)
    bad = np.zeros(1, np.int32)
    # closed by Pivoted.close, or below
    file = tempfile.TemporaryFile(dir=spill, prefix="pmu_")  # noqa: SIM115
    try:
        got = run(valid, _address(seen_as), file.fileno(), _address(bad))
        found = {}
        width = max((slots + 7) // 8, 1)
        for j in range(columns):  # wrapped whatever happened: what C allocated is freed with the buffers
            bitmap: int | None = valid[j]
            if bitmap:
                found[j] = (int(seen_as[j]), pa.foreign_buffer(bitmap, width, base=_Allocation(bitmap)))
        if got == _UNSUPPORTED:
            file.close()
            return None
        if got in (_MISMATCH, _SCATTERED):
            raise Mismatch("order" if got == _SCATTERED else ("task", "metric", "value")[int(bad[0])])
        if got == _ERROR:
            raise sqlite3.OperationalError(message().decode(errors="replace"))
    except BaseException:
        file.close()
        raise
    return Pivoted(file, slots, found)


class _Allocation:
    """Memory the C side allocated, handed to Arrow: freed with the last array that uses it."""

    def __init__(self, address: int) -> None:
        self.address = address

    def __del__(self) -> None:
        lib = _library()
        if lib is not None:
            lib.sf_free(self.address)
