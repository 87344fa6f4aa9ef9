"""Level of detail for timeline rows: nesting depth, and merging of sub-pixel events into honest runs.

At a time-per-pixel ``P``, an event at least ``P`` long stays as it is; consecutive narrower events whose
gaps are under ``P`` merge into one run that keeps the member count, the busy time and the longest member.
Gaps of a pixel or more survive at every level, so idle time stays visible (STYLE.md, "Charts and the
timeline"; the approach of Perfetto's slice mipmaps). Everything is vectorised over all rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Deeper nesting than this is drawn on the last row; real host stacks rarely go past ~20 levels.
MAX_DEPTH = 32


def nesting_depth(lane: np.ndarray | None, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each event in its lane; events must be sorted by (lane, start, longest first).

    The depth is the number of earlier events of the lane still open at its start, which is the stack depth
    for properly nested slices (and a usable row for the odd partially overlapping pair). ``lane`` None:
    all events are of one lane.
    """
    n = len(start)
    if n == 0:
        return np.empty(0, np.uint8)
    if lane is None:
        key_start = start
        key_end = np.sort(np.maximum(end, start + 1))  # a zero-length event closes just after it opens
    else:
        span = int(end.max()) + 2
        offset = lane.astype(np.int64) * span  # keys of one lane never mix with another lane's
        key_start = offset + start
        key_end = np.sort(offset + np.maximum(end, start + 1))
    closed = np.searchsorted(key_end, key_start, side="right")
    depth = np.arange(n, dtype=np.int64) - closed
    return np.minimum(depth, MAX_DEPTH - 1).astype(np.uint8)


@dataclass
class Bars:
    """Bars of many rows, sorted by (row, start). ``longest`` is an event index; ``count`` 1 is a lone event."""

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
    def from_events(cls, row: np.ndarray, start: np.ndarray, end: np.ndarray, index: np.ndarray) -> "Bars":
        dur = end - start
        return cls(row.astype(np.int32, copy=False), start, end, np.ones(len(start), np.int64), dur, dur,
                   index.astype(np.int64, copy=False))

    def take(self, keep: np.ndarray) -> "Bars":
        return Bars(self.row[keep], self.start[keep], self.end[keep], self.count[keep], self.busy[keep],
                    self.longest_dur[keep], self.longest[keep])


def running_end(row: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per-row running maximum of ``end`` (monotone within a row, so it can be binary searched)."""
    if len(end) == 0:
        return end.copy()
    span = int(end.max()) + 1
    offset = row.astype(np.int64) * span
    return np.maximum.accumulate(offset + end) - offset


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
    first = np.flatnonzero(new)
    if len(first) == n:
        return bars
    group = np.cumsum(new) - 1
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
