"""Folders, groups and archives streamed into saved profiles (``write_profiles``, ``write_ascend_pt``): what
the upload pipeline stores, one rank at a time, with the big files never held in memory."""

import json
import shutil
import zipfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import (
    csvscan,
    open_profile,
    open_profiles,
    parquet_sink,
    timeline_merge,
    write_profiles,
)
from pypto_core.formats.ascend_pt import write_ascend_pt
from pypto_core.formats.timeline_merge import repoint_flows
from pypto_core.profile import TABLE_NAMES, Profile
from tests.paths import SAMPLES

PT = SAMPLES / "ascend_pt"
LEVEL2 = PT / "cnn_8npu_text_level2" / "rank0_ascend_pt"  # kernel_details + l2_cache + trace_view with flows
QWEN = PT / "qwen3_0.6b_train_4npu_level2"  # two ranks
QWEN0 = QWEN / "rank_0_ascend_pt"  # kernel_details with Device_id, steps without bounds in some versions


def test_folder_read_piece_by_piece_equals_one_piece(tmp_path, monkeypatch):
    """The flows' re-pointing (time range by time range), the l2 join, the step bounds and the device ids
    read the saved kernels a piece at a time: with pieces of 7 rows the profile is the same as with one."""
    whole = {src: write_ascend_pt(src, tmp_path / "whole" / src.name) for src in (LEVEL2, QWEN0)}
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 7)
    monkeypatch.setattr(csvscan, "MAX_ROWS", 7)
    monkeypatch.setattr(timeline_merge, "MAPPING_KEYS", 5)  # tasks matched in dozens of time ranges
    for src in (LEVEL2, QWEN0):
        pieces = write_ascend_pt(src, tmp_path / "pieces" / src.name)
        assert pq.ParquetFile(tmp_path / "pieces" / src.name / "kernels.parquet").metadata.num_row_groups > 10
        a, b = Profile.load(tmp_path / "whole" / src.name), Profile.load(tmp_path / "pieces" / src.name)
        for name in TABLE_NAMES:
            assert a.table(name).equals(b.table(name)), (src.name, name)
        assert pieces == whole[src]
    assert whole[QWEN0].device_id == 0  # from kernel_details' Device_id column
    a = Profile.load(tmp_path / "whole" / LEVEL2.name)
    assert {"l2_hit_rate", "l2_victim_rate"} <= set(a.kernels.column_names)
    # hit rate is N/A here
    assert pc.sum(pc.is_valid(a.kernels["l2_victim_rate"]).cast(pa.int64())).as_py() > 0
    assert a.flows.num_rows > 0


def test_flows_point_at_the_csv_kernel_with_the_same_start_and_name(tmp_path):
    write_ascend_pt(LEVEL2, tmp_path / "p")
    p = Profile.load(tmp_path / "p")
    trace = open_profile(LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    flows = trace.flows.filter(pc.is_valid(trace.flows["kernel_index"]))
    expected = repoint_flows(flows, trace.kernels, p.kernels)
    assert p.flows.num_rows == expected.num_rows > 0
    for row in p.flows.to_pylist()[:50]:
        kernel = p.kernels.slice(row["kernel_index"], 1).to_pylist()[0]
        assert any(t["start_ns"] == kernel["start_ns"] and t["name"] == kernel["name"]
                   for t in trace.kernels.filter(pc.equal(trace.kernels["start_ns"],
                                                          kernel["start_ns"])).to_pylist())


@pytest.mark.parametrize("keys_per_range", [1, 2, 1 << 20])
def test_repoint_leaves_out_names_the_csv_lacks_and_takes_the_first_equal_row(monkeypatch, keys_per_range):
    monkeypatch.setattr(timeline_merge, "MAPPING_KEYS", keys_per_range)
    trace_kernels = pa.table({"start_ns": [10, 20, 30, None, 40],
                              "name": ["MatMul", "SDMA", "Add", "Add", None]})
    csv_kernels = pa.table({"start_ns": [30, 10, 10, 20, 10, None, 40],
                            "name": ["Add", "Cast", "MatMul", "Other", "MatMul", "Add", None]})
    flows = pa.table({"host_index": [0, 1, 2, 3, 4, 5], "kernel_index": [0, 1, 2, None, 3, 4],
                      "kind": ["a"] * 6})
    out = repoint_flows(flows, trace_kernels, csv_kernels)
    assert out["host_index"].to_pylist() == [0, 2]  # in the flows' order; SDMA, null starts and names dropped
    assert out["kernel_index"].to_pylist() == [2, 0]  # MatMul@10: the first of CSV rows 2 and 4


def test_ranks_of_a_group_are_saved_one_folder_each(tmp_path):
    saved = write_profiles(QWEN, tmp_path / "out")
    assert [name for name, _ in saved.ranks] == ["rank_0", "rank_1"]
    assert saved.primary()[0] == "rank_0"
    group = open_profiles(QWEN)
    for (name, meta), prof in zip(saved.ranks, sorted(group.profiles, key=lambda p: p.meta.rank)):
        loaded = Profile.load(tmp_path / "out" / name)
        assert loaded.meta.rank == meta.rank == prof.meta.rank
        assert json.loads((tmp_path / "out" / name / "profile.json").read_text())["meta"]["rank"] == meta.rank
        for table in TABLE_NAMES:
            assert loaded.table(table).equals(prof.table(table)), (name, table)


def test_archive_sources_name_the_archive_and_the_member(tmp_path):
    archive = tmp_path / "run.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in LEVEL2.rglob("*"):
            if f.is_file():
                zf.write(f, "rank0_ascend_pt/" + f.relative_to(LEVEL2).as_posix())
    saved = write_profiles(archive, tmp_path / "out")
    name, meta = saved.primary()
    assert meta.source == f"{archive}!/rank0_ascend_pt"
    stored = json.loads((tmp_path / "out" / name / "profile.json").read_text())["meta"]
    assert stored["source"] == meta.source
    assert all(s.startswith(f"{archive}!/") for s in stored["source_files"])
    assert not list(tmp_path.glob("out/*/_trace_view"))  # the scratch timeline is gone


def test_a_failed_read_leaves_no_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as err:
        write_profiles(empty, tmp_path / "out")
    assert "empty" in str(err.value)
    assert not any((tmp_path / "out").iterdir())
    bad = tmp_path / "bad_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    bad.mkdir(parents=True)
    (bad / "kernel_details.csv").write_bytes(b"\x00\xffnot a table" * 50)
    with pytest.raises(InputError):
        write_profiles(bad.parent, tmp_path / "out")
    assert not any((tmp_path / "out").iterdir())


def test_an_output_folder_with_files_is_refused_and_kept(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(InputError) as err:
        write_profiles(LEVEL2, out)
    assert "must be new or empty" in str(err.value)
    assert (out / "notes.txt").read_text() == "keep me"


def test_a_folder_whose_files_all_fail_names_each(tmp_path):
    folder = tmp_path / "bad_ascend_pt"
    shutil.copytree(LEVEL2, folder)
    out = folder / "ASCEND_PROFILER_OUTPUT"
    for f in out.iterdir():
        f.unlink()
    (out / "kernel_details.csv").write_bytes(b"\x00\x01binary\xff" * 100)
    (out / "trace_view.json").write_text('[{"ph": "X", "name": "a"')  # truncated
    with pytest.raises(InputError) as err:
        write_ascend_pt(folder, tmp_path / "p")
    message = str(err.value)
    assert "kernel_details.csv" in message and "trace_view.json" in message
    assert not (tmp_path / "p").exists()


def _slice_msprof(src, dest):
    """An msprof output folder cut into two slices, as msprof slices big outputs: op_summary_slice_0/1
    (each with the header) and msprof_slice_0/1 (each with the process metadata)."""
    shutil.copytree(src, dest)
    out = dest / "mindstudio_profiler_output"
    (summary,) = out.glob("op_summary_*.csv")
    header, *rows = summary.read_text().splitlines(keepends=True)
    half = len(rows) // 2
    (out / "op_summary_slice_0_20260101000000.csv").write_text(header + "".join(rows[:half]))
    (out / "op_summary_slice_1_20260101000001.csv").write_text(header + "".join(rows[half:]))
    summary.unlink()
    (timeline,) = out.glob("msprof_*.json")
    events = json.loads(timeline.read_text())
    meta = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e.get("ph") != "M"]
    half = len(rest) // 2
    (out / "msprof_slice_0_20260101000000.json").write_text(json.dumps(meta + rest[:half]))
    (out / "msprof_slice_1_20260101000001.json").write_text(json.dumps(meta + rest[half:]))
    timeline.unlink()


def test_msprof_slices_are_read_in_order_as_one_table(tmp_path):
    from pypto_core.synth import synthesize_run

    whole = synthesize_run(tmp_path / "whole", layout="msprof", tokens=2, prompt_tokens=16).path
    _slice_msprof(whole, tmp_path / "sliced" / whole.name)
    a = open_profile(whole)
    b = open_profile(tmp_path / "sliced" / whole.name)
    for name in ("kernels", "host_ops", "api_calls", "counters", "steps"):
        assert b.table(name).equals(a.table(name)), name
    names = [s.rsplit("/", 1)[-1] for s in b.meta.source_files]
    assert sum(n.startswith(("op_summary_slice_", "msprof_slice_")) for n in names) == 4
    # flows whose two ends fell into different slices are lost; every other one points at the same rows
    def triples(p: Any) -> set[tuple[int, int, int]]:
        return set(zip(*(p.flows[c].to_pylist() for c in ("host_index", "kernel_index", "api_index"))))

    assert 0 < b.flows.num_rows < a.flows.num_rows
    assert triples(b) <= triples(a)


def test_msprof_devices_are_saved_one_folder_each(tmp_path):
    from pypto_core.synth import synthesize_run

    legacy = synthesize_run(tmp_path / "legacy", layout="msprof_legacy", tokens=2, prompt_tokens=16).path
    shutil.copytree(legacy / "device_0", legacy / "device_1")
    for f in (legacy / "device_1").iterdir():
        if f.name == "info.json.0":
            f.rename(f.with_name("info.json.1"))
    saved = write_profiles(legacy, tmp_path / "out")
    assert len(saved.ranks) == 2
    loaded = [Profile.load(tmp_path / "out" / name) for name, _ in saved.ranks]
    assert [p.meta.device_id for p in loaded] == [0, 1]
    assert loaded[0].kernels.equals(loaded[1].kernels) and loaded[0].kernels.num_rows > 0
    assert loaded[0].flows.num_rows > 0


def test_cli_convert_saves_ranks_that_analyze_opens(tmp_path, capsys):
    from pypto_core.cli import main

    assert main(["convert", str(QWEN), str(tmp_path / "saved")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["ranks"][0]["kernel_count"] == 2463 and doc["ranks"][0]["format"] == "ascend_pt"
    assert main(["info", str(tmp_path / "saved")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ranks"] == 2 and info["profiles"][0]["kernel_count"] == 2463
    assert main(["convert", str(tmp_path / "nothing_here"), str(tmp_path / "saved2")]) == 2
    assert "nothing_here" in capsys.readouterr().err


def test_analyze_opens_what_convert_wrote_for_one_rank(tmp_path, capsys):
    """`pypto convert` writes rank_0/ even for one rank: analyze of the folder it was given reads that rank
    (it had looked for profile.json beside rank_0/ and failed with a traceback)."""
    from pypto_core.cli import main

    assert main(["convert", str(LEVEL2), str(tmp_path / "saved")]) == 0
    capsys.readouterr()
    assert [d.name for d in (tmp_path / "saved").iterdir()] == ["rank_0"]
    assert main(["analyze", str(tmp_path / "saved")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"]["kernel_count"] > 0 and report["profile"]["format"] == "ascend_pt"


def test_folder_bench_runs_end_to_end(tmp_path):
    """The folder benchmark on a tiny simulated run (speed is printed by `pypto bench`, never asserted)."""
    from pypto_core.bench import readers_folder

    r = readers_folder.run([2], tmp_path)["results"][0]
    assert "error" not in r and "load_error" not in r, r
    assert r["kernels"] > 0 and r["flows"] > 0 and r["mb_per_s"] > 0 and r["peak_rss_mb"] > 0
    assert r["parquet_load_peak_rss_mb"] > 0
    assert list(tmp_path.iterdir()) == []  # generated inputs are removed


def test_saved_ranks_are_copied_not_read_again(tmp_path, monkeypatch):
    """A folder of saved ranks (what `pypto convert` writes) is copied file by file: no table is loaded."""
    write_profiles(QWEN, tmp_path / "saved")

    def no_load(*args, **kwargs):
        raise AssertionError("a saved table was loaded")

    monkeypatch.setattr(Profile, "load", no_load)
    again = write_profiles(tmp_path / "saved", tmp_path / "again")
    assert [n for n, _ in again.ranks] == ["rank_0", "rank_1"] and [m.rank for _, m in again.ranks] == [0, 1]
    for name in ("kernels.parquet", "flows.parquet"):
        again, saved = tmp_path / "again" / "rank_0" / name, tmp_path / "saved" / "rank_0" / name
        assert again.read_bytes() == saved.read_bytes()
    (tmp_path / "saved" / "rank_1" / "kernels.parquet").write_bytes(b"PAR1 not parquet")
    with pytest.raises(InputError, match="could not be loaded"):
        write_profiles(tmp_path / "saved" / "rank_1", tmp_path / "bad")


def test_a_folders_tables_are_read_beside_its_timeline_to_the_same_profile(tmp_path, monkeypatch):
    """With two cores the kernel table and the small files are read in a second thread while the timeline
    is scanned; the saved profile is the one the serial read gives, and a failure in that thread fails the
    read (the thread is joined first: nothing is left behind)."""
    from pypto_core.formats import ascend_pt, saved_folder

    monkeypatch.setattr(saved_folder, "parallel_reads", lambda: False)
    serial = write_ascend_pt(LEVEL2, tmp_path / "serial")
    threads: list[str] = []
    real = ascend_pt._write_tables

    def recorded(files, out):
        import threading

        threads.append(threading.current_thread().name)
        return real(files, out)

    monkeypatch.setattr(ascend_pt, "_write_tables", recorded)
    monkeypatch.setattr(saved_folder, "parallel_reads", lambda: True)
    parallel = write_ascend_pt(LEVEL2, tmp_path / "parallel")
    assert threads and threads[0].startswith("pypto-folder-tables")
    assert parallel == serial
    a, b = Profile.load(tmp_path / "serial"), Profile.load(tmp_path / "parallel")
    for name in TABLE_NAMES:
        assert a.table(name).equals(b.table(name)), name

    def failing(files, out):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ascend_pt, "_write_tables", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        write_ascend_pt(LEVEL2, tmp_path / "failed")
    assert not (tmp_path / "failed").exists()
