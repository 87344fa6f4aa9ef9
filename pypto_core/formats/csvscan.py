"""Native scan of a CSV table into typed Arrow columns (``_csvscan.c``); the fast path of ``kernel_csv``.

The C scanner reads the bytes once and writes, per column, int32 codes into a per-batch dictionary (text),
exact int64 ns (times), int64 (ids) or float64 (counters) with validity bitmaps; here those buffers become
Arrow arrays without a Python object per cell. It takes only rows it is sure to read exactly as the
validating path would; at the first other row it stops and :class:`NotNative` tells the caller how many
rows were already delivered, so the caller can read the rest its own way.
Memory: the file is mapped and scanned in pieces of ``READ_CHUNK`` bytes, a few at a time; a batch's
columns are at most ``MAX_ROWS`` rows.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pypto_core.formats.native import load_library
from pypto_core.formats.prefetch import map_ahead

TEXT, TIME_NS, INT, FLOAT = 1, 2, 3, 4  # column kinds, as in _csvscan.c
READ_CHUNK = 16 << 20  # bytes per piece of rows: ~50k kernel_details rows, one batch
MAX_ROWS = 65536  # rows per batch at most (bounds the column buffers)
MAX_ROW_BYTES = 64 << 20  # a "row" longer than this (a runaway quote) is left to the validating path

_ST_NEED_MORE, _ST_DONE, _ST_FULL, _ST_BAIL = 1, 2, 3, 4
_SRC = Path(__file__).with_name("_csvscan.c")
_BOM = b"\xef\xbb\xbf"


class NotNative(Exception):
    """The native scan stopped: ``rows`` rows were delivered before; the rest is the caller's."""

    def __init__(self, rows: int, reason: str) -> None:
        super().__init__(reason)
        self.rows = rows
        self.reason = reason


def _build() -> ctypes.CDLL | None:
    lib = load_library(_SRC, "csvscan")
    if lib is None:
        return None
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    lib.csv_new.restype = p
    lib.csv_new.argtypes = [i32, p, p, i64]
    lib.csv_free.restype = None
    lib.csv_free.argtypes = [p]
    lib.csv_dict.restype = None
    lib.csv_dict.argtypes = [p, i32, p]
    lib.csv_scan.restype = i64
    lib.csv_scan.argtypes = [p, p, i64, i64, i32, i64, p, p, p]
    return lib


_NATIVE: ctypes.CDLL | None | bool = False  # False = not tried yet


def native_lib() -> ctypes.CDLL | None:
    """The compiled scanner, or None where no C compiler is available (callers then use pyarrow)."""
    global _NATIVE
    if _NATIVE is False:
        _NATIVE = _build()
    return _NATIVE  # type: ignore[return-value]


def _header_end(data: bytes, header: Sequence[str]) -> int | None:
    """Offset just after the header line, when that line is plain (no quotes, spaces around names or lone
    CRs) and names exactly ``header``; None otherwise (the caller's reader then takes the whole file)."""
    nl = data.find(b"\n")
    if nl < 0:
        return None
    line = data[:nl]
    start = len(_BOM) if line.startswith(_BOM) else 0
    line = line[start:]
    if line.endswith(b"\r"):
        line = line[:-1]
    if b'"' in line or b"\r" in line:
        return None
    try:
        names = line.decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    return nl + 1 if names == list(header) else None


def scan_columns(
    path: str | os.PathLike[str],
    header: Sequence[str],
    kinds: Sequence[int],
    null_tokens: Sequence[str],
    *,
    background: bool = False,
) -> Iterator[list[pa.Array]]:
    """Yield batches of ``path`` as one Arrow array per header column, typed by ``kinds``, in file order.

    TEXT columns come as ``dictionary<int32, string>`` holding the raw cell text (unquoted, untrimmed);
    TIME_NS as exact int64 ns from µs; INT as int64 (4294967295 null); FLOAT as float64; numeric cells
    in ``null_tokens`` are null. Raises :class:`NotNative` where the scanner stops (also before the first
    batch, e.g. without a compiler); OSError from reading passes through.

    ``background``: scan in ``SCAN_THREADS`` threads, each taking the next piece of whole rows, at most
    ``_IN_FLIGHT`` pieces ahead of the consumer (the scanner releases the GIL, so pieces are scanned on
    every core while the caller converts). Without it, everything runs in the caller's thread.
    """
    lib = native_lib()
    if lib is None:
        raise NotNative(0, "no C compiler")
    if len(header) != len(kinds):
        raise ValueError("one kind per column")
    spec = _Spec(lib, list(kinds), b"".join(t.encode() + b"\0" for t in null_tokens))
    return _scan(path, header, spec, SCAN_THREADS if background else 0)


SCAN_THREADS = 2  # pieces scanned at once (the 2-core target: scanning is the longest stage)
_IN_FLIGHT = 3  # pieces read ahead of the consumer: bounds the memory in flight (~40 MB each)


class _Spec:
    """What every piece's scan needs: the library, the column kinds, the null tokens, the buffers."""

    def __init__(self, lib: ctypes.CDLL, kinds: list[int], nulls: bytes) -> None:
        self.lib = lib
        self.kinds = kinds
        self.kinds_arr = np.asarray(kinds, dtype=np.int8)
        self.nulls = nulls
        self.pool = _BufferPool([np.int32 if k == TEXT else np.float64 if k == FLOAT
                                 else np.int64 for k in kinds])


def _scan(path: str | os.PathLike[str], header: Sequence[str], spec: _Spec,
          threads: int) -> Iterator[list[pa.Array]]:
    """Batches of every piece in file order; NotNative with
    the rows delivered before the first refused row."""
    delivered = 0
    with open(path, "rb") as fh:
        reader = _RowPieces(fh, header)
        if threads:
            results = _scan_parallel(reader, spec, threads)
        else:
            results = (_scan_piece(spec, reader, piece) for piece in reader)
        try:
            for batches, refused in results:
                for batch in batches:
                    delivered += len(batch[0])
                    yield batch
                if refused:
                    raise NotNative(delivered, refused)
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()  # joins the scan threads: nothing reads the map after this
            reader.close()


def _scan_parallel(reader: _RowPieces, spec: _Spec,
                   threads: int) -> Iterator[tuple[list[list[pa.Array]], str]]:
    """Each piece scanned in a worker thread, results in file order, at most ``_IN_FLIGHT`` pieces ahead."""
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pypto-csvscan") as pool:
        yield from map_ahead(pool, lambda piece: _scan_piece(spec, reader, piece), reader, ahead=_IN_FLIGHT)


def _scan_piece(spec: _Spec, reader: _RowPieces, piece: _Piece) -> tuple[list[list[pa.Array]], str]:
    """(batches, "") for a piece of whole rows, or (batches before the refused row, why it was refused)."""
    if piece.refused:
        return [], piece.refused
    lib = spec.lib
    nc = len(spec.kinds)
    scanner = lib.csv_new(nc, spec.kinds_arr.ctypes.data, spec.nulls, len(spec.nulls))
    if not scanner:
        return [], "scanner not created"
    status = np.zeros(5, dtype=np.int64)
    dict_info = np.zeros(4, dtype=np.int64)
    val_ptrs = (ctypes.c_void_p * nc)()
    valid_ptrs = (ctypes.c_void_p * nc)()
    batches: list[list[pa.Array]] = []
    pos = 0
    size = piece.end - piece.start
    try:
        while True:
            vals, valid = spec.pool.take()
            for c in range(nc):
                val_ptrs[c] = vals[c].ctypes.data
                valid_ptrs[c] = valid[c].ctypes.data
            n = int(lib.csv_scan(scanner, reader.address + piece.start, size, pos, 1, MAX_ROWS, val_ptrs,
                                 valid_ptrs, status.ctypes.data))
            state = int(status[0])
            try:
                if state == _ST_BAIL:
                    return batches, (f"row at byte offset {piece.start + int(status[2])} "
                                     f"(reason {int(status[3])})")
                if n:
                    arrays = _arrays(lib, scanner, n, spec.kinds, vals, valid, dict_info)
                    if arrays is None:
                        return batches, "text that is not UTF-8"
                    batches.append(arrays)
            finally:
                spec.pool.settle(vals)
            del vals, valid
            if state == _ST_DONE:
                return batches, ""
            if state != _ST_FULL:  # cannot happen (a piece ends at its end); never lose the rest silently
                return batches, "scanner wanted input past the end"
            pos = int(status[1])  # full: the next batch from here
    finally:
        lib.csv_free(scanner)
        reader.release(piece)


class _Piece:
    """Whole rows of the file: bytes ``start:end`` of the mapped file (``refused``: why there are none)."""

    def __init__(self, start: int, end: int, refused: str = "") -> None:
        self.start, self.end, self.refused = start, end, refused


class _RowPieces:
    """The file, memory-mapped, as pieces of whole rows of about ``READ_CHUNK`` bytes, cut after a line end.

    A cut never splits a row the scanner would take: rows hold no line ends (a newline inside quotes is a
    row it refuses anyway, in whichever piece it falls). The scanner reads the page cache through the map:
    no copy into a buffer (``read`` spent ~10% of the CPU time copying), and a scanned piece's pages are
    released from this process (``MADV_DONTNEED``) so that its resident memory does not grow with the file.
    """

    def __init__(self, fh: Any, header: Sequence[str]) -> None:
        self.header = header
        self.size = os.fstat(fh.fileno()).st_size
        self.map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.address = _map_address(self.map) if self.map is not None else 0  # 0: nothing is ever scanned

    def close(self) -> None:
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:  # a view still exported (an exception's frames): unmapped once collected
                pass

    def release(self, piece: _Piece) -> None:
        """The scan of ``piece`` is over: drop its pages from this process (they stay in the page cache)."""
        if self.map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = piece.start - piece.start % mmap.PAGESIZE
        if piece.end > start:
            self.map.madvise(mmap.MADV_DONTNEED, start, piece.end - start)

    def _bytes(self, start: int, end: int) -> np.ndarray:
        assert self.map is not None
        return np.frombuffer(self.map, dtype=np.uint8, count=end - start, offset=start)

    def __iter__(self) -> Iterator[_Piece]:
        if self.map is None:
            yield _Piece(0, 0, "header line not plain")  # an empty file: the validating path says so
            return
        start = _header_end(self.map[: min(self.size, 1 << 20)], self.header)
        if start is None:
            yield _Piece(0, 0, "header line not plain")
            return
        while start < self.size:
            end = start + READ_CHUNK
            while True:
                if end >= self.size:  # the rest is one piece, as a small file is whole
                    yield _Piece(start, self.size)
                    return
                cut = _last_line_end(self._bytes(start, end))
                if cut >= 0:
                    break
                if end - start > MAX_ROW_BYTES:  # no line end: one row longer than the scanner takes
                    yield _Piece(0, 0, "a row longer than the scanner takes")
                    return
                end += READ_CHUNK
            yield _Piece(start, start + cut + 1)
            start += cut + 1


def _map_address(m: mmap.mmap) -> int:
    """The address of a read-only map's first byte (ctypes cannot take a read-only buffer directly)."""
    view = np.frombuffer(m, dtype=np.uint8, count=1)
    address = int(view.ctypes.data)
    del view  # no export left behind: the map must be closable
    return address


def _last_line_end(data: np.ndarray) -> int:
    """Index of the last LF in ``data`` (else of the last CR: old Mac line ends), or -1; searched backwards
    in 64 KiB steps, since a row is a few hundred bytes."""
    for byte in (10, 13):
        end = len(data)
        while end > 0:
            lo = max(end - 65536, 0)
            hits = np.flatnonzero(data[lo:end] == byte)
            if len(hits):
                return lo + int(hits[-1])
            end = lo
    return -1


class _BufferPool:
    """Column buffers for the scanner, reused once Arrow (and everything after it) let go of them.

    A batch's arrays wrap these numpy buffers without copying; when every Arrow array over a buffer is
    gone, only the pool refers to it and it can take the next batch. Reusing warm memory instead of
    allocating ~25 MB per batch saves the kernel's page clearing, a large share of the system time.
    A set is lent (``take``) until its scan has wrapped it into Arrow arrays (``settle``): until then
    nothing else refers to it, yet it is in use."""

    _KEEP = 8  # sets kept for reuse: the batches in flight (scanning, converting, the writer's queue)

    def __init__(self, dtypes: Sequence[Any]) -> None:
        self.dtypes = list(dtypes)
        self.sets: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
        self.lent: set[int] = set()
        self.lock = threading.Lock()

    def take(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        with self.lock:
            for i, (vals, valid) in enumerate(self.sets):
                if id(vals) in self.lent:
                    continue
                # 3 = the pool's list, the generator's variable
                # and getrefcount's argument: nothing else has it
                if all(sys.getrefcount(a) == 3 for a in vals) and all(sys.getrefcount(a) == 3 for a in valid):
                    self.sets.append(self.sets.pop(i))  # most recently taken last: the others are tried first
                    self.lent.add(id(vals))
                    return vals, valid
            fresh = ([np.empty(MAX_ROWS, dtype=dt) for dt in self.dtypes],
                     [np.empty((MAX_ROWS + 7) // 8, dtype=np.uint8) for _ in self.dtypes])
            if len(self.sets) < self._KEEP:
                self.sets.append(fresh)
                self.lent.add(id(fresh[0]))
            return fresh

    def settle(self, vals: list[np.ndarray]) -> None:
        """The set's scan is over: from now on, the references to its buffers say whether it is free."""
        with self.lock:
            self.lent.discard(id(vals))


def _arrays(
    lib: ctypes.CDLL,
    scanner: int,
    n: int,
    kinds: Sequence[int],
    vals: list[np.ndarray],
    valid: list[np.ndarray],
    dict_info: np.ndarray,
) -> list[pa.Array] | None:
    """The scanner's buffers as Arrow arrays (no copy of the column buffers); None on invalid UTF-8."""
    out: list[pa.Array] = []
    for c, kind in enumerate(kinds):
        if kind == TEXT:
            lib.csv_dict(scanner, c, dict_info.ctypes.data)
            count, data_len, off_ptr, data_ptr = (int(x) for x in dict_info)
            offsets = np.ctypeslib.as_array((ctypes.c_int32 * (count + 1)).from_address(off_ptr)).copy()
            data = ctypes.string_at(data_ptr, data_len) if data_len else b""
            dictionary = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))
            try:
                dictionary.validate(full=True)
            except pa.ArrowInvalid:
                return None
            codes = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(vals[c])])
            out.append(pa.DictionaryArray.from_arrays(codes, dictionary, safe=False))
        else:
            typ = pa.float64() if kind == FLOAT else pa.int64()
            out.append(pa.Array.from_buffers(typ, n, [pa.py_buffer(valid[c]), pa.py_buffer(vals[c])]))
    return out
