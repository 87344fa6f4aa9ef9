"""Native scan of a CSV table into typed Arrow columns (``_csvscan.c``); the fast path of ``kernel_csv``.

The C scanner reads the bytes once and writes, per column, int32 codes into a per-batch dictionary (text),
exact int64 ns (times), int64 (ids) or float64 (counters) with validity bitmaps; here those buffers become
Arrow arrays without a Python object per cell. It takes only rows it is sure to read exactly as the
validating path would; at the first other row it stops and :class:`NotNative` tells the caller how many
rows were already delivered, so the caller can read the rest its own way.
Memory: the file is read in ``READ_CHUNK`` pieces; a batch's columns are at most ``MAX_ROWS`` rows.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from pypto_core.formats.native import load_library
from pypto_core.formats.prefetch import iterate_ahead

TEXT, TIME_NS, INT, FLOAT = 1, 2, 3, 4  # column kinds, as in _csvscan.c
READ_CHUNK = 16 << 20  # bytes per read: ~50k kernel_details rows, one batch
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
    """Yield batches of ``path`` as one Arrow array per header column, typed by ``kinds``.

    TEXT columns come as ``dictionary<int32, string>`` holding the raw cell text (unquoted, untrimmed);
    TIME_NS as exact int64 ns from µs; INT as int64 (4294967295 null); FLOAT as float64; numeric cells
    in ``null_tokens`` are null. Raises :class:`NotNative` where the scanner stops (also before the first
    batch, e.g. without a compiler); OSError from reading passes through.

    ``background``: scan in a second thread, at most ``_AHEAD`` batches ahead of the consumer (the scanner
    releases the GIL, so scanning overlaps the caller's conversion on a second core).
    """
    if background:
        return _ahead(_scan(path, header, kinds, null_tokens))
    return _scan(path, header, kinds, null_tokens)


_AHEAD = 1  # batches scanned ahead of the consumer: bounds the memory in flight


def _ahead(batches: Iterator[list[pa.Array]]) -> Iterator[list[pa.Array]]:
    return iterate_ahead(batches, depth=_AHEAD, name="pypto-csvscan")


def _scan(
    path: str | os.PathLike[str],
    header: Sequence[str],
    kinds: Sequence[int],
    null_tokens: Sequence[str],
) -> Iterator[list[pa.Array]]:
    lib = native_lib()
    if lib is None:
        raise NotNative(0, "no C compiler")
    nc = len(header)
    if nc != len(kinds):
        raise ValueError("one kind per column")
    kinds_arr = np.asarray(kinds, dtype=np.int8)
    nulls = b"".join(t.encode() + b"\0" for t in null_tokens)
    scanner = lib.csv_new(nc, kinds_arr.ctypes.data, nulls, len(nulls))
    if not scanner:
        raise NotNative(0, "scanner not created")
    status = np.zeros(5, dtype=np.int64)
    dict_info = np.zeros(4, dtype=np.int64)
    val_ptrs = (ctypes.c_void_p * nc)()
    valid_ptrs = (ctypes.c_void_p * nc)()
    dtypes = [np.int32 if k == TEXT else np.float64 if k == FLOAT else np.int64 for k in kinds]
    delivered = 0
    try:
        with open(path, "rb") as fh:
            buf = fh.read(READ_CHUNK)
            pos = _header_end(buf, header)
            if pos is None:
                raise NotNative(0, "header line not plain")
            eof = len(buf) < READ_CHUNK
            while True:
                vals = [np.empty(MAX_ROWS, dtype=dt) for dt in dtypes]
                valid = [np.empty((MAX_ROWS + 7) // 8, dtype=np.uint8) for _ in kinds]
                for c in range(nc):
                    val_ptrs[c] = vals[c].ctypes.data
                    valid_ptrs[c] = valid[c].ctypes.data
                n = int(lib.csv_scan(scanner, buf, len(buf), pos, int(eof), MAX_ROWS, val_ptrs, valid_ptrs,
                                     status.ctypes.data))
                state, consumed = int(status[0]), int(status[1])
                if state == _ST_BAIL:
                    raise NotNative(delivered, f"row at byte offset {int(status[2])} (reason {int(status[3])})")
                if n:
                    batch = _arrays(lib, scanner, n, kinds, vals, valid, dict_info)
                    if batch is None:
                        raise NotNative(delivered, "text that is not UTF-8")
                    delivered += n
                    yield batch
                if state == _ST_DONE:
                    return
                pos = consumed
                if state == _ST_NEED_MORE:
                    if eof:  # cannot happen (the scanner finishes at EOF); never loop on it
                        raise NotNative(delivered, "scanner wanted input past the end")
                    chunk = fh.read(READ_CHUNK)
                    if len(buf) - pos > MAX_ROW_BYTES:
                        raise NotNative(delivered, "a row longer than the scanner takes")
                    buf = buf[pos:] + chunk
                    pos = 0
                    eof = not chunk
    finally:
        lib.csv_free(scanner)


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
