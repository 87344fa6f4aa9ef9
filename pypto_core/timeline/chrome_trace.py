"""Chrome-trace JSON that Perfetto and chrome://tracing load correctly, written as a stream.

Every ``ts`` and ``dur`` is a JSON number in microseconds relative to one base (the profile's first event),
with three decimals so nanoseconds survive (docs/formats.md §0.1 and §3.3: absolute epoch µs lose the ns
digits in a float64, and torch_npu's string ``ts`` breaks Perfetto). The absolute base is in
``metadata.base_time_ns`` as a string. Processes and threads are named by ``M`` events, host op -> kernel
links are ``s``/``f`` flows with ``bp: "e"``, counter tracks are ``C`` events. Lines are formatted with
Arrow string kernels a chunk at a time, never one Python object per event.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import IO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.profile import Profile
from pypto_core.timeline.lanes import LaneEvents, collect_lanes

CHUNK = 200_000  # events formatted per Arrow pass


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _micros(ns: np.ndarray) -> pa.Array:
    """Relative ns -> "µs.nnn" text, exact (no float rounding)."""
    ns = ns.astype(np.int64, copy=False)
    whole, frac = np.divmod(ns, 1000)  # floor division keeps negatives exact too: -1 ns -> -1 + 999/1000
    return pc.binary_join_element_wise(_text(whole), pc.utf8_lpad(_text(frac), 3, "0"), ".")


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _ids(ev: LaneEvents) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """pid and tid per lane (groups in viewer order), plus the M events naming them."""
    groups: dict[str, int] = {}
    pid = np.zeros(len(ev.lanes), np.int64)
    tid = np.zeros(len(ev.lanes), np.int64)
    meta: list[str] = []
    for lane in sorted(ev.lanes, key=lambda ln: (ln.sort, ln.id)):
        if lane.group not in groups:
            groups[lane.group] = len(groups) + 1
            p = groups[lane.group]
            meta.append('{"ph":"M","pid":%d,"name":"process_name","args":{"name":%s}}'
                        % (p, orjson.dumps(lane.group).decode()))
            meta.append('{"ph":"M","pid":%d,"name":"process_sort_index","args":{"sort_index":%d}}' % (p, p))
        pid[lane.id] = groups[lane.group]
        tid[lane.id] = lane.id + 1
        if lane.kind == "slices":
            meta.append('{"ph":"M","pid":%d,"tid":%d,"name":"thread_name","args":{"name":%s}}'
                        % (pid[lane.id], tid[lane.id], orjson.dumps(lane.name).decode()))
            meta.append('{"ph":"M","pid":%d,"tid":%d,"name":"thread_sort_index","args":{"sort_index":%d}}'
                        % (pid[lane.id], tid[lane.id], lane.id))
    return pid, tid, meta


class _Writer:
    def __init__(self, sink: IO[str]) -> None:
        self.sink = sink
        self.first = True
        self.count = 0

    def lines(self, lines: pa.Array | list[str]) -> None:
        items = lines.to_pylist() if isinstance(lines, pa.Array) else lines
        if not items:
            return
        self.sink.write(("\n" if self.first else ",\n") + ",\n".join(items))
        self.first = False
        self.count += len(items)


def export_chrome_trace(profile: Profile, out_path: str | os.PathLike[str]) -> int:
    """Write ``profile`` as chrome-trace JSON (gzip when
    ``out_path`` ends in .gz); returns the event count."""
    ev = collect_lanes(profile)
    pid, tid, meta_lines = _ids(ev)
    name_json = pa.array([orjson.dumps(s).decode() for s in ev.strings.to_pylist()], pa.string())
    cat_of_lane = pa.array([ln.table for ln in ev.lanes] or [""], pa.string())
    out = Path(out_path)
    raw = gzip.open(out, "wb") if out.suffix == ".gz" else open(out, "wb")
    with raw, io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as sink:
        header = {
            "displayTimeUnit": "ns",
            "metadata": {
                "base_time_ns": str(ev.base_ns),
                "ts_unit": "microseconds relative to base_time_ns",
                "source": profile.meta.source,
                "format": profile.meta.format,
                "simulated": profile.meta.simulated,
                "generator": "pypto export-trace",
            },
        }
        sink.write(orjson.dumps(header).decode()[:-1] + ',"traceEvents":[')
        w = _Writer(sink)
        w.lines(meta_lines)

        for lo in range(0, len(ev.start), CHUNK):
            sl = slice(lo, lo + CHUNK)
            lane = ev.lane[sl]
            w.lines(_join('{"ph":"X","pid":', _text(pid[lane]), ',"tid":', _text(tid[lane]),
                          ',"ts":', _micros(ev.start[sl]), ',"dur":', _micros(ev.end[sl] - ev.start[sl]),
                          ',"name":', name_json.take(pa.array(ev.name[sl])),
                          ',"cat":"', cat_of_lane.take(pa.array(lane)), '","args":{"row":', _text(ev.row[sl]),
                          "}}"))

        _write_flows(w, profile, ev, pid, tid)

        finite = np.isfinite(ev.counter_v)
        c_lane, c_t, c_v = ev.counter_lane[finite], ev.counter_t[finite], ev.counter_v[finite]
        counter_names = pa.array([orjson.dumps(ln.name).decode() for ln in ev.lanes] or [""], pa.string())
        for lo in range(0, len(c_t), CHUNK):
            sl = slice(lo, lo + CHUNK)
            w.lines(_join('{"ph":"C","pid":', _text(pid[c_lane[sl]]), ',"name":',
                          counter_names.take(pa.array(c_lane[sl])), ',"ts":', _micros(c_t[sl]),
                          ',"args":{"value":', _text(c_v[sl]), "}}"))
        sink.write("\n]}\n")
    return w.count


def _write_flows(w: _Writer, profile: Profile, ev: LaneEvents, pid: np.ndarray, tid: np.ndarray) -> None:
    """``s`` on the host op, ``f`` with ``bp:"e"`` on the
    kernel (binds to the enclosing slice, as Kineto does)."""
    flows = profile.flows
    if not flows.num_rows:
        return
    where = {}
    for table in ("host_ops", "kernels"):
        mine = np.flatnonzero(np.isin(ev.lane, [ln.id for ln in ev.lanes if ln.table == table]))
        rowmap = np.full(profile.table(table).num_rows, -1, np.int64)
        rowmap[ev.row[mine]] = mine
        where[table] = rowmap
    host = pc.fill_null(flows["host_index"], -1).to_numpy().astype(np.int64)
    kernel = pc.fill_null(flows["kernel_index"], -1).to_numpy().astype(np.int64)
    ok = (host >= 0) & (host < len(where["host_ops"])) & (kernel >= 0) & (kernel < len(where["kernels"]))
    flow_id = np.flatnonzero(ok)
    h = where["host_ops"][host[ok]]
    k = where["kernels"][kernel[ok]]
    both = (h >= 0) & (k >= 0)
    flow_id, h, k = flow_id[both] + 1, h[both], k[both]
    kinds = pc.fill_null(flows["kind"], "flow").combine_chunks().take(pa.array(flow_id - 1))
    kind_json = pa.array([orjson.dumps(s).decode() for s in kinds.to_pylist()], pa.string())
    for lo in range(0, len(flow_id), CHUNK):
        sl = slice(lo, lo + CHUNK)
        hs, ks, ids, kj = h[sl], k[sl], _text(flow_id[sl]), kind_json[lo:lo + CHUNK]
        w.lines(_join('{"ph":"s","id":', ids, ',"pid":', _text(pid[ev.lane[hs]]), ',"tid":',
                      _text(tid[ev.lane[hs]]), ',"ts":', _micros(ev.start[hs]), ',"name":', kj, ',"cat":', kj,
                      "}"))
        w.lines(_join('{"ph":"f","bp":"e","id":', ids, ',"pid":', _text(pid[ev.lane[ks]]),
                      ',"tid":', _text(tid[ev.lane[ks]]), ',"ts":', _micros(ev.start[ks]), ',"name":', kj,
                      ',"cat":', kj, "}"))
