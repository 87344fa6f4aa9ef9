"""Where every nanosecond of a step goes: exclusive time buckets that add up to the step's wall time.

The ground truth every finding, the timeline's critical path and the comparison stand on. For each step
(a ``ProfilerStep#N`` window; the device span when the profile has no steps) the time line is cut at every
device-task and host-call edge, and each piece gets exactly one bucket, by priority:

1. ``compute``: a computing kernel runs (split by core: cube / mixed / vector / AI CPU / GPU / other);
2. ``communication_not_overlapped``: only collectives run (``communication_overlapped`` is reported
   beside the buckets: collective time hidden under compute);
3. ``memcpy``: only copies run (H2D / D2H / D2D / memset, with the pageable part where the trace says);
4. the device is idle, and the host is
   ``sync_wait``: blocked in a synchronisation (stream/device sync, sync memcpy, ``.item()``),
   ``data_loading``: in the data loader,
   ``host_launch_bound``: busy issuing work (framework ops, runtime calls),
   ``idle_other``: doing nothing the profile shows (or the profile has no host data).

This is msprof-analyze's step trace (Computing, Communication(Not Overlapped), Overlapped, Free) with its
Free split by what the host was doing, as HTA's idle-time breakdown does, per step, per rank and per
stream, in integer ns. ``Free + Preparing`` of torch_npu's step_trace_time equals our four idle buckets
plus the step's tail after its last device task (docs/attribution.md compares the samples).

A rank that kept only its step_trace_time (no tasks) is attributed from it (``source: step_trace_time``).
Memory: the sweep works one time range at a time (``SWEEP_TASKS``), the host calls a slice of rows at a
time (``HOST_SLICE_ROWS``); what it keeps is the merged segments of the time that is not compute (17 bytes
each, about 2 per task).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.grouping import (
    code_totals,
    column_values,
    int32_if_fits,
    looked_up,
    map_code_tuples,
    text_codes,
)
from pypto_core.i18n import Message, msg
from pypto_core.intervals import coverage, sorted_distinct, union_intervals, window_index
from pypto_core.memory import release_freed_memory
from pypto_core.op_roles import ROLE, role_codes

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.profile import Profile, ProfileGroup

BUCKETS: tuple[str, ...] = ("compute", "communication_not_overlapped", "memcpy", "sync_wait", "data_loading",
                            "host_launch_bound", "idle_other")
IDLE_BUCKETS: tuple[str, ...] = ("sync_wait", "data_loading", "host_launch_bound", "idle_other")
# Each bucket in words, the one home of them (CANN's and msprof-analyze's terms in Chinese): the pages' time
# breakdown and the report's warnings name the buckets so.
BUCKET_WORDS: dict[str, Message] = {
    "compute": msg("Compute"), "communication_not_overlapped": msg("Communication (not overlapped)"),
    "memcpy": msg("Memory copy"), "sync_wait": msg("Sync wait"), "data_loading": msg("Data loading"),
    "host_launch_bound": msg("Host launch bound"), "idle_other": msg("Other idle"),
}
COMPUTE_KINDS: tuple[str, ...] = ("cube", "mixed", "vector", "aicpu", "gpu", "other")
MEMCPY_KINDS: tuple[str, ...] = ("h2d", "d2h", "d2d", "memset", "other")

# Segment codes: compute kinds first (their order is the priority under overlap), then the rest.
_COMM = len(COMPUTE_KINDS)
_MEMCPY0 = _COMM + 1
_SYNC = _MEMCPY0 + len(MEMCPY_KINDS)
_DATA, _HOST, _IDLE = _SYNC + 1, _SYNC + 2, _SYNC + 3
N_CODES = _IDLE + 1
COMM_CODE = _COMM  # a collective task's code (``kernel_codes``)
D2D_CODE = _MEMCPY0 + MEMCPY_KINDS.index("d2d")  # a device-to-device copy's code


def is_copy_code(codes: np.ndarray) -> np.ndarray:
    """Per code: a copy task (H2D, D2H, D2D, memset)."""
    return (codes >= _MEMCPY0) & (codes < _SYNC)
CODE_BUCKET: tuple[str, ...] = (("compute",) * len(COMPUTE_KINDS) + ("communication_not_overlapped",)
                                + ("memcpy",) * len(MEMCPY_KINDS) + IDLE_BUCKETS)

_CORE_KIND = {"AI_CORE": "cube", "MIX_AIC": "mixed", "MIX_AIV": "mixed", "AI_VECTOR_CORE": "vector",
              "AI_CPU": "aicpu", "GPU": "gpu"}
# Host calls that block until the device catches up: CANN, CUDA and HIP syncs, the synchronous copies, and
# the framework ops that read a device value on the host (.item(), .tolist(), nonzero).
SYNC_CALL = re.compile(r"synchroniz|MemCopySync|(^|@)aclrtMemcpy$|(^|@)(cuda|hip)Memcpy$|"
                       r"^aten::(item|_local_scalar_dense|nonzero|tolist)$", re.I)
DATA_LOADER = re.compile(r"DataLoader|_DataLoaderIter|dataloader", re.I)
STEP_MARKER = re.compile(r"^ProfilerStep#")
_H2D = re.compile(r"HtoD|H2D|host_to_device|Host -> Device", re.I)
_D2H = re.compile(r"DtoH|D2H|device_to_host|Device -> Host", re.I)
_D2D = re.compile(r"DtoD|D2D|PtoP|device_to_device|Device -> Device", re.I)
_PAGEABLE = re.compile(r"Pageable", re.I)

# What ``attribute`` reads (a ``profile.ColumnSet``): the tasks' times, lanes and kinds, the steps, the
# host calls' names and times.
ATTRIBUTION_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "kernels": ("start_ns", "dur_ns", "device_id", "stream_id", "core_type", "name", "op_type"),
    "steps": None, "host_ops": ("name", "start_ns", "dur_ns"), "api_calls": ("name", "start_ns", "dur_ns"),
}


@dataclass
class Breakdown:
    """One window's (or the sum of several windows') exclusive buckets, in ns."""

    wall_ns: int = 0
    buckets: dict[str, int] = field(default_factory=lambda: {b: 0 for b in BUCKETS})
    compute_split: dict[str, int] = field(default_factory=lambda: {k: 0 for k in COMPUTE_KINDS})
    memcpy_split: dict[str, int] = field(default_factory=lambda: {k: 0 for k in MEMCPY_KINDS})
    memcpy_pageable_ns: int = 0
    communication_overlapped_ns: int = 0

    def add(self, other: Breakdown) -> None:
        self.wall_ns += other.wall_ns
        for target, source in ((self.buckets, other.buckets), (self.compute_split, other.compute_split),
                               (self.memcpy_split, other.memcpy_split)):
            for key, value in source.items():
                target[key] = target.get(key, 0) + value
        self.memcpy_pageable_ns += other.memcpy_pageable_ns
        self.communication_overlapped_ns += other.communication_overlapped_ns

    @property
    def idle_ns(self) -> int:
        return sum(self.buckets[b] for b in IDLE_BUCKETS)

    def share(self, bucket: str) -> float:
        return self.buckets.get(bucket, 0) / self.wall_ns if self.wall_ns else 0.0

    def dominant(self) -> str | None:
        if not self.wall_ns:
            return None
        return max(BUCKETS, key=lambda b: self.buckets[b])

    def to_dict(self) -> dict[str, Any]:
        return {"wall_ns": int(self.wall_ns), **{b: int(v) for b, v in self.buckets.items()},
                "communication_overlapped": int(self.communication_overlapped_ns),
                "compute_split": {k: int(v) for k, v in self.compute_split.items() if v},
                "memcpy_split": {k: int(v) for k, v in self.memcpy_split.items() if v},
                "memcpy_pageable": int(self.memcpy_pageable_ns)}


@dataclass
class StepBreakdown:
    step_id: int | None
    start_ns: int
    end_ns: int
    breakdown: Breakdown

    def to_dict(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "time_breakdown": self.breakdown.to_dict()}


@dataclass
class TimeAttribution:
    """A rank's attribution: the run (sum of its steps), each step, each stream's busy time, and the
    idle intervals by bucket (what the replay closes and the rules point at)."""

    run: Breakdown
    steps: list[StepBreakdown]
    source: str  # timeline | step_trace_time
    device_id: int | None = None
    streams: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (start, length, code) of the merged segments inside the windows that are not compute (communication,
    # copies, idle time by kind), for rules and the replay; ``intervals`` reads them. Lengths in 4 bytes
    # where they fit: 5.8 M segments of a 5 GB simulated folder held 94 MB with their ends in 8. Where no
    # host call is recorded, idle_other's are not kept: every idle moment is idle_other there, and what asks
    # for it (compilations stalling the device, ``dynamic_shape``) comes from host calls (a 15.7 M-kernel
    # table's gaps held 180 MB)
    segments: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    note: Message | None = None  # why the attribution is not the timeline's, when it is not
    # whether the profile records host calls: without them (a kernel table, an export without trace_view or
    # the AscendCL layer) the idle time is not split by what the host did, and all of it is idle_other
    host_recorded: bool = True

    def profiler_steps(self) -> list[StepBreakdown] | None:
        """The profile's own steps (ProfilerStep#N windows, the profiler's empty tail left out by
        ``step_windows``): none where the timeline is one window over the device span; None where the
        attribution is not the timeline's."""
        if self.source != "timeline":
            return None
        return [st for st in self.steps if st.step_id is not None]

    def windows(self) -> np.ndarray:
        """The steps' [start, end) windows, one row a step (shape (steps, 2), int64 ns)."""
        return np.array([[s.start_ns, s.end_ns] for s in self.steps], np.int64).reshape(-1, 2)

    def intervals(self, *buckets: str) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the pieces of time in these buckets (any but ``compute``, which is not kept)."""
        if self.segments is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        s, length, code = self.segments
        wanted = [c for c in range(N_CODES) if CODE_BUCKET[c] in buckets]
        sel = np.isin(code, wanted)
        starts = s[sel]
        return starts, starts + length[sel]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "note": self.note.render() if self.note else None,
                "device_id": self.device_id,
                "time_breakdown": self.run.to_dict(),
                "dominant": self.run.dominant(), "steps": [s.to_dict() for s in self.steps],
                "streams": self.streams}


# -- classification ------------------------------------------------------------------------------------
def kernel_codes(kernels: pa.Table, roles: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(segment code per kernel, pageable flag per kernel): computing kind, collective or copy kind."""
    n = kernels.num_rows
    if not n:
        return np.zeros(0, np.int8), np.zeros(0, bool)
    roles = role_codes(kernels) if roles is None else roles
    core, core_v = text_codes(kernels["core_type"], narrow=True)
    name, name_v = text_codes(kernels["name"], narrow=True)

    def classified(c: int, n: int) -> int:  # code and pageable flag in one number
        code, pageable = _classify_task((core_v[c] if c >= 0 else "").upper(), name_v[n] if n >= 0 else "")
        return code * 2 + int(pageable)

    both = map_code_tuples(classified, core, name)
    del core, name
    codes = (both // 2).astype(np.int8)
    codes = np.where((roles == ROLE["communication"]) & (codes < _COMM), _COMM, codes).astype(np.int8)
    codes = np.where((roles == ROLE["aicpu"]) & (codes < _COMM), COMPUTE_KINDS.index("aicpu"), codes)
    return codes.astype(np.int8), (both % 2).astype(bool)


def _classify_task(core_type: str, name: str) -> tuple[int, bool]:
    if core_type in ("COMMUNICATION", "HCCL"):
        return _COMM, False
    is_copy = core_type in ("MEMCPY", "MEMSET") or re.match(r"(?i)^(memcpy|memset)|^MEMCPY_ASYNC", name)
    if is_copy:
        if core_type == "MEMSET" or re.match(r"(?i)^memset", name):
            kind = "memset"
        elif _H2D.search(name):
            kind = "h2d"
        elif _D2H.search(name):
            kind = "d2h"
        elif _D2D.search(name):
            kind = "d2d"
        else:
            kind = "other"
        return _MEMCPY0 + MEMCPY_KINDS.index(kind), bool(_PAGEABLE.search(name))
    return COMPUTE_KINDS.index(_CORE_KIND.get(core_type, "other")), False


# Host calls (and flows) are read a slice of rows at a time: a slice's arrays (about 60 bytes a call) stay
# near 15 MB however many calls the profile holds (8.6 M on a 5 GB simulated folder).
HOST_SLICE_ROWS = 250_000


def host_calls(profile: Profile) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(start, end, class) of the host calls, one slice of rows of one table at a time: class 0 sync, 1 data
    loading, 2 busy; step markers and calls of no duration left out."""
    for table in (profile.host_ops, profile.api_calls):
        if not table.num_rows:
            continue
        enc = pc.fill_null(table["name"], "").combine_chunks()
        enc = enc if pa.types.is_dictionary(enc.type) else enc.dictionary_encode()
        lut = np.array([_host_class(v) for v in enc.dictionary.to_pylist()], np.int8)
        if not len(lut):
            continue
        for at in range(0, table.num_rows, HOST_SLICE_ROWS):
            rows = table.slice(at, HOST_SLICE_ROWS)
            s = pc.fill_null(rows["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            d = pc.fill_null(rows["dur_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            cls = lut[enc.indices.slice(at, HOST_SLICE_ROWS).to_numpy(zero_copy_only=False)]
            keep = (cls >= 0) & (d > 0)
            yield s[keep], s[keep] + d[keep], cls[keep]


Pieces = tuple[np.ndarray, np.ndarray]  # (starts, ends) of sorted, disjoint intervals


HostSlice = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def host_unions(profile: Profile, classes: tuple[int, ...] = (0, 1, 2),
                each_slice: HostSlice | None = None) -> list[Pieces]:
    """Per host class (``classes``, by index: sync, data loading, busy), its calls merged into sorted,
    disjoint intervals: nested framework ops and runtime calls become one piece, and the sweep only asks
    whether a class covers a moment (8.6 M calls are 2.2 M pieces on a 5 GB simulated folder). Merged slice
    by slice, then once more across the slices; ``each_slice`` sees every slice too (start, end, class), so
    that a caller's own pass over the host calls is this one."""
    parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(3)]
    for s, e, cls in host_calls(profile):
        if each_slice is not None:
            each_slice(s, e, cls)
        for c in classes:
            sel = cls == c
            if sel.any():
                parts[c].append(union_intervals(s[sel], e[sel]))
    out = []
    for c in range(3):
        pieces = parts[c]
        parts[c] = []
        if len(pieces) > 1:
            out.append(union_intervals(np.concatenate([x for x, _ in pieces]),
                                       np.concatenate([y for _, y in pieces])))
        else:
            out.append(pieces[0] if pieces else (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    return out


def matching_calls(profile: Profile, pattern: re.Pattern[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(starts, ends, names) of the host calls (runtime API calls and framework ops) whose name, less
    torch_npu's ``Level@`` prefix, matches ``pattern``; each distinct name is tested once."""
    starts, ends, names = [], [], []
    for table in (profile.api_calls, profile.host_ops):
        if not table.num_rows:
            continue
        column = pc.fill_null(table["name"], "").combine_chunks()
        enc = column.dictionary_encode()
        hit = np.array([bool(pattern.search(v.split("@", 1)[-1])) for v in enc.dictionary.to_pylist()], bool)
        if not hit.any():
            continue
        rows = np.nonzero(hit[enc.indices.to_numpy(zero_copy_only=False)])[0]
        s = pc.fill_null(table["start_ns"], 0).to_numpy(zero_copy_only=False)[rows].astype(np.int64)
        d = pc.fill_null(table["dur_ns"], 0).to_numpy(zero_copy_only=False)[rows].astype(np.int64)
        starts.append(s)
        ends.append(s + np.maximum(d, 0))
        names += column.take(pa.array(rows)).to_pylist()
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    return np.concatenate(starts), np.concatenate(ends), names


def _host_class(name: str) -> int:
    if STEP_MARKER.search(name):
        return -1
    bare = name.split("@", 1)[-1]  # torch_npu prefixes its API levels: AscendCL@aclrtSynchronizeStream
    if SYNC_CALL.search(bare) or SYNC_CALL.search(name):
        return 0
    if DATA_LOADER.search(name):
        return 1
    return 2


# -- windows -----------------------------------------------------------------------------------------------
def step_windows(profile: Profile, k_start: np.ndarray, k_end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, list[int | None]]:
    """The steps as non-overlapping [start, end) windows (a step is cut where the next one begins); the
    device span as one window when the profile has no usable steps."""
    steps = profile.steps
    if steps.num_rows:
        st = pc.fill_null(steps["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
        en = pc.fill_null(steps["end_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
        ids = steps["step_id"].to_pylist()
        ok = (st > 0) & (en > st)
        if ok.any():
            order = np.argsort(st[ok], kind="stable")
            st, en = st[ok][order], en[ok][order]
            ids = [ids[i] for i in np.nonzero(ok)[0][order]]
            en = np.minimum(en, np.concatenate([st[1:], [np.iinfo(np.int64).max]]))
            # torch's profiler opens the step after the last one it records (41-49 µs, no device task, on
            # the H200 and MI250 traces): trailing steps in which no task starts are not steps of the run
            if len(k_start) and len(st) > 1:
                inside = window_index(st, en, k_start)
                last = int(inside.max())
                if last >= 0:
                    st, en, ids = st[:last + 1], en[:last + 1], ids[:last + 1]
            return st, en, ids
    if len(k_start):
        return np.array([k_start.min()]), np.array([k_end.max()]), [None]
    return np.zeros(0, np.int64), np.zeros(0, np.int64), []


# -- the sweep -------------------------------------------------------------------------------------------
def attribute(profile: Profile, codes: tuple[np.ndarray, np.ndarray] | None = None) -> TimeAttribution | None:
    """The time attribution of one rank (see the module docstring); None when the profile has neither
    device tasks nor step_trace figures. ``codes``: ``kernel_codes`` of its kernels, when already known."""
    k = profile.kernels
    if not k.num_rows:
        return _from_step_trace(profile)
    # read, never written: the loaded columns themselves where they are one chunk (``column_values``)
    start = column_values(k["start_ns"]).astype(np.int64, copy=False)
    dur = column_values(k["dur_ns"])  # 4 bytes where a projected load kept them so: added to int64 starts
    if int(dur.min()) < 0:  # a copy only where a length is negative (125 MB of a 15.7 M-kernel table)
        dur = np.maximum(dur, 0)
    # ids in their loaded width (4 bytes where they fit): 250 MB less on a 15.7 M-kernel table
    device = column_values(k["device_id"])
    stream = column_values(k["stream_id"], -1)
    kinds, pageable = codes if codes is not None else kernel_codes(k)
    # One device per rank: where a file holds several, the busiest is the rank's (the others are listed
    # under their own streams only).
    main = _busiest_device(device, dur)
    on = (device == main) & (start > 0)
    del device
    if on.all():  # one device, every task timed: the tasks as loaded, no copy
        end = start + dur
    else:
        start, end, kinds, pageable, stream = (start[on], start[on] + dur[on], kinds[on], pageable[on],
                                               stream[on])
    del dur, on
    w_start, w_end, ids = step_windows(profile, start, end)
    if not len(w_start):
        return None
    tasks = _Tasks(start, end, kinds, pageable, *_lanes(stream))
    del start, end, kinds, pageable, stream
    host = host_unions(profile)
    host_recorded = any(len(starts) for starts, _ in host)
    release_freed_memory()  # the host calls' slices, before the sweep's edges take their place
    totals = _Totals.zeros(len(w_start), tasks.busiest_lanes())
    pieces = [_sweep(lo, hi, tasks, host, w_start, w_end, totals, keep_idle_other=host_recorded)
              for lo, hi in _time_ranges(tasks.start, w_start[0], w_end[-1])]
    del host
    release_freed_memory()
    seg_start, seg_end, seg_code = _joined(pieces)
    seg_end -= seg_start  # in place: the lengths
    segments = (seg_start, int32_if_fits(seg_end), seg_code)
    del seg_end
    steps: list[StepBreakdown] = []
    run = Breakdown()
    for i in range(len(w_start)):
        b = _breakdown(int(w_end[i] - w_start[i]), totals.per[i], int(totals.overlapped[i]),
                       int(totals.paged[i]))
        steps.append(StepBreakdown(ids[i], int(w_start[i]), int(w_end[i]), b))
        run.add(b)
    timeline = TimeAttribution(run=run, steps=steps, source="timeline", device_id=main,
                               streams=tasks.streams(totals), segments=segments, host_recorded=host_recorded)
    return _unless_incomplete(timeline, profile)


STREAMS_LISTED = 32  # the busiest streams a report lists


def _busiest_device(device: np.ndarray, dur: np.ndarray) -> int:
    """The device id whose tasks take the most time (the lowest id of a tie); a rank's file holds one, which
    is read off without a lane per task (250 MB of temporaries on a 15.7 M-kernel table)."""
    if int(device.min()) == int(device.max()):
        return int(device[0])
    device_ids, device_lane = _lanes(device)  # ids are file contents: a sparse one must not size a table
    return int(device_ids[np.argmax(np.bincount(device_lane, weights=dur.astype(np.float64)))])


def _lanes(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct stream ids, sorted; per task, the index of its stream among them)."""
    low = int(stream.min()) if len(stream) else 0
    span = int(stream.max()) - low + 1 if len(stream) else 0
    if span > 1 << 20:  # ids too sparse for a table of them
        ids, lane = np.unique(stream, return_inverse=True)
        return ids, lane.reshape(-1).astype(np.int32)
    # worked into the lanes in place, a slice at a time: one array a task (a count or a lookup over every
    # task at once widens its indices to 8 bytes first: 125 MB of a 15.7 M-kernel table)
    # worked out in 4 bytes (8 where the ids are): 1-byte ids would wrap (127 - -1)
    lane = np.subtract(stream, low, dtype=np.int64 if stream.dtype.itemsize > 4 else np.int32)
    lane = lane.astype(np.int32, copy=False)
    present = np.zeros(span, bool)
    for at in range(0, len(lane), _LANE_SLICE):
        present[lane[at:at + _LANE_SLICE]] = True
    index = (np.cumsum(present) - 1).astype(np.int32)  # a lane in 4 bytes a task
    return np.flatnonzero(present) + low, looked_up(index, lane, out=lane)


@dataclass
class _Tasks:
    """The main device's tasks, as the sweep reads them: times, codes, pageable flags and stream lanes."""

    start: np.ndarray
    end: np.ndarray
    kinds: np.ndarray
    pageable: np.ndarray
    lane_ids: np.ndarray  # stream id of each lane
    lane: np.ndarray  # per task

    def busiest_lanes(self) -> np.ndarray:
        return np.argsort(-self._lane_time(by_kind=False)[:, 0])[:STREAMS_LISTED]

    def _lane_time(self, by_kind: bool) -> np.ndarray:
        """The tasks' time per lane (and kind: lanes x codes), a slice of tasks at a time (their lengths as
        floats took 250 MB of a 15.7 M-kernel table at once). Float sums of integer ns: exact in any order
        below 2**53 ns (104 days)."""
        width = N_CODES if by_kind else 1
        total = np.zeros(len(self.lane_ids) * width)
        for at in range(0, len(self.lane), _LANE_SLICE):
            part = slice(at, at + _LANE_SLICE)
            key = self.lane[part].astype(np.int64)
            if by_kind:
                key = key * N_CODES + self.kinds[part]
            total += np.bincount(key, weights=(self.end[part] - self.start[part]).astype(np.float64),
                                 minlength=len(total))
        return total.reshape(-1, width)

    def streams(self, totals: _Totals) -> dict[str, dict[str, Any]]:
        """Busy time (union of its tasks, inside the steps) of the busiest streams, and what they mostly
        run."""
        by_kind = self._lane_time(by_kind=True)
        count, _ = code_totals(self.lane, len(self.lane_ids))
        out: dict[str, dict[str, Any]] = {}
        for j, busy in zip(totals.lanes, totals.lane_busy):
            main = int(np.argmax(by_kind[j]))
            kind = "communication" if main == _COMM else ("memcpy" if _MEMCPY0 <= main < _SYNC else "compute")
            out[str(int(self.lane_ids[j]))] = {"busy_ns": int(busy), "tasks": int(count[j]), "kind": kind}
        return out


_LANE_SLICE = 1 << 20  # tasks whose lanes' time is summed at once


@dataclass
class _Totals:
    """What the sweep adds up over its time ranges: per window and code, the overlapped and pageable time per
    window, and the busy time of the listed lanes."""

    per: np.ndarray  # (windows, codes)
    overlapped: np.ndarray
    paged: np.ndarray
    lanes: np.ndarray  # the lanes whose busy time is summed
    lane_busy: np.ndarray

    @classmethod
    def zeros(cls, windows: int, lanes: np.ndarray) -> _Totals:
        return cls(np.zeros((windows, N_CODES), np.int64), np.zeros(windows, np.int64),
                   np.zeros(windows, np.int64), lanes, np.zeros(len(lanes), np.int64))


# The sweep works one time range at a time, each holding about this many device tasks: its arrays over the
# edges (about 60 bytes per edge) then stay near 60 MB whatever the run's length. The figures are exactly the
# whole run's sweep (per-window sums of integer ns). Measured on a 5 GB simulated folder (2.1 M tasks, 8.6 M
# host calls), with the host calls merged per class and the task classes coded: the attribution's peak above
# the call graph fell from 857 MB to 370 MB, and it took 3.9 s instead of 8.9 s.
SWEEP_TASKS = 500_000


def _time_ranges(start: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi) cut at task starts into ranges of about ``SWEEP_TASKS`` tasks each (a sample's quantiles:
    the cuts need not be exact, only the figures)."""
    n = len(start)
    if n <= SWEEP_TASKS:
        return [(int(lo), int(hi))]
    sample = np.sort(start[:: max(n // 20_000, 1)])
    cuts = sample[np.linspace(0, len(sample) - 1, n // SWEEP_TASKS + 1)[1:-1].astype(np.int64)]
    cuts = np.unique(cuts[(cuts > lo) & (cuts < hi)])
    edges = [int(lo), *map(int, cuts), int(hi)]
    return list(zip(edges[:-1], edges[1:]))


def _within(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The parts inside [lo, hi) of sorted, disjoint intervals."""
    a, b = np.searchsorted(e, lo, side="right"), np.searchsorted(s, hi, side="left")
    return np.clip(s[a:b], lo, hi), np.clip(e[a:b], lo, hi)


def _sweep(lo: int, hi: int, tasks: _Tasks, host: list[tuple[np.ndarray, np.ndarray]], w_start: np.ndarray,
           w_end: np.ndarray, totals: _Totals, keep_idle_other: bool = True
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The time range [lo, hi): each window's time by code, its overlapped and pageable time and the listed
    lanes' busy time added to ``totals``; returns the range's merged segments inside the windows (but
    idle_other's unless ``keep_idle_other``)."""
    rows = np.flatnonzero((tasks.start < hi) & (tasks.end > lo))
    s, e = np.clip(tasks.start[rows], lo, hi), np.clip(tasks.end[rows], lo, hi)
    k, pg, lane = tasks.kinds[rows], tasks.pageable[rows], tasks.lane[rows]
    del rows
    h = [_within(hs, he, lo, hi) for hs, he in host]
    wa, wb = np.searchsorted(w_end, lo, side="right"), np.searchsorted(w_start, hi, side="left")
    ws, we = w_start[wa:wb], w_end[wa:wb]
    bounds = sorted_distinct(np.concatenate([s, e, *(x for pair in h for x in pair), np.clip(ws, lo, hi),
                                             np.clip(we, lo, hi), [lo, hi]]))
    # Memory: a handful of arrays over the edges (int32 where they fit); temporaries dropped as soon as used
    win = (np.searchsorted(ws, bounds[:-1], side="right") - 1).astype(np.int32)
    inside = (win >= 0) & (bounds[:-1] < we[np.clip(win, 0, None)])
    seg_code = np.full(len(bounds) - 1, -1, np.int8)
    for code in range(_SYNC):  # device kinds in priority order
        sel = k == code
        if sel.any():
            seg_code[(seg_code < 0) & coverage(bounds, s[sel], e[sel])] = code
    for (hs, he), code in zip(h, (_SYNC, _DATA, _HOST)):
        if len(hs):
            seg_code[(seg_code < 0) & coverage(bounds, hs, he)] = code
    del h
    seg_code[seg_code < 0] = _IDLE
    length = np.diff(bounds)
    for i, j in enumerate(totals.lanes):  # a stream's busy time: its tasks' union, inside the windows
        sel = lane == j
        if sel.any():
            totals.lane_busy[i] += int(length[inside & coverage(bounds, s[sel], e[sel])].sum())
    del lane
    both = coverage(bounds, s[k < _COMM], e[k < _COMM])
    both &= coverage(bounds, s[k == _COMM], e[k == _COMM])
    on_pageable = coverage(bounds, s[pg], e[pg])
    on_pageable &= (seg_code >= _MEMCPY0) & (seg_code < _SYNC)
    del s, e, k, pg
    nwin = len(ws)
    len_in = length[inside].astype(np.float64)
    del length
    win_in, code_in = win[inside], seg_code[inside]
    del win
    per = np.bincount(win_in.astype(np.int64) * N_CODES + code_in, weights=len_in, minlength=nwin * N_CODES)
    totals.per[wa:wb] += np.rint(per).astype(np.int64).reshape(nwin, N_CODES)
    totals.overlapped[wa:wb] += np.rint(np.bincount(win_in, weights=len_in * both[inside],
                                                    minlength=nwin)).astype(np.int64)
    totals.paged[wa:wb] += np.rint(np.bincount(win_in, weights=len_in * on_pageable[inside],
                                               minlength=nwin)).astype(np.int64)
    del both, on_pageable, len_in, win_in, code_in
    starts, ends, codes = _merged(bounds[:-1][inside], bounds[1:][inside], seg_code[inside])
    # only the time that is not compute is kept: no rule or replay asks where the compute ran (``intervals``
    # of the other buckets), and a busy device's segments are half compute
    kept = codes >= _COMM
    if not keep_idle_other:
        kept &= codes != _IDLE
    return starts[kept], ends[kept], codes[kept]


# A task table holding less than this share of the device time the profiler itself recorded in
# step_trace_time is a part of the run (a trimmed upload,
# or tasks the export dropped): its own steps say more.
MIN_TASK_COVERAGE = 0.5


def _unless_incomplete(timeline: TimeAttribution, profile: Profile) -> TimeAttribution:
    recorded = _from_step_trace(profile)
    if recorded is None:
        return timeline

    def busy(a: TimeAttribution) -> int:
        return sum(a.run.buckets.get(b, 0) for b in ("compute", "communication_not_overlapped", "memcpy"))

    want = busy(recorded)
    if want and busy(timeline) < MIN_TASK_COVERAGE * want:
        recorded.note = msg("the task table holds {pct:.0f}% of the device time that step_trace_time "
                            "records; the breakdown is step_trace_time's", pct=100 * busy(timeline) / want)
        return recorded
    return timeline


def _breakdown(wall: int, per_code: np.ndarray, overlapped: int, pageable: int) -> Breakdown:
    b = Breakdown(wall_ns=wall, memcpy_pageable_ns=pageable, communication_overlapped_ns=overlapped)
    for code in range(N_CODES):
        b.buckets[CODE_BUCKET[code]] += int(per_code[code])
    for i, kind in enumerate(COMPUTE_KINDS):
        b.compute_split[kind] = int(per_code[i])
    for i, kind in enumerate(MEMCPY_KINDS):
        b.memcpy_split[kind] = int(per_code[_MEMCPY0 + i])
    return b


def _merged(s: np.ndarray, e: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adjacent segments of one code joined (fewer, longer pieces for rules and the replay)."""
    if not len(s):
        return s, e, code
    new = np.concatenate([[True], (code[1:] != code[:-1]) | (s[1:] != e[:-1])])
    first = np.nonzero(new)[0]
    last = np.concatenate([first[1:] - 1, [len(s) - 1]])
    return s[first], e[last], code[first]


Segments = tuple[np.ndarray, np.ndarray, np.ndarray]  # (starts, ends, codes)


def _joined(pieces: list[Segments]) -> Segments:
    """The time ranges' merged segments as one run's: a segment that goes on across a cut is joined, and
    each range's arrays are freed once copied (the whole run's segments are held once, not twice)."""
    keep = [len(p[0]) for p in pieces]
    last: Segments | None = None  # the latest range with a segment left
    for i, (s, e, code) in enumerate(pieces):
        if last is not None and len(s) and code[0] == last[2][-1] and s[0] == last[1][-1]:
            last[1][-1] = e[0]  # the first segment of a range continues the last one before it
            pieces[i] = (s[1:], e[1:], code[1:])
            keep[i] -= 1
        if keep[i]:
            last = pieces[i]
    total = sum(keep)
    out: Segments = (np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int8))
    at = 0
    while pieces:
        piece = pieces.pop(0)
        n = len(piece[0])
        for target, source in zip(out, piece):
            target[at:at + n] = source
        at += n
        del piece
    return out


def _from_step_trace(profile: Profile) -> TimeAttribution | None:
    """A rank with no device tasks but torch_npu's step_trace_time: its own figures, idle unsplit."""
    steps = profile.steps
    if not steps.num_rows or "computing_ns" not in steps.column_names:
        return None
    rows = steps.to_pylist()
    if all(r.get("computing_ns") is None for r in rows):
        return None
    out, run = [], Breakdown()
    for r in rows:
        compute = int(r.get("computing_ns") or 0)
        comm = r.get("communication_not_overlapped_ns")
        if comm is None:
            comm = int(r.get("communication_ns") or 0) - int(r.get("overlapped_ns") or 0)
        free = int(r.get("free_ns") or 0) + int(r.get("preparing_ns") or 0)
        b = Breakdown(wall_ns=compute + int(comm) + free,
                      communication_overlapped_ns=int(r.get("overlapped_ns") or 0))
        b.buckets.update({"compute": compute, "communication_not_overlapped": int(comm), "idle_other": free})
        b.compute_split["other"] = compute
        out.append(StepBreakdown(r.get("step_id"), int(r.get("start_ns") or 0), int(r.get("end_ns") or 0), b))
        run.add(b)
    return TimeAttribution(run=run, steps=out, source="step_trace_time")


def attribute_group(group: ProfileGroup) -> list[tuple[int | None, TimeAttribution | None]]:
    """(rank, attribution) for every rank of a group, lowest rank first."""
    ranked = sorted(group.profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))
    return [(p.meta.rank, attribute(p)) for p in ranked]
