"""What fixing buys: re-time a rank's run with some findings' changes applied (a what-if replay).

The run is replayed as a dependency graph built from what the profile recorded, in the spirit of HTA's
critical-path what-if:

* stream order: a task starts after the previous task of its stream ends, plus the device's own turnaround
  (the gap it had, at most ``TURNAROUND_NS`` when the host was the reason for the gap);
* host issue order: a task linked to its launching host call (flows, correlation ids) starts no earlier than
  that call's return, plus its launch latency, on a host timeline that loses whatever host time a change
  removes;
* event waits across streams: a task that began right as a task of another stream ended (within
  ``CROSS_STREAM_NS``, and explained neither by its own stream nor by its launch) waits for it;
* host synchronisation: a sync call returns when the task it waited for ends, so a shorter task moves the
  host, and everything the host issues after the sync, earlier.

Each change says what it does (``Change``): tasks shortened or removed, host time removed (compile calls,
syncs, the data loader), tasks launched from a graph (no host issue constraint, gap cut to a residual).
A replay with no change reproduces the recorded run exactly; a step ends when both its host work and its
device tasks are done. The combined gain replays all changes together, so overlapping savings are never
counted twice and a kernel made faster in a host-bound run saves nothing. Collectives joining ranks are not
replayed across ranks: a change is taken to apply on every rank alike (data-parallel ranks run one
program), so the peers arrive earlier by as much as this rank does and a collective keeps its wait. The wait
itself goes only with a fix on the late ranks: it is reported apart (``Finding.peer_wait_us``), never
replayed as a saving of this rank.

Memory: a few int64 arrays per task; time: a handful of sorts plus one vectorised pass per iteration
(cross-stream waits and syncs are settled by iterating to a fixed point, at most ``MAX_ITERATIONS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.attribution import HOST_SLICE_ROWS, TimeAttribution, host_unions
from pypto_core.grouping import int32_if_fits
from pypto_core.intervals import overlap_ns, subtract_intervals, union_intervals, window_index

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.profile import Profile

# the device's own gap between back-to-back tasks of a stream [INFERRED: ~1 us on NPU/GPU]
TURNAROUND_NS = 1_000
CROSS_STREAM_NS = 10_000  # a start this close after another stream's end reads as an event wait [INFERRED:
# 2-4 us on the CNN sample's collectives -> optimizer copies]
SYNC_MATCH_NS = 50_000  # a sync returning within this (or 5% of its length) of a task's end waited for it
# [INFERRED: 216 us after the last optimizer kernel for the CNN sample's 86 ms StreamSynchronize]
HOST_BUSY_SHARE = 0.9  # a gap the host was busy through this much of is the host's pace [INFERRED]
MAX_ITERATIONS = 12
_NEVER = np.iinfo(np.int64).min // 4

# What ``Replay`` reads besides the attribution it is given (a ``profile.ColumnSet``): the tasks' times and
# lanes, and what issued them (flows to host calls, else correlation ids).
REPLAY_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "kernels": ("start_ns", "dur_ns", "device_id", "stream_id", "correlation_id"),
    "flows": ("kernel_index", "host_index", "api_index"), "host_ops": ("name", "start_ns", "dur_ns"),
    "api_calls": ("name", "start_ns", "dur_ns", "correlation_id"),
}


@dataclass
class Change:
    """What one finding's fix does to the run (kernel row indices of ``profile.kernels``)."""

    kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # per kernel; > dur removes it
    saving_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_removed: tuple[np.ndarray, np.ndarray] | None = None  # host time that disappears (starts, ends)
    # host time that disappears: the attribution's pieces in these buckets, read when the replay runs (a
    # graph-mode finding's copy of them was 32 MB on a 5 GB simulated folder, held through every later rule)
    host_removed_buckets: tuple[str, ...] = ()
    graph_kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # launched from a graph
    all_from_graph: bool = False  # every task launched from a graph (as ``graph_kernels`` listing them all)
    # gap before -> residual
    gap_cut_kernels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    residual_gap_ns: int = 1_000

    @staticmethod
    def merge(changes: list[Change]) -> Change:
        if not changes:
            return Change()
        host = [c.host_removed for c in changes if c.host_removed is not None and len(c.host_removed[0])]
        return Change(kernels=int32_if_fits(np.concatenate([c.kernels for c in changes])),
                      saving_ns=np.concatenate([np.asarray(c.saving_ns, np.float64) for c in changes]),
                      host_removed=(np.concatenate([h[0] for h in host]),
                                    np.concatenate([h[1] for h in host]))
                      if host else None,
                      host_removed_buckets=tuple(sorted({b for c in changes
                                                         for b in c.host_removed_buckets})),
                      # index sets: a row named twice is changed once (``run`` assigns, never adds)
                      graph_kernels=int32_if_fits(np.concatenate([c.graph_kernels for c in changes])),
                      all_from_graph=any(c.all_from_graph for c in changes),
                      gap_cut_kernels=int32_if_fits(np.concatenate([c.gap_cut_kernels for c in changes])),
                      residual_gap_ns=min(c.residual_gap_ns for c in changes))


@dataclass
class ReplayResult:
    duration_ns: int  # the replayed run: first step's start to last step's end
    original_ns: int  # the recorded run, the same way
    step_ns: np.ndarray  # replayed duration of each step

    @property
    def saving_ns(self) -> int:
        return max(self.original_ns - self.duration_ns, 0)

    @property
    def speedup(self) -> float:
        return self.original_ns / self.duration_ns if self.duration_ns > 0 else 1.0


class Replay:
    """The dependency graph of one rank's main device, built once; ``run(change)`` re-times it."""

    def __init__(self, profile: Profile, attribution: TimeAttribution) -> None:
        # Memory: per task seven int64 arrays (start, duration, end, issue, issue start, stream gap, launch
        # latency: s d e h issue_start q lat), three int32 (row, stream, the task waited for) and three
        # flags, plus an int32 position per kernel row: about 75 bytes; while it is built, four int64 arrays
        # more (the kernel columns are read one at a time). 2.1 M tasks of a 5 GB simulated folder: 160 MB.
        k = profile.kernels
        self.attribution = attribution  # what a change's ``host_removed_buckets`` name
        self.windows = attribution.windows()
        main = attribution.device_id if attribution.device_id is not None else 0
        lo, hi = (self.windows[0, 0], self.windows[-1, 1]) if len(self.windows) else (0, 0)
        start = _values(k["start_ns"], 0).astype(np.int64, copy=False)
        on = (start >= lo) & (start < hi)
        on &= _values(k["device_id"], 0) == main
        keep = np.flatnonzero(on)
        del on
        stream = _values(k["stream_id"], -1)[keep]
        by_stream = np.lexsort((start[keep], stream))  # by stream, then start
        order = int32_if_fits(keep[by_stream])
        del keep
        self.rows = order  # replay position -> kernel row
        n = len(order)
        self.pos_of_row = np.full(k.num_rows, -1, order.dtype)
        self.pos_of_row[order] = np.arange(n, dtype=order.dtype)
        self.stream = int32_if_fits(stream[by_stream])
        del stream, by_stream
        self.s = start[order]
        del start
        self.d = np.maximum(_values(k["dur_ns"], 0)[order].astype(np.int64, copy=False), 0)
        self.e = self.s + self.d
        self.first = np.ones(n, bool)
        if n > 1:
            self.first[1:] = self.stream[1:] != self.stream[:-1]
        self.h = _issue_times(profile, self.pos_of_row, n)
        # the host's syncs (nested ones as one wait) and its last call in each step: one pass over its calls
        self.host_end = self.windows[:, 0].copy()
        self.syncs = host_unions(profile, classes=(0,), each_slice=self._host_work_end)[0]
        self.issue_start = self._issue_starts()
        self.linked = self.h > _NEVER
        raw_gap = self._raw_gaps()  # < 0 where the recording overlaps two tasks
        # host-bound: issued only after its stream predecessor ended, while the host was busy through the gap
        # (the attribution's host_launch_bound, sync_wait or data_loading time), so the device waited for the
        # host's own pace. A gap the host spent idle (idle_other) is the task's own delay: it moves with its
        # stream, as the simulator models launch gaps.
        hs, he = attribution.intervals("host_launch_bound", "sync_wait", "data_loading")
        prev_e = self.s - raw_gap  # the previous task's end (the task's own start for a stream's first)
        gap = np.maximum(raw_gap, 0)
        host_bound = (self.linked & ~self.first & (gap > TURNAROUND_NS) & (self.h + TURNAROUND_NS > prev_e)
                      & (overlap_ns(hs, he, prev_e, self.s) >= HOST_BUSY_SHARE * gap))
        del prev_e, hs, he
        launch = self.s - self.h  # < 0 where the task began before its call returned
        launch[~self.linked] = 0
        typical = int(np.median(launch[host_bound])) if host_bound.any() else TURNAROUND_NS
        self.host_bound = host_bound
        self.cross = self._cross_stream_waits(host_bound, gap)
        del gap
        # a gap explained by the host (host-bound) or by another stream's task (an event wait) shrinks to the
        # device's turnaround once that reason goes; any other gap is the task's own and stays. Host-bound
        # tasks keep their whole launch latency; queued ones
        # at most the typical one (never more than they had).
        explained = host_bound | (self.cross >= 0)
        explained &= ~self.first
        self.q = np.where(explained, np.minimum(raw_gap, TURNAROUND_NS), raw_gap)
        del explained, raw_gap
        # (a stream's first task has no predecessor: its issue and launch explain its start)
        self.lat = np.where(host_bound | self.first, launch, np.minimum(launch, typical))
        del launch
        self.sync_task = self._sync_tasks()

    def _raw_gaps(self) -> np.ndarray:
        """Per task, its start less its stream predecessor's end (0 for a stream's first task)."""
        raw_gap = np.zeros(len(self.s), np.int64)
        if len(raw_gap) > 1:
            np.subtract(self.s[1:], self.e[:-1], out=raw_gap[1:])
            raw_gap[self.first] = 0
        return raw_gap

    @property
    def linked_share(self) -> float:
        """Share of the replayed tasks whose launch the profile records (flows, correlation ids)."""
        return float(self.linked.mean()) if len(self.linked) else 0.0

    def _issue_starts(self) -> np.ndarray:
        """Per task, the host time spent issuing it: from the previous issue's return to its own, less the
        host's syncs. Issues tile the host's timeline, so removing an op removes its share of the host's
        time, the Python and framework work between ops included (busy or not shown in the profile)."""
        start = np.zeros(len(self.h), np.int64)
        linked = self.h > _NEVER
        if linked.any():
            pos = np.nonzero(linked)[0]
            order = pos[np.argsort(self.h[pos], kind="stable")]
            prev = np.concatenate([[self.h[order[0]] - TURNAROUND_NS], self.h[order[:-1]]])
            start[order] = prev
        return start

    def _host_work_end(self, hs: np.ndarray, he: np.ndarray, _cls: np.ndarray) -> None:
        """``host_end``, per step when the host's last call in it ended (the step's start when it shows
        none), with one slice of the host calls (``attribution.host_unions``' ``each_slice``)."""
        w = self.windows
        if not len(w):
            return
        step = window_index(w[:, 0], w[:, 1], hs)
        ok = step >= 0
        np.maximum.at(self.host_end, step[ok], np.minimum(he[ok], w[step[ok], 1]))

    def _cross_stream_waits(self, host_bound: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Per task, the replay position of another stream's task it waited for (-1: none)."""
        n = len(self.s)
        out = np.full(n, -1, self.rows.dtype)
        if n < 2 or not (self.stream != self.stream[0]).any():
            return out
        # only the tasks a wait could explain: a stream's first, or one after a long gap, not host-bound
        ask = np.flatnonzero((self.first | (gap > CROSS_STREAM_NS)) & ~host_bound)
        if not len(ask):
            return out
        by_end = int32_if_fits(np.argsort(self.e, kind="stable"))
        ends = self.e[by_end]
        s = self.s[ask]
        j = np.searchsorted(ends, s, side="right") - 1
        del ends
        ok = j >= 0
        cand = np.where(ok, by_end[np.clip(j, 0, None)], -1)
        del by_end, j
        c = np.clip(cand, 0, None)
        sel = ok & (s - self.e[c] <= CROSS_STREAM_NS) & (self.stream[c] != self.stream[ask])
        out[ask[sel]] = cand[sel]
        return out

    def _sync_tasks(self) -> np.ndarray:
        """Per sync call, the replay position of the task whose end it returned at (-1: none)."""
        ss, se = self.syncs
        if not len(ss) or not len(self.e):
            return np.zeros(0, np.int64)
        by_end = np.argsort(self.e, kind="stable")
        ends = self.e[by_end]
        j = np.searchsorted(ends, se, side="right") - 1
        ok = (j >= 0)
        task = np.where(ok, by_end[np.clip(j, 0, None)], -1)
        lag = se - self.e[np.clip(task, 0, None)]
        near = (ok & (lag <= np.maximum(SYNC_MATCH_NS, (se - ss) // 20))
                & (self.e[np.clip(task, 0, None)] >= ss))
        return np.where(near, task, -1)

    # -- the replay ---------------------------------------------------------------------------------------
    def run(self, change: Change | None = None) -> ReplayResult:
        change = change or Change()
        # the task arrays a change alters are new ones (np.where, copies before an assignment in place)
        d, q, lat, linked = self.d, self.q, self.lat, self.linked
        pos = (self.pos_of_row[np.asarray(change.kernels)] if len(change.kernels)
               else np.zeros(0, np.int64))
        removed_host: list[tuple[np.ndarray, np.ndarray]] = []
        if len(pos):
            saving = np.asarray(change.saving_ns, np.float64)
            ok = pos >= 0
            pos, saving = pos[ok], saving[ok]
            cut = np.zeros(len(d), np.float64)
            np.add.at(cut, pos, saving)
            gone = (cut >= d) & (cut > 0)  # its whole run time saved: the op is gone (fused into another)
            left = np.minimum(cut, d)
            del cut
            np.subtract(d, left, out=left)
            np.maximum(left, 0, out=left)
            d = left.astype(np.int64)
            del left
            # a fused-away op is neither launched nor waited for: its gap goes, and so does its host launch
            q = np.where(gone, 0, q)
            lat = np.where(gone, 0, lat)
            # a gone op is not issued either: the framework op that issued it leaves the host's timeline
            issued = gone & linked
            if issued.any():
                removed_host.append(subtract_intervals(self.issue_start[issued], self.h[issued],
                                                       *self.syncs))
            linked = linked & ~gone
        if change.all_from_graph or len(change.graph_kernels):
            # launched from a captured graph: no per-op issue on the host, so its issuing work goes too
            g = self.pos_of_row if change.all_from_graph else self.pos_of_row[change.graph_kernels]
            g = g[g >= 0]
            issued = g[linked[g]]
            if len(issued):
                removed_host.append(subtract_intervals(self.issue_start[issued], self.h[issued],
                                                       *self.syncs))
            linked = linked.copy() if linked is self.linked else linked
            linked[g] = False
        if len(change.gap_cut_kernels):
            g = self.pos_of_row[change.gap_cut_kernels]
            g = g[g >= 0]
            q = q.copy() if q is self.q else q
            q[g] = np.minimum(q[g], change.residual_gap_ns)
        if change.host_removed is not None and len(change.host_removed[0]):
            removed_host.append(change.host_removed)
        if change.host_removed_buckets:
            removed_host.append(self.attribution.intervals(*change.host_removed_buckets))
        base = _Shift(*_joined(removed_host))
        extra = np.zeros(len(self.syncs[0]), np.int64)
        new_e = self.e
        host = base
        # the few tasks placed by something other than their own issue: fixed for the whole replay
        placed = np.flatnonzero(self.first & ~linked)  # a first task with no issue keeps its host place
        waits = np.flatnonzero(self.cross >= 0)  # a task that waited for another stream's task
        waited_for = self.cross[waits]
        lag = self.s[waits] - self.e[waited_for]
        for _ in range(MAX_ITERATIONS):
            floor = host.new(self.h)
            floor += lat
            floor[~linked] = _NEVER
            np.maximum.at(floor, placed, host.new(self.s[placed]))
            np.maximum.at(floor, waits, new_e[waited_for] + lag)
            updated = _stream_recurrence(floor, q, d, self.first)
            del floor
            before = np.concatenate([[0], np.cumsum(extra)[:-1]]) if len(extra) else extra
            shorter = self._sync_shortening(updated, base, before)
            keep = shorter > 0
            host = _Shift(np.concatenate([base.s, self.syncs[1][keep] - shorter[keep]]),
                          np.concatenate([base.e, self.syncs[1][keep]]))
            if np.array_equal(updated, new_e) and np.array_equal(shorter, extra):
                break
            new_e, extra = updated, shorter
        return self._steps(new_e, host)

    def _sync_shortening(self, new_e: np.ndarray, base: _Shift, before: np.ndarray) -> np.ndarray:
        """Per sync call (in time order), the host time it no longer waits: it returns when its task's new
        end (plus the lag it had) has passed, on a host already moved by the earlier syncs (``before``: their
        shortening up to it, from the previous iteration)."""
        ss, se = self.syncs
        out = np.zeros(len(ss), np.int64)
        t = self.sync_task
        ok = t >= 0
        if not ok.any():
            return out
        tc = np.clip(t, 0, None)
        ready = new_e[tc] + (se - self.e[tc])
        new_ss, new_se = base.new(ss) - before, base.new(se) - before
        ret = np.maximum(new_ss, ready)
        out[ok] = np.clip(new_se - ret, 0, se - ss)[ok]
        return out

    def _steps(self, new_e: np.ndarray, host: _Shift) -> ReplayResult:
        """Each step ends when its host work (shifted) and its tasks (their new ends, less what already ran
        past the step's end in the recording) are done; the run spans the first step's start to the last
        end."""
        w = self.windows
        if not len(w):
            return ReplayResult(0, 0, np.zeros(0, np.int64))
        step = np.clip(np.searchsorted(w[:, 0], self.s, side="right") - 1, 0, None)
        dev_old = np.full(len(w), _NEVER, np.int64)
        dev_new = np.full(len(w), _NEVER, np.int64)
        np.maximum.at(dev_old, step, self.e)
        np.maximum.at(dev_new, step, new_e)
        overflow = np.maximum(dev_old - w[:, 1], 0)
        dev_old = np.minimum(dev_old, w[:, 1])
        # host time after both were done (step bookkeeping)
        tail = w[:, 1] - np.maximum(self.host_end, dev_old)
        dev = np.where(dev_new > _NEVER, dev_new - overflow, _NEVER)
        ends = np.maximum.accumulate(np.maximum(host.new(self.host_end), dev) + tail)
        start0 = int(host.new(w[:1, 0])[0])
        step_ns = np.diff(np.concatenate([[start0], ends]))
        return ReplayResult(duration_ns=int(ends[-1] - start0), original_ns=int(w[-1, 1] - w[0, 0]),
                            step_ns=step_ns)


def _stream_recurrence(floor: np.ndarray, q: np.ndarray, d: np.ndarray, first: np.ndarray) -> np.ndarray:
    """new_end[i] = max(new_end[i-1] + q[i], floor[i]) + d[i] along each stream, vectorised; ``floor`` is
    used up (the result is written over it).

    With c = cumsum(q + d) per stream, new_end - c is a running maximum of floor + d - c. Worked in place
    (two task-long arrays live at once besides the inputs: this runs a dozen times per replay).
    """
    n = len(d)
    if not n:
        return np.zeros(0, np.int64)
    c = np.where(first, 0, q).astype(np.int64, copy=False)
    c += d
    key = floor
    key += d
    starts = np.flatnonzero(first)  # the first task is a stream's first
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), n]):  # streams are few
        run = c[lo:hi]
        np.cumsum(run, out=run)  # the sum restarts at each stream (at its first task, c = its d)
        part = key[lo:hi]
        part -= run  # at a stream's first task: its floor alone
        np.maximum.accumulate(part, out=part)
        part += run
    return key


def _joined(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Pieces of time as one (starts, ends) pair, ``pieces`` emptied as they are joined: their arrays go
    before the union's sort (a lone piece, already in order, is neither copied nor sorted)."""
    if len(pieces) == 1:
        return pieces.pop()
    if not pieces:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts, ends = np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])
    pieces.clear()
    return starts, ends


class _Shift:
    """The host timeline with some time removed: ``new(t) = t - removed time before t``."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.s, self.e = union_intervals(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
        self.cum = np.concatenate([[0], np.cumsum(self.e - self.s)])

    def new(self, t: np.ndarray) -> np.ndarray:
        """``t`` less the removed time before it; a slice of times at a time (its temporaries, a dozen
        arrays as long as the slice, stay near 25 MB however many tasks the replay holds)."""
        out = np.array(t, np.int64)
        if not len(self.s):
            return out
        for at in range(0, len(out), HOST_SLICE_ROWS):
            part = out[at:at + HOST_SLICE_ROWS]
            i = np.searchsorted(self.s, part, side="right") - 1
            ic = np.clip(i, 0, None)
            inside = np.clip(part - self.s[ic], 0, self.e[ic] - self.s[ic])
            part -= np.where(i >= 0, self.cum[ic] + inside, 0)  # in place: ``part`` is a view of ``out``
        return out


def records_launches(profile: Profile) -> bool:
    """Whether the profile links any task to the host call that launched it (flows, or correlation ids
    shared by tasks and API calls): without a link no task's launch can be replayed."""
    k = profile.kernels
    if profile.flows.num_rows:
        return True
    return bool("correlation_id" in k.column_names and k["correlation_id"].null_count < k.num_rows
                and profile.api_calls.num_rows)


def _issue_times(profile: Profile, pos_of_row: np.ndarray, n: int) -> np.ndarray:
    """Per replayed task (``pos_of_row``: kernel row -> its position, -1 where not replayed): when the host
    call that issued it returned (flows to API calls or host ops, else a shared correlation id; the launch
    is done by then); ``_NEVER`` where the profile does not link it."""
    out = np.full(n, _NEVER, np.int64)
    rows = len(pos_of_row)
    flows = profile.flows
    if flows.num_rows:
        for column, table in (("host_index", profile.host_ops), ("api_index", profile.api_calls)):
            if column not in flows.column_names or not table.num_rows:
                continue
            ends = _call_ends(table)
            for at in range(0, flows.num_rows, HOST_SLICE_ROWS):  # the flows a slice at a time
                part = flows.slice(at, HOST_SLICE_ROWS)
                kernel = pc.fill_null(part["kernel_index"], -1).to_numpy(zero_copy_only=False)
                idx = pc.fill_null(part[column], -1).to_numpy(zero_copy_only=False)
                ok = (idx >= 0) & (idx < table.num_rows) & (kernel >= 0) & (kernel < rows)
                pos = pos_of_row[kernel[ok]]
                on = pos >= 0
                np.maximum.at(out, pos[on], ends[idx[ok][on]])  # the latest link is the launch itself
            del ends
    elif records_launches(profile):  # no flows: the correlation ids that tasks and API calls share
        k = profile.kernels
        api = profile.api_calls
        corr = pc.fill_null(api["correlation_id"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
        ends = _call_ends(api)
        kc = pc.fill_null(k["correlation_id"], -2).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(corr, kind="stable")
        j = np.searchsorted(corr[order], kc)
        hit = (j < len(order)) & (corr[order][np.clip(j, 0, len(order) - 1)] == kc)
        calls = order[j[hit]]
        pos = pos_of_row[np.nonzero(hit)[0]]
        on = pos >= 0
        np.maximum.at(out, pos[on], ends[calls[on]])
    return out


def _values(column: pa.ChunkedArray, fill: int) -> np.ndarray:
    """An integer column as numpy in its own type, nulls as ``fill``."""
    values: np.ndarray = pc.fill_null(column, fill).to_numpy(zero_copy_only=False)
    return values


def _call_ends(table: pa.Table) -> np.ndarray:
    """When each host call returned (start + duration; 0 where unknown)."""
    ends: np.ndarray = pc.fill_null(table["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ends += pc.fill_null(table["dur_ns"], 0).to_numpy(zero_copy_only=False)
    return ends


def kernel_change(kernels: np.ndarray, saving_ns: np.ndarray | float, dur: np.ndarray) -> Change:
    """Kernels shortened by ``saving_ns`` each (one total spread by duration, at most each one's own
    duration, when a scalar)."""
    kernels = int32_if_fits(np.asarray(kernels, np.int64))
    if np.ndim(saving_ns) == 0:
        d = dur[kernels].astype(np.float64)
        saving_ns = np.minimum(d / d.sum() * float(saving_ns), d) if d.sum() > 0 else np.zeros(len(kernels))
    return Change(kernels=kernels, saving_ns=np.asarray(saving_ns, np.float64))
