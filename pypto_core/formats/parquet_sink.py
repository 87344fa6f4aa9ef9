"""Stream record batches into one Parquet file, encoding in a second thread while the next ones are read.

Parsing and Parquet encoding both run in C++ (or C) without the GIL, so a writer thread overlaps them on a
second core. Memory stays bounded: the queue holds at most two row groups.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.errors import InputError
from pypto_core.i18n import msg
from pypto_core.limits import CUT_MARK, current_limits
from pypto_core.profile import output_compression

# 128 Ki rows per row group: loading a 100 MB kernel CSV's Parquet took 0.94 s CPU with the reader's 12 k-row
# batches as row groups and 0.3-0.4 s with 128 k (measured on the 2-core dev machine; readers_csv bench).
ROW_GROUP_ROWS = 128 * 1024
_QUEUE_DEPTH = 2
_DONE = object()


class ParquetStream:
    """Batches pushed with :meth:`add` become row groups of about ``row_group_rows`` in ``dest``.

    ``dictionary_columns``: dictionary-encode only these (repeated names, types, ids), or a function of
    the file's schema naming them; trying it on unique times and counters cost about a third of the write
    time. ``statistics_columns``: min/max only
    for these (e.g. ``start_ns`` for time-window reads). None means Parquet's defaults (all columns).
    The file's schema is ``schema`` or the first batch's. :meth:`close` returns the row count; a failure
    in the writer thread is raised by the next :meth:`add` or by :meth:`close`, and a partly written file
    is removed (also by :meth:`abort`).
    """

    def __init__(
        self,
        dest: str | os.PathLike[str],
        *,
        schema: pa.Schema | None = None,
        dictionary_columns: Sequence[str] | Callable[[pa.Schema], Sequence[str]] | None = None,
        statistics_columns: Sequence[str] | None = None,
        row_group_rows: int | None = None,
        compression: str | None = None,
    ) -> None:
        self.dest = dest
        self.schema = schema
        self.rows = 0
        self._dictionary_columns = dictionary_columns
        self._options: dict[str, Any] = dict(
            compression=compression or output_compression(),
            write_statistics=list(statistics_columns) if statistics_columns is not None else True,
        )
        # ROW_GROUP_ROWS read at call time (not bound as a default), so that a test can make it small
        self._row_group_rows = ROW_GROUP_ROWS if row_group_rows is None else row_group_rows
        self._todo: queue.Queue[object] = queue.Queue(maxsize=_QUEUE_DEPTH)
        self._failure: list[BaseException] = []
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._thread = threading.Thread(target=self._consume, name="parquet-writer", daemon=True)
        self._thread.start()
        self._closed = False

    def _writer(self, schema: pa.Schema) -> pq.ParquetWriter:
        chosen = self._dictionary_columns
        use_dictionary = True if chosen is None else list(chosen(schema) if callable(chosen) else chosen)
        return pq.ParquetWriter(self.dest, schema, use_dictionary=use_dictionary, **self._options)

    def _consume(self) -> None:
        writer = self._writer(self.schema) if self.schema is not None else None
        try:
            while True:
                item = self._todo.get()
                if item is _DONE:
                    break
                assert isinstance(item, pa.Table)
                if writer is None:
                    writer = self._writer(item.schema)
                writer.write_table(item, row_group_size=max(item.num_rows, 1))
        except BaseException as exc:  # handed to the producer, which raises it
            self._failure.append(exc)
            while self._todo.get() is not _DONE:  # drain so that the producer never blocks on a full queue
                pass
        finally:
            if writer is not None:
                writer.close()

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._failure:
            self.abort()
            raise self._failure[0]
        limits = current_limits()
        if self.rows + batch.num_rows > limits.max_table_rows:
            self.abort()
            # No path: write_profiles names the input it was reading.
            raise InputError("", msg("more than {n} rows in one table (the deployment's limit)",
                                     n=limits.max_table_rows))
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            b = cap_text(b, limits.max_text_chars)
            self._pending.append(b)
            self._pending_rows += b.num_rows
            self.rows += b.num_rows
        if self._pending_rows >= self._row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._todo.put(pa.Table.from_batches(self._pending))
            self._pending, self._pending_rows = [], 0

    def close(self) -> int:
        """Write what is pending and finish the file; the rows written. Nothing is written for a stream
        without batches and without a schema."""
        if self._closed:
            return self.rows
        self._closed = True
        if not self._failure:
            self._flush()
        self._todo.put(_DONE)
        self._thread.join()
        if self._failure:
            _remove(self.dest)
            raise self._failure[0]
        return self.rows

    def abort(self) -> None:
        """Stop and remove the partly written file."""
        if not self._closed:
            self._closed = True
            self._pending = []
            self._todo.put(_DONE)
            self._thread.join()
        _remove(self.dest)


def _cap_strings(arr: pa.Array, max_chars: int) -> pa.Array:
    """Text longer than ``max_chars`` cut there and marked; shorter text untouched (and not copied)."""
    if pa.types.is_dictionary(arr.type):
        values = _cap_strings(arr.dictionary, max_chars)
        return arr if values is arr.dictionary else pa.DictionaryArray.from_arrays(arr.indices, values)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) or not len(arr):
        return arr
    longest = pc.max(pc.binary_length(arr)).as_py()  # bytes >= characters: a cheap first look at the offsets
    if longest is None or longest <= max_chars:
        return arr
    long = pc.greater(pc.utf8_length(arr), max_chars)
    cut = pc.binary_join_element_wise(pc.utf8_slice_codeunits(arr, 0, max_chars),
                                      pa.scalar(CUT_MARK, arr.type), pa.scalar("", arr.type))
    return pc.if_else(long, cut, arr)


def cap_text(batch: pa.RecordBatch, max_chars: int) -> pa.RecordBatch:
    """``batch`` with every text cell cut to ``max_chars`` characters (pypto_core.limits): a hostile 200 MB
    operator name reaches no page, answer or rule whole."""
    columns = [_cap_strings(col, max_chars) for col in batch.columns]
    if all(new is old for new, old in zip(columns, batch.columns)):
        return batch
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(
        [f.with_type(c.type) for f, c in zip(batch.schema, columns)], metadata=batch.schema.metadata))


def write_parquet_stream(batches: Iterable[pa.RecordBatch], dest: str | os.PathLike[str],
                         **options: Any) -> int:
    """Write ``batches`` to ``dest`` (``options`` as for :class:`ParquetStream`); returns the row count.

    Without any batch and without a ``schema`` nothing is written and 0 is returned. An exception in either
    thread stops both and is raised here; a partly written file is removed.
    """
    stream = ParquetStream(dest, **options)
    try:
        for batch in batches:
            stream.add(batch)
    except BaseException:
        stream.abort()
        raise
    return stream.close()


def rewrite_parquet(path: str | os.PathLike[str], transform: Callable[[pa.Table], pa.Table],
                    **options: Any) -> None:
    """Apply ``transform`` to ``path`` one row group at a time (bounded memory), replacing the file;
    ``options`` as for :class:`ParquetStream`."""
    src = pq.ParquetFile(path)
    tmp = f"{path}.rewrite"
    try:
        schema = None if src.metadata.num_row_groups else src.schema_arrow
        stream = ParquetStream(tmp, schema=schema, **options)
        try:
            for i in range(src.metadata.num_row_groups):
                stream.add(transform(src.read_row_group(i)))
        except BaseException:
            stream.abort()
            raise
        stream.close()
    finally:
        src.close()
    os.replace(tmp, path)


def pieces(path: str | os.PathLike[str], columns: Sequence[str] | None = None,
           read_dictionary: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """A Parquet file's ``columns`` in order, at most ``ROW_GROUP_ROWS`` rows at a time, whatever its row
    groups' size (what bounds the memory of a pass over it)."""
    source = pq.ParquetFile(path, read_dictionary=read_dictionary)
    try:
        wanted = list(columns) if columns else None
        for batch in source.iter_batches(batch_size=ROW_GROUP_ROWS, columns=wanted):
            yield pa.Table.from_batches([batch])
    finally:
        source.close()


def concat_parquet(sources: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str], *,
                   transform: Callable[[int, pa.Table], pa.Table] | None = None, **options: Any) -> int:
    """The rows of ``sources`` one after another in ``dest``, a piece at a time, and the sources removed;
    the rows written. Schemas are unified as ``pa.concat_tables(promote_options="default")`` does: a column
    missing from a source is null there. ``transform(i, piece)``: applied to each piece of ``sources[i]``.
    ``options`` as for :class:`ParquetStream`."""
    if len(sources) == 1 and transform is None:
        os.replace(sources[0], dest)
        rows: int = pq.ParquetFile(dest).metadata.num_rows
        return rows
    schema = pa.unify_schemas([pq.read_schema(s) for s in sources], promote_options="default")
    stream = ParquetStream(dest, schema=schema, **options)
    try:
        for i, src in enumerate(sources):
            for chunk in pieces(src):
                chunk = transform(i, chunk) if transform is not None else chunk
                stream.add(pa.table([chunk[f.name].cast(f.type) if f.name in chunk.column_names
                                     else pa.nulls(chunk.num_rows, f.type) for f in schema], schema=schema))
    except BaseException:
        stream.abort()
        raise
    rows = stream.close()
    for src in sources:
        _remove(src)
    return rows


def _remove(dest: str | os.PathLike[str]) -> None:
    try:
        os.unlink(dest)
    except OSError:
        pass
