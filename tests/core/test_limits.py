"""Bounded work for any input (issue 17, items 2-4 and 9): pypto_core.limits, whatever the wrapper.

Each hostile input is built on the fly, tiny on disk; each refusal must name the file and the limit, and
no message may carry the folder the reader worked in.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import eventscan, write_profiles
from pypto_core.limits import RATIO_FLOOR_BYTES, Limits, current_limits, use_limits
from pypto_core.profile import TABLE_NAMES, Profile


@pytest.fixture
def limits():  # type: ignore[no-untyped-def]
    """Set limits for one test, and put the defaults back."""
    before = current_limits()
    yield use_limits
    use_limits(before)


def _events(names: list[str]) -> bytes:
    """A Kineto trace: one CPU op per name and a GPU kernel."""
    events = [{"ph": "X", "name": n, "pid": 1, "tid": 1, "ts": i, "dur": 1, "cat": "cpu_op"}
              for i, n in enumerate(names)]
    events.append({"ph": "X", "name": "k0", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "cat": "kernel",
                   "args": {"stream": 7}})
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def _text_lengths(folder: Path) -> list[int]:
    lengths = []
    for rank in [p for p in folder.iterdir() if p.is_dir()]:
        profile = Profile.load(rank)
        for name in TABLE_NAMES:
            table = profile.table(name)
            for col in table.columns:
                typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
                if pa.types.is_string(typ) or pa.types.is_large_string(typ):
                    lengths.extend(len(v) for v in col.to_pylist() if v is not None)
    return lengths


def test_a_huge_name_is_cut_at_the_limit_and_short_names_are_untouched(tmp_path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_bytes(_events(["aten::mm", "x" * (3 << 20), "aten::add"]))
    write_profiles(trace, tmp_path / "out")
    lengths = _text_lengths(tmp_path / "out")
    assert max(lengths) == current_limits().max_text_chars + 1  # cut, with the cut mark
    rank = next(p for p in (tmp_path / "out").iterdir() if p.is_dir())
    names = Profile.load(rank).host_ops["name"].to_pylist()
    assert names[0] == "aten::mm" and names[2] == "aten::add"
    assert names[1] == "x" * current_limits().max_text_chars + "…"


def test_rows_per_table_over_the_limit_refused_naming_the_file(tmp_path, limits) -> None:
    limits(Limits(max_table_rows=50))
    trace = tmp_path / "many.json"
    trace.write_bytes(_events([f"op{i}" for i in range(200)]))
    with pytest.raises(InputError) as err:
        write_profiles(trace, tmp_path / "out")
    assert err.value.path == str(trace) and "more than 50 rows in one table" in err.value.reason
    assert not any((tmp_path / "out").iterdir())


def test_gz_of_whitespace_with_a_forged_size_refused_by_ratio_after_a_few_mib(tmp_path) -> None:
    raw = b"[" + b" " * (64 << 20) + b"]"
    data = bytearray(gzip.compress(raw, 9))
    data[-4:] = (100).to_bytes(4, "little")  # the trailer says 100 bytes
    bomb = tmp_path / "trace.json.gz"
    bomb.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        write_profiles(bomb, tmp_path / "out")
    assert err.value.path == str(bomb)
    assert "compression ratio above the limit of 200:1" in err.value.reason
    inflated = int(re.search(r"\((\d+) bytes from", err.value.reason).group(1))
    assert inflated <= RATIO_FLOOR_BYTES + 2 * eventscan.READ_CHUNK  # stopped early, not at 64 MiB


def test_gz_over_the_unpacked_limit_refused(tmp_path, limits) -> None:
    limits(Limits(max_unpacked_bytes=1 << 20))
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(_events([f"op{i}" for i in range(40000)])))
    with pytest.raises(InputError, match="decompressed size exceeds the limit of 1048576 bytes"):
        write_profiles(trace, tmp_path / "out")


def test_blanks_between_events_are_skipped_a_window_at_a_time(tmp_path, monkeypatch) -> None:
    trace = tmp_path / "blank.json"
    doc = _events(["aten::mm"])
    trace.write_bytes(doc[:1] + b" \n\t" * (6 << 20) + doc[1:])
    calls = {"n": 0}

    def counted(original):  # type: ignore[no-untyped-def]
        def byte(self, i):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            return original(self, i)
        return byte

    for cls in (eventscan._Buffer, eventscan._MappedBuffer):
        monkeypatch.setattr(cls, "byte", counted(cls.byte))
    write_profiles(trace, tmp_path / "out")
    assert calls["n"] < 1000  # 18 MiB of blanks: was one Python call per byte


def test_a_zip_named_json_is_unpacked_inside_the_output_folder_with_the_deployments_limits(
        tmp_path, limits) -> None:
    limits(Limits(max_members=3))
    inside = tmp_path / "upload.json"
    with zipfile.ZipFile(inside, "w") as zf:
        for i in range(5):
            zf.writestr(f"r{i}/trace.json", "[]")
    before = set(Path(tempfile.gettempdir()).glob("pypto_extract_*"))
    with pytest.raises(InputError) as err:
        write_profiles(inside, tmp_path / "out")
    assert "too many members (limit 3)" in str(err.value)
    assert set(Path(tempfile.gettempdir()).glob("pypto_extract_*")) == before
    assert not any((tmp_path / "out").iterdir())

    limits(Limits())
    broken = tmp_path / "broken.json"
    with zipfile.ZipFile(broken, "w") as zf:
        zf.writestr("rank0/trace.json", '[{"ph": "X", "name": "a", "ts": 1,')
    with pytest.raises(InputError) as err:
        write_profiles(broken, tmp_path / "out2")
    message = str(err.value)
    assert message.startswith(f"{broken}!"), message  # archive!member, as the user knows it
    assert str(tmp_path / "out2") not in message and ".unpacked_" not in message


def _db_with_views(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(
        "create table STRING_IDS (id integer primary key, value text);"
        "insert into STRING_IDS values (1, 'MatMul');"
        "create table COMMUNICATION_OP (opName integer, startNs integer, endNs integer, connectionId integer,"
        " opType integer);"
        "create view TASK as with recursive r(n) as"
        " (select 1 union all select n + 1 from r where n < 10000000)"
        " select n as startNs, n + 1 as endNs, 0 as deviceId, n as connectionId, n as globalTaskId,"
        " 1 as streamId, n as taskId from r;"
        "create view COMPUTE_TASK_INFO as select 1 as name, globalTaskId, null as taskType from TASK;")
    conn.commit()
    conn.close()
    return path


def test_sqlite_views_are_never_read(tmp_path) -> None:
    from pypto_core.formats import ascend_db

    db = _db_with_views(tmp_path / "ascend_pytorch_profiler_0.db")
    assert db.stat().st_size < 64 * 1024
    with pytest.raises(InputError) as err:
        ascend_db.write_profiler_db(db, tmp_path / "out")
    assert err.value.path == str(db) and "holds no tasks" in err.value.reason  # the views are not tables
    conn = ascend_db.connect(db)
    try:
        with pytest.raises(sqlite3.DatabaseError) as refused:
            conn.execute("select count(*) from TASK").fetchall()
        assert "only stored tables are read" in str(ascend_db.refusal(refused.value))
    finally:
        conn.close()
