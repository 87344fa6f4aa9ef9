"""Level of detail for timeline rows: nesting depth, and merging of sub-pixel events into honest runs.

At a time-per-pixel ``P``, an event at least ``P`` long stays as it is; consecutive narrower events whose
gaps are under ``P`` merge into one run that keeps the member count, the busy time and the longest member.
Gaps of a pixel or more survive at every level, so idle time stays visible (the approach of Perfetto's
slice mipmaps). Everything is vectorised over all rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Deeper nesting than this is drawn on the last row (a uint8 row number). Python call stacks recorded with
# with_stack go deep: the CNN 8-NPU level1 sample reaches 38 rows on its main thread.
MAX_DEPTH = 256
PARENT_SLICE = 500_000  # children whose parent is checked at once (their temporaries stay near 30 MB)
PLACE_PIECE = 65_536  # events placed one by one per piece of Python ints


def nesting_depth(lane: np.ndarray | None, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row (depth) of each event in its lane; events must be sorted by (lane, start, longest first).

    The rule (``place_rows``): an event goes on the first row below every earlier event that contains it,
    skipping rows still busy at its start. Properly nested slices get their stack depth. A slice that starts
    inside another but ends after it (real traces have them: an ``aten::to`` ending just after
    ``ProfilerStep#11`` begins) is not that slice's child: it keeps its times and goes on the next free row,
    and its own children go below it. So a parent is always above its children, no two slices of a row
    overlap, and a step bar is never covered. (Perfetto's JSON importer instead drops or truncates mis-nested
    slices; we keep every slice as measured.) A zero-length event occupies its row for one ns.

    Vectorised: the open-event count is the answer for properly nested runs; it is checked, and only the runs
    of overlapping events where it fails (between two instants when nothing is open) are placed one by one.
    ``lane`` None: all events are of one lane.
    """
    n = len(start)
    if n == 0:
        return np.empty(0, np.uint8)
    # Memory: besides the inputs, about five arrays of 8 bytes an event at once (a lane of the 5 GB simulated
    # folder holds 4.3 M host calls)
    key_end = start + 1
    np.maximum(key_end, end, out=key_end)
    if lane is None:
        key_start = start
    else:
        span = int(key_end.max()) + 2
        offset = lane.astype(np.int64) * span  # lanes never overlap in keyed time
        key_start = offset + start
        key_end += offset
        del offset
    ends = np.sort(key_end)
    depth = np.searchsorted(ends, key_start, side="right")  # the events closed by each start
    del ends
    np.negative(depth, out=depth)
    depth += np.arange(n, dtype=np.int64)  # open at each start: earlier events less the closed ones
    bad = _misplaced(key_start, key_end, depth)
    if bad.any():
        # the runs of overlapping events (between two instants when nothing is open) that hold a misplaced one
        first_of_run = np.empty(n, bool)
        first_of_run[0] = True
        np.greater_equal(key_start[1:], np.maximum.accumulate(key_end)[:-1], out=first_of_run[1:])
        starts = np.flatnonzero(first_of_run)
        del first_of_run
        bounds = np.r_[starts, n]
        runs = np.unique(np.searchsorted(starts, np.flatnonzero(bad), side="right") - 1)
        del starts, bad
        for r in runs.tolist():
            a, b = int(bounds[r]), int(bounds[r + 1])
            depth[a:b] = place_rows(key_start[a:b], key_end[a:b])
    clipped: np.ndarray = np.minimum(depth, MAX_DEPTH - 1).astype(np.uint8)
    return clipped


def _misplaced(start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Events whose row breaks the rule: the row's previous event still open at its start, or the nearest
    earlier event one row up (its parent) not containing it."""
    n = len(start)
    bad = np.zeros(n, bool)
    if n < 2 or int(depth.max()) == 0:  # nothing open at any start: no overlaps at all
        return bad
    by_row = np.argsort(depth, kind="stable")  # by (row, index)
    prev, following = by_row[:-1], by_row[1:]
    overlap = depth[following] == depth[prev]
    overlap &= end[prev] > start[following]
    bad[following[overlap]] = True
    del overlap
    keys = depth[by_row]
    keys *= n
    keys += by_row  # sorted
    child = np.flatnonzero(depth > 0)
    for at in range(0, len(child), PARENT_SLICE):  # each child's parent, a slice of children at a time
        c = child[at:at + PARENT_SLICE]
        wanted = depth[c] - 1
        wanted *= n
        wanted += c
        pos = np.searchsorted(keys, wanted) - 1
        parent = by_row[np.maximum(pos, 0)]
        found = (pos >= 0) & (depth[parent] == depth[c] - 1) & (parent < c)
        contains = found & (start[parent] <= start[c]) & (end[c] <= end[parent])
        bad[c[~contains]] = True
    return bad


def place_rows(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The nesting rule one event at a time (events of one lane sorted by start, longest first; ``end`` >
    ``start``): the first row below the deepest earlier event that contains it, and free at its start."""
    row_end: list[int] = []  # end of the last event put on each row
    out = np.empty(len(start), np.int64)
    # the times as Python ints a piece at a time: a run can hold a whole lane (a host thread's 4 M calls
    # under one long slice), and two lists of it took 290 MB
    for at in range(0, len(start), PLACE_PIECE):
        piece = zip(start[at:at + PLACE_PIECE].tolist(), end[at:at + PLACE_PIECE].tolist())
        for i, (s, e) in enumerate(piece, at):
            d = 0
            for r in range(len(row_end) - 1, -1, -1):
                if row_end[r] > s and row_end[r] >= e:  # row r's last event is open and contains this one
                    d = r + 1
                    break
            while d < len(row_end) and row_end[d] > s:
                d += 1
            if d == len(row_end):
                row_end.append(e)
            else:
                row_end[d] = e
            out[i] = d
    return out


@dataclass
class Bars:
    """Bars of many rows, sorted by (row, start). ``longest``
    is an event index; ``count`` 1 is a lone event."""

    row: np.ndarray  # int32
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    count: np.ndarray  # int64
    busy: np.ndarray  # int64, summed member time, at most end - start
    longest_dur: np.ndarray  # int64
    longest: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def from_events(cls, row: np.ndarray, start: np.ndarray, end: np.ndarray, index: np.ndarray) -> Bars:
        dur = end - start
        return cls(row.astype(np.int32, copy=False), start, end, np.ones(len(start), np.int64), dur, dur,
                   index.astype(np.int64, copy=False))

    def take(self, keep: np.ndarray) -> Bars:
        return Bars(self.row[keep], self.start[keep], self.end[keep], self.count[keep], self.busy[keep],
                    self.longest_dur[keep], self.longest[keep])


def running_end(row: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per-row running maximum of ``end`` (monotone within a row, so it can be binary searched)."""
    if len(end) == 0:
        return end.copy()
    span = int(end.max()) + 1
    # worked in place: two arrays as long as the events, not four (a lane of 15.7 M kernels: 240 MB less)
    offset = row.astype(np.int64)
    offset *= span
    out: np.ndarray = offset + end
    np.maximum.accumulate(out, out=out)
    out -= offset
    return out


def merge(bars: Bars, pixel_ns: int) -> Bars:
    """Merge runs of bars narrower than ``pixel_ns`` whose gaps are narrower than ``pixel_ns``."""
    n = len(bars)
    if n == 0:
        return bars
    # Only a lone event can be wide: a run's members are all narrower than any coarser pixel too, so runs
    # keep growing across levels and merging level by level equals merging the raw events at once.
    wide = (bars.count == 1) & ((bars.end - bars.start) >= pixel_ns)
    new = np.empty(n, bool)
    new[0] = True
    prev_end = running_end(bars.row, bars.end)[:-1]
    new[1:] = ((bars.row[1:] != bars.row[:-1]) | wide[1:] | wide[:-1]
               | ((bars.start[1:] - prev_end) >= pixel_ns))
    del prev_end, wide  # not held beside the merged bars (a lane of 15.7 M kernels: 250 MB)
    first = np.flatnonzero(new)
    if len(first) == n:
        return bars
    group: np.ndarray = np.cumsum(new, dtype=np.int32 if n < 2**31 else np.int64)
    np.subtract(group, 1, out=group)
    del new
    start = bars.start[first]
    end = np.maximum.reduceat(bars.end, first)
    longest_dur = np.maximum.reduceat(bars.longest_dur, first)
    candidates = np.flatnonzero(bars.longest_dur == longest_dur[group])
    cand_group = group[candidates]
    keep = np.ones(len(candidates), bool)
    keep[1:] = cand_group[1:] != cand_group[:-1]  # the first longest member of each run
    return Bars(
        row=bars.row[first],
        start=start,
        end=end,
        count=np.add.reduceat(bars.count, first),
        busy=np.minimum(np.add.reduceat(bars.busy, first), end - start),
        longest_dur=longest_dur,
        longest=bars.longest[candidates[keep]],
    )
