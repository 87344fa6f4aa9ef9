"""The JSON-reader benchmark's generated inputs are real
traces (speed is printed by `pypto bench`, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from pypto_core.bench import readers_json, registry
from pypto_core.cli import main
from pypto_core.formats.chrome_trace import read_trace_view
from pypto_core.formats.kineto import read_kineto


def test_generated_trace_view_is_read_whole_with_shifted_exact_times(tmp_path: Path) -> None:
    path = tmp_path / "tv.json"
    gen = readers_json.generate_trace_view(path, 5)
    tt = read_trace_view(path)
    assert tt.hints["events"] == gen["events"] > 10476
    starts = tt.kernels["start_ns"].to_pylist()
    copies = tt.kernels.num_rows // 535  # 535 device tasks per copy of the level2 sample
    assert copies >= 2 and tt.kernels.num_rows == copies * 535
    # copy 1 keeps the file's ns digits ("ts": "1736412474701224.784"); each copy is shifted by one span
    assert starts[0] == 1736412474701224784
    shift = starts[535] - starts[0]
    assert shift > 10**9 and starts[1070] - starts[535] == shift
    # links stay unique per copy: every copy's async_npu flows bind
    # 210 pairs, 4 end on HCCL ops
    assert tt.flows.filter(pc.equal(tt.flows["kind"], "async_npu")).num_rows == copies * 206


def test_generated_kineto_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    gen = readers_json.generate_kineto(path, 5)
    prof = read_kineto(path)
    assert prof.meta.extra["events"] == gen["events"]
    assert prof.meta.device == "A100"
    assert prof.flows.num_rows == prof.kernels.num_rows  # every kernel keeps its launch link


def test_registry_and_command(tmp_path: Path, capsys) -> None:
    assert {"readers_json"} <= set(registry())
    out = tmp_path / "b.json"
    assert main(["bench", "--sizes", "1", "--only", "readers_json", "-o", str(out)]) == 0
    report = json.loads(out.read_text())
    results = report["benchmarks"]["readers_json"]["results"]
    assert {r["input"] for r in results} == {"trace_view.json", "kineto.json", "kineto.json.gz"}
    for r in results:
        assert "error" not in r, r
        assert r["events_match"] and r["mb_per_s"] > 0 and r["peak_rss_mb"] > 0 and r["parquet_load_s"] >= 0
    assert main(["bench", "--only", "no_such_bench"]) == 1
