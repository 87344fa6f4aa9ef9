"""The typed fast path of the kernel CSV reader gives exactly what the validating string path gives,
and falls back to it (with the same warnings) whenever Arrow's typed parse refuses a cell."""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pypto_core.formats import csvtable, kernel_csv
from pypto_core.formats.kernel_csv import kernel_device_ids, kernels_to_parquet, read_kernels
from tests.paths import SAMPLES

HEADER = ("Device_id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
          "Wait Time(us),Block Dim,Input Shapes,Input Data Types,aic_mte2_ratio\n")
ROW = '0,4294967295,{task},2,{name},MatMul,{core},{start}\t,{dur},0,{block},"""4096,1;{dim}""",DT_BF16;DT_BF16,{ratio}\n'


def _write(path, rows):
    path.write_text(HEADER + "".join(ROW.format(**r) for r in rows), encoding="utf-8")
    return path


def _slow_read(path, monkeypatch):
    """The same file through the validating string path only."""
    with monkeypatch.context() as m:
        m.setattr(kernel_csv, "fast_column_types", lambda cols: {h: pa.string() for h in cols.header})
        return read_kernels(path)


def _row(**kw):
    base = dict(task=1, name="MatMul_1", core="AI_CORE", start="1764246877073569.640", dur="1.5", block=20,
                dim=7, ratio="0.25")
    return {**base, **kw}


@pytest.mark.parametrize("sample", [
    "ascend_pt/qwen3_0.6b_train_4npu_level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "ascend_pt/trimmed_2023_memoryl0/test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "ascend_pt/llm_arithutil_2023/kernel_details.csv",
    "ascend_pt/llm_matmul_pipeutil_2025/kernel_details.csv",
    "msprof/op_summary_fixture/op_summary_1.csv",
])
def test_fast_path_equals_string_path_on_real_samples(sample, monkeypatch):
    fast, fast_warn = read_kernels(SAMPLES / sample)
    slow, slow_warn = _slow_read(SAMPLES / sample, monkeypatch)
    assert fast.num_rows > 0
    assert fast.equals(slow) and fast_warn == slow_warn


def test_sub_ns_digits_round_half_away_from_zero_like_the_string_path(tmp_path, monkeypatch):
    # 2023 files carry 4 decimals (0.1 ns): "496.8508" -> 496851 ns, "-2.0005" -> -2001 ns
    path = _write(tmp_path / "k.csv", [_row(dur="496.8508"), _row(task=2, dur="0.0004"), _row(task=3, dur="-2.0005"),
                                       _row(task=4, start="1764246877073569.6405")])
    fast, _ = read_kernels(path)
    assert fast["dur_ns"].to_pylist() == [496851, 0, -2001, 1500]
    assert fast["start_ns"][3].as_py() == 1764246877073569641
    assert fast.equals(_slow_read(path, monkeypatch)[0])


@pytest.mark.parametrize("bad", [
    dict(block="40.0"),  # integral decimal in an integer column: accepted by the string path
    dict(ratio="abc"),  # text in a counter
    dict(dur="1.0000000001"),  # more digits than the fast decimal holds
    dict(dim="x"),  # unreadable shape
])
def test_refused_cells_fall_back_to_the_validating_path(tmp_path, monkeypatch, bad):
    rows = [_row(task=i, start=f"17642468770735{i:02d}.640") for i in range(5)] + [_row(task=9, **bad)]
    path = _write(tmp_path / "k.csv", rows)
    fast, fast_warn = read_kernels(path)
    slow, slow_warn = _slow_read(path, monkeypatch)
    assert fast.num_rows == 6 and fast.equals(slow) and fast_warn == slow_warn
    assert fast["start_ns"][0].as_py() == 1764246877073500640


def test_text_cleaning_and_renames_work_on_dictionary_columns(tmp_path):
    path = _write(tmp_path / "k.csv", [_row(core="HCCL", name='" hcom_x "'), _row(task=2, core="N/A", name="N/A")])
    k, _ = read_kernels(path)
    assert k["core_type"].to_pylist() == ["COMMUNICATION", None]
    assert k["name"].to_pylist() == ["hcom_x", None]
    assert k["input_shapes"].to_pylist() == [[[4096, 1], [7]]] * 2
    assert k["input_dtypes"].to_pylist() == [["DT_BF16", "DT_BF16"]] * 2
    assert k["model_id"].to_pylist() == [None, None]  # 4294967295 = none


def test_decimal_to_ns_out_of_range_goes_the_string_way():
    arr = pa.array(["99999999999999999.5", "1.5"]).cast(csvtable.decimal_type(1000))
    assert csvtable.decimal_to_ns(arr) is None
    notes = csvtable.ConversionNotes()
    out = csvtable.to_ns(arr, column="t", notes=notes)
    assert out.to_pylist() == [None, 1500] and notes.bad_values["t"][0] == 1  # reported, never wrapped


def test_kernels_to_parquet_streams_all_rows_exactly(tmp_path):
    rows = [_row(task=i, start=f"1764246877{i:06d}.{i % 1000:03d}", core="HCCL" if i % 7 == 0 else "AI_CORE")
            for i in range(3000)]
    src = _write(tmp_path / "k.csv", rows)
    dest = tmp_path / "k.parquet"
    n, warnings = kernels_to_parquet(src, dest, block_size=16 * 1024)  # many small batches
    table = pq.read_table(dest)
    expected, _ = read_kernels(src)
    assert n == 3000 and warnings == [] and table.equals(expected)
    assert table["start_ns"][2999].as_py() == 1764246877002999999
    assert pc.sum(pc.equal(table["core_type"], "COMMUNICATION")).as_py() == 429


def test_kernels_to_parquet_removes_its_file_on_bad_input(tmp_path):
    src = tmp_path / "k.csv"
    src.write_text("Name,Start Time(us),Duration(us),Type\n" + "\x00" * 10, encoding="utf-8")
    dest = tmp_path / "k.parquet"
    with pytest.raises(Exception):
        kernels_to_parquet(src, dest)
    assert not dest.exists()


def test_kernel_device_ids():
    assert kernel_device_ids(pa.table({"device_id": pa.array([3, None, 1, 3], pa.int64())})) == [1, 3]
    assert kernel_device_ids(pa.table({"name": ["x"]})) == []


def test_fallback_after_batches_were_delivered_keeps_every_row_once(tmp_path, monkeypatch):
    rows = [_row(task=i, start=f"1764246877{i:06d}.500") for i in range(2000)] + [_row(task=9999, ratio="junk")]
    path = _write(tmp_path / "k.csv", rows)
    batches = list(kernel_csv.iter_kernel_batches(path, kernel_csv.map_columns(path), block_size=8 * 1024))
    assert len(batches) > 10  # the refused cell sits many batches in
    got = pa.Table.from_batches(batches)
    assert got["task_id"].to_pylist() == list(range(2000)) + [9999]
    assert got.equals(_slow_read(path, monkeypatch)[0])
