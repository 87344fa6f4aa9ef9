"""A table's rows in the order of its first column (a time; nulls first, then rowid, as SQL's ``order by``),
read from its pages by ``sqlite_fetch`` and put in order in bounded memory instead of sorted by SQLite.

The profiler's tables are nearly in time order as written: CANN_API is; PYTORCH_API holds an operator where
it ends, after the ones it encloses (a few rows out of place); a simulated export writes CANN_API as two
sorted runs. So the first column is read alone, its order found in numpy, and the rows then come as they
are (in order), reordered through a window of rows held (locally out of order), or merged from a few sorted
runs each read from where it starts. Anything else is ``Declined``: the caller sorts in SQLite, whose
temporary files bound its memory whatever the order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.formats.sqlite_fetch import (
    INT64,
    ROWID,
    Declined,
    IdMap,
    NativeDb,
    StoredTable,
    table_reading,
)

# Rows a reordering read may hold at once, and the sorted runs it merges (each its own page reader).
REORDER_ROWS = 1 << 20
MERGE_RUNS = 64


def ascending(first: np.ndarray, *keys: np.ndarray) -> bool:
    """Whether the rows are in strictly increasing order of (first, *keys)."""
    if len(first) < 2:
        return True
    before, same = np.zeros(len(first) - 1, bool), np.ones(len(first) - 1, bool)
    for key in (first, *keys):
        before |= same & (key[:-1] < key[1:])
        same &= key[:-1] == key[1:]
    return bool(before.all())


def by_first_column(conn: sqlite3.Connection, db: NativeDb, table: str,
                    columns: Sequence[tuple[str, int, IdMap | None, str]],
                    rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``table`` (``columns``: name in the blocks, kind, id map, the table's column; the first
    the order's) in blocks of ``rows``, by the first column (nulls first) then rowid. ``Declined`` where
    the page reader does not take the table (at once: ``conn`` is used here, not by the blocks, which may
    be read in another thread) or its rows are far from that order."""
    names = [c for _, _, _, c in columns]
    stored = table_reading(conn, table, [names[0], ROWID, *names])
    if stored is None:
        raise Declined(f"{table} is not a plain rowid table")
    return _by_first_column(db, table, stored, columns, rows)


def _by_first_column(db: NativeDb, table: str, stored: StoredTable,
                     columns: Sequence[tuple[str, int, IdMap | None, str]],
                     rows: int) -> Iterator[pa.RecordBatch]:
    name, kind, _, _ = columns[0]
    keys = pa.Table.from_batches(list(db.table_blocks(StoredTable(stored.root, stored.positions[:2]),
                                                      [(name, kind, None), ("rowid", INT64, None)], 1 << 20)),
                                 pa.schema([(name, pa.int64()), ("rowid", pa.int64())]))
    timed = pc.is_valid(keys[name]).to_numpy(zero_copy_only=False)  # nulls sort first, as in SQL
    times = pc.fill_null(keys[name], 0).to_numpy()
    data = StoredTable(stored.root, stored.positions[2:])
    blocks = [(n, k, m) for n, k, m, _ in columns]
    if ascending(timed, times, np.arange(len(times))):
        yield from db.table_blocks(data, blocks, rows)
        return
    order = np.lexsort((times, timed))  # stable: equal times stay in rowid order
    back = np.flatnonzero((timed[1:] < timed[:-1]) | ((timed[1:] == timed[:-1]) & (times[1:] < times[:-1])))
    runs = np.concatenate([[0], back + 1])  # the first row of each run of rows in order
    starts = keys["rowid"].to_numpy()[runs]
    del timed, times, keys, back
    low = np.minimum.accumulate(order[::-1])[::-1]  # the first row still to write from a row on
    firsts = np.arange(0, len(order), rows)
    lasts = np.minimum(firsts + rows, len(order)) - 1
    if int((np.maximum.accumulate(order)[lasts] - low[firsts]).max()) < REORDER_ROWS:  # rows held for a block
        yield from reordered(db.table_blocks(data, blocks, rows), order, low, rows)
    elif len(runs) <= MERGE_RUNS:
        del low
        yield from merged([db.table_blocks(data, blocks, rows, int(s)) for s in starts], order, runs, rows)
    else:
        raise Declined(f"{table} is far from the order of its {name}")


def reordered(blocks: Iterator[pa.RecordBatch], order: np.ndarray, low: np.ndarray,
              rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``blocks`` with row ``order[i]`` as the i-th, ``rows`` at a time, holding the rows read but
    not yet written (``low[i]``: the first row still needed from the i-th on)."""
    window: list[pa.RecordBatch] = []
    first = read = 0  # the row of window[0]'s first row; the rows read
    for at in range(0, len(order), rows):
        want = order[at:at + rows]
        top = int(want.max()) + 1
        while read < top:
            block = next(blocks)
            window.append(block)
            read += block.num_rows
        yield pa.Table.from_batches(window).take(want - first).combine_chunks().to_batches()[0]
        keep = int(low[at + len(want)]) if at + len(want) < len(order) else read
        while window and first + window[0].num_rows <= keep:
            first += window.pop(0).num_rows


class Run:
    """The rows of one sorted run, handed out in order: ``take(n)`` the next ``n``."""

    def __init__(self, blocks: Iterator[pa.RecordBatch]) -> None:
        self.blocks = blocks
        self.held: list[pa.RecordBatch] = []  # read, not yet handed out (from ``offset`` on)
        self.offset = 0

    def take(self, n: int) -> pa.Table:
        have = sum(b.num_rows for b in self.held) - self.offset
        while have < n:
            block = next(self.blocks)
            self.held.append(block)
            have += block.num_rows
        taken = pa.Table.from_batches(self.held).slice(self.offset, n)
        self.offset += n
        while self.held and self.offset >= self.held[0].num_rows:
            self.offset -= self.held.pop(0).num_rows
        return taken


def merged(runs: list[Iterator[pa.RecordBatch]], order: np.ndarray, firsts: np.ndarray,
           rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of sorted runs (each read from its first row, ``firsts``) with row ``order[i]`` as the i-th,
    ``rows`` at a time: each run hands the rows it gives to the block, in its order."""
    readers = [Run(blocks) for blocks in runs]
    for at in range(0, len(order), rows):
        run = np.searchsorted(firsts, order[at:at + rows], "right") - 1
        counts = np.bincount(run, minlength=len(readers))
        pieces = pa.concat_tables([readers[r].take(int(c)) for r, c in enumerate(counts) if c])
        grouped = np.argsort(run, kind="stable")  # the block's rows run by run, as ``pieces`` holds them
        where = np.empty(len(run), np.int64)
        where[grouped] = np.arange(len(run), dtype=np.int64)
        yield pieces.take(where).combine_chunks().to_batches()[0]
