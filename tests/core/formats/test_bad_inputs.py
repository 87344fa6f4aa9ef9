"""Bad input: a clear InputError naming the file and the
reason, or a profile with a warning; never a crash."""

import shutil
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto_core.cli import main
from pypto_core.errors import InputError
from pypto_core.formats import open_profile
from tests.paths import HAVE_SAMPLES, SAMPLES

KD = SAMPLES / "ascend_pt" / "llm_matmul_pipeutil_2025" / "kernel_details.csv"
CNN1 = SAMPLES / "ascend_pt" / "cnn_8npu_text_level1" / "rank0_ascend_pt"


def _raises(path, *fragments):
    with pytest.raises(InputError) as exc:
        open_profile(path)
    msg = str(exc.value)
    assert str(path) in msg or path.name in msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_empty_folder(tmp_path):
    _raises(tmp_path, "empty folder")


def test_folder_of_unrelated_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    _raises(tmp_path, "no profile found", "notes.txt")


def test_zero_byte_csv(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(b"")
    _raises(f, "empty (0 bytes)")


def test_binary_file_named_csv(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(bytes(range(256)) * 20)
    _raises(f, "binary")


def test_csv_missing_required_column(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_text("Step Id,Name,Type,Accelerator Core,Duration(us)\n1,a,b,AI_CORE,1.0\n")
    _raises(f, "Start Time(us)")


def test_unknown_text_column_skipped_with_warning_numeric_kept(tmp_path):
    f = tmp_path / "kernel_details.csv"
    f.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us),Mystery,new_counter\n"
                 "k,T,AI_CORE,1736413971558972.912\t,1.5,hello,0.25\n")
    p = open_profile(f)
    assert "Mystery" not in p.kernels.column_names and p.kernels["new_counter"][0].as_py() == 0.25
    assert any("'Mystery'" in w and "skipped" in w for w in map(str, p.meta.warnings))


def test_junk_in_counter_column_is_null_and_warned(tmp_path):
    f = tmp_path / "kernel_details.csv"
    lines = ["Name,Type,Accelerator Core,Start Time(us),Duration(us),aic_mac_ratio"]
    lines += [f"k{i},T,AI_CORE,{1000 + i}.5,1.5,0.5" for i in range(50)] + ["bad,T,AI_CORE,2000.5,1.5,oops"]
    f.write_text("\n".join(lines) + "\n")
    p = open_profile(f)
    assert p.kernels.num_rows == 51 and p.kernels["aic_mac_ratio"][50].as_py() is None
    assert p.kernels["aic_mac_ratio"][0].as_py() == 0.5
    assert any("'oops'" in w for w in map(str, p.meta.warnings))


def test_truncated_json_is_skipped_with_warning(tmp_path):
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(CNN1, folder, ignore=shutil.ignore_patterns("trace_view.json", "operator_details.csv"))
    comm = folder / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    comm.write_bytes(comm.read_bytes()[:500])
    p = open_profile(folder)
    assert p.kernels.num_rows == 191  # the rest is usable
    assert any("communication.json" in w and "truncated JSON" in w for w in map(str, p.meta.warnings))


def test_truncated_profiler_info_only_folder(tmp_path):
    folder = tmp_path / "x_ascend_pt"
    folder.mkdir()
    (folder / "profiler_info_0.json").write_text('{"config": {')
    _raises(folder, "profiler_info_0.json", "truncated JSON")


def test_truncated_csv_last_row_skipped(tmp_path):
    f = tmp_path / "kernel_details.csv"
    data = KD.read_bytes()
    f.write_bytes(data[: len(data) - 200])
    p = open_profile(f)
    assert 0 < p.kernels.num_rows < 29
    assert any("malformed row" in w for w in map(str, p.meta.warnings))


def test_corrupt_db(tmp_path):
    f = tmp_path / "ascend_pytorch_profiler_0.db"
    f.write_bytes(b"SQLite format 3\x00" + bytes(2000))
    with pytest.raises(InputError) as exc:
        open_profile(f)
    assert f.name in str(exc.value)


def test_archive_is_extracted_and_labelled(tmp_path):
    archive = tmp_path / "run.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(KD, "upload/kernel_details.csv")
    p = open_profile(archive)
    assert p.kernels.num_rows == 29 and p.meta.source.startswith(str(archive) + "!")


def test_cli_exit_2_one_line(tmp_path, capsys):
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(b"")
    assert main(["info", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "kernel_details.csv" in err and "empty" in err


def test_cli_info_json(capsys):
    import json

    assert main(["info", str(KD)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"] == 1 and doc["profiles"][0]["kernel_count"] == 29
    assert doc["profiles"][0]["op_types"][0]["op_type"].startswith("MatMul")


# without the samples its tests are skipped
_LINES = KD.read_text().splitlines() if HAVE_SAMPLES else ["Name"]
_HEADER, _ROWS = _LINES[0], _LINES[1:6]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(min_value=0, max_value=4000),
    junk=st.binary(max_size=40),
    pos=st.integers(min_value=0, max_value=4000),
    drop_col=st.integers(min_value=-1, max_value=45),
)
def test_mangled_csv_never_crashes(tmp_path, cut, junk, pos, drop_col):
    header = _HEADER.split(",")
    if drop_col >= 0:
        header = header[:drop_col] + header[drop_col + 1:]
    data = ("\r\n".join([",".join(header)] + _ROWS) + "\r\n").encode()
    data = data[:pos] + junk + data[pos:]
    data = data[: max(cut, 1)] if cut < len(data) else data
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(data)
    try:
        p = open_profile(f)
    except InputError as exc:
        assert "kernel_details.csv" in str(exc)
    else:
        assert p.kernels.num_rows <= 6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=6000), junk=st.binary(max_size=20), pos=st.integers(0, 6000))
def test_mangled_json_never_crashes(tmp_path, cut, junk, pos):
    src = (CNN1 / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_bytes()
    data = src[:pos] + junk + src[pos:]
    data = data[:cut] if cut < len(data) else data
    folder = tmp_path / "r_ascend_pt"
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    (out / "communication.json").write_bytes(data)
    try:
        p = open_profile(folder)
    except InputError as exc:
        assert "communication.json" in str(exc)
    else:
        assert p.communication.num_rows <= 4
