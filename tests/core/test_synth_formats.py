"""pypto_core.synth in the other real on-disk formats of issue 4 ("text; optionally db"): the CANN <= 7.0
msprof layout (device_0/summary, device_0/timeline) and the SQLite exports (ascend_pytorch_profiler_0.db +
analysis.db, msprof_{ts}.db).

Each is read back with ``pypto_core.formats.open_profile`` and compared with the text export of the same run
(same seed: the same kernels at the same ns): kernel count, op types, start and duration to the ns, Block
Dim, a PMU ratio; the db schema is compared with the real samples; the diagnosis finds the four planted
anti-patterns on each. Small runs (2 decode tokens, 32-token prompt).
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from pathlib import Path

import pyarrow.compute as pc
import pytest

from pypto_core.cli import main
from pypto_core.formats import open_profile
from pypto_core.rules import diagnose
from pypto_core.synth import RULES, synthesize_run
from pypto_core.synth.profiler_db import PTA_STRING_BASE
from tests.paths import SAMPLES

RUN = {"model": "llama3-8b", "sku": "910B3", "tokens": 2, "prompt_tokens": 32, "seed": 3}
DB_SAMPLE = str(SAMPLES / "ascend_pt" / "cnn_8npu_db_level{}" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
                / "ascend_pytorch_profiler_0.db")
TOLERANCE = 0.30  # as tests/core/rules/test_synth_rules.py: estimated savings within 30% of the planted cost


@pytest.fixture(scope="module")
def pt_db(tmp_path_factory):
    """ascend_pt text + db of one run (cann83)."""
    return synthesize_run(tmp_path_factory.mktemp("pt_db"), layout="ascend_pt", variant="cann83", db=True,
                          **RUN)


@pytest.fixture(scope="module")
def pt_db_only(tmp_path_factory):
    """The same run exported as db only, 2026 column names."""
    return synthesize_run(tmp_path_factory.mktemp("pt_db_only"), layout="ascend_pt", variant="2026",
                          db="only", **RUN)


@pytest.fixture(scope="module")
def msprof_db(tmp_path_factory):
    return synthesize_run(tmp_path_factory.mktemp("msprof_db"), layout="msprof", db=True, **RUN)


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    return synthesize_run(tmp_path_factory.mktemp("legacy"), layout="msprof_legacy", **RUN)


def _db(run) -> Path:
    (path,) = [p for p in run.path.rglob("*.db") if p.name != "analysis.db"]
    return path


def _same_kernels(got, want) -> None:
    """What a reader gives for the same run in two formats: the same kernels, in order, to the ns."""
    a, b = got.kernels, want.kernels
    assert a.num_rows == b.num_rows > 1000
    for col in ("op_type", "name", "core_type", "start_ns", "dur_ns", "block_dim", "mix_block_dim",
                "input_shapes", "input_dtypes", "output_shapes"):
        assert a[col].to_pylist() == b[col].to_pylist(), col
    assert a["aiv_mte2_ratio"].to_pylist() == b["aiv_mte2_ratio"].to_pylist()
    assert a["aic_mte2_ratio"].to_pylist() == b["aic_mte2_ratio"].to_pylist()


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], r[2].upper()) for r in conn.execute(f'pragma table_info("{table}")')]


# --- CANN <= 7.0 msprof layout ------------------------------------------------------------------------------


def test_legacy_layout_file_names_and_columns(legacy) -> None:
    root = legacy.path
    summary, timeline = root / "device_0" / "summary", root / "device_0" / "timeline"
    names = sorted(p.name for p in summary.iterdir())
    assert any(re.fullmatch(r"op_summary_0_1_\d{14}\.csv", n) for n in names), names
    assert [p.name for p in timeline.iterdir() if re.fullmatch(r"msprof_0_1_\d{14}\.json", p.name)]
    assert not (root / "mindstudio_profiler_output").exists()
    op_summary = next(summary.glob("op_summary_*.csv"))
    with op_summary.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header[:9] == ["Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "Task Type",
                          "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"]
    assert {"Block Dim", "Mix Block Dim"} <= set(header)
    assert not {"Device_id", "OP State", "HF32 Eligible", "Block Num"} & set(header)
    assert all(len(r) == len(header) for r in rows)
    assert not rows[1][6].endswith("\t")
    info = json.loads((root / "device_0" / "info.json.0").read_text(encoding="utf-8"))
    assert info["simulated"] is True and info["cannVersion"] == "7.0.0"
    assert legacy.variant == "cann70"


def test_legacy_reads_back_like_the_text_of_the_same_run(legacy, msprof_db) -> None:
    prof = open_profile(legacy.path)
    assert prof.meta.format == "msprof" and prof.meta.simulated is True
    assert (prof.meta.cann_version, prof.meta.device, prof.meta.device_id) == ("7.0.0", "Ascend910B3", 0)
    assert prof.kernels.num_rows == legacy.kernel_count
    _same_kernels(prof, open_profile(msprof_db.path))
    assert prof.host_ops.num_rows == 0 and prof.api_calls.num_rows > 0  # the timeline was read too


# --- SQLite exports -----------------------------------------------------------------------------------------


def test_db_schema_is_the_real_samples(pt_db, pt_db_only) -> None:
    real0 = sqlite3.connect(f"file:{DB_SAMPLE.format(0)}?mode=ro&immutable=1", uri=True)
    real1 = sqlite3.connect(f"file:{DB_SAMPLE.format(1)}?mode=ro&immutable=1", uri=True)
    ours = sqlite3.connect(_db(pt_db))
    tables = {r[0] for r in ours.execute("select name from sqlite_master where type='table'")}
    assert {"TASK", "COMPUTE_TASK_INFO", "TASK_PMU_INFO", "STRING_IDS", "PYTORCH_API", "CONNECTION_IDS",
            "CANN_API", "STEP_TIME", "META_DATA", "NPU_INFO", "SESSION_TIME_INFO",
            "RANK_DEVICE_MAP"} <= tables
    for table in sorted(tables):
        real = real1 if table in ("COMPUTE_TASK_INFO", "TASK_PMU_INFO") else real0
        assert _columns(ours, table) == _columns(real, table), table
    # TEXT times in PYTORCH_API, interned strings in two id ranges, names resolve
    assert ours.execute("select distinct typeof(startNs), typeof(endNs) from PYTORCH_API").fetchall() == [
        ("text", "text")]
    assert ours.execute("select min(name) from PYTORCH_API").fetchone()[0] >= PTA_STRING_BASE
    assert ours.execute("select count(*) from COMPUTE_TASK_INFO c left join STRING_IDS s on s.id = c.opType "
                        "where s.value is null").fetchone()[0] == 0
    quoted = ours.execute("select value from STRING_IDS where value like '\"%' limit 1").fetchone()[0]
    assert quoted.count('"') == 2
    meta = dict(ours.execute("select name, value from META_DATA"))
    assert meta["SCHEMA_VERSION"] == "1.0.0" and meta["SIMULATED"] == "true"
    assert json.loads(meta["PYPTO_SYNTH"])["kernel_count"] == pt_db.kernel_count
    new = sqlite3.connect(_db(pt_db_only))
    assert [c for c, _ in _columns(new, "COMPUTE_TASK_INFO")][2:4] == ["blockNum", "mixBlockNum"]
    assert {"opState", "hf32Eligible"} <= {c for c, _ in _columns(new, "COMPUTE_TASK_INFO")}
    analysis = sqlite3.connect(_db(pt_db).parent / "analysis.db")
    assert [r[0] for r in analysis.execute("select step from StepTraceTime")] == ["0", "1", "2"]


def test_db_reads_back_like_the_text_of_the_same_run(pt_db) -> None:
    text = open_profile(pt_db.path)  # a folder with both exports: the text one
    db = open_profile(_db(pt_db))
    assert text.meta.format == "ascend_pt" and db.meta.format == "ascend_pt_db"
    assert db.meta.simulated is True and db.meta.device == "Ascend910B3"
    _same_kernels(db, text)
    assert db.kernels["wait_ns"].to_pylist() == text.kernels["wait_ns"].to_pylist()  # waitNs (cann83)
    assert db.flows.num_rows == db.kernels.num_rows  # one launch link per kernel
    assert db.steps["step_id"].to_pylist() == [0, 1, 2]
    assert db.steps["computing_ns"].to_pylist() == text.steps["computing_ns"].to_pylist()  # analysis.db
    ops = pc.equal(db.host_ops["name"], "aten::linear")
    assert pc.sum(pc.cast(ops, "int64")).as_py() > 0


def test_db_only_folder_and_msprof_db(pt_db, pt_db_only, msprof_db) -> None:
    out = pt_db_only.path / "ASCEND_PROFILER_OUTPUT"
    assert sorted(p.name for p in out.iterdir()) == ["analysis.db", "ascend_pytorch_profiler_0.db"]
    info = json.loads((pt_db_only.path / "profiler_info_0.json").read_text(encoding="utf-8"))
    assert info["config"]["experimental_config"]["_export_type"] == ["db"] and info["simulated"] is True
    prof = open_profile(pt_db_only.path)
    assert prof.meta.format == "ascend_pt_db" and prof.meta.simulated and prof.meta.cann_version == "8.5.0"
    _same_kernels(prof, open_profile(pt_db.path))  # 2026 column names, same numbers
    ms = open_profile(_db(msprof_db))
    assert ms.meta.format == "msprof_db" and ms.host_ops.num_rows == 0
    _same_kernels(ms, open_profile(msprof_db.path))


# --- the diagnosis on the new formats ----------------------------------------------------------------------


@pytest.mark.parametrize("which", ["legacy", "pt_db_only", "msprof_db"])
def test_planted_anti_patterns_found(which, request) -> None:
    run = request.getfixturevalue(which)
    path = run.path if which != "msprof_db" else _db(run)
    report = diagnose(open_profile(path))
    by_rule = {f.rule: f for f in report.findings}
    assert report.profile["device"] == RUN["sku"]
    for rule_id in RULES:
        assert rule_id in by_rule, f"{rule_id} planted but not found in {which}"
        measured_us = run.planted_cost_ns[rule_id] / 1e3
        assert abs(by_rule[rule_id].estimated_saving_us - measured_us) <= TOLERANCE * measured_us, rule_id


def test_cli_layout_and_db_flags(tmp_path, capsys) -> None:
    assert main(["synth", str(tmp_path / "a"), "--tokens", "1", "--prompt", "16", "--layout", "msprof_legacy",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layout"] == "msprof_legacy" and summary["variant"] == "cann70"
    assert main(["synth", str(tmp_path / "b"), "--tokens", "1", "--prompt", "16", "--db-only", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["export_type"] == ["db"]
    assert list(Path(summary["path"]).glob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"))
    assert main(["synth", str(tmp_path / "c"), "--layout", "msprof_legacy", "--db"]) == 2
    assert "no db export" in capsys.readouterr().err
