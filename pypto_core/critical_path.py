"""The critical path of each step: the chain of device tasks, host intervals and waits that sets when the
step ends, read from the what-if replay's dependency graph (``pypto_core.replay.Replay``; no second graph).

The rule, walking back from the step's end:

* the step ends when its host work and its device tasks are done (the replay's ``_steps``): when the device's
  last task ends at or after the host's last call, the path is the host's bookkeeping after it (``host``),
  then that task; otherwise the host itself;
* a task started when the dependency the replay gives it allowed: a task that waited for another stream's
  task (an event wait) follows that task; a host-bound task (and a stream's first linked task) follows its
  launching call's return, after its launch latency; any other task follows its stream predecessor, after
  its own gap;
* the host runs without waiting except in its synchronisations: walking back along the host, the path
  leaves it at the last sync that returned when a task ended (it follows that task), or reaches the step's
  start.

Segments tile the step: each ends where the next (in time) begins, a task overlapping its successor in the
recording is cut at the successor's start, and nothing reaches before the step's start; so a step's segments
add up to its span exactly. A chain of stream-order links is emitted at once (vectorised); the Python loop
runs once per host hop, event wait or sync, bounded by the step's task and sync counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from pypto_core.replay import Replay

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.attribution import TimeAttribution
    from pypto_core.profile import Profile

# What a segment is: a device task, host time, or a wait before a task (its own gap on its stream, its
# launch latency after the host issued it, an event wait on another stream) or before a sync's return.
KINDS = ("task", "host", "stream_gap", "launch", "event_wait", "sync_return")
TASK, HOST, STREAM_GAP, LAUNCH, EVENT_WAIT, SYNC_RETURN = range(len(KINDS))
# Where a segment is drawn: a kernel's row, a host call's row (the call that ends the segment), or none.
TABLES = ("kernels", "host_ops", "api_calls")


@dataclass
class CriticalPath:
    """Segments of every step in time order; times are absolute ns."""

    windows: np.ndarray  # (steps, 2): each step's [start, end), as the attribution cut them
    step_ids: list[int | None]  # each step's id as the profile numbers it (None: not recorded)
    step: np.ndarray  # int32: the step of each segment
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    kind: np.ndarray  # int8: index into KINDS
    table: np.ndarray  # int8: index into TABLES, -1 where no row stands for the segment
    row: np.ndarray  # int64: row of that table

    def __len__(self) -> int:
        return len(self.start)

    def step_totals(self) -> np.ndarray:
        """Per step, the segments' total duration (its span, by construction)."""
        return np.bincount(self.step, weights=self.end - self.start,
                           minlength=len(self.windows)).astype(np.int64)

    def device_ns(self) -> np.ndarray:
        """Per step, the device task time on the path."""
        task = self.kind == TASK
        return np.bincount(self.step[task], weights=(self.end - self.start)[task],
                           minlength=len(self.windows)).astype(np.int64)


def profile_critical_path(profile: Profile,
                          attribution: TimeAttribution | None = None) -> CriticalPath | None:
    """The critical path of ``profile``'s main device; None where the replay does not apply (no timeline of
    device tasks in steps). ``attribution``: the profile's, when diagnosis already computed it (the path and
    the findings then stand on one attribution)."""
    from pypto_core.attribution import attribute

    a = attribution if attribution is not None else attribute(profile)
    if a is None or a.source != "timeline" or not len(a.steps):
        return None
    path = critical_path(Replay(profile, a), profile)
    path.step_ids = [s.step_id for s in a.steps]
    return path


class _Walk:
    def __init__(self, r: Replay) -> None:
        self.r = r
        self.s, self.e = r.s, r.e
        pred = np.where(r.cross >= 0, EVENT_WAIT,
                        np.where(r.host_bound | (r.first & r.linked), LAUNCH,
                                 np.where(~r.first, STREAM_GAP, HOST)))
        self.pred = pred.astype(np.int8)
        n = len(pred)
        # the first position of the chain of stream-order links ending at each task
        self.head = np.maximum.accumulate(np.where(pred != STREAM_GAP, np.arange(n), 0)) if n else pred
        ss, se = r.syncs
        self.sync_end = se
        tasked = np.where(r.sync_task >= 0, np.arange(len(se)), -1)
        self.last_tasked = np.maximum.accumulate(tasked) if len(tasked) else tasked
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, step: int, start: np.ndarray, end: np.ndarray, kind: np.ndarray, table: np.ndarray,
            row: np.ndarray) -> None:
        keep = end > start
        if keep.any():
            self.parts.append((np.full(int(keep.sum()), step, np.int32), start[keep], end[keep], kind[keep],
                               table[keep], row[keep]))

    def one(self, step: int, start: int, end: int, kind: int, table: int = -1, row: int = -1) -> None:
        self.add(step, np.array([start], np.int64), np.array([end], np.int64), np.array([kind], np.int8),
                 np.array([table], np.int8), np.array([row], np.int64))

    def chain(self, step: int, lo: int, i: int, cursor: int, wait: int,
              wait_ref: tuple[int, int]) -> tuple[int, int]:
        """Emit the stream-order chain ending at task ``i`` (reached at ``cursor`` through a ``wait``);
        returns the chain's first task and the time the path has reached."""
        j = int(self.head[i])
        s, e = self.s[j:i + 1], self.e[j:i + 1]
        # the time each task of the chain is left at: its successor's (clipped) start
        cur = np.minimum.accumulate(np.r_[s[1:], cursor][::-1])[::-1]
        cur = np.minimum(cur, cursor)
        te = np.minimum(e, cur)
        ts = np.minimum(s, te)
        rows = self.r.rows[j:i + 1]
        m = i + 1 - j
        wait_kind = np.full(m, STREAM_GAP, np.int8)
        wait_kind[-1] = wait
        wait_table = np.zeros(m, np.int8)
        wait_row = np.r_[rows[1:], 0].astype(np.int64)
        wait_table[-1], wait_row[-1] = wait_ref
        # interleave, in time order: task r, then the wait before its successor
        start = np.maximum(np.stack([ts, te], 1).reshape(-1), lo)
        end = np.maximum(np.stack([te, cur], 1).reshape(-1), lo)
        kind = np.stack([np.full(m, TASK, np.int8), wait_kind], 1).reshape(-1)
        table = np.stack([np.zeros(m, np.int8), wait_table], 1).reshape(-1)
        row = np.stack([rows.astype(np.int64), wait_row], 1).reshape(-1)
        self.add(step, start, end, kind, table, row)
        return j, int(ts[0])

    def step_path(self, step: int, lo: int, hi: int, last_task: int, host_end: int) -> None:
        r = self.r
        hops = len(self.s) + len(self.sync_end) + 4  # every hop moves to an earlier task or sync
        if last_task >= 0 and min(int(self.e[last_task]), hi) >= host_end:
            device_end = min(int(self.e[last_task]), hi)
            self.one(step, device_end, hi, HOST)
            task, cursor, wait, ref = last_task, device_end, HOST, (-1, -1)
        else:
            task, cursor, wait, ref = -1, hi, HOST, (-1, -1)
        while cursor > lo and hops > 0:
            hops -= 1
            if task < 0:  # on the host: back to the last sync that waited for a task, or the step's start
                k = int(np.searchsorted(self.sync_end, cursor, side="right")) - 1
                k = int(self.last_tasked[k]) if k >= 0 else -1
                if k < 0 or self.sync_end[k] <= lo:
                    break
                ret = int(self.sync_end[k])
                self.one(step, ret, cursor, HOST)
                task, cursor, wait, ref = int(r.sync_task[k]), ret, SYNC_RETURN, (-1, -1)
                continue
            j, cursor = self.chain(step, lo, task, cursor, wait, ref)
            link = int(self.pred[j])
            kernel_row = (0, int(r.rows[j]))
            if link == EVENT_WAIT:
                task, wait, ref = int(r.cross[j]), EVENT_WAIT, kernel_row
            elif link == LAUNCH:
                issued = min(int(r.h[j]), cursor)
                self.one(step, max(issued, lo), cursor, LAUNCH, *kernel_row)
                task, cursor = -1, issued
            else:  # a stream's first task, not linked to its launch: the host's pace set it
                task = -1
        if cursor > lo:
            self.one(step, lo, cursor, HOST)


def critical_path(replay: Replay, profile: Profile) -> CriticalPath:
    """The critical path of every step of ``replay`` (see the module docstring)."""
    w = replay.windows
    walk = _Walk(replay)
    s, e = replay.s, replay.e
    if len(s) and len(w):
        step_of = np.clip(np.searchsorted(w[:, 0], s, side="right") - 1, 0, None)  # as the replay's _steps
        order = np.lexsort((e, step_of))
        last = np.full(len(w), -1, np.int64)
        last[step_of[order]] = order  # per step, its task that ends last (sorted: the last write wins)
    else:
        last = np.full(len(w), -1, np.int64)
    for k in range(len(w)):
        walk.step_path(k, int(w[k, 0]), int(w[k, 1]), int(last[k]), int(replay.host_end[k]))
    parts = walk.parts
    cols = [np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, t)
            for c, t in enumerate((np.int32, np.int64, np.int64, np.int8, np.int8, np.int64))]
    order = np.lexsort((cols[1], cols[0]))
    step, start, end, kind, table, row = (c[order] for c in cols)
    _host_rows(profile, end, kind, table, row)
    return CriticalPath(windows=w, step_ids=[None] * len(w), step=step, start=start, end=end, kind=kind,
                        table=table, row=row)


def _host_rows(profile: Profile, end: np.ndarray, kind: np.ndarray, table: np.ndarray,
               row: np.ndarray) -> None:
    """Name the host call that ends each host segment and sync return (the call that returned then),
    in place."""
    want = np.flatnonzero((table < 0) & ((kind == HOST) | (kind == SYNC_RETURN)))
    if not len(want):
        return
    ends, tables, rows = [], [], []
    for code, name in ((1, "host_ops"), (2, "api_calls")):
        t = profile.table(name)
        if not t.num_rows:
            continue
        e = (pc.fill_null(t["start_ns"], 0).to_numpy(zero_copy_only=False)
             + pc.fill_null(t["dur_ns"], 0).to_numpy(zero_copy_only=False)).astype(np.int64)
        ends.append(e)
        tables.append(np.full(len(e), code, np.int8))
        rows.append(np.arange(len(e), dtype=np.int64))
    if not ends:
        return
    all_ends, all_tables, all_rows = np.concatenate(ends), np.concatenate(tables), np.concatenate(rows)
    order = np.argsort(all_ends, kind="stable")
    sorted_ends = all_ends[order]
    at = np.searchsorted(sorted_ends, end[want], side="left")
    hit = (at < len(order)) & (sorted_ends[np.clip(at, 0, len(order) - 1)] == end[want])
    pick = order[at[hit]]
    table[want[hit]] = all_tables[pick]
    row[want[hit]] = all_rows[pick]
