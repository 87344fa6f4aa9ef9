"""Flow binding out of core: what the chrome-trace readers keep to build ``flows`` (per slice its lane and
times, per flow end its id and ts, per link its key) goes to spill files as batches are scanned, and is
bound and paired afterwards in buckets of at most about ``BUCKET_ROWS`` rows, so that memory stays flat
whatever the size of the file.

* Binding a flow end to the innermost slice that contains its ts (:func:`bind_on_lanes`) runs per time
  bucket: a bucket holds the slices that start in it, those that start earlier and reach into it, and per
  lane the last ``_WALK_BACK`` slices before it in lane order (so that the walk back of
  :func:`bind_on_lanes` sees exactly the slices it would see over the whole file).
* Pairing ends and links by id runs per hash partition of the id.
* The flows come out bucket by bucket in kernel-row order.

Without a folder (the in-memory readers) the same code runs over one bucket held in memory.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

# rows (slices, flow ends, links) one bucket holds, about: binding a bucket takes ~50 bytes a row (its
# lexsort and searches) on top of the records; with 1 Mi rows the binding of a 5 GB trace_view (6.4 M
# slices, 1.9 M flow ends) stayed under the peak of its scan (377 MB), where 2 Mi rows added 105 MB to it
BUCKET_ROWS = 1024 * 1024
CHUNK_ROWS = 256 * 1024  # rows read back from a spill file at a time when partitioning it

_WALK_BACK = 16  # how many earlier siblings to step over looking for the enclosing slice (nesting depth)
NO_START = np.iinfo(np.int64).max  # a slice without ts never contains a flow end
NO_TS = np.iinfo(np.int64).min  # a flow end without ts is never inside a slice

# per slice, what a flow end binds on (packed: 20 bytes); with its row in the table (28 bytes)
SPAN = np.dtype([("lane", "<i4"), ("start", "<i8"), ("dur", "<i8")])
SPAN_ROW = np.dtype([("lane", "<i4"), ("start", "<i8"), ("dur", "<i8"), ("row", "<i8")])


# ---------------------------------------------------------------------------------------------- binding


def lane_order(lane: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """The slices sorted by (lane, start, longest first), equal ones in row order: the order the flow ends
    are searched in."""
    return np.lexsort((-dur, start, lane))


def bind_on_lanes(end_lane: np.ndarray, end_ts: np.ndarray, lane: np.ndarray, start: np.ndarray,
                  dur: np.ndarray) -> np.ndarray:
    """Per flow end, the row of the innermost slice on its lane that contains its ts, or -1.

    A slice starting exactly at ts wins (that is how torch_npu and Kineto write flows); among nested slices
    starting together, the shortest. Lanes are integer ids (an end on lane -1 is never bound); nulls are
    already filled (ts: int64 min, start: int64 max, dur: 0)."""
    if not (len(end_lane) and len(lane)):
        return np.full(len(end_lane), -1, dtype=np.int64)
    return _bind_ordered(lane_order(lane, start, dur), end_lane, end_ts, lane, start, dur)


def _bind_ordered(order: np.ndarray, e_id: np.ndarray, ts: np.ndarray, s_id: np.ndarray, start: np.ndarray,
                  dur: np.ndarray) -> np.ndarray:
    result = np.full(len(e_id), -1, dtype=np.int64)
    if not (len(e_id) and len(s_id)):
        return result
    # per lane the last start <= ts is the innermost candidate; walk back over ended siblings
    s_id_o, start_o = s_id[order], start[order]
    end_o = start_o + dur[order]
    lane_lo = np.searchsorted(s_id_o, e_id, side="left")
    lane_hi = np.searchsorted(s_id_o, e_id, side="right")
    # position of ts within its lane: search lane by lane (few lanes, each vectorized)
    pos = np.full(len(e_id), -1, dtype=np.int64)
    for one in np.unique(e_id[e_id >= 0]):
        sel = np.flatnonzero(e_id == one)
        lo, hi = lane_lo[sel[0]], lane_hi[sel[0]]
        pos[sel] = lo + np.searchsorted(start_o[lo:hi], ts[sel], side="right") - 1
    cand = pos.copy()
    for _ in range(_WALK_BACK):
        valid = (cand >= lane_lo) & (cand < lane_hi) & (e_id >= 0)
        inside = np.zeros_like(valid)
        inside[valid] = (start_o[cand[valid]] <= ts[valid]) & (ts[valid] <= end_o[cand[valid]])
        done = valid & inside & (result < 0)
        result[done] = order[cand[done]]
        cand = np.where(valid & ~inside & (result < 0), cand - 1, -1)
        if not (cand >= 0).any():
            break
    return result


# ---------------------------------------------------------------------------------------------- spills


class Spill:
    """Rows of one structured dtype, appended batch by batch: in memory, or in a raw file (``path``)."""

    def __init__(self, dtype: np.dtype, path: Path | None) -> None:
        self.dtype = dtype
        self.rows = 0
        self._path = path
        self._parts: list[np.ndarray] = []
        self._fh: BinaryIO | None = None

    def __len__(self) -> int:
        return self.rows

    def add(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        self.rows += len(rows)
        if self._path is None:
            self._parts.append(rows)
            return
        if self._fh is None:
            self._fh = open(self._path, "ab")  # noqa: SIM115 - kept open while the scan appends
        rows.tofile(self._fh)

    def close(self) -> None:
        """Done appending (the file's handle is closed; reads flush it first anyway)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def read(self, offset: int = 0, count: int | None = None, *, remove: bool = False) -> np.ndarray:
        """Rows ``offset`` .. ``offset + count`` (all the rest by default); ``remove``: the spill is done
        with once read."""
        count = self.rows - offset if count is None else min(count, self.rows - offset)
        if count <= 0:
            rows = np.empty(0, self.dtype)
        elif self._path is None:
            if len(self._parts) > 1:
                self._parts = [np.concatenate(self._parts)]
            rows = self._parts[0][offset:offset + count]
        else:
            self.close()
            rows = np.fromfile(self._path, self.dtype, count=count, offset=offset * self.dtype.itemsize)
        if remove:
            self.remove()
        return rows

    def chunks(self, size: int | None = None) -> Iterator[np.ndarray]:
        step = size or CHUNK_ROWS
        for offset in range(0, self.rows, step):
            yield self.read(offset, step)

    def remove(self) -> None:
        self.close()
        self._parts = []
        if self._path is not None:
            self._path.unlink(missing_ok=True)


class SpillDir:
    """Where a conversion's spills go: a hidden temporary folder inside the output folder (removed by
    :meth:`remove`, at the end and on failure), or memory when there is no folder."""

    def __init__(self, folder: Path | None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=".spill-", dir=folder)) if folder is not None else None
        self._n = 0
        self._made: list[Spill] = []  # on disk: closed by remove() (a failed read leaves them open)
        self._lock = threading.Lock()  # spills are made from several threads (each then used by one)

    @property
    def on_disk(self) -> bool:
        return self.path is not None

    def spill(self, dtype: np.dtype) -> Spill:
        if self.path is None:
            return Spill(dtype, None)
        with self._lock:
            self._n += 1
            spill = Spill(dtype, self.path / f"{self._n}.bin")
            self._made.append(spill)
        return spill

    def parts(self, dtype: np.dtype, n: int) -> list[Spill]:
        """``n`` spills for the partitions of ``buckets()`` rows: one is held in memory (it is at most about
        ``BUCKET_ROWS`` rows, or the reader is in memory anyway)."""
        return [Spill(dtype, None)] if n == 1 else [self.spill(dtype) for _ in range(n)]

    def buckets(self, rows: int) -> int:
        """How many buckets ``rows`` rows take: one in memory, else about ``BUCKET_ROWS`` rows each."""
        return 1 if self.path is None else max(1, -(-rows // BUCKET_ROWS))

    def remove(self) -> None:
        for spill in self._made:
            spill.close()
        self._made = []
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


def split_to(parts: list[Spill], rows: np.ndarray, part: np.ndarray) -> None:
    """Appends each row to ``parts[part[row]]``, keeping their order within a part."""
    if len(parts) == 1:
        parts[0].add(rows)
        return
    if len(parts) <= 16:  # a mask per part: cheaper than sorting by part
        for k, spill in enumerate(parts):
            spill.add(rows[part == k])
        return
    order = np.argsort(part, kind="stable")
    edges = np.searchsorted(part[order], np.arange(len(parts) + 1))
    for k, spill in enumerate(parts):
        if edges[k + 1] > edges[k]:
            spill.add(rows[order[edges[k]:edges[k + 1]]])


def hash_part(parts: int, *keys: np.ndarray) -> np.ndarray:
    """A partition in ``range(parts)`` per row of the integer ``keys`` (equal keys, equal partitions)."""
    if parts == 1:
        return np.zeros(len(keys[0]), np.int64)
    h = np.zeros(len(keys[0]), np.uint64)
    for key in keys:  # multiply-xorshift mixing: ids that are ns times or counters spread evenly
        h = (h ^ key.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(31)
    return (h % np.uint64(parts)).astype(np.int64)


class RowOrder:
    """The final row of each spilled row of a table whose rows were streamed first (``n`` of them) and whose
    late rows, spilled after them, were each put before streamed row ``at[j]``."""

    def __init__(self, n: int, at: np.ndarray) -> None:
        self.n, self.at = n, at

    def final(self, idx: np.ndarray) -> np.ndarray:
        if not len(self.at):
            return idx
        late = idx >= self.n
        out = idx + np.searchsorted(self.at, idx, side="right")
        j = idx[late] - self.n
        out[late] = self.at[j] + j
        return out


class TimeSample:
    """Every ``step``-th slice start, the step doubling to keep at most ``2 * cap`` values: the bucket
    boundaries (about equal numbers of slices each) without keeping every start."""

    def __init__(self, cap: int = 1 << 16) -> None:
        self._cap, self._step, self._seen = cap, 1, 0
        self._kept: list[np.ndarray] = []
        self._n = 0

    def add(self, ts: np.ndarray) -> None:
        kept = ts[(-self._seen) % self._step::self._step]
        self._seen += len(ts)
        self._kept.append(kept)
        self._n += len(kept)
        if self._n > 2 * self._cap:
            self._kept = [np.concatenate(self._kept)[::2]]
            self._n, self._step = len(self._kept[0]), self._step * 2

    def bounds(self, buckets: int) -> np.ndarray:
        """``buckets - 1`` (or fewer) increasing boundaries: bucket k holds times in [b[k-1], b[k])."""
        if buckets <= 1 or not self._n:
            return np.empty(0, np.int64)
        sample = np.sort(np.concatenate(self._kept))
        sample = sample[sample != NO_START]
        if not len(sample):
            return np.empty(0, np.int64)
        return np.unique(sample[(len(sample) * np.arange(1, buckets)) // buckets])


# ---------------------------------------------------------------------------------------------- spans


class BucketedSpans:
    """One slice table's spans split into time buckets, bound to flow ends bucket by bucket, in order.

    Bucket k holds the slices starting in it, the ones starting before it that reach into it (copies),
    and, carried from bucket k-1, per lane the last ``_WALK_BACK`` slices before it in lane order: the
    candidates :func:`bind_on_lanes` would walk back over in the whole table."""

    def __init__(self, spans: Spill, rows: RowOrder, bounds: np.ndarray, spills: SpillDir) -> None:
        n = len(bounds) + 1
        self._whole = (spans, rows) if n == 1 else None  # one bucket: the spans as they are
        self._starting = spills.parts(SPAN_ROW, n) if n > 1 else []
        self._crossing = spills.parts(SPAN_ROW, n) if n > 1 else []
        self._tail = np.empty(0, SPAN_ROW)
        offset = 0
        for chunk in spans.chunks() if n > 1 else ():
            rec = np.empty(len(chunk), SPAN_ROW)
            for f in ("lane", "start", "dur"):
                rec[f] = chunk[f]
            rec["row"] = rows.final(np.arange(offset, offset + len(chunk), dtype=np.int64))
            offset += len(chunk)
            rec = rec[rec["start"] != NO_START]  # never contains an end: no bucket needs it
            first = np.searchsorted(bounds, rec["start"], side="right")
            last = np.searchsorted(bounds, rec["start"] + rec["dur"], side="right")
            split_to(self._starting, rec, first)
            cross = np.flatnonzero(last > first)
            for k in range(1, n):  # few slices cross a boundary (long ones): a mask per bucket is cheap
                sel = cross[(first[cross] < k) & (last[cross] >= k)]
                self._crossing[k].add(rec[sel])
        if n > 1:
            spans.remove()

    def bind(self, k: int, end_lane: np.ndarray, end_ts: np.ndarray) -> np.ndarray:
        """Per end of bucket k, the final row of the slice it binds to, or -1 (call for k = 0, 1, ...)."""
        if self._whole is not None:
            return self._bind_whole(end_lane, end_ts)
        starting = _by_row(self._starting[k].read(remove=True))
        if self._crossing:
            crossing = self._crossing[k].read(remove=True)
            crossing = crossing[~np.isin(crossing["row"], self._tail["row"])]
            # slices of the tail and crossing ones start before the bucket, its own in it: no ties between
            spans = np.concatenate([_by_row(np.concatenate([self._tail, crossing])), starting])
        else:
            spans = starting
        lane, start, dur = spans["lane"], spans["start"], spans["dur"]
        order = lane_order(lane, start, dur)
        bound = _bind_ordered(order, end_lane, end_ts, lane, start, dur)
        if self._crossing and k + 1 < len(self._starting):
            lane_o = lane[order]
            ends = np.append(np.flatnonzero(lane_o[1:] != lane_o[:-1]) + 1, len(lane_o))
            lane_end = np.repeat(ends, np.diff(ends, prepend=0))  # per position, where its lane's run ends
            keep = order[lane_end - np.arange(len(order)) <= _WALK_BACK]
            self._tail = _by_row(spans[keep])
        rows = spans["row"]
        return np.where(bound >= 0, rows[np.maximum(bound, 0)] if len(rows) else -1, -1)

    def _bind_whole(self, end_lane: np.ndarray, end_ts: np.ndarray) -> np.ndarray:
        assert self._whole is not None
        spans, rows = self._whole
        rec = spans.read()
        lane, start, dur = rec["lane"], rec["start"], rec["dur"]
        if not len(rows.at):
            return bind_on_lanes(end_lane, end_ts, lane, start, dur)
        final = rows.final(np.arange(len(rec), dtype=np.int64))
        order = np.argsort(final)  # the spans in their final row order (equal ones bind to the later row)
        bound = bind_on_lanes(end_lane, end_ts, lane[order], start[order], dur[order])
        return np.where(bound >= 0, final[order][np.maximum(bound, 0)], -1)

    def remove(self) -> None:
        for spill in (*self._starting, *self._crossing):
            spill.remove()
        if self._whole is not None:
            self._whole[0].remove()


def _by_row(rec: np.ndarray) -> np.ndarray:
    """Records in row order (equal slices bind to the later row, as over the whole table)."""
    if len(rec) > 1 and (np.diff(rec["row"]) < 0).any():
        return rec[np.argsort(rec["row"], kind="stable")]
    return rec


# ---------------------------------------------------------------------------------------------- links


def first_rows(keys: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """For each key, the index of the first row of ``domain`` with the same key, or -1 (keys: comparable
    numpy values, structured ones included; invalid keys are the caller's to mask)."""
    if not (len(domain) and len(keys)):
        return np.full(len(keys), -1, np.int64)
    order = np.argsort(domain, kind="stable")  # equal keys keep their order: the first row comes first
    ordered = domain[order]
    pos = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
    return np.where(ordered[pos] == keys, order[pos], -1)


LINK = np.dtype([("key", "<i8"), ("ok", "?")])  # per row of a table, the id it links by (ok: has one)
_KEY_ROW = np.dtype([("key", "<i8"), ("row", "<i8")])
MATCH = np.dtype([("row", "<i8"), ("match", "<i8")])


def link_first_rows(keys: Spill, domain: Spill, spills: SpillDir, width: int, ranges: int) -> list[Spill]:
    """Per row of ``keys`` (``LINK`` records) with an id, the first row of ``domain`` with the same id:
    ``MATCH`` records, in ``ranges`` spills of ``width`` key rows each (rows without a match are left out).

    Ids are paired per hash partition; within one, domain rows keep their order, so the first wins."""
    parts = spills.buckets(len(keys) + len(domain))
    by_part = []
    for src in (keys, domain):
        dst = spills.parts(_KEY_ROW, parts)
        offset = 0
        for chunk in src.chunks():
            ok = np.flatnonzero(chunk["ok"])
            rec = np.empty(len(ok), _KEY_ROW)
            rec["key"], rec["row"] = chunk["key"][ok], offset + ok
            offset += len(chunk)
            split_to(dst, rec, hash_part(parts, rec["key"]))
        by_part.append(dst)
    out = spills.parts(MATCH, ranges)
    for k_part, d_part in zip(*by_part):
        k, d = k_part.read(remove=True), d_part.read(remove=True)
        hit = first_rows(np.ascontiguousarray(k["key"]), np.ascontiguousarray(d["key"]))
        sel = np.flatnonzero(hit >= 0)
        rec = np.empty(len(sel), MATCH)
        rec["row"], rec["match"] = k["row"][sel], d["row"][hit[sel]]
        split_to(out, rec, rec["row"] // width)
    return out
