"""Chrome-trace events of a simulated run, shaped like torch_npu's trace_view.json and msprof's msprof_*.json
(docs/formats.md §2.5, the real samples): a bare array, every ``ts`` a string of epoch µs, ``dur`` a
number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from pypto_core.synth.kernels import HOST_TYPE_NAMES, Kernel
from pypto_core.synth.rows import MODEL_ID_NONE, us_text
from pypto_core.synth.schedule import STREAM_ID, Placed, StepRecord

HOST_PID = 24601
HOST_TID = 24601
CANN_PID = HOST_PID * 100 + 2
DEVICE_PID = HOST_PID * 100 + 3
OVERLAP_PID = HOST_PID * 100 + 4
FREQ_PID = HOST_PID * 100 + 5
OVERLAP_COMPUTING_TID = 0
OVERLAP_FREE_TID = 3
_HOST_TYPES = {"FLOAT": "float", "INT64": "long int", "INT32": "int", "BOOL": "bool"}


class TraceWriter:
    """Writes a JSON array one event at a time (never the whole trace in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: TextIO = path.open("w", encoding="utf-8", newline="")
        self._f.write("[")
        self._first = True
        self.bytes = 1
        self.events = 0

    def write(self, event: dict[str, Any]) -> None:
        text = json.dumps(event) if self._first else ", " + json.dumps(event)
        self._first = False
        self._f.write(text)
        self.bytes += len(text)
        self.events += 1

    def write_events_text(self, text: str, events: int) -> None:
        """Events already rendered, each with its leading ``, `` (never the first of the file)."""
        assert not self._first
        self._f.write(text)
        self.bytes += len(text)
        self.events += events

    def close(self) -> None:
        self._f.write("]")
        self._f.close()


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def metadata_events(*, python: bool, freq_mhz: int, start_ns: int) -> list[dict[str, Any]]:
    """process_name / labels / sort index and thread names, as torch_npu writes them."""
    ev: list[dict[str, Any]] = []

    def proc(pid: int, name: str, label: str, sort: int, threads: list[tuple[int, str]]) -> None:
        ev.append({"name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}, "ph": "M"})
        for tid, tname in threads:
            ev.append({"name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}, "ph": "M"})
            ev.append({"name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid},
                       "ph": "M"})
        ev.append({"name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}, "ph": "M"})
        ev.append({"name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort},
                   "ph": "M"})

    if python:
        proc(HOST_PID, "Python", "CPU", 0, [(HOST_TID, f"Thread {HOST_TID}")])
    proc(CANN_PID, "CANN", "CPU", 7, [(HOST_TID, f"Thread {HOST_TID}")])
    proc(DEVICE_PID, "Ascend Hardware", "NPU", 13, [(STREAM_ID, f"Stream {STREAM_ID}")])
    proc(FREQ_PID, "AI Core Freq", "NPU", 14, [])
    proc(OVERLAP_PID, "Overlap Analysis", "NPU", 23, [(OVERLAP_COMPUTING_TID, "Computing"),
                                                       (OVERLAP_FREE_TID, "Free")])
    ev.append({"name": "AI Core Freq", "ts": us_text(start_ns), "pid": FREQ_PID, "tid": 0,
               "args": {"MHz": freq_mhz}, "ph": "C"})
    return ev


def step_event(rec: StepRecord) -> dict[str, Any]:
    return {"ph": "X", "name": f"ProfilerStep#{rec.step}", "pid": HOST_PID, "tid": HOST_TID,
            "ts": us_text(rec.start_ns), "dur": _us(rec.end_ns - rec.start_ns), "cat": "cpu_op",
            "args": {"Sequence number": -1, "Fwd thread id": 0}}


def host_dims(k: Kernel) -> str:
    """``Input Dims`` of the framework op, as torch_npu's record_shapes writes it."""
    return ";\r\n".join(",".join(map(str, t.shape)) for t in k.inputs)


def event_dicts(k: Kernel, v: dict[str, Any], *, python: bool, dtype: str,
                free: bool) -> list[dict[str, Any]]:
    """The events of one kernel, with the placement values in ``v`` (``ts_*`` texts, ``dur_*`` numbers, ids).
    Shared by the per-kernel reference and the step templates of ``templates`` (which pass placeholders)."""
    ev: list[dict[str, Any]] = []
    if python:
        host_type = HOST_TYPE_NAMES[dtype]
        types = ";\r\n".join(_HOST_TYPES.get(t.dtype, host_type) for t in k.inputs)
        ev.append({"ph": "X", "name": k.host_op, "pid": HOST_PID, "tid": HOST_TID, "ts": v["ts_host"],
                   "dur": v["dur_host"], "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0, "Input Dims": v["dims"],
                            "Input type": types}})
        ev.append({"ph": "X", "name": k.api, "pid": HOST_PID, "tid": HOST_TID, "ts": v["ts_launch"],
                   "dur": v["dur_launch"], "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
        ev.append({"ph": "s", "bp": "e", "name": "torch_to_npu", "id": v["flow_id"], "pid": HOST_PID,
                   "tid": HOST_TID, "ts": v["ts_launch"], "cat": "async_npu"})
        ev.append({"ph": "f", "bp": "e", "name": "torch_to_npu", "id": v["flow_id"], "pid": DEVICE_PID,
                   "tid": STREAM_ID, "ts": v["ts_dev"], "cat": "async_npu"})
    ev.append({"name": f"AscendCL@{k.api}", "pid": CANN_PID, "tid": HOST_TID, "ts": v["ts_launch"],
               "dur": v["dur_launch"],
               "args": {"Thread Id": HOST_TID, "Mode": "ACL_NN", "level": "acl", "id": k.api, "item_id": "0",
                        "connection_id": v["cid"]}, "ph": "X"})
    ev.append({"name": "Node@launch", "pid": CANN_PID, "tid": HOST_TID, "ts": v["ts_node"],
               "dur": v["dur_node"],
               "args": {"Thread Id": HOST_TID, "Mode": "launch", "level": "node", "id": "0",
                        "item_id": k.name, "connection_id": v["cid"]}, "ph": "X"})
    ev.append({"name": f"HostToDevice{v['cid_text']}", "ph": "s", "cat": "HostToDevice", "id": v["cid_text"],
               "pid": CANN_PID, "tid": HOST_TID, "ts": v["ts_node"]})
    ev.append({"name": k.name, "pid": DEVICE_PID, "tid": STREAM_ID, "ts": v["ts_dev"], "dur": v["dur_dev"],
               "args": {"Model Id": int(MODEL_ID_NONE), "Task Type": k.core, "Physic Stream Id": STREAM_ID,
                        "Task Id": v["task_id"], "Batch Id": 0, "Subtask Id": 4294967295,
                        "connection_id": v["cid"]}, "ph": "X"})
    ev.append({"name": f"HostToDevice{v['cid_text']}", "ph": "f", "id": v["cid_text"], "ts": v["ts_dev"],
               "cat": "HostToDevice", "pid": DEVICE_PID, "tid": STREAM_ID, "bp": "e"})
    if free:
        ev.append({"name": "Free", "pid": OVERLAP_PID, "tid": OVERLAP_FREE_TID, "ts": v["ts_free"],
                   "dur": v["dur_free"], "ph": "X"})
    ev.append({"name": "Computing", "pid": OVERLAP_PID, "tid": OVERLAP_COMPUTING_TID, "ts": v["ts_dev"],
               "dur": v["dur_dev"], "ph": "X"})
    return ev


def kernel_events(p: Placed, prev_end_ns: int, *, python: bool, dtype: str) -> list[dict[str, Any]]:
    """The host op, its aclnn call, the CANN API and launch, the device task, the flows and the overlap bars
    (the per-kernel reference of the step templates; tests check that both write the same bytes)."""
    node_start = p.launch_start_ns + p.launch_dur_ns // 2
    v = {"ts_host": us_text(p.host_start_ns), "dur_host": _us(p.host_dur_ns),
         "ts_launch": us_text(p.launch_start_ns), "dur_launch": _us(p.launch_dur_ns), "flow_id": p.start_ns,
         "ts_dev": us_text(p.start_ns), "dur_dev": _us(p.dur_ns), "cid": p.connection_id,
         "cid_text": str(p.connection_id), "ts_node": us_text(node_start),
         "dur_node": _us(p.launch_start_ns + p.launch_dur_ns - node_start), "task_id": p.task_id,
         "ts_free": us_text(prev_end_ns), "dur_free": _us(p.start_ns - prev_end_ns),
         "dims": host_dims(p.kernel)}
    return event_dicts(p.kernel, v, python=python, dtype=dtype, free=p.start_ns > prev_end_ns)
