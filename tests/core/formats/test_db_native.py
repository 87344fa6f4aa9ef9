"""The native fetch of the SQLite exports (``sqlite_fetch``, ``_sqlitefetch.c``) writes exactly what the SQL
path (Python's sqlite3 alone) writes: on every real db sample, on simulated exports, and where a table holds a
value the C loop does not take (then that table goes the SQL path). The C side keeps the safety of the
Python connection: read-only, stored tables only, the time budget; its page reader survives damaged pages."""

from __future__ import annotations

import random
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import ascend_db, row_order, sqlite_fetch
from pypto_core.limits import Limits, current_limits, use_limits
from pypto_core.profile import TABLE_NAMES, Profile
from pypto_core.synth import synthesize_run
from tests.paths import SAMPLES

OUT = Path("rank0_ascend_pt") / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
REAL = {
    "level0": SAMPLES / "ascend_pt" / "cnn_8npu_db_level0" / OUT,
    "level1": SAMPLES / "ascend_pt" / "cnn_8npu_db_level1" / OUT,
    "msprof": SAMPLES / "msprof" / "db_8npu_2023" / "msprof_0.db",
}
RUN: dict[str, Any] = {"model": "llama3-8b", "sku": "910B3", "tokens": 2, "prompt_tokens": 16, "seed": 7,
                       "db": "only"}
NATIVE_WRITERS = ("_write_kernels_native", "_write_host_ops_native", "_write_api_calls_native",
                  "_native_flows")

NATIVE = pytest.mark.skipif(not sqlite_fetch.available(), reason="needs a C compiler and libsqlite3 (the SQL "
                            "path alone is what the other db tests read)")


@pytest.fixture(scope="module")
def synth_dbs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Simulated exports as the bench writes them: torch_npu cann83 and 2026 (opState, hf32Eligible),
    msprof."""
    root = tmp_path_factory.mktemp("native_db")
    runs = [synthesize_run(root / "pt83", layout="ascend_pt", variant="cann83", **RUN),
            synthesize_run(root / "pt26", layout="ascend_pt", variant="2026", **RUN),
            synthesize_run(root / "ms", layout="msprof", **RUN)]
    return [next(p for p in r.path.rglob("*.db") if p.name != "analysis.db") for r in runs]


@pytest.fixture
def native_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The native writers that finished (a ``Mismatch`` or a declined join is not recorded)."""
    seen: list[str] = []
    for name in NATIVE_WRITERS:
        real = getattr(ascend_db, name)

        def spy(*args: Any, _real: Callable[..., Any] = real, _name: str = name) -> Any:
            out = _real(*args)
            if out is not None:
                seen.append(_name)
            return out
        monkeypatch.setattr(ascend_db, name, spy)
    return seen


def _tables(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    finally:
        conn.close()


def _write(db: Path, folder: Path, monkeypatch: pytest.MonkeyPatch, *, native: bool) -> Profile:
    with monkeypatch.context() as m:
        if not native:
            m.setattr(sqlite_fetch, "available", lambda: False)
        ascend_db.write_profiler_db(db, folder, analysis_db=db.parent / "analysis.db")
    return Profile.load(folder)


def _assert_same(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    tag = f"{db.parent.name}_{db.stem}"
    sql = _write(db, tmp_path / f"{tag}_sql", monkeypatch, native=False)
    fast = _write(db, tmp_path / f"{tag}_native", monkeypatch, native=True)
    for name in TABLE_NAMES:
        assert fast.table(name).schema == sql.table(name).schema, (db.name, name)
        assert fast.table(name).equals(sql.table(name)), (db.name, name)
    assert fast.meta == sql.meta
    return fast


@NATIVE
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_samples_read_natively_as_through_sql(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     native_calls: list[str]) -> None:
    db = REAL[name]
    tables = _tables(db)
    p = _assert_same(db, tmp_path, monkeypatch)
    assert p.kernels.num_rows > 0
    assert "_write_kernels_native" in native_calls and "_write_api_calls_native" in native_calls
    if "PYTORCH_API" in tables:
        assert {"_write_host_ops_native", "_native_flows"} <= set(native_calls) and p.flows.num_rows > 0
    if "TASK_PMU_INFO" in tables:
        assert "aic_total_time" in p.kernels.column_names


@NATIVE
def test_simulated_exports_read_natively_as_through_sql(synth_dbs: list[Path], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        native_calls: list[str]) -> None:
    for db in synth_dbs:
        native_calls.clear()
        p = _assert_same(db, tmp_path, monkeypatch)
        assert p.kernels.num_rows > 100 and p.kernels.column_names[-1].startswith(("aic", "aiv", "l2", "mac"))
        expected = set(NATIVE_WRITERS) if "PYTORCH_API" in _tables(db) else {
            "_write_kernels_native", "_write_api_calls_native"}
        assert set(native_calls) == expected, db


@NATIVE
def test_small_blocks_and_the_sqlite_pivot_change_nothing(synth_dbs: list[Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 7 rows, and the PMU scan through SQLite (where the page reader declines a table)."""
    db = synth_dbs[1]
    default = _write(db, tmp_path / "default", monkeypatch, native=True)
    monkeypatch.setattr(ascend_db, "NATIVE_FETCH_ROWS", 7)
    monkeypatch.setattr(ascend_db, "table_reading", lambda *args: None)
    small = _write(db, tmp_path / "small", monkeypatch, native=True)
    for name in TABLE_NAMES:
        assert small.table(name).equals(default.table(name)), name


# --------------------------------------------------------------------- values the C loop does not take


def _copy(db: Path, tmp_path: Path) -> Path:
    target = tmp_path / "odd" / db.name
    target.parent.mkdir(parents=True)
    shutil.copy(db, target)
    return target


def _edit(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("edits, declined", [
    # a host time with blanks (to_ns trims them) and one in exponent form (unreadable: a warning)
    (["update PYTORCH_API set startNs = ' ' || startNs || ' ' where rowid % 7 = 0",
      "update PYTORCH_API set endNs = '1.5e3' where rowid = 3"], "_write_host_ops_native"),
    (["update COMPUTE_TASK_INFO set name = 'not an id' where rowid % 5 = 0"], "_write_kernels_native"),
    (["update CONNECTION_IDS set id = 'x' where rowid = 2"], "_native_flows"),
    (["update CANN_API set name = 'not an id' where rowid % 3 = 0"], "_write_api_calls_native"),
    # text where a metric is (left empty with a warning); integers past 2^53 and inf read in C as well
    (["update TASK_PMU_INFO set value = 'n/a' where rowid % 50 = 1"], "_write_kernels_native"),
    (["update TASK_PMU_INFO set value = 1152921504606846977 where rowid % 7 = 0",
      "update TASK_PMU_INFO set value = 2.5e300 * 1e300 where rowid % 11 = 0"], None),
])
@NATIVE
def test_odd_values_go_the_sql_path(edits: list[str], declined: str | None, synth_dbs: list[Path],
                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    native_calls: list[str]) -> None:
    db = _copy(synth_dbs[0], tmp_path)
    _edit(db, *edits)
    p = _assert_same(db, tmp_path, monkeypatch)
    if "'n/a'" in edits[0]:
        assert any("could not be read as numbers (e.g. 'n/a')" in w for w in map(str, p.meta.warnings))
    if declined is not None:
        assert declined not in native_calls
    assert "_write_kernels_native" in native_calls or declined == "_write_kernels_native"


@pytest.fixture
def pivots(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How each PMU scan read its rows (``NativeDb.pivot_read``)."""
    seen: list[str] = []
    real = sqlite_fetch.NativeDb.pivot

    def spy(self: sqlite_fetch.NativeDb, *args: Any, **kwargs: Any) -> Any:
        try:
            return real(self, *args, **kwargs)
        finally:
            seen.append(self.pivot_read)

    monkeypatch.setattr(sqlite_fetch.NativeDb, "pivot", spy)
    return seen


@NATIVE
def test_the_pmu_rows_are_read_from_their_pages(synth_dbs: list[Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, pivots: list[str]) -> None:
    _write(synth_dbs[0], tmp_path / "out", monkeypatch, native=True)
    assert pivots == ["pages"]


@pytest.mark.parametrize("edits", [
    # a PMU row too long for its page (its record goes on overflow pages)
    ["alter table TASK_PMU_INFO add column note text",
     "update TASK_PMU_INFO set note = printf('%.*c', 9000, 'x') where rowid = 11"],
    # rows written before a column was added: a record with fewer columns than the table
    ["create table P2 as select name, value from TASK_PMU_INFO", "drop table TASK_PMU_INFO",
     "create table TASK_PMU_INFO (name integer, value numeric)", "insert into TASK_PMU_INFO select * from P2",
     "alter table TASK_PMU_INFO add column globalTaskId integer",
     "update TASK_PMU_INFO set globalTaskId = (select min(globalTaskId) from TASK) where rowid % 3 = 0"],
])
@NATIVE
def test_pmu_rows_the_page_reader_declines_are_scanned_by_sqlite(
        edits: list[str], synth_dbs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        pivots: list[str]) -> None:
    db = _copy(synth_dbs[0], tmp_path)
    _edit(db, *edits)
    p = _assert_same(db, tmp_path, monkeypatch)
    assert pivots == ["declined"]
    assert "aic_total_time" in p.kernels.column_names


# ------------------------------------------------------------------------------- host ops, API calls, flows

SHIFT_FIRST_HALF = ("update CANN_API set startNs = startNs + 1000000000000 "
                    "where rowid <= (select avg(rowid) from CANN_API)")
IN_THREE_RUNS = ["create table P2 as select * from PYTORCH_API", "delete from PYTORCH_API",
                 "insert into PYTORCH_API select * from P2 order by rowid % 3, rowid", "drop table P2"]


@NATIVE
@pytest.mark.parametrize("window, runs", [(1 << 20, 64), (1, 64), (1, 0)],
                         ids=["reordered in a window", "merged from sorted runs", "sorted by sqlite"])
def test_tables_out_of_time_order(window: int, runs: int, synth_dbs: list[Path], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch, native_calls: list[str]) -> None:
    """PYTORCH_API in three sorted runs and CANN_API in two (its first half started later): read in their
    time order from the pages, whichever way the reader takes (the window it may hold, the runs it may
    merge), as SQLite's ``order by`` sorts them."""
    db = _copy(synth_dbs[0], tmp_path)
    _edit(db, SHIFT_FIRST_HALF, *IN_THREE_RUNS)
    ways: list[str] = []
    for way in ("reordered", "merged"):
        real = getattr(row_order, way)

        def spy(*args: Any, _real: Callable[..., Any] = real, _way: str = way) -> Any:
            ways.append(_way)
            return _real(*args)
        monkeypatch.setattr(row_order, way, spy)
    monkeypatch.setattr(ascend_db, "NATIVE_FETCH_ROWS", 1000)
    monkeypatch.setattr(row_order, "REORDER_ROWS", window)
    monkeypatch.setattr(row_order, "MERGE_RUNS", runs)
    p = _assert_same(db, tmp_path, monkeypatch)
    assert {"_write_host_ops_native", "_write_api_calls_native", "_native_flows"} <= set(native_calls)
    assert p.api_calls.num_rows > 2000 and p.host_ops.num_rows > 1000
    assert ways == {1 << 20: ["reordered"] * 2, 1: ["merged"] * 2, 0: []}[window if runs else 0]


def test_flows_join_as_sql_does() -> None:
    """Links repeated, ids shared, nulls: every (host, kernel) pair once per link that makes it, sorted."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        hosts, kernels, links = (rng.integers(0, 12, size=rng.integers(0, 40)) for _ in range(3))
        link_cids = rng.integers(0, 12, size=len(links))
        host_rows = np.flatnonzero(rng.random(len(hosts)) > 0.1)  # some hosts without an id
        kernel_rows = np.arange(len(kernels))
        want = sorted((h, k) for h in host_rows for i, c in zip(links, link_cids) if hosts[h] == i
                      for k in kernel_rows if kernels[k] == c)
        got = ascend_db._join_links((host_rows, hosts[host_rows]), links, link_cids, (kernel_rows, kernels))
        assert got is not None and list(zip(got[0].tolist(), got[1].tolist())) == want


# -------------------------------------------------------------------------------------------- safety


def _db(path: Path, script: str) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


@NATIVE
def test_the_c_connection_reads_stored_tables_only_and_never_writes(tmp_path: Path) -> None:
    db = _db(tmp_path / "x.db", "create table T (a integer); insert into T values (1), (2);"
                                "create view V as select a * 2 as b from T;")
    before = db.read_bytes()
    with sqlite_fetch.NativeDb(db, time.monotonic() + 60, 1024) as native:
        rows = list(native.blocks("select a from T", [("a", sqlite_fetch.INT64, None)], 10))
        assert rows[0].column("a").to_pylist() == [1, 2]
        recursive = ("with recursive r(n) as (select 1 union all select n + 1 from r where n < 10) "
                     "select n from r")
        for sql in ("select b from V", recursive):
            with pytest.raises(sqlite3.DatabaseError) as refused:
                list(native.blocks(sql, [("n", sqlite_fetch.INT64, None)], 10))
            assert "only stored tables are read" in str(ascend_db.refusal(refused.value))
        with pytest.raises(sqlite3.DatabaseError):
            list(native.blocks("delete from T", [], 10))
    assert db.read_bytes() == before


@NATIVE
def test_the_c_side_stops_at_the_time_budget(synth_dbs: list[Path], tmp_path: Path) -> None:
    db = synth_dbs[0]
    past = time.monotonic() - 1
    with sqlite_fetch.NativeDb(db, past, 1024) as native:
        with pytest.raises(sqlite3.DatabaseError) as late:
            join = "select t.startNs from TASK t join TASK_PMU_INFO p on p.globalTaskId = t.globalTaskId"
            list(native.blocks(join, [("s", sqlite_fetch.INT64, None)], 1000))
        assert "reading took longer" in str(ascend_db.refusal(late.value))
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        stored = sqlite_fetch.table_reading(conn, "TASK_PMU_INFO", ("globalTaskId", "name", "value"))
        conn.close()
        assert stored is not None
        with sqlite_fetch.IdMap(np.arange(10)) as tasks, sqlite_fetch.IdMap(np.arange(10)) as metrics, \
                pytest.raises(sqlite3.DatabaseError) as late:
            native.pivot("select globalTaskId, name, value from TASK_PMU_INFO order by rowid", tasks, metrics,
                         10, tmp_path, stored)
        assert "reading took longer" in str(ascend_db.refusal(late.value))
    before = current_limits()
    use_limits(Limits(sqlite_seconds=0))
    try:
        with pytest.raises(InputError) as err:
            ascend_db.write_profiler_db(db, tmp_path / "out")
    finally:
        use_limits(before)
    assert err.value.path == str(db) and "reading took longer" in err.value.reason
    assert not (tmp_path / "out").exists()


def _pages(db: Path) -> Iterator[int]:
    """The byte offsets of the pages of TASK_PMU_INFO's b-tree (dbstat is not in every build: walk it)."""
    data = db.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    root = conn.execute("select rootpage from sqlite_master where name = 'TASK_PMU_INFO'").fetchone()[0]
    conn.close()
    todo = [root]
    while todo:
        page = todo.pop()
        at = (page - 1) * size
        yield at
        h = at + (100 if page == 1 else 0)
        if data[h] == 5:
            count = int.from_bytes(data[h + 3:h + 5], "big")
            for i in range(count):
                cell = at + int.from_bytes(data[h + 12 + 2 * i:h + 14 + 2 * i], "big")
                todo.append(int.from_bytes(data[cell:cell + 4], "big"))
            todo.append(int.from_bytes(data[h + 8:h + 12], "big"))


def _outcome(db: Path, folder: Path, monkeypatch: pytest.MonkeyPatch, *, native: bool) -> Profile | str:
    try:
        return _write(db, folder, monkeypatch, native=native)
    except InputError as exc:
        assert exc.path == str(db) and exc.reason, exc
        assert not folder.exists()
        return exc.reason


@NATIVE
def test_damaged_pages_read_or_refused_as_through_sql(synth_dbs: list[Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      pivots: list[str]) -> None:
    """Bytes of the PMU table's pages overwritten at random (headers, cell pointers, records): the page
    reader never reads outside the file's pages, and each damaged file is read as the SQL path reads it or
    refused for the same named reason."""
    source = synth_dbs[0]
    pages = list(_pages(source))
    size = int.from_bytes(source.read_bytes()[16:18], "big")
    rng = random.Random(20)
    for case in range(24):
        data = bytearray(source.read_bytes())
        for _ in range(rng.choice([1, 4, 32])):
            page = rng.choice(pages[:1] + pages[1:4] + pages)  # the interior pages more often
            spot = page + (rng.randrange(16) if rng.random() < 0.4 else rng.randrange(size))
            data[spot] = rng.randrange(256)
        db = tmp_path / f"case{case}" / source.name
        db.parent.mkdir()
        db.write_bytes(bytes(data))
        fast = _outcome(db, tmp_path / f"native{case}", monkeypatch, native=True)
        sql = _outcome(db, tmp_path / f"sql{case}", monkeypatch, native=False)
        if isinstance(fast, str) or isinstance(sql, str):
            assert fast == sql, case
        else:
            assert all(fast.table(name).equals(sql.table(name)) for name in TABLE_NAMES), case
    assert "pages" in pivots and "declined" in pivots  # both the reader's reading and its declining were met
