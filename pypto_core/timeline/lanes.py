"""Turn a ``Profile`` into timeline lanes: one per process/thread/stream, with columnar events.

A lane is what one row of the viewer shows: host ops of one thread, CANN API calls of one thread, the kernels
of one device stream, one communication group, the profiler steps, or one counter track. Events come out as
flat numpy columns (lane, start, end, name id, source row) with times relative to one base, so that the
index and the chrome-trace export share the same lane assignment and the same time base.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.i18n import Message, msg, render
from pypto_core.profile import Profile

Text = Message | str  # a lane's name or heading: a template (rendered in the page's language) or trace data


@dataclass
class Lane:
    id: int
    name: str
    group: str  # the process-like heading the lane sits under ("Host process 1234", "NPU 0", ...)
    kind: str  # "slices" or "counter"
    table: str  # the source table ("host_ops", "kernels", ..., "counters", "memory")
    sort: int  # order of groups: steps, device, communication, host, CANN API, counters
    # Shown folded away at first: a counter whose value never changes in the profile (the viewer lists it).
    hidden: bool = False
    detail: str = ""  # what the name stands for, in full (an HCCL group's id, a stream left unrecorded)
    # The same three as stored messages (``Message.to_dict``), rendered in the page's language when served;
    # ``name``, ``group`` and ``detail`` stay English (the chrome-trace export, and the group's stable id).
    texts: dict[str, dict[str, Any] | str] | None = None

    @classmethod
    def make(cls, lane_id: int, name: Text, group: Text, kind: str, table: str, sort: int) -> Lane:
        lane = cls(lane_id, render(name), render(group), kind, table, sort)
        lane.texts = {"name": _stored(name), "group": _stored(group)}
        return lane

    def set_detail(self, detail: Text) -> None:
        self.detail = render(detail)
        self.texts = {**(self.texts or {}), "detail": _stored(detail)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def localized(self, language: str) -> dict[str, Any]:
        """The lane as answers show it: name, group and detail in ``language``, ``group_id`` the English
        heading (stable whatever the language: saved layouts name folded groups by it)."""
        out = {k: v for k, v in asdict(self).items() if k != "texts"}
        out["group_id"] = self.group
        for key, stored in (self.texts or {}).items():
            out[key] = render(Message.from_dict(stored), language) if isinstance(stored, dict) else stored
        return out


def _stored(text: Text) -> dict[str, Any] | str:
    return text.to_dict() if isinstance(text, Message) else text


@dataclass
class LaneEvents:
    """Every slice of the profile as columns; times are ns relative to ``base_ns``."""

    base_ns: int
    lanes: list[Lane]
    strings: pa.Array  # interned names; ``name`` holds indices into it
    lane: np.ndarray  # int32
    start: np.ndarray  # int64, relative ns
    end: np.ndarray  # int64, relative ns, >= start
    name: np.ndarray  # int32
    row: np.ndarray  # int64, row index in the lane's source table
    counter_lane: np.ndarray  # int32, counter samples: lane id
    counter_t: np.ndarray  # int64, relative ns
    counter_v: np.ndarray  # float64


# Group order in the viewer, top to bottom: the steps, then the device's streams and its collectives (what a
# timeline is opened for: with the host above them, as Perfetto and MindStudio Insight order it, a host
# process of a few threads with deep Python stacks filled the first screen and the device lanes were below
# the fold), then the host threads and the runtime API that launched the work, then counters.
_SORT = {"steps": 0, "kernels": 1, "communication": 2, "host_ops": 3, "api_calls": 4,
         "counters": 5, "memory": 6}


def _int_column(table: pa.Table, name: str, fill: int) -> np.ndarray:
    col = table[name]
    if col.null_count:
        col = pc.fill_null(col, fill)
    # no copy for a single chunk without nulls
    values = col.chunk(0).to_numpy() if col.num_chunks == 1 else col.to_numpy()
    as_int: np.ndarray = values.astype(np.int64, copy=False)
    return as_int


def _group_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique (a, b) pairs (sorted) and, per row, the index of its pair (int32)."""
    if len(a) == 0:
        return np.empty((0, 2), np.int64), np.empty(0, np.int32)
    a_lo, b_lo = int(a.min()), int(b.min())
    b_span = int(b.max()) - b_lo + 1
    if (int(a.max()) - a_lo + 1) * b_span < 2**62:  # one int64 key, hashed (no sort of the rows)
        encoded = pc.dictionary_encode(pa.array((a - a_lo) * b_span + (b - b_lo)))
        keys = encoded.dictionary.to_numpy()
        order = np.argsort(keys)
        rank = np.empty(len(keys), np.int32)
        rank[order] = np.arange(len(keys), dtype=np.int32)
        keys = keys[order]
        inverse = rank[encoded.indices.to_numpy()]
        return np.stack([keys // b_span + a_lo, keys % b_span + b_lo], axis=1), inverse
    pairs, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    return pairs, inverse.reshape(-1).astype(np.int32)


class _Interner:
    """Collects string columns and maps them to ids in one shared table."""

    def __init__(self) -> None:
        self._dicts: list[pa.Array] = []
        self._indices: list[np.ndarray] = []
        self._maps: list[np.ndarray] = []

    def add(self, column: pa.ChunkedArray | pa.Array) -> int:
        col = pc.fill_null(column, "")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        encoded = pc.dictionary_encode(col.cast(pa.string()))
        self._dicts.append(encoded.dictionary)
        self._indices.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False))
        return len(self._dicts) - 1

    def finish(self) -> pa.Array:
        """The shared string table; ``ids(slot)`` then maps a column's rows into it."""
        if not self._dicts:
            return pa.array([], pa.string())
        strings = pc.unique(pa.concat_arrays(self._dicts))
        self._maps = [pc.index_in(d, value_set=strings).to_numpy(zero_copy_only=False).astype(np.int32)
                      for d in self._dicts]
        return strings

    def ids(self, slot: int) -> np.ndarray:
        """Name id per row of the column added as ``slot`` (int32)."""
        indices = self._indices[slot]
        return self._maps[slot][indices] if len(indices) else np.empty(0, np.int32)


@dataclass
class SliceTable:
    """The slices of one source table: its lanes are ``first_lane .. first_lane + lane_count - 1``."""

    table: str
    first_lane: int
    lane_count: int
    num_rows: int
    slot: int  # the interner slot of its names
    _columns: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per source row: local lane (int32, -1 for a row without a start), start and end (relative ns)."""
        return self._columns()


def _base_ns(profile: Profile) -> int:
    lows = []
    for name, col in (("kernels", "start_ns"), ("host_ops", "start_ns"), ("api_calls", "start_ns"),
                      ("communication", "start_ns"), ("steps", "start_ns"), ("counters", "ts_ns"),
                      ("memory", "ts_ns")):
        table = profile.table(name)
        if table.num_rows:
            low = pc.min(table[col]).as_py()
            if low is not None:
                lows.append(low)
    return int(min(lows)) if lows else 0


def slice_tables(profile: Profile, base: int, lanes: list[Lane], interner: _Interner) -> list[SliceTable]:
    """Register the slice lanes of ``profile`` in ``lanes`` (in viewer order); columns are computed on demand,
    one table at a time, so that a caller never holds more than one table's columns."""
    sources: list[SliceTable] = []

    def add(table_name: str, table: pa.Table, names: pa.ChunkedArray | pa.Array,
            columns: Callable[[], tuple[np.ndarray, np.ndarray]], keys: np.ndarray,
            key_names: list[tuple[Text, Text]]) -> None:
        first_lane = len(lanes)
        for group, lane_name in key_names:
            lanes.append(Lane.make(len(lanes), lane_name, group, "slices", table_name, _SORT[table_name]))

        def load() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            start, dur = columns()
            lane = keys.astype(np.int32)
            lane[start < 0] = -1
            start = start - base
            return lane, start, start + np.maximum(dur, 0)

        sources.append(SliceTable(table_name, first_lane, len(key_names), table.num_rows, interner.add(names),
                                  load))

    steps = profile.steps
    if steps.num_rows:
        ids = pc.fill_null(steps["step_id"], -1).to_pylist()
        names = pa.array([f"Step {i}" if i >= 0 else "Step" for i in ids], pa.string())

        def step_columns() -> tuple[np.ndarray, np.ndarray]:
            start = _int_column(steps, "start_ns", -1)
            return start, np.maximum(_int_column(steps, "end_ns", -1) - start, 0)

        add("steps", steps, names, step_columns, np.zeros(steps.num_rows, np.int32),
            [(msg("Profiler steps"), msg("Step markers"))])

    def plain(table: pa.Table, dur: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        return lambda: (_int_column(table, "start_ns", -1), _int_column(table, dur, 0))

    host = profile.host_ops
    if host.num_rows:
        pairs, inverse = _group_pairs(_int_column(host, "pid", -1), _int_column(host, "tid", -1))
        add("host_ops", host, host["name"], plain(host, "dur_ns"), inverse.astype(np.int32),
            [(msg("Host process {pid}", pid=p),
              msg("Thread {tid} (main)", tid=t) if t == p else msg("Thread {tid}", tid=t))
             for p, t in pairs.tolist()])

    api = profile.api_calls
    if api.num_rows:
        pairs, inverse = _group_pairs(_int_column(api, "pid", -1), _int_column(api, "tid", -1))
        add("api_calls", api, api["name"], plain(api, "dur_ns"), inverse.astype(np.int32),
            [(_api_heading(profile, p), msg("Thread {tid}", tid=t)) for p, t in pairs.tolist()])

    kernels = profile.kernels
    if kernels.num_rows:
        pairs, inverse = _group_pairs(_int_column(kernels, "device_id", -1),
                                      _int_column(kernels, "stream_id", -1))
        device = _device_heading(profile)
        unrecorded = _unrecorded_stream_name(kernels)
        word = _device_word(profile)
        add("kernels", kernels, kernels["name"], plain(kernels, "dur_ns"), inverse.astype(np.int32),
            [(f"{word} {d}" if d >= 0 else device, msg("Stream {stream}", stream=s) if s >= 0 else unrecorded)
             for d, s in pairs.tolist()])

    comm = profile.communication
    if comm.num_rows:
        library = _collective_library(profile)
        groups = pc.fill_null(comm["group"], "").combine_chunks()
        encoded = pc.dictionary_encode(groups)
        first = len(lanes)
        group_ids = encoded.dictionary.to_pylist()
        add("communication", comm, comm["name"], plain(comm, "elapse_ns"),
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32),
            [(msg("Communication ({library})", library=library), communication_group_name(profile, g))
             for g in group_ids])
        for lane, g in zip(lanes[first:], group_ids):
            lane.set_detail(msg("{library} group {group}", library=library, group=g) if g
                            else msg("no group recorded"))
    return sources


def _api_heading(profile: Profile, pid: int) -> Message:
    """CANN for Ascend exports; a PyTorch (Kineto) trace's runtime calls are CUDA's or HIP's, not CANN's."""
    if profile.meta.format == "kineto":
        return msg("Runtime API (process {pid})", pid=pid)
    return msg("CANN API (process {pid})", pid=pid)


def _device_word(profile: Profile) -> str:
    """What the device is called: a PyTorch (Kineto) trace's kernels ran on a GPU (CUDA or ROCm), an Ascend
    export's on an NPU (its "NPU 0" heading named an A100's streams)."""
    return "GPU" if profile.meta.format == "kineto" else "NPU"


def _collective_library(profile: Profile) -> str:
    """The collective library whose calls the communication lanes hold: HCCL on Ascend, NCCL on an NVIDIA
    GPU, RCCL on an AMD one (a ROCm trace names its device or its hip* runtime calls)."""
    if profile.meta.format != "kineto":
        return "HCCL"
    from pypto_core.workload import device_vendor

    return "RCCL" if device_vendor(profile) == "amd" else "NCCL"


def _device_heading(profile: Profile) -> Text:
    """The heading of kernels without a device id: the rank's device when the profile says which."""
    meta, word = profile.meta, _device_word(profile)
    if meta.device_id is not None:
        return f"{word} {meta.device_id}"
    if meta.rank is None:
        return word
    if word == "GPU":
        return msg("GPU (rank {rank})", rank=meta.rank)
    return msg("NPU (rank {rank})", rank=meta.rank)


def _unrecorded_stream_name(kernels: pa.Table) -> Message:
    """Kernels whose stream id the export left empty (kernel_details gives none for HCCL tasks): named by
    their core type."""
    if "core_type" not in kernels.column_names:
        return msg("Stream not recorded")
    rows = kernels.filter(pc.is_null(kernels["stream_id"]))
    types = sorted({t for t in pc.unique(rows["core_type"]).to_pylist() if t})[:3] if rows.num_rows else []
    if not types:
        return msg("Stream not recorded")
    return msg("{types} tasks (stream not recorded)", types=" / ".join(types))


_HCOM = re.compile(r"^hcom_([A-Za-z]+)")


def communication_group_name(profile: Profile, group: str) -> Message:
    """An HCCL group as users know it: its collectives and ranks (from the communication matrix's links),
    with the group id shortened (CANN prints a 20-digit hash; msprof-analyze shows it as is)."""
    if not group:
        return msg("(no group)")
    comm = profile.communication
    names = comm.filter(pc.equal(pc.fill_null(comm["group"], ""), group))["name"].to_pylist()
    ops = sorted({m.group(1) for m in map(_HCOM.match, (n or "" for n in names)) if m})
    ranks: set[int] = set()
    matrix = (profile.meta.extra or {}).get("communication_matrix") or {}
    for step in matrix.values():
        for ops_by_kind in (step or {}).values():
            for op_key, links in (ops_by_kind or {}).items():
                if str(op_key).endswith(f"@{group}"):
                    for link in links or {}:
                        ranks.update(int(x) for x in str(link).split("-") if x.strip().isdigit())
    collectives: Text = ", ".join(ops[:3]) or msg("collectives")
    short = group if len(group) <= 12 else "…" + group[-6:]
    if not ranks:
        return msg("{ops} · group {group}", ops=collectives, group=short)
    lo, hi = min(ranks), max(ranks)
    contiguous = len(ranks) == hi - lo + 1 and len(ranks) > 2
    listed = f"{lo}–{hi}" if contiguous else ",".join(map(str, sorted(ranks)))
    return msg("{ops} · ranks {ranks} · group {group}", ops=collectives, ranks=listed, group=short)


def counter_columns(profile: Profile, base: int,
                    lanes: list[Lane]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Register the counter lanes in ``lanes``; returns lane
    (int32), time (relative ns) and value per sample."""
    c_lane, c_t, c_v = [], [], []
    counters = profile.counters
    if counters.num_rows:
        tracks = pc.dictionary_encode(pc.fill_null(counters["track"], "").combine_chunks())
        first = len(lanes)
        for track in tracks.dictionary.to_pylist():
            lanes.append(Lane.make(len(lanes), track or msg("(counter)"), msg("Counters"), "counter",
                                   "counters", _SORT["counters"]))
        c_lane.append(tracks.indices.to_numpy(zero_copy_only=False).astype(np.int32) + first)
        c_t.append(_int_column(counters, "ts_ns", base) - base)
        c_v.append(pc.fill_null(counters["value"], np.nan).to_numpy().astype(np.float64))
    memory = profile.memory
    if memory.num_rows:
        comp = pc.fill_null(memory["component"], "").cast(pa.string())
        dev = pc.fill_null(memory["device"], "").cast(pa.string())
        label = pc.binary_join_element_wise(comp, dev, " ").combine_chunks()
        tracks = pc.dictionary_encode(label)
        first = len(lanes)
        for track in tracks.dictionary.to_pylist():
            name = msg("{track} allocated (MB)", track=track.strip() or msg("memory"))
            lanes.append(Lane.make(len(lanes), name, msg("Memory"), "counter", "memory", _SORT["memory"]))
        c_lane.append(tracks.indices.to_numpy(zero_copy_only=False).astype(np.int32) + first)
        c_t.append(_int_column(memory, "ts_ns", base) - base)
        c_v.append(pc.fill_null(memory["allocated_bytes"], 0).to_numpy().astype(np.float64) / 1e6)
    return (np.concatenate(c_lane) if c_lane else np.empty(0, np.int32),
            np.concatenate(c_t) if c_t else np.empty(0, np.int64),
            np.concatenate(c_v) if c_v else np.empty(0, np.float64))


def collect_lanes(profile: Profile) -> LaneEvents:
    """Assign every slice and counter sample of ``profile`` to a lane (columnar, no per-event objects)."""
    base = _base_ns(profile)
    lanes: list[Lane] = []
    interner = _Interner()
    sources = slice_tables(profile, base, lanes, interner)
    strings = interner.finish()
    parts = []
    for src in sources:
        lane, start, end = src.columns()
        rows = np.flatnonzero(lane >= 0)
        parts.append((lane[rows] + src.first_lane, start[rows], end[rows], interner.ids(src.slot)[rows],
                      rows))
    if parts:
        lane = np.concatenate([p[0] for p in parts]).astype(np.int32)
        start = np.concatenate([p[1] for p in parts])
        end = np.concatenate([p[2] for p in parts])
        name = np.concatenate([p[3] for p in parts]).astype(np.int32)
        row = np.concatenate([p[4] for p in parts]).astype(np.int64)
    else:
        lane = np.empty(0, np.int32)
        start = end = row = np.empty(0, np.int64)
        name = np.empty(0, np.int32)
    counter_lane, counter_t, counter_v = counter_columns(profile, base, lanes)
    return LaneEvents(
        base_ns=base, lanes=lanes, strings=strings, lane=lane, start=start, end=end, name=name, row=row,
        counter_lane=counter_lane, counter_t=counter_t, counter_v=counter_v,
    )
