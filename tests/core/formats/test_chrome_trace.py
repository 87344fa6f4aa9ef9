"""read_trace_view on every real trace_view.json / msprof json sample, checked against plain json parsing."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto_core.errors import InputError
from pypto_core.formats import eventscan
from pypto_core.formats.chrome_trace import read_trace_view
from tests.paths import HAVE_SAMPLES, SAMPLES

TRACE_VIEWS = sorted(SAMPLES.glob("ascend_pt/**/trace_view.json"))
MSPROF_JSONS = sorted(SAMPLES.glob("msprof/**/msprof*.json"))
LEVEL1 = SAMPLES / "ascend_pt/cnn_8npu_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def ns(ts: str) -> int:
    """Independent exact conversion: decimal µs text -> int ns."""
    return int(Decimal(ts) * 1000)


def expected(path: Path) -> dict:
    events = json.loads(path.read_text(encoding="utf-8"))
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name")
             == "process_name"}

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
    want_dur = [int((Decimal(repr(e["dur"])) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))
                for e in exp["kernels"]]
    assert tt.kernels["dur_ns"].to_pylist() == want_dur
    # time span over kernels
    if exp["kernels"]:
        assert pc.min(tt.kernels["start_ns"]).as_py() == min(ns(e["ts"]) for e in exp["kernels"])
    # counters: first args value
    want_values = [float(next(iter(e["args"].values()))) for e in exp["counters"]]
    assert tt.counters["value"].to_pylist() == want_values
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
    assert (c["track"], c["ts_ns"], c["value"], c["unit"]) == ("AI Core Freq", 1736408883573887920, 1800.0,
                                                               "MHz")
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
    # msprof_*.json: the same building blocks minus the Python process (docs/formats.md §1.2)
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
    "truncated.json": (LEVEL1.read_bytes()[:50_000] if HAVE_SAMPLES else b"[{", "truncated"),
    "number.json": (b"42", "not JSON"),
    "object.json": (b'{"a": 1}', "not a chrome trace"),
    "array_of_numbers.json": (b"[1, 2, 3]", "malformed"),
    "trailing.json": (b'[{"ph": "X"}] garbage', "unexpected data"),
    "bad_escape.json": (b'[{"ph": "X", "name": "a\\qb"}]', "malformed"),
    "bad_utf8.json": (b'[{"ph": "X", "name": "\xff\xfe"}]', "UTF-8"),
    # a character cut across two names: the bytes in a row are valid UTF-8, each name is not
    "split_utf8.json": (b'[{"ph": "X", "name": "a\xe4\xb8"}, {"ph": "X", "name": "\xadb"}]', "UTF-8"),
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


def test_text_other_than_ascii_reads_back_exactly(tmp_path: Path) -> None:
    # ASCII fields take a byte scan, others Arrow's full UTF-8 check: both give the text as written
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    names = ["MatMul", "自定义算子_融合", "ÄÖ", "k" * 300]
    ev += [{"ph": "X", "name": n, "pid": 1, "tid": 3, "ts": f"{i}.000", "dur": 1}
           for i, n in enumerate(names)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(ev, ensure_ascii=False), encoding="utf-8")
    assert read_trace_view(p).kernels["name"].to_pylist() == names


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
    for col in ("ph", "name", "pid", "tid", "id", "ts_ns", "dur_ns", "arg:Task Type", "arg:connection_id",
                "arg:name"):
        assert native.events[col].to_pylist() == slow.events[col].to_pylist(), col


SMALL = json.dumps(json.loads(LEVEL1.read_text())[:40] if HAVE_SAMPLES else [{"ph": "X"}]).encode()


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
        {"ph": "X", "name": "late", "pid": 9, "tid": 2, "ts": "2.000", "dur": 1,
         "args": {"Task Type": "AI_CORE"}},
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(ev))
    tt = read_trace_view(p)
    assert tt.kernels["name"].to_pylist() == ["late"]  # named after its slices: still a kernel
    assert [str(w) for w in tt.warnings] == [
        "1 slices on processes the file never names (no process_name) were skipped"]


# ---------------------------------------------------------------------------------------------- streamed


LEVEL2 = SAMPLES / "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
SAVED = ("kernels", "host_ops", "api_calls", "flows", "counters", "steps", "communication")


def _same_tables(path: Path, folder: Path, tt) -> None:
    from pypto_core.profile import Profile

    loaded = Profile.load(folder)
    want = Profile(kernels=tt.kernels, host_ops=tt.host_ops, api_calls=tt.api_calls, flows=tt.flows,
                   counters=tt.counters, steps=tt.steps, communication=tt.communication)
    for name in SAVED + ("memory",):
        assert loaded.table(name).equals(want.table(name)), name
    assert loaded.meta.format == ("ascend_pt" if "trace_view" in path.name else "msprof")
    assert loaded.meta.source == str(path)
    assert loaded.meta.warnings == tt.warnings
    assert loaded.meta.extra["events"] == tt.hints["events"]
    assert loaded.meta.extra["input_bytes"] == tt.hints["input_bytes"]


@pytest.mark.parametrize("path", TRACE_VIEWS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_streamed_folder_loads_as_the_in_memory_read(path: Path, tmp_path: Path) -> None:
    """write_trace_view streams the big tables into Parquet; loading the folder gives read_trace_view's."""
    from pypto_core.formats.chrome_trace import write_trace_view

    meta = write_trace_view(path, tmp_path / "p")
    assert meta.extra["events"] > 0
    _same_tables(path, tmp_path / "p", read_trace_view(path))


@pytest.mark.parametrize("cap", [97, 1000])
def test_streamed_slices_named_late_land_in_file_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       cap: int) -> None:
    # level2 names its processes only after event 1496: with small batches the first host slices (and the
    # flows starting on them) wait until the end, then go back before the streamed ones
    from pypto_core.formats import parquet_sink
    from pypto_core.formats.chrome_trace import write_trace_view

    whole = read_trace_view(LEVEL2)
    monkeypatch.setattr(eventscan, "EVENT_CAP", cap)
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 100)
    write_trace_view(LEVEL2, tmp_path / "p")
    _same_tables(LEVEL2, tmp_path / "p", whole)
    _same_tables(LEVEL2, tmp_path / "p", read_trace_view(LEVEL2))


def test_streamed_deferred_rows_are_merged_across_row_groups(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # two device processes, interleaved; pid 2 is named only at the end: its kernels are classified last and
    # must be put back between pid 1's, across many row groups of kernels.parquet
    import pyarrow.parquet as pq

    from pypto_core.formats import parquet_sink
    from pypto_core.formats.chrome_trace import write_trace_view
    from pypto_core.profile import Profile

    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "Python"}},
    ]
    for i in range(600):
        pid = 1 + (i % 3 == 0)  # every third kernel on the late-named pid 2
        ts = f"{1000 + 10 * i}.000"
        ev.append({"ph": "X", "name": f"k{i}", "pid": pid, "tid": 3, "ts": ts, "dur": 5,
                   "args": {"Task Type": "AI_CORE"}})
        ev.append({"ph": "X", "name": f"op{i}", "cat": "cpu_op", "pid": 5, "tid": 9,
                   "ts": f"{999 + 10 * i}.000", "dur": 2})
        ev.append({"ph": "s", "cat": "async_npu", "id": str(i), "pid": 5, "tid": 9,
                   "ts": f"{999 + 10 * i}.000"})
        ev.append({"ph": "f", "cat": "async_npu", "id": str(i), "pid": pid, "tid": 3, "ts": ts, "bp": "e"})
    ev.append({"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}})
    src = tmp_path / "late.json"
    src.write_text(json.dumps(ev), encoding="utf-8")
    from pypto_core.formats import chrome_trace

    # the late name is only seen late
    monkeypatch.setattr(chrome_trace, "early_process_names", lambda *args: {})
    whole = read_trace_view(src)
    assert whole.kernels["name"].to_pylist() == [f"k{i}" for i in range(600)]
    monkeypatch.setattr(eventscan, "EVENT_CAP", 50)
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 64)
    write_trace_view(src, tmp_path / "p")
    assert pq.ParquetFile(tmp_path / "p" / "kernels.parquet").metadata.num_row_groups > 3
    _same_tables(src, tmp_path / "p", whole)
    loaded = Profile.load(tmp_path / "p")
    assert loaded.flows.num_rows == 600
    assert loaded.flows["kernel_index"].to_pylist() == list(range(600))
    assert loaded.flows["host_index"].to_pylist() == list(range(600))


def test_counters_take_the_last_name_of_their_process(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # samples written before their pid is named, then under a first name: in small batches they are streamed
    # with the name known then, and rewritten at the end with the file's last one (as one whole read gives)
    from pypto_core.formats import parquet_sink
    from pypto_core.formats.chrome_trace import write_trace_view

    ev: list[dict] = [{"ph": "C", "name": "freq", "pid": 4, "tid": 0, "ts": f"{i}.000", "args": {"MHz": i}}
                      for i in range(300)]
    ev.insert(100, {"ph": "M", "name": "process_name", "pid": 4, "tid": 0, "args": {"name": "first"}})
    ev.append({"ph": "M", "name": "process_name", "pid": 4, "tid": 0, "args": {"name": "AI Core Freq"}})
    src = tmp_path / "c.json"
    src.write_text(json.dumps(ev), encoding="utf-8")
    whole = read_trace_view(src)
    assert whole.counters["process"].to_pylist() == ["AI Core Freq"] * 300
    monkeypatch.setattr(eventscan, "EVENT_CAP", 50)
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 64)
    assert read_trace_view(src).counters.equals(whole.counters)
    write_trace_view(src, tmp_path / "p")
    _same_tables(src, tmp_path / "p", whole)


def test_streamed_read_of_a_truncated_file_leaves_no_folder(tmp_path: Path) -> None:
    from pypto_core.formats.chrome_trace import write_trace_view

    src = tmp_path / "cut.json"
    src.write_bytes(LEVEL1.read_bytes()[:1_000_000])
    with pytest.raises(InputError, match="truncated") as err:
        write_trace_view(src, tmp_path / "p")
    assert str(src) in str(err.value)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("path", MSPROF_JSONS, ids=lambda p: p.name)
def test_streamed_msprof_placeholders_are_named_errors(path: Path, tmp_path: Path) -> None:
    from pypto_core.formats.chrome_trace import write_trace_view

    with pytest.raises(InputError, match="empty"):
        write_trace_view(path, tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_streamed_msprof_style_array(tmp_path: Path) -> None:
    from pypto_core.formats.chrome_trace import write_trace_view

    events = [e for e in json.loads(LEVEL1.read_text()) if e.get("pid") != 3096504]
    src = tmp_path / "msprof_20250101000000.json"
    src.write_text(json.dumps(events))
    write_trace_view(src, tmp_path / "p")
    _same_tables(src, tmp_path / "p", read_trace_view(src))


def test_flow_ids_pair_as_text_would(tmp_path: Path) -> None:
    """Flow ends pair by (cat, id) as their text: integer ids (20-digit HostToDevice ones too) by value, any
    other id ("007", "x1") by its text, never an integer id with a text one; HostToDevice also binds by the
    API's connection_id."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "CANN"}},
        {"ph": "X", "name": "op_a", "pid": 1, "tid": 1, "ts": "10.000", "dur": 5},
        {"ph": "X", "name": "op_b", "pid": 1, "tid": 1, "ts": "20.000", "dur": 5},
        {"ph": "X", "name": "op_c", "pid": 1, "tid": 1, "ts": "30.000", "dur": 5},
        {"ph": "X", "name": "launch", "pid": 3, "tid": 3, "ts": "40.000", "dur": 5,
         "args": {"connection_id": "x1"}},
        {"ph": "X", "name": "k1", "pid": 2, "tid": 7, "ts": "100.000", "dur": 1},
        {"ph": "X", "name": "k2", "pid": 2, "tid": 7, "ts": "200.000", "dur": 1},
        {"ph": "X", "name": "k3", "pid": 2, "tid": 7, "ts": "300.000", "dur": 1},
        {"ph": "X", "name": "k4", "pid": 2, "tid": 7, "ts": "400.000", "dur": 1},
        {"ph": "s", "cat": "async_npu", "id": 1764246877073569640, "pid": 1, "tid": 1, "ts": "10.000"},
        {"ph": "f", "cat": "async_npu", "id": "1764246877073569640", "pid": 2, "tid": 7, "ts": "100.000",
         "bp": "e"},
        {"ph": "s", "cat": "async_npu", "id": "007", "pid": 1, "tid": 1, "ts": "20.000"},
        {"ph": "f", "cat": "async_npu", "id": "007", "pid": 2, "tid": 7, "ts": "200.000", "bp": "e"},
        {"ph": "s", "cat": "async_npu", "id": "x9", "pid": 1, "tid": 1, "ts": "30.000"},
        {"ph": "f", "cat": "async_npu", "id": 9, "pid": 2, "tid": 7, "ts": "300.000", "bp": "e"},
        {"ph": "s", "cat": "HostToDevice", "id": "x1", "pid": 3, "tid": 3, "ts": "99.000"},
        {"ph": "f", "cat": "HostToDevice", "id": "x1", "pid": 2, "tid": 7, "ts": "400.000", "bp": "e"},
        {"ph": "s", "cat": "HostToDevice", "id": "40006882869110636543", "pid": 3, "tid": 3, "ts": "40.000"},
        {"ph": "f", "cat": "HostToDevice", "id": "40006882869110636543", "pid": 2, "tid": 7, "ts": "300.000"},
        {"ph": "f", "cat": "HostToDevice", "id": "50006882869110636543", "pid": 2, "tid": 7, "ts": "200.000"},
    ]
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(ev))
    tt = read_trace_view(p)
    got = {(r["kind"], r["kernel_index"], r["host_index"], r["api_index"]) for r in tt.flows.to_pylist()}
    assert got == {("async_npu", 0, 0, None), ("async_npu", 1, 1, None), ("HostToDevice", 3, None, 0),
                   ("HostToDevice", 2, None, 0)}  # a 20-digit id pairs by value, a different one does not
    assert tt.hints["unbound_flows"] == 3  # "x9" and 9 are two flows with one end each, so is 5000...543
