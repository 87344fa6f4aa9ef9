"""read_trace_view on every real trace_view.json / msprof json sample, checked against plain json parsing."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto_core.errors import InputError
from pypto_core.formats import eventscan
from pypto_core.formats.chrome_trace import read_trace_view
from tests.paths import SAMPLES

TRACE_VIEWS = sorted(SAMPLES.glob("ascend_pt/**/trace_view.json"))
MSPROF_JSONS = sorted(SAMPLES.glob("msprof/**/msprof*.json"))
LEVEL1 = SAMPLES / "ascend_pt/cnn_8npu_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def ns(ts: str) -> int:
    """Independent exact conversion: decimal µs text -> int ns."""
    return int(Decimal(ts) * 1000)


def expected(path: Path) -> dict:
    events = json.loads(path.read_text(encoding="utf-8"))
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}

    def on(proc: str) -> list[dict]:
        return [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == proc]

    host = [e for e in on("Python") if e.get("cat") != "python_function"]
    return {
        "events": events,
        "procs": procs,
        "kernels": on("Ascend Hardware"),
        "host": host,
        "api": on("CANN"),
        "counters": [e for e in events if e.get("ph") == "C"],
    }


def test_samples_found() -> None:
    assert len(TRACE_VIEWS) >= 4, TRACE_VIEWS


@pytest.mark.parametrize("path", TRACE_VIEWS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_trace_view_matches_plain_json(path: Path) -> None:
    exp = expected(path)
    tt = read_trace_view(path)
    assert tt.hints["events"] == len(exp["events"])
    assert tt.kernels.num_rows == len(exp["kernels"])
    assert tt.host_ops.num_rows == len(exp["host"])
    assert tt.api_calls.num_rows == len(exp["api"])
    assert tt.counters.num_rows == len(exp["counters"])
    # starts exact to the ns, in file order
    assert tt.kernels["start_ns"].to_pylist() == [ns(e["ts"]) for e in exp["kernels"]]
    assert tt.host_ops["start_ns"].to_pylist() == [ns(e["ts"]) for e in exp["host"]]
    assert tt.kernels["name"].to_pylist() == [e["name"] for e in exp["kernels"]]
    assert tt.kernels["core_type"].to_pylist() == [e["args"].get("Task Type") for e in exp["kernels"]]
    # durations: µs with up to 8 decimals, rounded to the ns
    want_dur = [int((Decimal(repr(e["dur"])) * 1000).to_integral_value(rounding="ROUND_HALF_UP")) for e in exp["kernels"]]
    assert tt.kernels["dur_ns"].to_pylist() == want_dur
    # time span over kernels
    if exp["kernels"]:
        assert pc.min(tt.kernels["start_ns"]).as_py() == min(ns(e["ts"]) for e in exp["kernels"])
    # counters: first args value
    assert tt.counters["value"].to_pylist() == [float(next(iter(e["args"].values()))) for e in exp["counters"]]
    # lanes: every named process is there
    assert set(tt.hints["processes"]) == set(exp["procs"].values())
    # steps
    steps = [e for e in exp["host"] if e["name"].startswith("ProfilerStep#")]
    assert tt.steps["step_id"].to_pylist() == sorted(int(e["name"].split("#")[1]) for e in steps)


@pytest.mark.parametrize("path", TRACE_VIEWS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_async_npu_flows_link_the_host_op_to_the_kernel(path: Path) -> None:
    exp = expected(path)
    tt = read_trace_view(path)
    pairs: dict = {}
    for e in exp["events"]:
        if e.get("cat") == "async_npu" and e["ph"] in "sf":
            pairs.setdefault(e["id"], {})[e["ph"]] = e
    # pairs ending on a device task (level0 also has flows ending on HCCL ops, which are not kernels)
    device = {pid for pid, name in exp["procs"].items() if name == "Ascend Hardware"}
    pairs = {i: p for i, p in pairs.items() if "s" in p and "f" in p and p["f"]["pid"] in device}
    flows = tt.flows.filter(pc.equal(tt.flows["kind"], "async_npu"))
    assert flows.num_rows == len(pairs) > 100
    got = {
        (tt.host_ops["start_ns"][h].as_py(), tt.kernels["start_ns"][k].as_py())
        for h, k in zip(flows["host_index"].to_pylist(), flows["kernel_index"].to_pylist())
    }
    want = {(ns(p["s"]["ts"]), ns(p["f"]["ts"])) for p in pairs.values()}
    assert got == want


def test_level1_literal_values() -> None:
    tt = read_trace_view(LEVEL1)
    # first event of the file: {"name": "aten::empty", "ts": "1736408883688177.930", "dur": 145.57, ...}
    first = tt.host_ops.slice(0, 1).to_pylist()[0]
    assert first["name"] == "aten::empty"
    assert first["start_ns"] == 1736408883688177930
    assert first["dur_ns"] == 145570
    assert first["pid"] == 3096504
    # the async_npu flow with id 1736408883700059821 ends on the kernel starting at "1736408883700059.821"
    k = tt.kernels.filter(pc.equal(tt.kernels["start_ns"], 1736408883700059821))
    assert k.num_rows == 1 and k["stream_id"][0].as_py() == 2
    # counter: {"name": "AI Core Freq", "ts": "1736408883573887.920", "args": {"MHz": 1800}}
    c = tt.counters.slice(0, 1).to_pylist()[0]
    assert (c["track"], c["ts_ns"], c["value"], c["unit"]) == ("AI Core Freq", 1736408883573887920, 1800.0, "MHz")
    # HostToDevice: CANN aclrtMemcpyAsync (connection_id 936) -> the device task with connection_id 936
    h2d = tt.flows.filter(pc.equal(tt.flows["kind"], "HostToDevice"))
    assert h2d.num_rows >= 200
    api0 = h2d["api_index"][0].as_py()
    assert tt.api_calls["name"][api0].as_py().startswith(("AscendCL@", "Runtime@", "Node@", "HCCL@", "Hccl"))
    assert tt.communication.num_rows == 4
    assert tt.communication["name"][0].as_py().startswith("hcom_allReduce_")
    assert tt.hints["python_function_events"] == 1282


@pytest.mark.parametrize("path", MSPROF_JSONS, ids=lambda p: p.name)
def test_msprof_zero_byte_placeholders_are_named_errors(path: Path) -> None:
    with pytest.raises(InputError) as err:
        read_trace_view(path)
    assert str(path) in str(err.value) and "empty" in str(err.value)


def test_msprof_style_array_without_python(tmp_path: Path) -> None:
    # msprof_*.json: the same building blocks minus the Python process (FORMATS.md §1.2)
    events = [e for e in json.loads(LEVEL1.read_text()) if e.get("pid") != 3096504]
    p = tmp_path / "msprof_20250101000000.json"
    p.write_text(json.dumps(events))
    tt = read_trace_view(p)
    assert tt.host_ops.num_rows == 0
    assert tt.kernels.num_rows == len([e for e in events if e.get("ph") == "X" and e["pid"] == 3170820512])
    assert tt.api_calls.num_rows > 0


# ---------------------------------------------------------------------------------------------- bad input

BAD = {
    "empty.json": (b"", "empty"),
    "blank.json": (b"  \n ", "empty"),
    "binary.json": (bytes(range(256)) * 4, "not JSON"),
    "truncated.json": (LEVEL1.read_bytes()[:50_000], "truncated"),
    "number.json": (b"42", "not JSON"),
    "object.json": (b'{"a": 1}', "not a chrome trace"),
    "array_of_numbers.json": (b"[1, 2, 3]", "malformed"),
    "trailing.json": (b'[{"ph": "X"}] garbage', "unexpected data"),
    "bad_escape.json": (b'[{"ph": "X", "name": "a\\qb"}]', "malformed"),
    "bad_utf8.json": (b'[{"ph": "X", "name": "\xff\xfe"}]', "UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_a_named_error(tmp_path: Path, name: str) -> None:
    data, reason = BAD[name]
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError) as err:
        read_trace_view(p)
    assert str(p) in str(err.value)
    assert reason.lower() in str(err.value).lower(), str(err.value)


def test_missing_file_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open"):
        read_trace_view(tmp_path / "nope.json")


def test_exactness_beyond_float64(tmp_path: Path) -> None:
    # 1.7e15 µs with ns digits: a float64 would round these; huge flow ids stay text
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "name": "k", "pid": 1, "tid": 3, "ts": "1736408883688177.931", "dur": 0.001, "args": {}},
        {"ph": "X", "name": "k2", "pid": 1, "tid": 3, "ts": "1736408883688177.932", "dur": 1e-3},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(ev))
    tt = read_trace_view(p)
    assert tt.kernels["start_ns"].to_pylist() == [1736408883688177931, 1736408883688177932]
    assert tt.kernels["dur_ns"].to_pylist() == [1, 1]


def test_chunk_boundaries_do_not_change_the_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = read_trace_view(LEVEL1)
    monkeypatch.setattr(eventscan, "READ_CHUNK", 4099)  # many events split across reads
    monkeypatch.setattr(eventscan, "EVENT_CAP", 97)  # and many native calls
    parts = read_trace_view(LEVEL1)
    for name in ("kernels", "host_ops", "api_calls", "counters", "flows"):
        assert getattr(parts, name).equals(getattr(whole, name)), name


def test_fallback_gives_the_same_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    native = eventscan.scan_file(LEVEL1, ("Task Type", "connection_id", "name"))
    monkeypatch.setattr(eventscan, "_NATIVE", None)
    slow = eventscan.scan_file(LEVEL1, ("Task Type", "connection_id", "name"))
    assert not slow.native
    for col in ("ph", "name", "pid", "tid", "id", "ts_ns", "dur_ns", "arg:Task Type", "arg:connection_id", "arg:name"):
        assert native.events[col].to_pylist() == slow.events[col].to_pylist(), col


SMALL = json.dumps(json.loads(LEVEL1.read_text())[:40]).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(min_value=0, max_value=len(SMALL)),
    pos=st.integers(min_value=0, max_value=len(SMALL) - 1),
    junk=st.binary(min_size=0, max_size=8),
)
def test_mangled_json_gives_input_error_or_a_result(tmp_path: Path, cut: int, pos: int, junk: bytes) -> None:
    data = SMALL[:pos] + junk + SMALL[pos + len(junk):cut] if cut > pos else SMALL[:cut]
    p = tmp_path / "mangled.json"
    p.write_bytes(data)
    try:
        tt = read_trace_view(p)
    except InputError as exc:
        assert str(p) in str(exc)
    else:
        assert tt.hints["events"] <= 40 + len(junk)


def test_slices_of_unnamed_processes_are_skipped_with_a_warning(tmp_path: Path) -> None:
    ev = [
        {"ph": "X", "name": "orphan", "pid": 7, "tid": 1, "ts": "1.000", "dur": 1},
        {"ph": "X", "name": "late", "pid": 9, "tid": 2, "ts": "2.000", "dur": 1, "args": {"Task Type": "AI_CORE"}},
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(ev))
    tt = read_trace_view(p)
    assert tt.kernels["name"].to_pylist() == ["late"]  # named after its slices: still a kernel
    assert tt.warnings == ["1 slices on processes the file never names (no process_name) were skipped"]
