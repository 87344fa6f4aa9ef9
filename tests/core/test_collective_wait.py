"""What communication.json's Idle is, read a second time from the trace's own HCCL tasks (standard library).

msprof reads a collective's Transit and Wait on its main stream only and writes Idle = Elapse - Transit - Wait
(pypto_core/collective_wait.py). Our wait for other ranks counts Idle as waiting; these tests check that
reading on every real sample whose trace_view.json holds the collectives' tasks on every stream (the HCCL
process's "Plane N" threads): the other streams' Notify_Wait tasks must cover what Idle holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from pypto_core import formats
from pypto_core.collective_wait import peer_wait
from pypto_core.report_render import render
from pypto_core.rules import diagnose_group
from tests.paths import HAVE_SAMPLES, SAMPLES, sample_cases

TRANSFER_TASKS = {"Memcpy", "Reduce_Inline", "RDMASend"}


def _merge(pieces: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(pieces):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(pieces: list[list[float]]) -> float:
    return sum(e - s for s, e in pieces)


def _overlap(a: list[list[float]], b: list[list[float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(e - s, 0.0)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def trace_waiting(trace: Path) -> dict[str, float] | None:
    """From trace_view.json, µs over the collectives: their Elapse, and the part of it in a Notify_Wait on any
    of their streams and not in a transfer; None where the trace holds no HCCL stream tasks."""
    events = json.loads(trace.read_text())
    events = events if isinstance(events, list) else events.get("traceEvents", [])
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    hccl = [e for e in events if e.get("ph") == "X" and processes.get(e.get("pid")) == "HCCL"]
    ops = [e for e in hccl if "Communication" in threads.get((e["pid"], e["tid"]), "")]
    tasks = [e for e in hccl if threads.get((e["pid"], e["tid"]), "").startswith("Plane")]
    if not ops or not tasks:
        return None
    elapse = waiting = 0.0
    for op in ops:
        s = float(op["ts"])
        e = s + float(op["dur"])
        mine = [(max(float(t["ts"]), s), min(float(t["ts"]) + float(t["dur"]), e), t) for t in tasks
                if s <= float(t["ts"]) < e]
        wait = _merge([(a, b) for a, b, t in mine if t["name"] == "Notify_Wait"])
        moved = _merge([(a, b) for a, b, t in mine if t["name"] in TRANSFER_TASKS
                        and (t.get("args") or {}).get("link type") != "ON_CHIP"])
        elapse += e - s
        waiting += _length(wait) - _overlap(wait, moved)
    return {"elapse_us": elapse, "waiting_us": waiting}


def _traced_samples() -> list[str]:
    if not HAVE_SAMPLES:
        return []
    out = []
    for comm in sorted((SAMPLES / "ascend_pt").rglob("communication.json")):
        trace = comm.parent / "trace_view.json"
        if trace.is_file() and trace_waiting(trace) is not None:
            out.append(str(comm.parent.parent.relative_to(SAMPLES)))
    return out


def _total_time_info(comm: Path) -> dict[str, float]:
    total = {"Elapse": 0.0, "Transit": 0.0, "Wait": 0.0, "Idle": 0.0}
    for step in json.loads(comm.read_text()).values():
        for kind in ("collective", "p2p"):
            info = (step.get(kind) or {}).get("Total Op Info", {}).get("Communication Time Info", {})
            for k in total:
                total[k] += 1e3 * float(info.get(f"{k} Time(ms)", 0) or 0)
    return total


def test_the_cnn_samples_hold_their_collectives_tasks() -> None:
    # the samples behind the reading below: a change of the samples must not empty it unnoticed
    if HAVE_SAMPLES:
        assert {"ascend_pt/cnn_8npu_text_level1/rank0_ascend_pt",
                "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt"} <= set(_traced_samples())


@pytest.mark.parametrize("sample", sample_cases(_traced_samples()))
def test_idle_is_the_other_streams_waiting_for_peers(sample: str) -> None:
    """communication.json's Idle is time the collective's main stream neither moves data nor waits on a
    notify; the trace shows what fills it: on the CNN 8-NPU rank 0, Wait 2.7 ms and Idle 93.2 ms against
    95.6 ms of Notify_Wait on the collectives' other streams outside any transfer (one of 86.1 ms towards
    rank 5). Were Idle scheduling gaps, the trace's waits would fall short of Wait + Idle and counting Idle as
    waiting for peers would be wrong."""
    folder = SAMPLES / sample
    info = _total_time_info(folder / "ASCEND_PROFILER_OUTPUT" / "communication.json")
    traced = trace_waiting(folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    assert traced is not None
    assert traced["elapse_us"] == pytest.approx(info["Elapse"], rel=0.01)
    assert info["Idle"] > 10 * info["Wait"]  # the main stream's notify Wait is a small part of the waiting
    not_moving = info["Wait"] + info["Idle"]
    assert 0.95 * not_moving <= traced["waiting_us"] <= 1.01 * not_moving
    # the report's wait: the exposed communication times the share of the collectives' time that waits, the
    # same figure the trace's own tasks give; split into the notify Wait and Idle parts, which add up to it
    report = diagnose_group(formats.open_profiles(folder))
    pw = report.profile["peer_wait"]
    expected = pw["communication_not_overlapped_us"] * traced["waiting_us"] / traced["elapse_us"]
    assert pw["wait_us"] == pytest.approx(expected, rel=0.05)
    assert pw["notify_wait_us"] + pw["idle_us"] == pytest.approx(pw["wait_us"], abs=0.01)
    assert pw["notify_wait_us"] == pytest.approx(pw["wait_us"] * info["Wait"] / (info["Wait"] + info["Idle"]),
                                                 rel=0.01)
    # the headline names both parts, and what Idle is, in English and Chinese
    md = render(report, "md")
    notify, idle = pw["notify_wait_us"] / 1e3, pw["idle_us"] / 1e3
    total = pw["wait_us"] / 1e3  # the split names the figure it splits (it read "Of the wait")
    assert (f"Of the {total:.1f} ms this rank waits, {notify:.1f} ms is notify Wait on the collectives' main "
            f"stream and {idle:.1f} ms their Idle") in md
    assert (f"本 Rank 等待的 {total:.1f} ms 中，{notify:.1f} ms 是集合通信主流上的通知等待"
            in render(report, "md", "zh-Hans"))


def test_without_transfer_figures_the_whole_wait_is_notify_wait() -> None:
    # Idle may then hold the transfer: only the notify Wait counts (a lower bound), and no part is Idle
    comm = pa.table({"name": ["hcom_allReduce_1"], "elapse_ns": pa.array([10_000_000], pa.int64()),
                     "transit_ns": pa.array([0], pa.int64()), "wait_ns": pa.array([2_000_000], pa.int64()),
                     "idle_ns": pa.array([8_000_000], pa.int64())})
    pw = peer_wait(comm, 5_000_000, 20_000_000)
    assert pw is not None and not pw.transit_recorded
    out = pw.to_dict(20_000_000, 1)
    assert out["wait_us"] == 1000.0 and out["notify_wait_us"] == 1000.0 and out["idle_us"] == 0.0
    recorded = peer_wait(comm.set_column(2, "transit_ns", pa.array([2_000_000], pa.int64()))
                         .set_column(4, "idle_ns", pa.array([6_000_000], pa.int64())), 5_000_000, 20_000_000)
    assert recorded is not None
    split = recorded.to_dict(20_000_000, 1)
    # 80% of the collectives' time moves no data: 4 ms of the 5 ms exposed, split 2 : 6 as Wait : Idle
    assert split["wait_us"] == pytest.approx(4000.0)
    assert split["notify_wait_us"] == pytest.approx(1000.0) and split["idle_us"] == pytest.approx(3000.0)


@pytest.mark.skipif(not HAVE_SAMPLES, reason="samples not present")
def test_a_level0_rank_is_told_how_to_split_transfer_from_waiting() -> None:
    """A Level0 export has no communication.json: the wait cannot be split, and the finding says which
    profiler level writes the figures, instead of leaving the user at "cannot be told apart"."""
    group = formats.open_profiles(SAMPLES / "ascend_pt/cnn_8npu_text_level0")
    report = diagnose_group(group)
    assert report.profile["peer_wait"] is None
    (finding,) = [f for f in report.findings if f.rule == "communication_not_overlapped"]
    assert "profiler_level Level1" in finding.description and "communication.json" in finding.description
