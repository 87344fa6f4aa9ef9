"""What the benchmarks measure: a child's peak is its own, and a trace that names its processes first is
read in one pass (issue 24 items 8 and 11: both once published figures that measured something else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pypto_core.bench._measure import child_json
from pypto_core.formats import chrome_trace, eventscan
from pypto_core.formats.chrome_trace import read_trace_view


def test_a_child_reports_its_own_peak_not_its_parents() -> None:
    ballast = bytearray(400 * 1024 * 1024)  # the parent's peak: 400 MB touched
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    code = ("import json; from pypto_core.bench.timeline import _rss_mb; "
            "print(json.dumps({'peak': _rss_mb()}))")
    peak = child_json(code, check=True)["peak"]
    del ballast
    assert 0 < peak < 200, peak  # a bare interpreter with numpy and pyarrow is ~100 MB; ru_maxrss gave >= 400


def _trace(path: Path, names_first: bool) -> Path:
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Python"}},
            {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "Ascend Hardware"}}]
    slices = [{"name": f"aten::op{i}", "ph": "X", "pid": 1, "tid": 1, "ts": f"{10 + 5 * i}.0", "dur": 4}
              for i in range(50)]
    slices += [{"name": f"Kernel{i}", "ph": "X", "pid": 2, "tid": 3, "ts": f"{12 + 5 * i}.0", "dur": 3,
                "args": {"Task Type": "AI_CORE"}} for i in range(50)]
    path.write_text(json.dumps(meta + slices if names_first else slices + meta))
    return path


@pytest.mark.parametrize("names_first", [True, False])
def test_the_name_search_reads_the_file_again_only_when_names_come_late(tmp_path: Path, monkeypatch,
                                                                       names_first: bool) -> None:
    calls = []
    real = chrome_trace.early_process_names

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(chrome_trace, "early_process_names", counted)
    monkeypatch.setattr(eventscan, "EVENT_CAP", 20)  # several batches: late names arrive after their slices
    profile = read_trace_view(_trace(tmp_path / "trace_view.json", names_first))
    assert profile.host_ops.num_rows == 50 and profile.kernels.num_rows == 50  # read right either way
    assert len(calls) == (0 if names_first else 1)


def test_the_analyze_bench_reports_the_median_of_three_fresh_runs(tmp_path: Path) -> None:
    """Item 9: one cold child right after the inputs were written read 0.72 s where warm runs took 0.38 s."""
    from pypto_core.bench import analyze

    row = analyze.run([1.0], tmp_path)["results"][0]
    assert len(row["runs_s"]) == 3
    assert sorted(row["runs_s"])[1] == pytest.approx(row["load_plus_analyze_s"], abs=1e-3)
    assert row["load_plus_analyze_s"] == pytest.approx(row["load_s"] + row["analyze_s"], abs=0.01)
    assert row["load_avg"] is not None and row["kernels"] > 0


def test_each_capture_bench_size_counts_only_its_own_traces(tmp_path: Path) -> None:
    """Item 10: both sizes once wrote into one folder, so the second size counted the first's traces too
    (exactly double). Two models of the same depth write about the same trace per step."""
    from pypto_core.bench import capture

    sizes = capture.run([1, 2], tmp_path)["sizes"]
    first, second = sizes["1MB"]["trace_mb_per_active_step"], sizes["2MB"]["trace_mb_per_active_step"]
    assert first > 0 and 0.67 < second / first < 1.5, (first, second)


def test_the_folder_bench_times_each_step_of_analyze(tmp_path: Path) -> None:
    """``analyze_folder``: pypto analyze of a raw simulated folder, its read, load, diagnosis and report
    timed apart inside the one CLI call (no timing is asserted, only that each step was seen and counted)."""
    from pypto_core.bench import analyze_folder

    row = analyze_folder.run([2.0], tmp_path)["results"][0]
    assert row["exit"] == 0 and row["kernels"] > 0 and len(row["runs_s"]) == 3
    assert set(row["stages"]) == {"read", "load", "diagnose", "render"}
    assert sum(s["s"] for s in row["stages"].values()) <= row["seconds"] + 0.05
    assert row["stages"]["read"]["peak_rss_mb"] <= row["peak_rss_mb"]


def test_the_saved_bench_analyses_and_compares_a_kernel_table(tmp_path: Path) -> None:
    """``analyze_saved``: a saved profile of a kernel_details.csv built from the real sample's rows, built
    once and reused; pypto analyze of it and the worker's comparison of two, each in its own child."""
    from pypto_core.bench import analyze_saved

    row = analyze_saved.run([1], tmp_path)["results"][0]
    assert row["rows"] > 0 and row["analyze"]["kernels"] == row["rows"] and row["analyze"]["exit"] == 0
    assert row["compare"]["op_rows"] > 0 and len(row["compare"]["runs_s"]) == 3
    built = (tmp_path / "kernel_table_1mb.saved" / "rank_0" / "kernels.parquet").stat().st_mtime
    analyze_saved.run([1], tmp_path)
    assert (tmp_path / "kernel_table_1mb.saved" / "rank_0" / "kernels.parquet").stat().st_mtime == built


def test_the_worker_bench_measures_each_part_of_the_diagnosis_step(tmp_path: Path) -> None:
    """``worker_diagnose``: the load, rules, page data and timeline index of the worker's step, on a saved
    simulated folder and a saved kernel table, each in fresh children; the peak after each part."""
    from pypto_core.bench import worker_diagnose

    rows = worker_diagnose.run([1], tmp_path)["results"]
    assert [r["profile"] for r in rows] == ["ascend_pt_folder", "kernel_table"]
    for row in rows:
        assert list(row["parts"]) == ["load", "rules", "page_data", "timeline_index"], row
        assert row["kernels"] > 0 and len(row["runs_s"]) == 3
        assert max(p["peak_rss_mb"] for p in row["parts"].values()) <= row["peak_rss_mb"] + 1
