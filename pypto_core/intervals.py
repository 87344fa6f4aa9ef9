"""Interval arithmetic on int64 ns: pieces of time as (starts, ends) arrays, [start, end).

Shared by the attribution (which piece of a step is in which bucket), the rules (what a fix closes) and the
replay (host time removed); all vectorised, no Python loop per interval.
"""

from __future__ import annotations

import numpy as np

# Queries are answered a slice at a time: a slice's temporaries stay near 25 MB however many there are (one
# per device task in the replay, 2.1 M on a 5 GB simulated folder).
QUERY_SLICE_ROWS = 250_000


def sorted_distinct(values: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """``np.unique`` for time edges by a plain sort (numpy's hash-based unique took 3 s on 4 M edges);
    ``overwrite``: ``values`` is a scratch array of the caller's, sorted in place rather than copied."""
    out = values if overwrite else values.copy()
    out.sort(kind="stable")
    if len(out) > 1:
        out = out[np.concatenate([[True], out[1:] != out[:-1]])]
    return out


def coverage(bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per segment [bounds[i], bounds[i+1]): whether any interval covers it."""
    if not len(starts):
        return np.zeros(max(len(bounds) - 1, 0), bool)
    m = len(bounds)
    # in place: two edge-long counts live at once, not four (the attribution calls this on tens of millions
    # of edges)
    depth = np.bincount(np.searchsorted(bounds, starts), minlength=m + 1)
    depth -= np.bincount(np.searchsorted(bounds, ends), minlength=m + 1)
    np.cumsum(depth, out=depth)  # how many intervals cover each segment
    return depth[: m - 1] > 0


def union_length(starts: np.ndarray, ends: np.ndarray, *, ends_scratch: bool = False) -> int:
    """Total length covered by intervals [start, end) (overlaps counted once): the span from the first start
    to the last end, less the gaps between the merged pieces, which are never built. Two arrays as long as
    the intervals at once (three while they are sorted); the union's merged pieces took five (a finding's
    1.6 M closed gaps on a 5 GB simulated folder: 63 MB, the rules' peak). ``ends_scratch``: the caller's
    ``ends`` is its own copy, worked in place where the intervals are in start order."""
    pieces = _running_ends(starts, ends, ends_scratch=ends_scratch)
    if pieces is None:
        return 0
    s, e = pieces
    span = int(e[-1]) - int(s[0])
    gap = e[:-1]  # worked in place: the room between a piece and the running end before it, where positive
    np.subtract(s[1:], gap, out=gap)
    np.maximum(gap, 0, out=gap)
    return span - int(gap.sum())


def union_length_of(starts: np.ndarray, durs: np.ndarray, rows: np.ndarray | None = None) -> int:
    """``union_length`` of [start, start + dur) over the ``rows`` of a mask (every row where None): worked a
    slice at a time where the starts are in order (a rank's kernels as stored), with no array as long as
    the rows (copies of both took 250 MB on a 15.7 M-kernel table); else on copies of those rows. The same
    integers either way: the span from the first start to the last running end, less the gaps."""
    if not in_order(starts):
        sel = slice(None) if rows is None else rows
        chosen = starts[sel]
        return union_length(chosen, chosen + durs[sel], ends_scratch=True)
    first: int | None = None
    run_end = 0
    gaps = 0
    for at in range(0, len(starts), _UNION_SLICE_ROWS):
        part = slice(at, at + _UNION_SLICE_ROWS)
        s = np.asarray(starts[part], np.int64)
        e = s + durs[part]
        keep = e > s
        if rows is not None:
            keep &= rows[part]
        if not keep.all():
            s, e = s[keep], e[keep]
        if not len(s):
            continue
        np.maximum.accumulate(e, out=e)
        if first is None:
            first = int(s[0])
        else:
            np.maximum(e, run_end, out=e)
            gaps += max(int(s[0]) - run_end, 0)
        gap = np.subtract(s[1:], e[:-1])
        gaps += int(np.maximum(gap, 0, out=gap).sum())
        run_end = int(e[-1])
    return 0 if first is None else run_end - first - gaps


_UNION_SLICE_ROWS = 1 << 20


def in_order(starts: np.ndarray) -> bool:
    """Whether the starts never go back (a rank's tasks as stored)."""
    return bool((starts[1:] >= starts[:-1]).all())


def union_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals [start, end) merged into sorted, disjoint ones."""
    pieces = _running_ends(starts, ends)
    if pieces is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s, e = pieces
    new = np.empty(len(s), bool)
    new[0] = True
    np.greater(s[1:], e[:-1], out=new[1:])
    first = np.flatnonzero(new)
    del new
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], e[last]


def _running_ends(starts: np.ndarray, ends: np.ndarray,
                  ends_scratch: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The intervals in start order (an empty or reversed one left out: it covers nothing) and each one's
    running end, the latest end up to it; None where none is left. The starts may be the caller's own array
    (read, never written); the ends are a new one, or the caller's where it is scratch (``ends_scratch``)."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    ok = ends > starts
    if not ok.any():
        return None
    # Few arrays live at once (the replay merges millions of host pieces): the sorted copies are worked on
    # in place, the order and masks dropped as soon as used.
    if not ok.all():  # the intervals that cover something, as copies of their own
        starts, ends, ends_scratch = starts[ok], ends[ok], True
    del ok
    if in_order(starts):
        # already in start order (pieces that ``subtract_intervals`` made, a rank's kernels): no sort
        s, e = starts, (ends if ends_scratch and ends.dtype == np.int64 else ends.copy())
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        del order
    np.maximum.accumulate(e, out=e)
    return s, e


def clip_to_length(starts: np.ndarray, ends: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """The first ``length`` ns of sorted, disjoint intervals (a saving smaller than the time it sits in)."""
    d = np.maximum(ends - starts, 0)
    before = np.concatenate([[0], np.cumsum(d)[:-1]])
    keep = np.clip(length - before, 0, d).astype(np.int64)
    return starts, starts + keep


def window_index(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time ``t``: the index of the window [starts[i], ends[i]) holding it (windows sorted by start,
    disjoint: profiler steps), -1 outside every window; in 4 bytes, worked a slice of ``t`` at a time (over
    15.7 M kernels at once its temporaries took 600 MB)."""
    t = np.asarray(t)
    out = np.full(len(t), -1, np.int32)
    if not len(starts):
        return out
    for at in range(0, len(t), QUERY_SLICE_ROWS):
        part = t[at:at + QUERY_SLICE_ROWS]
        i = np.searchsorted(starts, part, side="right") - 1
        inside = (i >= 0) & (part < ends[np.clip(i, 0, None)])
        out[at:at + len(part)][inside] = i[inside]
    return out


def overlap_ns(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each query [a, b): its overlap with the union of sorted, disjoint intervals (starts, ends)."""
    if not len(starts):
        return np.zeros(len(a), np.int64)
    cum = np.concatenate([[0], np.cumsum(ends - starts)])

    def covered_until(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, t, side="right") - 1
        ic = np.clip(i, 0, len(starts) - 1)
        inside = np.clip(t - starts[ic], 0, ends[ic] - starts[ic])
        return np.where(i >= 0, cum[ic] + inside, 0)

    a, b = np.asarray(a), np.asarray(b)
    covered = np.empty(len(a), np.int64)
    for at in range(0, len(a), QUERY_SLICE_ROWS):  # a dozen temporaries, as long as a slice, not the queries
        part = slice(at, at + QUERY_SLICE_ROWS)
        covered[part] = np.maximum(covered_until(b[part]) - covered_until(a[part]), 0)
    return covered


def intersect_intervals(s1: np.ndarray, e1: np.ndarray, s2: np.ndarray, e2: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of time inside both interval sets (each may overlap itself), as disjoint intervals."""
    if not len(s1) or not len(s2):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    bounds = sorted_distinct(np.concatenate([s1, e1, s2, e2]).astype(np.int64, copy=False), overwrite=True)
    both = coverage(bounds, s1, e1) & coverage(bounds, s2, e2)
    return bounds[:-1][both], bounds[1:][both]


def subtract_intervals(s1: np.ndarray, e1: np.ndarray, s2: np.ndarray, e2: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of time inside the first interval set and outside the second, as disjoint intervals."""
    if not len(s1):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # the edges sorted where they were gathered: on the replay's 2.1 M issues, 70 MB less than two copies
    bounds = sorted_distinct(np.concatenate([s1, e1, s2, e2]).astype(np.int64, copy=False), overwrite=True)
    keep = coverage(bounds, s1, e1) & ~coverage(bounds, s2, e2)
    # kept pieces that touch are one interval (the replay's issue times tile the host: millions of pieces
    # otherwise, each carried into its merges)
    edge = np.diff(np.concatenate([[False], keep, [False]]).astype(np.int8))
    return bounds[np.flatnonzero(edge == 1)], bounds[np.flatnonzero(edge == -1)]


def outermost(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of the intervals not inside an earlier-listed-or-wider one: a call that wraps others
    (aclopCompileAndExecute around opCompile) counts once."""
    n = len(starts)
    if not n:
        return np.zeros(0, bool)
    order = np.lexsort((-ends, starts))  # by start, the wider of two equal starts first
    reach = np.maximum.accumulate(ends[order])
    keep_sorted = np.concatenate([[True], ends[order][1:] > reach[:-1]])
    out = np.zeros(n, bool)
    out[order] = keep_sorted
    return out
