"""Folders, groups and archives streamed into saved profiles (``write_profiles``, ``write_ascend_pt``): what
the upload pipeline stores, one rank at a time, with the big files never held in memory."""

import json
import shutil
import zipfile

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import csvscan, open_profile, open_profiles, parquet_sink, write_profiles
from pypto_core.formats.ascend_pt import write_ascend_pt
from pypto_core.formats.timeline_merge import repoint_flows
from pypto_core.profile import TABLE_NAMES, Profile
from tests.paths import SAMPLES

PT = SAMPLES / "ascend_pt"
LEVEL2 = PT / "cnn_8npu_text_level2" / "rank0_ascend_pt"  # kernel_details + l2_cache + trace_view with flows
QWEN = PT / "qwen3_0.6b_train_4npu_level2"  # two ranks
QWEN0 = QWEN / "rank_0_ascend_pt"  # kernel_details with Device_id, steps without bounds in some versions


def test_folder_read_row_group_by_row_group_equals_one_row_group(tmp_path, monkeypatch):
    """The flows' re-pointing, the l2 join, the step bounds and the device ids read the saved kernels one
    row group at a time: with row groups of 7 rows the profile is the same as with one row group."""
    whole = {src: write_ascend_pt(src, tmp_path / "whole" / src.name) for src in (LEVEL2, QWEN0)}
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 7)
    monkeypatch.setattr(csvscan, "MAX_ROWS", 7)
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
    assert pc.sum(pc.is_valid(a.kernels["l2_victim_rate"]).cast(pa.int64())).as_py() > 0  # hit rate is N/A here
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
                   for t in trace.kernels.filter(pc.equal(trace.kernels["start_ns"], kernel["start_ns"])).to_pylist())


def test_repoint_leaves_out_names_the_csv_lacks_and_takes_the_first_equal_row():
    trace_kernels = pa.table({"start_ns": [10, 20, 30], "name": ["MatMul", "SDMA", "Add"]})
    csv_kernels = pa.table({"start_ns": [30, 10, 10, 20], "name": ["Add", "Cast", "MatMul", "Other"]})
    flows = pa.table({"host_index": [0, 1, 2, 3], "kernel_index": [0, 1, 2, None], "kind": ["a"] * 4})
    out = repoint_flows(flows, trace_kernels, csv_kernels).sort_by("host_index")
    assert out["host_index"].to_pylist() == [0, 2]
    assert out["kernel_index"].to_pylist() == [2, 0]


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
    assert not (tmp_path / "out").exists()


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
