"""Stream a chrome-trace JSON file (bare array or ``{"traceEvents": [...]}``, plain or gzip) into raw columns.

This is the shared fast path under ``chrome_trace`` (torch_npu ``trace_view.json``, msprof ``msprof_*.json``)
and ``kineto`` (PyTorch profiler traces). It knows JSON, not profilers: each event becomes one row of text
columns (``ph``, ``name``, ``cat``, ``pid``, ``tid``, ``id``, ``bp``, the first args key and value, and any
args keys the caller asks for) plus exact ``ts_ns`` / ``dur_ns`` int64 columns. The readers give meaning.

Speed: the hot loop is ``_eventscan.c`` (compiled on first use by ``native.load_library``, cached under
``$PYPTO_CACHE`` or ``~/.cache/pypto``), one pass over the bytes writing Arrow string views; Python only
handles whole columns. Without a compiler a pure-Python fallback gives the same columns, slower and holding
the whole file. Memory: the input is read in 8 MiB chunks; only the columns produced so far are kept.
"""

from __future__ import annotations

import ctypes
import gc
import json
import mmap
import os
import queue
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from pypto_core.errors import InputError
from pypto_core.formats.native import load_library
from pypto_core.formats.prefetch import iterate_ahead
from pypto_core.i18n import Message, msg
from pypto_core.limits import Inflation

FIXED_FIELDS: tuple[str, ...] = ("ph", "name", "cat", "pid", "tid", "id", "bp", "arg0_key", "arg0_val")
READ_CHUNK = 8 << 20  # bytes per read; ~35k trace_view events
EVENT_CAP = 65536  # events per native call: bounds the view buffers to (fields x cap x 16) bytes
MAX_EVENT_BYTES = 512 << 20  # one event (or one wrapper value) larger than this is refused, not buffered
HEADER_VALUE_LIMIT = 64 << 20  # wrapper values (deviceProperties, distributedInfo...) kept for metadata

_ST_NEED_MORE, _ST_ARRAY_END, _ST_FULL, _ST_ERROR = 1, 2, 3, 4
_SRC = Path(__file__).with_name("_eventscan.c")


@dataclass
class ScannedTrace:
    """What one file held: raw event columns, and the wrapper object's other keys (Kineto metadata)."""

    events: pa.Table
    header: dict[str, Any] = field(default_factory=dict)
    wrapped: bool = False  # True for {"traceEvents": [...]}, False for a bare array
    input_bytes: int = 0  # decompressed bytes scanned
    native: bool = True


# ---------------------------------------------------------------------------------------------- native


def _build_native() -> ctypes.CDLL | None:
    lib = load_library(_SRC, "eventscan")
    if lib is None:
        return None
    p = ctypes.c_void_p
    i64 = ctypes.c_int64
    lib.scan_events.restype = i64
    lib.scan_events.argtypes = [p, i64, i64, p, ctypes.c_int32, i64, p, p, p, p, p, p, i64, p, p]
    lib.skip_value.restype = i64
    lib.skip_value.argtypes = [p, i64, i64]
    lib.lens_to_offsets.restype = None
    lib.lens_to_offsets.argtypes = [p, i64, p]
    return lib


_NATIVE: ctypes.CDLL | None | bool = False  # False = not tried yet


def native_scanner() -> ctypes.CDLL | None:
    """The compiled scanner, or None where no C compiler is available (then the fallback is used)."""
    global _NATIVE
    if _NATIVE is False:
        _NATIVE = _build_native()
    return _NATIVE  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------- input


def _read_chunks(fh: IO[bytes], path: Path, gzipped: bool) -> Iterator[bytes]:
    """Yield the (decompressed) chunks of an open file, closing it at the end."""
    with fh:
        if not gzipped:
            while True:
                chunk = fh.read(READ_CHUNK)
                if not chunk:
                    return
                yield chunk
        yield from _gunzip(fh, path)


def _gunzip(fh: IO[bytes], path: Path) -> Iterator[bytes]:
    """The decompressed chunks, held to the unpacked size and ratio limits as an archive is (the size in the
    gzip trailer is never trusted: it can be forged)."""
    dec = zlib.decompressobj(wbits=47)  # 47: gzip or zlib header, detected
    started = False
    inflation = Inflation(str(path), os.fstat(fh.fileno()).st_size)
    try:
        while True:
            raw = fh.read(READ_CHUNK // 4)
            if not raw:
                break
            while raw:
                started = True
                out = dec.decompress(raw, READ_CHUNK)
                if out:
                    inflation.add(len(out))
                    yield out
                if dec.eof:
                    raw = dec.unused_data
                    dec = zlib.decompressobj(wbits=47)  # concatenated gzip members
                    started = False
                else:
                    raw = dec.unconsumed_tail
                    while not raw and not dec.eof:  # drain output zlib still holds
                        out = dec.decompress(b"", READ_CHUNK)
                        if not out:
                            break
                        inflation.add(len(out))
                        yield out
    except zlib.error as exc:
        raise InputError(str(path), msg("corrupt gzip data: {error}", error=str(exc))) from None
    if started and not dec.eof:
        raise InputError(str(path), msg("truncated gzip data: the file ends mid-stream"))


def _prefetch(chunks: Iterator[bytes], depth: int = 3) -> Generator[bytes, None, None]:
    """Read and decompress in a second thread (file reads and zlib release the GIL, so does the scanner)."""
    return iterate_ahead(chunks, depth=depth, name="pypto-read")


_WS = b" \t\r\n"
_WS_SLICE = 64 * 1024


class _Buffer:
    """A sliding window over the decompressed input: ``window()`` is what the native functions scan, ``pos``
    the cursor in it. This one holds decompressed chunks (gzip); :class:`_MappedBuffer` maps a plain file."""

    def __init__(self, path: Path, chunks: Iterator[bytes]) -> None:
        self.path = path
        self._chunks = _prefetch(chunks)
        self.data = b""
        self.pos = 0
        self.eof = False
        self.total = 0  # input bytes made available so far

    @property
    def size(self) -> int:
        return len(self.data)

    def window(self) -> tuple[Any, int]:
        """(pointer for ctypes, length) of the window."""
        return self.data, len(self.data)

    def byte(self, i: int) -> int:
        return self.data[i]

    def slice(self, start: int, end: int) -> bytes:
        return self.data[start:end]

    def offset(self, i: int) -> int:
        """The input offset of window position ``i`` (for error messages)."""
        return self.total - self.size + i

    def more(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at end of input."""
        if self.eof:
            return False
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.eof = True
            return False
        self.total += len(chunk)
        keep = len(self.data) - self.pos
        if keep > MAX_EVENT_BYTES:
            raise InputError(str(self.path), _too_large())
        self.data = self.data[self.pos :] + chunk if keep else chunk
        self.pos = 0
        return True

    def skip_ws(self) -> bool:
        """Skip whitespace (and a UTF-8 BOM at the start); False if the input ended."""
        while True:
            n = self.size
            # A run of blanks is skipped by bytes.lstrip (C), 64 KiB at a time: slicing the rest of
            # the window copied up to READ_CHUNK bytes per run (7% of a Kineto read's CPU time).
            while self.pos < n and self.byte(self.pos) in _WS:
                part = self.slice(self.pos, min(n, self.pos + _WS_SLICE))
                self.pos += len(part) - len(part.lstrip(_WS))
            if self.pos < n:
                if self.offset(self.pos) == 0 and self.slice(0, 3) == b"\xef\xbb\xbf":
                    self.pos = 3
                    continue
                return True
            if not self.more():
                return False

    def peek(self) -> int:
        return self.byte(self.pos)

    def close(self) -> None:
        """Stop reading (the decompressing thread ends)."""
        self._chunks.close()


class _MappedBuffer(_Buffer):
    """The window over a plain file, memory-mapped: the scanner reads the page cache without a copy into
    Python bytes (``read`` and joining chunks cost ~15% of the CPU time), and the pages already scanned are
    dropped from this process (``MADV_DONTNEED``) so that its resident memory does not grow with the file."""

    def __init__(self, path: Path, fh: IO[bytes]) -> None:
        self.path = path
        self.file_size = os.fstat(fh.fileno()).st_size
        self.map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        view = np.frombuffer(self.map, dtype=np.uint8, count=1)
        self.address = int(view.ctypes.data)
        del view  # no export may outlive the map
        self.start = 0  # file offset of the window
        self.end = min(READ_CHUNK, self.file_size)
        self.pos = 0
        self.eof = self.end == self.file_size
        self.total = self.end

    @property
    def size(self) -> int:
        return self.end - self.start

    def window(self) -> tuple[Any, int]:
        return self.address + self.start, self.end - self.start

    def byte(self, i: int) -> int:
        return self.map[self.start + i]

    def slice(self, start: int, end: int) -> bytes:
        return self.map[self.start + start : self.start + end]

    def more(self) -> bool:
        if self.eof:
            return False
        if self.size - self.pos > MAX_EVENT_BYTES:
            raise InputError(str(self.path), _too_large())
        new_start = self.start + self.pos
        if hasattr(mmap, "MADV_DONTNEED"):
            done = new_start - new_start % mmap.PAGESIZE  # whole pages before the cursor: scanned
            if done > 0:
                self.map.madvise(mmap.MADV_DONTNEED, 0, done)
        self.start, self.pos = new_start, 0
        self.end = min(self.end + READ_CHUNK, self.file_size)
        self.eof = self.end == self.file_size
        self.total = self.end
        return True

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # a view still exported (an exception's frames): unmapped once collected
            pass


def _open_file(path: Path) -> tuple[IO[bytes], bool, bool]:
    """(the open file, gzipped, empty): gzip is told by its magic bytes, not the file's name."""
    try:
        fh: IO[bytes] = open(path, "rb")
    except OSError as exc:
        raise InputError(str(path), msg("cannot open: {error}", error=exc.strerror or str(exc))) from None
    head = fh.read(2)
    fh.seek(0)
    return fh, head == b"\x1f\x8b", not head


def _open_buffer(path: Path) -> _Buffer:
    """A mapped window for a plain, non-empty file; a chunked one for gzip (decompressed in a thread)."""
    fh, gzipped, empty = _open_file(path)
    if not (gzipped or empty):
        try:
            with fh:
                return _MappedBuffer(path, fh)  # the map stays valid once the file is closed
        except (OSError, ValueError):  # not mappable (a pipe, a special file): read it in chunks
            fh = open(path, "rb")
    return _Buffer(path, _read_chunks(fh, path, gzipped))


# ---------------------------------------------------------------------------------------------- scanning


def _fail(path: Path, reason: Message) -> InputError:
    return InputError(str(path), reason)


_TRUNCATED_TOP = msg("truncated JSON: the file ends inside the top-level object")


def _too_large() -> Message:
    return msg("a single JSON value is larger than {mib} MiB", mib=MAX_EVENT_BYTES >> 20)


def raw_schema(arg_keys: tuple[str, ...]) -> pa.Schema:
    """The columns ``scan_file`` produces for these args keys."""
    names = FIXED_FIELDS + tuple(f"arg:{k}" for k in arg_keys)
    return pa.schema([(n, pa.string()) for n in names] + [("ts_ns", pa.int64()), ("dur_ns", pa.int64())])


class Pieces:
    """Per-category slices of raw batches, kept with only the columns each category needs."""

    def __init__(self, columns: dict[str, list[str]], arg_keys: tuple[str, ...],
                 extra: tuple[pa.Field, ...] = ()) -> None:
        schema = raw_schema(arg_keys)
        for f in extra:  # columns the reader adds to each batch (e.g. a sequence number)
            schema = schema.append(f)
        self.columns = columns
        self.parts: dict[str, list[pa.RecordBatch]] = {k: [] for k in columns}
        self.schemas = {k: pa.schema([schema.field(c) for c in cols]) for k, cols in columns.items()}

    def add(self, kind: str, batch: pa.RecordBatch, mask: Any) -> None:
        part = batch.select(self.columns[kind]).filter(mask)  # select first: filter only the kept columns
        if part.num_rows:
            self.parts[kind].append(part)

    def table(self, kind: str) -> pa.Table:
        return pa.Table.from_batches(self.parts.pop(kind, []), schema=self.schemas[kind])


class _Sink:
    """Where raw batches go: kept, or handed in file order to the reader's ``on_batch`` (which keeps
    only what it needs, so that memory follows the tables, not the file)."""

    def __init__(self, on_batch: Callable[[pa.RecordBatch], None] | None) -> None:
        self.on_batch = on_batch
        self.kept: list[pa.RecordBatch] = []

    def append(self, batch: pa.RecordBatch) -> None:
        if self.on_batch is None:
            self.kept.append(batch)
        else:
            self.on_batch(batch)

    def extend(self, batches: list[pa.RecordBatch]) -> None:
        for b in batches:
            self.append(b)


def scan_file(
    path: str | os.PathLike[str],
    arg_keys: tuple[str, ...] = (),
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
) -> ScannedTrace:
    """Read every event of a chrome-trace JSON file into raw columns (see the module docstring).

    With ``on_batch``, each raw batch (up to EVENT_CAP events, in file order) is passed to it and not
    kept: ``events`` is then empty. Raises ``InputError`` naming the file for anything that is not a
    complete chrome trace: empty file, binary data, truncated JSON, JSON that is neither an event array
    nor an object with ``traceEvents``.
    """
    p = Path(path)
    if native_scanner() is None:
        scanned = _scan_fallback(p, arg_keys)
        if on_batch is not None:
            for b in scanned.events.to_batches(max_chunksize=EVENT_CAP):
                on_batch(b)
            scanned.events = scanned.events.schema.empty_table()
        return scanned
    # No reference cycles are made while scanning; the cyclic GC only rescans live objects (measured ~3%).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan_native(p, arg_keys, on_batch)
    finally:
        if gc_was_enabled:
            gc.enable()


def _scan_native(p: Path, arg_keys: tuple[str, ...],
                 on_batch: Callable[[pa.RecordBatch], None] | None) -> ScannedTrace:
    buf = _open_buffer(p)
    try:
        return _scan_buffer(p, buf, arg_keys, on_batch)
    finally:
        buf.close()


def _scan_buffer(
    p: Path, buf: _Buffer, arg_keys: tuple[str, ...], on_batch: Callable[[pa.RecordBatch], None] | None
) -> ScannedTrace:
    if not buf.skip_ws():
        raise _fail(p, msg("empty file (no JSON)"))
    first = buf.peek()
    header: dict[str, Any] = {}
    batches = _Sink(on_batch)
    scanner = _NativeScan(p, arg_keys)
    if first == ord("["):
        buf.pos += 1
        scanner.run(buf, batches)
        _expect_end(buf, p)
        wrapped = False
    elif first == ord("{"):
        buf.pos += 1
        found = _scan_object(buf, p, scanner, batches, header)
        if not found:
            raise _fail(p, msg("JSON object without a traceEvents list: not a chrome trace"))
        wrapped = True
    else:
        raise _fail(p, msg("not JSON (does not start with '[' or '{{'): not a chrome trace"))
    schema = scanner.schema()
    table = pa.Table.from_batches(batches.kept, schema=schema) if batches.kept else schema.empty_table()
    return ScannedTrace(events=table, header=header, wrapped=wrapped, input_bytes=buf.total)


def _expect_end(buf: _Buffer, path: Path) -> None:
    if buf.skip_ws():
        raise _fail(path, msg("unexpected data after the end of the JSON array at byte {byte}",
                                      byte=buf.offset(buf.pos)))


def _skip_json_value(buf: _Buffer, path: Path) -> bytes:
    """Return the raw text of the JSON value at the cursor, reading more input as needed."""
    lib = native_scanner()
    assert lib is not None
    while True:
        pointer, size = buf.window()
        end = lib.skip_value(pointer, size, buf.pos)
        if end >= 0 and not (end == size and not buf.eof):
            raw = buf.slice(buf.pos, end)
            buf.pos = end
            return raw
        if end == -2:
            raise _fail(path, msg("malformed JSON near byte {byte}", byte=buf.offset(buf.pos)))
        if not buf.more():
            if end >= 0:
                raw = buf.slice(buf.pos, end)
                buf.pos = end
                return raw
            raise _fail(path, msg("truncated JSON: the file ends inside a value"))


def _scan_object(
    buf: _Buffer, path: Path, scanner: _NativeScan, batches: _Sink, header: dict[str, Any]
) -> bool:
    """Walk the wrapper object's keys; scan ``traceEvents``, keep the other values as metadata."""
    found = False
    if not buf.skip_ws():
        raise _fail(path, _TRUNCATED_TOP)
    if buf.peek() == ord("}"):
        buf.pos += 1
        _expect_end(buf, path)
        return False
    while True:
        if not buf.skip_ws():
            raise _fail(path, _TRUNCATED_TOP)
        if buf.peek() != ord('"'):
            raise _fail(path, msg("malformed JSON: expected a key near byte {byte}",
                                  byte=buf.offset(buf.pos)))
        try:
            key = json.loads(_skip_json_value(buf, path))
        except ValueError:
            raise _fail(path, msg("malformed JSON key in the top-level object")) from None
        if not buf.skip_ws() or buf.peek() != ord(":"):
            raise _fail(path, msg("malformed JSON: expected ':' after key {key!r}", key=key))
        buf.pos += 1
        if not buf.skip_ws():
            raise _fail(path, _TRUNCATED_TOP)
        if key == "traceEvents" and buf.peek() == ord("["):
            buf.pos += 1
            scanner.run(buf, batches)
            found = True
        else:
            raw = _skip_json_value(buf, path)
            if len(raw) <= HEADER_VALUE_LIMIT:
                try:
                    header[key] = json.loads(raw)
                except (ValueError, RecursionError):
                    raise _fail(path, msg("malformed JSON in top-level key {key!r}", key=key)) from None
        if not buf.skip_ws():
            raise _fail(path, _TRUNCATED_TOP)
        c = buf.peek()
        buf.pos += 1
        if c == ord(","):
            continue
        if c == ord("}"):
            _expect_end(buf, path)
            return found
        raise _fail(path, msg("malformed JSON: expected ',' or '}}' near byte {byte}",
                              byte=buf.offset(buf.pos)))


@dataclass
class _Scratch:
    """One native call's outputs; a fresh set per call, so the scan of the next chunk can run while a
    worker thread turns this one into Arrow arrays (both release the GIL)."""

    lens: np.ndarray
    kinds: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    ok: np.ndarray
    used: np.ndarray
    out: np.ndarray
    region: int

    @classmethod
    def new(cls, nf: int, region: int) -> _Scratch:
        return cls(
            lens=np.empty((nf, EVENT_CAP), dtype=np.int32),
            kinds=np.empty((nf, EVENT_CAP), dtype=np.uint8),
            ts=np.empty(EVENT_CAP, dtype=np.int64),
            dur=np.empty(EVENT_CAP, dtype=np.int64),
            ok=np.empty(EVENT_CAP, dtype=np.uint8),
            used=np.zeros(nf, dtype=np.int64),
            # One region per field, each as large as the input left: virtual memory where only written
            # pages become resident. An anonymous mmap, not np.empty: numpy advises huge pages for large
            # arrays, and then one written byte per field made 2 MiB resident (measured: +300 MB peak RSS).
            out=np.frombuffer(mmap.mmap(-1, nf * region), dtype=np.uint8),
            region=region,
        )

    def fit(self, nf: int, region: int) -> _Scratch:
        """This scratch set if its regions are large enough, else a new one."""
        return self if region <= self.region and self.lens.shape[1] == EVENT_CAP else _Scratch.new(nf, region)


_MAX_PENDING = 2  # batches being built behind the scanner: bounds the memory in flight


class _NativeScan:
    def __init__(self, path: Path, arg_keys: tuple[str, ...]) -> None:
        self.path = path
        self.arg_keys = arg_keys
        self.names = FIXED_FIELDS + tuple(f"arg:{k}" for k in arg_keys)
        self.nf = len(self.names)
        self.keys_blob = b"".join(k.encode() + b"\0" for k in arg_keys) + b"\0"
        self.status = np.zeros(4, dtype=np.int64)
        self._schema = pa.schema([(n, pa.string()) for n in self.names]
                                 + [("ts_ns", pa.int64()), ("dur_ns", pa.int64())])

    def schema(self) -> pa.Schema:
        return self._schema

    def run(self, buf: _Buffer, batches: _Sink) -> None:
        """Scan events from the cursor to the array's closing ']'."""
        from concurrent.futures import Future, ThreadPoolExecutor

        lib = native_scanner()
        assert lib is not None
        pending: list[Future[None]] = []
        # Scratch sets are recycled: fresh ones cost the kernel a page-zeroing fault per 4 KiB (measured:
        # 14% of a read), and in flight there are at most _MAX_PENDING + 1.
        free: queue.SimpleQueue[_Scratch] = queue.SimpleQueue()
        for _ in range(_MAX_PENDING + 2):
            free.put(_Scratch.new(self.nf, 2 * READ_CHUNK))  # a chunk plus a carried partial event
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pypto-columns") as pool:
            try:
                while True:
                    pointer, size = buf.window()
                    sc = free.get().fit(self.nf, size - buf.pos + 64)
                    lib.scan_events(
                        pointer, size, buf.pos, self.keys_blob, len(self.arg_keys), EVENT_CAP,
                        sc.lens.ctypes.data, sc.kinds.ctypes.data, sc.ts.ctypes.data, sc.dur.ctypes.data,
                        sc.ok.ctypes.data, sc.out.ctypes.data, sc.region, sc.used.ctypes.data,
                        self.status.ctypes.data,
                    )  # fmt: skip
                    status, consumed, err_pos, n = (int(x) for x in self.status)
                    if status == _ST_ERROR:
                        where = buf.offset(err_pos)
                        raise _fail(self.path, msg("malformed JSON in the event list near byte {byte}",
                                                   byte=where))
                    if n:
                        # the worker builds the columns and hands them to the sink (the reader's
                        # classification) while this thread scans on: both release the GIL
                        pending.append(pool.submit(self._batch_to_sink, n, sc, free, batches))
                        while len(pending) > _MAX_PENDING:
                            pending.pop(0).result()
                    else:
                        free.put(sc)
                    buf.pos = consumed
                    if status == _ST_ARRAY_END:
                        break
                    if status == _ST_NEED_MORE and not buf.more():
                        raise _fail(self.path, msg("truncated JSON: the file ends inside the event list"))
            finally:
                for f in pending:  # one worker, in order: re-raises a worker's InputError
                    f.result()

    def _batch_to_sink(self, n: int, sc: _Scratch, free: queue.SimpleQueue[_Scratch], sink: _Sink) -> None:
        try:
            batch = self._batch(n, sc)
        finally:
            free.put(sc)
        sink.append(batch)

    def _batch(self, n: int, sc: _Scratch) -> pa.RecordBatch:
        lib = native_scanner()
        assert lib is not None
        columns: list[pa.Array] = []
        region = sc.region
        for f in range(self.nf):
            present = sc.kinds[f, :n] != 0
            if not present.any():
                columns.append(pa.nulls(n, pa.string()))
                continue
            used = int(sc.used[f])
            lens = sc.lens[f, :n]  # a row of the C-ordered lengths: contiguous
            offsets = np.empty(n + 1, dtype=np.int32)
            lib.lens_to_offsets(lens.ctypes.data, n, offsets.ctypes.data)
            data = sc.out[f * region : f * region + used].copy()
            validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
            arr = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), validity)
            # ASCII text in whole offsets is valid UTF-8 however it is cut: a byte scan, fifty times faster
            # than Arrow's full check (which still checks every other field)
            ascii_only = offsets[-1] == used and (not used or data.max() < 0x80) and lens.min() >= 0
            try:
                arr.validate(full=not ascii_only)
            except pa.ArrowInvalid:
                raise _fail(self.path, msg("invalid UTF-8 text in field {field!r}",
                                           field=self.names[f])) from None
            columns.append(arr)
        ok = sc.ok[:n]
        columns.append(pa.array(sc.ts[:n].copy(), pa.int64(), mask=(ok & 1) == 0))
        columns.append(pa.array(sc.dur[:n].copy(), pa.int64(), mask=(ok & 2) == 0))
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


# ---------------------------------------------------------------------------------------------- fallback


class _Text(str):
    """A JSON number kept as its text (so ``ts`` keeps every digit)."""


def _us_text_to_ns(text: str) -> int | None:
    t = text.strip()
    neg = t.startswith("-")
    if t[:1] in "+-":
        t = t[1:]
    if "e" in t or "E" in t:
        try:
            v = round(float(t) * 1000)
        except ValueError:
            return None
        return -v if neg else v
    whole, dot, frac = t.partition(".")
    if (not (whole or frac) or (whole and not whole.isdigit()) or (frac and not frac.isdigit())
            or (dot and not frac and not whole)):
        return None
    ns = int(whole or "0") * 1000 + int((frac + "000")[:3])
    if len(frac) > 3 and frac[3] >= "5":
        ns += 1
    return -ns if neg else ns


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return str(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    return json.dumps(v, separators=(",", ":")) if isinstance(v, (list, dict)) else str(v)


def _scan_fallback(path: Path, arg_keys: tuple[str, ...]) -> ScannedTrace:
    """The same columns without the compiled scanner: whole-file json, exact number text."""
    fh, gzipped, _ = _open_file(path)
    raw = b"".join(_read_chunks(fh, path, gzipped))
    if not raw.strip():
        raise _fail(path, msg("empty file (no JSON)"))
    try:
        doc = json.loads(raw, parse_float=_Text, parse_int=_Text)
    except UnicodeDecodeError:
        raise _fail(path, msg("not JSON (binary or non-UTF-8 data)")) from None
    except RecursionError:
        raise _fail(path, msg("malformed JSON (nested too deeply)")) from None
    except ValueError as exc:
        raise _fail(path, msg("malformed or truncated JSON: {error}", error=str(exc))) from None
    header: dict[str, Any] = {}
    if isinstance(doc, list):
        events, wrapped = doc, False
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events, wrapped = doc["traceEvents"], True
        header = {k: v for k, v in doc.items() if k != "traceEvents"}
        header = json.loads(json.dumps(header))  # plain numbers for metadata
    else:
        raise _fail(path, msg("JSON object without a traceEvents list: not a chrome trace"))
    names = FIXED_FIELDS + tuple(f"arg:{k}" for k in arg_keys)
    cols: dict[str, list[Any]] = {n: [] for n in names}
    ts_ns: list[int | None] = []
    dur_ns: list[int | None] = []
    for ev in events:
        if not isinstance(ev, dict):
            raise _fail(path, msg("malformed JSON in the event list: an event is not an object"))
        for key in ("ph", "name", "cat", "pid", "tid", "id", "bp"):
            cols[key].append(_as_text(ev.get(key)))
        args = ev.get("args")
        if isinstance(args, dict) and args:
            k0 = next(iter(args))
            cols["arg0_key"].append(k0)
            cols["arg0_val"].append(_as_text(args[k0]))
        else:
            cols["arg0_key"].append(None)
            cols["arg0_val"].append(None)
        for k in arg_keys:
            cols[f"arg:{k}"].append(_as_text(args.get(k)) if isinstance(args, dict) else None)
        ts = ev.get("ts")
        ts_ns.append(_us_text_to_ns(ts) if isinstance(ts, str) else None)
        dur = ev.get("dur")
        dur_ns.append(_us_text_to_ns(dur) if isinstance(dur, str) else None)
    arrays = [pa.array(cols[n], pa.string()) for n in names]
    arrays += [pa.array(ts_ns, pa.int64()), pa.array(dur_ns, pa.int64())]
    table = pa.table(arrays, names=list(names) + ["ts_ns", "dur_ns"])
    return ScannedTrace(events=table, header=header, wrapped=wrapped, input_bytes=len(raw), native=False)
