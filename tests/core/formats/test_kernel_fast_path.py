"""The fast paths of the kernel CSV reader (the native C scanner, then Arrow's typed parse) give exactly
what the validating string path gives, and fall back to it (with the same warnings) whenever they refuse
a cell or a row."""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import csvscan, csvtable, kernel_csv
from pypto_core.formats.kernel_csv import kernel_device_ids, kernels_to_parquet, read_kernels
from pypto_core.formats.shapes import CELL_TEXT_TYPE
from pypto_core.profile import read_table
from tests.paths import SAMPLES, sample_cases

HEADER = ("Device_id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
          "Wait Time(us),Block Dim,Input Shapes,Input Data Types,aic_mte2_ratio\n")
ROW = ('0,4294967295,{task},2,{name},MatMul,{core},{start}\t,{dur},0,{block},"""4096,1;{dim}""",'
       'DT_BF16;DT_BF16,{ratio}\n')


def _write(path, rows):
    path.write_text(HEADER + "".join(ROW.format(**r) for r in rows), encoding="utf-8")
    return path


def _slow_read(path, monkeypatch):
    """The same file through the validating string path only."""
    with monkeypatch.context() as m:
        m.setattr(kernel_csv, "fast_column_types", lambda cols: {h: pa.string() for h in cols.header})
        m.setattr(csvscan, "_NATIVE", None)
        return read_kernels(path)


def _native_takes(path):
    """True when the C scanner reads the whole file itself (no row left to the pyarrow paths)."""
    cols = kernel_csv.map_columns(path)
    try:
        for _ in csvscan.scan_columns(path, cols.header, kernel_csv.native_column_kinds(cols),
                                      csvtable.NULL_TOKENS):
            pass
    except csvscan.NotNative:
        return False
    return True


@pytest.fixture(params=["native", "arrow"])
def fast_reader(request, monkeypatch):
    """Run a test once with the C scanner first (the default) and once without it (no C compiler)."""
    if request.param == "native":
        if csvscan.native_lib() is None:
            pytest.skip("no C compiler")
    else:
        monkeypatch.setattr(csvscan, "_NATIVE", None)
    return request.param


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
def test_fast_path_equals_string_path_on_real_samples(sample, monkeypatch, fast_reader):
    fast, fast_warn = read_kernels(SAMPLES / sample)
    slow, slow_warn = _slow_read(SAMPLES / sample, monkeypatch)
    assert fast.num_rows > 0
    assert fast.equals(slow) and fast_warn == slow_warn


def test_sub_ns_digits_round_half_away_from_zero_like_the_string_path(tmp_path, monkeypatch, fast_reader):
    # 2023 files carry 4 decimals (0.1 ns): "496.8508" -> 496851 ns, "-2.0005" -> -2001 ns
    path = _write(tmp_path / "k.csv", [_row(dur="496.8508"), _row(task=2, dur="0.0004"),
                                       _row(task=3, dur="-2.0005"),
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
def test_refused_cells_fall_back_to_the_validating_path(tmp_path, monkeypatch, bad, fast_reader):
    rows = [_row(task=i, start=f"17642468770735{i:02d}.640") for i in range(5)] + [_row(task=9, **bad)]
    path = _write(tmp_path / "k.csv", rows)
    fast, fast_warn = read_kernels(path)
    slow, slow_warn = _slow_read(path, monkeypatch)
    assert fast.num_rows == 6 and fast.equals(slow) and fast_warn == slow_warn
    assert fast["start_ns"][0].as_py() == 1764246877073500640


def test_text_cleaning_and_renames_work_on_dictionary_columns(tmp_path):
    path = _write(tmp_path / "k.csv", [_row(core="HCCL", name='" hcom_x "'),
                                       _row(task=2, core="N/A", name="N/A")])
    k, _ = read_kernels(path)
    assert k["core_type"].to_pylist() == ["COMMUNICATION", None]
    assert k["name"].to_pylist() == ["hcom_x", None]
    assert k["input_shapes"].to_pylist() == [[[4096, 1], [7]]] * 2
    assert k["input_dtypes"].to_pylist() == [["DT_BF16", "DT_BF16"]] * 2
    assert k["model_id"].to_pylist() == [None, None]  # 4294967295 = none


def test_kernels_to_parquet_streams_all_rows_exactly(tmp_path):
    rows = [_row(task=i, start=f"1764246877{i:06d}.{i % 1000:03d}", core="HCCL" if i % 7 == 0 else "AI_CORE")
            for i in range(3000)]
    src = _write(tmp_path / "k.csv", rows)
    dest = tmp_path / "k.parquet"
    n, warnings = kernels_to_parquet(src, dest, block_size=16 * 1024)  # many small batches
    stored = pq.read_table(dest)
    assert stored.schema.field("input_shapes").type == CELL_TEXT_TYPE  # the storage form, not lists
    table = read_table(dest, "kernels")
    expected, _ = read_kernels(src)
    assert n == 3000 and warnings == [] and table.equals(expected)
    assert table["start_ns"][2999].as_py() == 1764246877002999999
    assert pc.sum(pc.equal(table["core_type"], "COMMUNICATION")).as_py() == 429


def test_kernels_to_parquet_removes_its_file_on_bad_input(tmp_path):
    src = tmp_path / "k.csv"
    src.write_text("Name,Start Time(us),Duration(us),Type\n" + "\x00" * 10, encoding="utf-8")
    dest = tmp_path / "k.parquet"
    with pytest.raises(InputError, match="NUL bytes"):
        kernels_to_parquet(src, dest)
    assert not dest.exists()


def test_kernel_device_ids():
    assert kernel_device_ids(pa.table({"device_id": pa.array([3, None, 1, 3], pa.int64())})) == [1, 3]
    assert kernel_device_ids(pa.table({"name": ["x"]})) == []


def test_fallback_after_batches_were_delivered_keeps_every_row_once(tmp_path, monkeypatch, fast_reader):
    monkeypatch.setattr(csvscan, "MAX_ROWS", 128)  # the native scan delivers many batches before the junk
    monkeypatch.setattr(csvscan, "READ_CHUNK", 20_000)  # ... from many pieces, scanned in parallel
    rows = [_row(task=i, start=f"1764246877{i:06d}.500") for i in range(2000)]
    rows.append(_row(task=9999, ratio="junk"))
    path = _write(tmp_path / "k.csv", rows)
    batches = list(kernel_csv.iter_kernel_batches(path, kernel_csv.map_columns(path), block_size=8 * 1024))
    assert len(batches) > 10  # the refused cell sits many batches in
    got = pa.Table.from_batches(batches)
    assert got["task_id"].to_pylist() == list(range(2000)) + [9999]
    assert got.equals(_slow_read(path, monkeypatch)[0])


# ------------------------------------------------------------------------------------- native scanner


@pytest.mark.parametrize("sample", [
    "ascend_pt/qwen3_0.6b_train_4npu_level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "ascend_pt/llm_arithutil_2023/kernel_details.csv",
    "ascend_pt/llm_matmul_pipeutil_2025/kernel_details.csv",
])
def test_native_scanner_reads_real_samples_itself(sample):
    # the other two samples hold a truncated row (31 of 32 fields): the scanner leaves them to pyarrow
    if csvscan.native_lib() is None:
        pytest.skip("no C compiler")
    assert _native_takes(SAMPLES / sample)


def test_native_scanner_across_read_chunks_equals_the_string_path(tmp_path, monkeypatch):
    # rows, quoted shape cells and CRLFs split across reads; many small batches
    if csvscan.native_lib() is None:
        pytest.skip("no C compiler")
    rows = [_row(task=i, start=f"1764246877{i:06d}.{i % 1000:03d}", name=f"op_{i % 13}", dim=i % 5,
                 ratio="N/A" if i % 11 == 0 else f"0.{i}") for i in range(700)]
    path = tmp_path / "k.csv"
    path.write_bytes((HEADER + "".join(ROW.format(**r) for r in rows)).replace("\n", "\r\n").encode())
    monkeypatch.setattr(csvscan, "READ_CHUNK", 997)
    monkeypatch.setattr(csvscan, "MAX_ROWS", 61)
    assert _native_takes(path)
    fast, fast_warn = read_kernels(path)
    slow, slow_warn = _slow_read(path, monkeypatch)
    assert fast.num_rows == 700 and fast.equals(slow) and fast_warn == slow_warn == []


@pytest.mark.parametrize("end", ["\r\n", "\n"])
def test_native_scanner_pieces_keep_rows_whole_and_in_order(tmp_path, monkeypatch, end):
    # CRLF and LF files cut into many pieces, one row longer than a read
    if csvscan.native_lib() is None:
        pytest.skip("no C compiler")
    rows = [_row(task=i, start=f"1764246877{i:06d}.{i % 1000:03d}",
                 name="x" * (3000 if i == 77 else 1 + i % 9))
            for i in range(400)]
    path = tmp_path / "k.csv"
    path.write_bytes((HEADER + "".join(ROW.format(**r) for r in rows)).replace("\n", end).encode())
    monkeypatch.setattr(csvscan, "READ_CHUNK", 1500)
    fast, _ = read_kernels(path)
    assert _native_takes(path)
    assert fast["task_id"].to_pylist() == list(range(400))
    assert fast.equals(_slow_read(path, monkeypatch)[0])


@pytest.mark.parametrize("text, takes", [
    ('"0,1"', False),  # 3 fields in a row of 2 columns... via a quoted comma: fine, but here a wrong count
    ('0', True),
    ('0,"x"y', False),  # text after a closing quote
    ('0,x"y', False),  # a quote inside an unquoted field
    ('0,"x\ny"', False),  # a newline inside quotes
    ('0,"x', False),  # unterminated quote
    ('+5,x', False),  # a sign the string path refuses
    ('1e400,x', False),  # out of range
    ('inf,x', False),
])
def test_native_scanner_refuses_what_it_cannot_read_exactly(tmp_path, text, takes):
    if csvscan.native_lib() is None:
        pytest.skip("no C compiler")
    path = tmp_path / "t.csv"
    path.write_text("n,s\n" + (text if "," in text else text + ",x") + "\n", encoding="utf-8")
    try:
        list(csvscan.scan_columns(path, ["n", "s"], [csvscan.FLOAT, csvscan.TEXT], csvtable.NULL_TOKENS))
        took = True
    except csvscan.NotNative:
        took = False
    assert took == takes


_CELLS = ["", "N/A", "NA", "-", "nan", "None", " 5 ", "5\t", '"5"', "+5", "5.0", "40.", "5.5", "-2.0005",
          "1e3", ".5", "5.", "inf", "1e400", "4294967295", "abc", "-0", "0.0005", "9999999999999999.9999",
          "1764246877073569.640\t", "0000000000000000001", "12345678901234567890123", "é", "\u00a05", "x y",
          "4096,1;7", '"4096,1;;2"', "DT_BF16;INT64", 'a"b', "HCCL", " MatMul "]


# per HEADER column: cells the scanner takes (mangled ones are drawn from _CELLS now and then)
_INT_OK = ["0", "7", "-3", "4294967295", "N/A", "", "40.0", '"12"']
_TIME_OK = ["1764246877073569.640\t", "1.5", "-2.0005", "0", "N/A", "496.8508"]
_GOOD = [_INT_OK] * 4 + [["MatMul_1", "hcom_x", "N/A", " a b ", '"q"'], ["MatMul", "N/A"],
                         ["AI_CORE", "HCCL", "N/A"]] + \
    [_TIME_OK] * 3 + [_INT_OK, ['"4096,1;7"', '"""4096,1;;2"""', "", "N/A", '"x,1"'],
                      ["DT_BF16;INT64", "", "N/A"],
                      ["0.25", "1e-3", "-0.0", "N/A", "", "12345678901234567890.5", "0.1234567890123456789"]]


def _cell(draw, st, col):
    if col < len(_GOOD) and draw(st.integers(0, 99)) < 97:
        return draw(st.sampled_from(_GOOD[col]))
    text = draw(st.sampled_from(_CELLS) | st.text(alphabet='0123456789.-+eE ,;"\tNA/x', max_size=8))
    how = draw(st.sampled_from(["plain", "quoted", "quoted"]))
    return '"' + text.replace('"', '""') + '"' if how == "quoted" else text


def test_native_scanner_on_mangled_csv_equals_the_validating_path(tmp_path_factory, monkeypatch):
    """Whatever the cells, the default reader (C scanner first) gives the validating path's table and
    warnings, or the same InputError."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pypto_core.errors import InputError

    if csvscan.native_lib() is None:
        pytest.skip("no C compiler")
    ncols = HEADER.count(",") + 1

    @st.composite
    def files(draw):
        rows = []
        for _ in range(draw(st.integers(1, 6))):
            n = draw(st.sampled_from([ncols] * 18 + [ncols - 1, ncols + 1]))
            rows.append(",".join(_cell(draw, st, c) for c in range(n)))
        ends = draw(st.lists(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]), min_size=len(rows),
                             max_size=len(rows)))
        last = draw(st.sampled_from(["", "\n"]))
        return HEADER + "".join(r + e for r, e in zip(rows[:-1], ends)) + rows[-1] + last

    def outcome(read, path):
        try:
            table, warnings = read(path)
        except InputError as exc:
            return ("error", str(exc))
        return ("ok", table, warnings)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=files())
    def check(text):
        path = tmp_path_factory.mktemp("m") / "k.csv"
        path.write_bytes(text.encode("utf-8"))
        native = outcome(read_kernels, path)
        slow = outcome(lambda p: _slow_read(p, monkeypatch), path)
        assert native[0] == slow[0], (native, slow)
        if native[0] == "error":
            assert native[1] == slow[1]
        else:
            assert native[1].equals(slow[1]), (native[1].to_pylist(), slow[1].to_pylist())
            assert native[2] == slow[2]

    check()


REAL_KERNEL_TABLES = sorted(
    p for pattern in ("kernel_details*.csv", "op_summary*.csv") for p in SAMPLES.rglob(pattern)
    if p.stat().st_size
)


@pytest.mark.parametrize("src", sample_cases(REAL_KERNEL_TABLES),
                         ids=lambda p: str(p.relative_to(SAMPLES)) if p else "samples-missing")
def test_streamed_parquet_of_every_real_kernel_table_loads_as_read(src, tmp_path):
    """The streaming writer's storage form (shapes, dtypes, formats as cell text) loads back into exactly
    the table the in-memory reader gives, warnings included."""
    dest = tmp_path / "k.parquet"
    n, warnings = kernels_to_parquet(src, dest)
    expected, expected_warnings = read_kernels(src)
    assert n == expected.num_rows and warnings == expected_warnings
    assert read_table(dest, "kernels").equals(expected)


def test_unreadable_shapes_are_stored_null_and_warned_like_the_reader(tmp_path):
    rows = [_row(task=1, dim="x7"), _row(task=2, dim=7), _row(task=3, dim="x7")]
    src = _write(tmp_path / "k.csv", rows)
    dest = tmp_path / "k.parquet"
    _, warnings = kernels_to_parquet(src, dest)
    expected, expected_warnings = read_kernels(src)
    loaded = read_table(dest, "kernels")
    assert loaded["input_shapes"].to_pylist() == [None, [[4096, 1], [7]], None]
    assert loaded.equals(expected) and warnings == expected_warnings
    assert any("Input Shapes" in w and "2" in w for w in map(str, warnings)), warnings
