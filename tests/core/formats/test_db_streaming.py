"""The SQLite exports streamed into Parquet (``ascend_db.write_profiler_db``): the same tables as an in-memory
reading of the same file (computed here row by row with sqlite3, the way the tables are defined), the same
whatever the fetch block and row group size, rows with equal start times in file order, and a clear
``InputError`` naming the file, with no folder left behind, for a broken or empty database."""

import sqlite3
from pathlib import Path

import pytest

from pypto_core.errors import InputError
from pypto_core.formats import ascend_db, open_profile, parquet_sink, write_profiles
from pypto_core.profile import TABLE_NAMES, Profile
from pypto_core.synth import synthesize_run
from tests.paths import SAMPLES

PT = SAMPLES / "ascend_pt"
LEVEL1 = PT / "cnn_8npu_db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
LEVEL0 = PT / "cnn_8npu_db_level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
MSPROF = SAMPLES / "msprof" / "db_8npu_2023" / "msprof_0.db"
RUN = {"model": "llama3-8b", "sku": "910B3", "tokens": 2, "prompt_tokens": 16, "seed": 5, "db": "only"}


@pytest.fixture(scope="module")
def synth_dbs(tmp_path_factory):
    """Simulated db-only exports: torch_npu cann83 (blockDim,
    waitNs) and 2026 (opState, hf32Eligible), msprof."""
    root = tmp_path_factory.mktemp("synth_db")
    runs = [synthesize_run(root / "pt83", layout="ascend_pt", variant="cann83", **RUN),
            synthesize_run(root / "pt26", layout="ascend_pt", variant="2026", **RUN),
            synthesize_run(root / "ms", layout="msprof", **RUN)]
    return [next(p for p in r.path.rglob("*.db") if p.name != "analysis.db") for r in runs]


def _written(db: Path, folder: Path) -> Profile:
    ascend_db.write_profiler_db(db, folder, analysis_db=db.parent / "analysis.db")
    return Profile.load(folder)


# ------------------------------------------------------------------- an in-memory reading, row by row


class Reference:
    """The tables of one db computed in Python from whole-table fetches (small files only)."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db)
        self.tables = {r[0] for r in self.conn.execute("select name from sqlite_master where type='table'")}
        self.strings = dict(self.conn.execute("select id, value from STRING_IDS"))

    def cols(self, table: str) -> list[str]:
        return [r[1] for r in self.conn.execute(f"pragma table_info({table})")]

    def kernels(self) -> list[dict]:
        """Compute tasks and hcom ops by start time (nulls last); compute first on a tie, then file order."""
        rows = []
        if {"TASK", "COMPUTE_TASK_INFO"} <= self.tables:
            for start, end, cid, gid, name, trid, crid in self.conn.execute(
                    "select t.startNs, t.endNs, t.connectionId, t.globalTaskId, c.name, t.rowid, c.rowid "
                    "from TASK t join COMPUTE_TASK_INFO c on c.globalTaskId = t.globalTaskId"):
                rows.append({"key": (start is None, start or 0, 0, trid, crid), "start_ns": start,
                             "dur_ns": end - start, "correlation_id": cid, "name": self.strings.get(name),
                             "gid": gid})
        if "COMMUNICATION_OP" in self.tables:
            for start, end, cid, name, rid in self.conn.execute(
                    "select startNs, endNs, connectionId, opName, rowid from COMMUNICATION_OP"):
                rows.append({"key": (start is None, start or 0, 1, rid, 0), "start_ns": start,
                             "dur_ns": end - start, "correlation_id": cid, "name": self.strings.get(name),
                             "gid": None})
        return sorted(rows, key=lambda r: r["key"])

    def pmu(self) -> dict[tuple[int, str], float]:
        """(globalTaskId, metric) -> the first non-null value in file order."""
        first: dict[tuple[int, str], float] = {}
        if "TASK_PMU_INFO" in self.tables:
            rows = self.conn.execute("select globalTaskId, name, value from TASK_PMU_INFO order by rowid")
            for gid, name, value in rows:
                if value is not None:
                    first.setdefault((gid, self.strings.get(name)), float(value))
        return first

    def host_ops(self) -> list[tuple[int, int | None]]:
        """(start_ns, connectionId) by start time, then file order."""
        if "PYTORCH_API" not in self.tables:
            return []
        rows = self.conn.execute("select startNs, connectionId, rowid from PYTORCH_API").fetchall()
        return [(int(s), c) for s, c, _ in sorted(rows, key=lambda r: (int(r[0]), r[2]))]

    def api_starts(self) -> list[int]:
        if "CANN_API" not in self.tables:
            return []
        return [s for s, _ in sorted(self.conn.execute("select startNs, rowid from CANN_API"))]

    def flows(self) -> list[tuple[int, int]]:
        if "CONNECTION_IDS" not in self.tables:
            return []
        links: dict[int, list[int]] = {}
        for i, c in self.conn.execute("select id, connectionId from CONNECTION_IDS"):
            links.setdefault(i, []).append(c)
        by_cid: dict[int, list[int]] = {}
        for k, row in enumerate(self.kernels()):
            by_cid.setdefault(row["correlation_id"], []).append(k)
        pairs = [(h, k) for h, (_, cid) in enumerate(self.host_ops())
                 for link in links.get(cid, []) for k in by_cid.get(link, [])]
        return sorted(pairs)


def _check_against_reference(db: Path, p: Profile) -> None:
    ref = Reference(db)
    kernels = ref.kernels()
    got = p.kernels.select(["start_ns", "dur_ns", "correlation_id", "name"]).to_pylist()
    assert got == [{k: r[k] for k in ("start_ns", "dur_ns", "correlation_id", "name")} for r in kernels]
    pmu = ref.pmu()
    metrics = sorted({m for _, m in pmu})
    assert [c for c in p.kernels.column_names if c in metrics] == metrics
    for metric in metrics:
        want = [pmu.get((r["gid"], metric)) if r["gid"] is not None else None for r in kernels]
        assert p.kernels[metric].to_pylist() == want, metric
    hosts = ref.host_ops()
    assert list(zip(p.host_ops["start_ns"].to_pylist(), p.host_ops["correlation_id"].to_pylist())) == hosts
    assert p.api_calls["start_ns"].to_pylist() == ref.api_starts()
    flows = list(zip(p.flows["host_index"].to_pylist(), p.flows["kernel_index"].to_pylist()))
    assert flows == ref.flows()
    assert set(p.flows["kind"].to_pylist()) <= {"async_npu"}


@pytest.mark.parametrize("db", [LEVEL0, LEVEL1, MSPROF], ids=["level0", "level1", "msprof"])
def test_samples_equal_an_in_memory_reading(db, tmp_path):
    p = _written(db, tmp_path / "out")
    assert p.kernels.num_rows > 0
    _check_against_reference(db, p)


def test_level1_sample_has_what_the_reading_adds(tmp_path):
    p = _written(LEVEL1, tmp_path / "out")
    assert p.kernels.num_rows == 191 and p.flows.num_rows > 0
    assert "aic_total_time" in p.kernels.column_names  # TASK_PMU_INFO pivoted
    assert set(p.memory["source"].to_pylist()) == {"memory_record", "npu_module_mem"}
    assert p.counters.num_rows == 107 and p.steps.to_pylist()[0]["computing_ns"] > 0  # analysis.db merged
    assert p.kernels["core_type"].to_pylist().count("COMMUNICATION") == 4  # the hcom ops merged in


def test_synthetic_dbs_equal_an_in_memory_reading(synth_dbs, tmp_path):
    for i, db in enumerate(synth_dbs):
        p = _written(db, tmp_path / f"out{i}")
        assert p.kernels.num_rows > 100
        _check_against_reference(db, p)
    columns = _written(synth_dbs[1], tmp_path / "o26").kernels.column_names
    assert {"op_state", "hf32_eligible", "model_id"} <= set(columns)


def test_tiny_fetch_blocks_and_row_groups_change_nothing(synth_dbs, tmp_path, monkeypatch):
    dbs = [LEVEL1, MSPROF, synth_dbs[1]]
    default = [_written(db, tmp_path / f"default{i}") for i, db in enumerate(dbs)]
    monkeypatch.setattr(ascend_db, "FETCH_ROWS", 7)
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 13)
    for i, db in enumerate(dbs):
        tiny = _written(db, tmp_path / f"tiny{i}")
        for name in TABLE_NAMES:
            assert tiny.table(name).equals(default[i].table(name)), (db.name, name)
        assert tiny.meta == default[i].meta


def test_read_profiler_db_is_write_then_load(tmp_path):
    p = ascend_db.read_profiler_db(LEVEL1, analysis_db=LEVEL1.parent / "analysis.db")
    saved = _written(LEVEL1, tmp_path / "out")
    for name in TABLE_NAMES:
        assert p.table(name).equals(saved.table(name)), name
    assert p.meta == saved.meta


def test_folder_and_file_detections_stream_the_same(tmp_path):
    folder = open_profile(LEVEL1.parent.parent)  # the *_ascend_pt folder: profiler_info adds to the meta
    lone = open_profile(LEVEL1)
    assert folder.meta.rank == 0 and folder.meta.source_files[0].endswith("profiler_info_0.json")
    for name in TABLE_NAMES:
        assert folder.table(name).equals(lone.table(name)), name


# -------------------------------------------------------------------------------- ties and bad files


def _tiny_db(path: Path, tasks: list[tuple[int, int, int]], comm: list[tuple[int, int]] = ()) -> Path:
    """A minimal export: TASK (start, end, connectionId) ⋈ COMPUTE_TASK_INFO, named by insertion order."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "create table STRING_IDS (id integer primary key, value text);"
        "create table TASK (startNs integer, endNs integer, deviceId integer, connectionId integer, "
        "globalTaskId integer, streamId integer, taskId integer);"
        "create table COMPUTE_TASK_INFO (name integer, globalTaskId integer primary key, taskType integer);"
        "create table COMMUNICATION_OP (opName integer, startNs integer, endNs integer, connectionId "
        "integer, "
        "opType integer);")
    for i, (start, end, cid) in enumerate(tasks):
        conn.execute("insert into STRING_IDS values (?, ?)", (i, f"k{i}"))
        conn.execute("insert into TASK values (?, ?, 0, ?, ?, 1, ?)", (start, end, cid, 100 + i, i))
        conn.execute("insert into COMPUTE_TASK_INFO values (?, ?, null)", (i, 100 + i))
    for j, (start, end) in enumerate(comm):
        conn.execute("insert into STRING_IDS values (?, ?)", (1000 + j, f"hcom{j}"))
        conn.execute("insert into COMMUNICATION_OP values (?, ?, ?, null, null)", (1000 + j, start, end))
    conn.commit()
    conn.close()
    return path


def test_equal_start_times_keep_file_order(tmp_path, monkeypatch):
    db = _tiny_db(tmp_path / "ascend_pytorch_profiler_0.db",
                  [(50, 60, 1), (10, 20, 2), (50, 55, 3), (10, 11, 4), (50, 51, 5)], comm=[(10, 12), (5, 6)])
    monkeypatch.setattr(ascend_db, "FETCH_ROWS", 2)
    p = _written(db, tmp_path / "out")
    assert p.kernels["name"].to_pylist() == ["hcom1", "k1", "k3", "hcom0", "k0", "k2", "k4"]
    assert p.kernels["core_type"].to_pylist()[0] == "COMMUNICATION"


def test_a_repeated_metric_keeps_its_first_value(tmp_path):
    db = _tiny_db(tmp_path / "ascend_pytorch_profiler_0.db", [(1, 2, 1), (3, 4, 2), (5, 6, 3)])
    conn = sqlite3.connect(db)
    conn.executescript(
        "create table TASK_PMU_INFO (globalTaskId integer, name integer, value numeric);"
        "insert into STRING_IDS values (500, 'aic_total_time'), (501, 'aic_mac_ratio'), (502, 'name');")
    rows = [(100, 500, 7.5), (100, 501, 0.25), (101, 501, None), (101, 501, 0.5), (102, 502, 9)]
    conn.executemany("insert into TASK_PMU_INFO values (?, ?, ?)", rows)
    conn.commit()
    single = _written(db, tmp_path / "single")  # one value per task and metric: the one-pass pivot
    assert single.kernels["aic_mac_ratio"].to_pylist() == [0.25, 0.5, None]
    assert "name" in single.kernels.column_names and single.kernels["name"].to_pylist() == ["k0", "k1", "k2"]
    conn.executemany("insert into TASK_PMU_INFO values (?, ?, ?)",
                     [(100, 501, 0.75), (101, 500, 1), (101, 500, 2)])
    conn.commit()
    conn.close()
    repeated = _written(db, tmp_path / "repeated")  # written again with the two-pass pivot
    assert repeated.kernels["aic_mac_ratio"].to_pylist() == [0.25, 0.5, None]
    assert repeated.kernels["aic_total_time"].to_pylist() == [7.5, 1.0, None]
    assert repeated.kernels.column_names == single.kernels.column_names


def test_corrupt_db_names_the_file_and_leaves_no_folder(tmp_path):
    db = tmp_path / "ascend_pytorch_profiler_0.db"
    db.write_bytes(b"SQLite format 3\x00" + bytes(2000))
    out = tmp_path / "out"
    with pytest.raises(InputError) as exc:
        ascend_db.write_profiler_db(db, out)
    assert db.name in str(exc.value) and not out.exists()


def test_db_without_the_tables_names_the_file_and_leaves_no_folder(tmp_path):
    db = tmp_path / "msprof_0.db"
    conn = sqlite3.connect(db)
    conn.execute("create table NOTES (x integer)")
    conn.commit()
    conn.close()
    out = tmp_path / "out"
    with pytest.raises(InputError) as exc:
        ascend_db.write_profiler_db(db, out, fmt="msprof_db")
    assert db.name in str(exc.value) and "no tasks" in str(exc.value) and not out.exists()


def test_broken_table_midway_names_the_file_and_leaves_no_folder(tmp_path):
    db = _tiny_db(tmp_path / "ascend_pytorch_profiler_0.db", [(1, 2, 1), (3, 4, 2)])
    conn = sqlite3.connect(db)
    conn.execute("create table CANN_API (startNs integer)")  # no endNs, name, ...: the query fails
    conn.commit()
    conn.close()
    out = tmp_path / "out"
    with pytest.raises(InputError) as exc:
        ascend_db.write_profiler_db(db, out)  # after kernels.parquet and host_ops.parquet were written
    assert db.name in str(exc.value) and "unexpected database content" in str(exc.value)
    assert not out.exists()
    saved = tmp_path / "saved"
    with pytest.raises(InputError):
        write_profiles(db, saved)
    assert not saved.exists() or not any(saved.iterdir())  # no rank folder left behind


def test_bench_runs_end_to_end_on_a_tiny_db(tmp_path):
    from pypto_core.bench import readers_db, registry

    assert "readers_db" in registry()
    r = readers_db.run([1], tmp_path)["results"][0]
    assert "error" not in r and "load_error" not in r, r
    # every task launched by an op
    assert r["input_mb"] > 0.3 and r["kernels"] > 0 and r["flows"] == r["kernels"]
    assert r["mb_per_s"] > 0 and r["peak_rss_mb"] > 0 and r["parquet_load_s"] >= 0
    assert list(tmp_path.iterdir()) == []  # the simulated input and its saved profile are removed
