"""Where a reader's canonical batches go: kept in memory (``read_*``, which returns a ``Profile``) or
streamed into the Parquet files of a profile folder (``write_*``), so that memory follows the batches in
flight, not the size of the file.

Both kinds take conformed batches of one table in file order and finish with an optional transform that
needs the whole file first (Kineto's ``baseTimeNanoseconds``, written after the events, shifts every time).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from pypto_core.formats.parquet_sink import ParquetStream, rewrite_parquet
from pypto_core.profile import STREAM_ENCODING, conform, empty_table

Transform = Callable[[pa.Table], pa.Table]


class TableSink:
    """One canonical table's batches: in memory when ``folder`` is None, else ``folder/<name>.parquet``."""

    def __init__(self, name: str, folder: Path | None) -> None:
        self.name = name
        self.rows = 0
        self._batches: list[pa.Table] = []
        self._empty = empty_table(name).schema  # the columns of a table without rows
        self._path = folder / f"{name}.parquet" if folder is not None else None
        self._stream = ParquetStream(self._path, **STREAM_ENCODING) if self._path is not None else None

    def add(self, batch: pa.Table) -> None:
        if not batch.num_rows:  # no rows, but the reader's columns (extras included) if the table stays empty
            self._empty = batch.schema
            return
        self.rows += batch.num_rows
        if self._stream is not None:
            self._stream.add(batch)
        else:
            self._batches.append(batch)

    def finish(self, transform: Transform | None = None) -> pa.Table | None:
        """The whole table (in memory), or None once the Parquet file is complete."""
        if self._stream is None:
            table = pa.concat_tables(self._batches) if self._batches else self._empty.empty_table()
            self._batches = []
            return conform(self.name, transform(table) if transform else table)
        assert self._path is not None  # a stream writes to its file
        if not self._stream.close():  # no rows: an empty table of its columns, as Profile.save writes it
            ParquetStream(self._path, schema=self._empty, **STREAM_ENCODING).close()
        elif transform is not None:
            rewrite_parquet(self._path, transform, **STREAM_ENCODING)
        return None

    def abort(self) -> None:
        if self._stream is not None:
            self._stream.abort()
        self._batches = []
