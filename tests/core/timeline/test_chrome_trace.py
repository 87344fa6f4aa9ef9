"""Chrome-trace export: numeric ts in one time base, exact ns, named lanes, flows and counters."""

import gzip
import json
from decimal import Decimal

import pytest

from pypto_core.timeline import export_chrome_trace
from tests.core.timeline.sample import BASE, sample_profile


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("ct") / "trace.json"
    count = export_chrome_trace(sample_profile(), path)
    # parse_float=Decimal: check the written digits, not what a float64 makes of them
    doc = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    assert count == len(doc["traceEvents"])
    return doc


def test_one_time_base_in_metadata_and_numeric_ts(trace: dict) -> None:
    assert trace["metadata"]["base_time_ns"] == str(BASE)
    for ev in trace["traceEvents"]:
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], (int, Decimal)), ev
            assert 0 <= ev["ts"] < 1e9  # relative µs, not 1.7e15 absolute


def test_slices_keep_nanoseconds_exactly(trace: dict) -> None:
    slices = {ev["name"]: ev for ev in trace["traceEvents"] if ev["ph"] == "X"}
    matmul = slices["aten::matmul"]
    assert BASE + int(matmul["ts"] * 1000) == BASE + 150 and matmul["dur"] == Decimal("0.200")
    add = [ev for ev in trace["traceEvents"] if ev["ph"] == "X" and ev["name"] == "Add"]
    assert len(add) == 1000 and {ev["dur"] for ev in add} == {Decimal("0.001")}
    assert "<script>alert(1)</script>" in slices  # escaped by JSON, read back verbatim


def test_processes_and_threads_are_named(trace: dict) -> None:
    meta = [ev for ev in trace["traceEvents"] if ev["ph"] == "M"]
    processes = {ev["pid"]: ev["args"]["name"] for ev in meta if ev["name"] == "process_name"}
    threads = {(ev["pid"], ev["tid"]): ev["args"]["name"] for ev in meta if ev["name"] == "thread_name"}
    assert set(processes.values()) == {"Host process 100", "CANN API (process 100)", "NPU 0", "Counters"}
    for ev in trace["traceEvents"]:
        if ev["ph"] == "X":
            assert (ev["pid"], ev["tid"]) in threads
    npu = next(p for p, n in processes.items() if n == "NPU 0")
    assert threads[(npu, next(t for (p, t) in threads if p == npu))] == "Stream 2"


def test_flows_start_on_the_host_op_and_bind_to_the_enclosing_kernel(trace: dict) -> None:
    events = trace["traceEvents"]
    starts = {ev["id"]: ev for ev in events if ev["ph"] == "s"}
    finishes = {ev["id"]: ev for ev in events if ev["ph"] == "f"}
    assert set(starts) == set(finishes) and len(starts) == 2
    slices = {(ev["pid"], ev["tid"], ev["ts"]): ev["name"] for ev in events if ev["ph"] == "X"}
    pairs = set()
    for fid, s in starts.items():
        f = finishes[fid]
        assert f["bp"] == "e" and s["cat"] == "async_npu"
        pairs.add((slices[(s["pid"], s["tid"], s["ts"])], slices[(f["pid"], f["tid"], f["ts"])]))
    assert pairs == {("aten::matmul", "MatMulV2"), ("aten::rms_norm", "RmsNorm")}


def test_counters_are_c_events(trace: dict) -> None:
    counters = [ev for ev in trace["traceEvents"] if ev["ph"] == "C"]
    assert [(ev["name"], ev["ts"], ev["args"]["value"]) for ev in counters] == [
        ("AI Core freq (MHz)", 0, 1800), ("AI Core freq (MHz)", 5, 1650), ("AI Core freq (MHz)", 9, 1800)]


def test_gzip_output(tmp_path) -> None:
    path = tmp_path / "trace.json.gz"
    export_chrome_trace(sample_profile(), path)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        assert len(json.load(fh)["traceEvents"]) > 1000


def test_export_trace_command(tmp_path, monkeypatch, capsys) -> None:
    import pypto_core.formats as formats
    from pypto_core.cli import main

    monkeypatch.setattr(formats, "open_profile", lambda path: sample_profile(), raising=False)
    out = tmp_path / "t.json"
    assert main(["export-trace", str(tmp_path), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["metadata"]["base_time_ns"] == str(BASE)
    assert "trace events" in capsys.readouterr().out
