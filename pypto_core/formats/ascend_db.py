"""SQLite exports → ``Profile``: torch_npu ``ascend_pytorch_profiler_*.db`` (+ ``analysis.db``) and msprof ``msprof_*.db``.

Both share msprof's schema (FORMATS.md §1.5, §2.7): times are INTEGER ns since the epoch (torch_npu's
``PYTORCH_API.startNs`` is TEXT holding the same digits), text columns are ids into ``STRING_IDS``, and
column names drift (``blockDim``→``blockNum``, ``waitNs`` only in older files). Each table is optional;
what is missing is simply absent, what is broken becomes a warning.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats.csvtable import ConversionNotes, to_int, to_ns, to_text
from pypto_core.formats.shapes import parse_name_lists, parse_shapes
from pypto_core.profile import Profile, ProfileMeta, conform

_FETCH = 50_000
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open read-only (never modify an upload), or ``InputError`` for empty / non-SQLite / corrupt files."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(str(p), f"cannot read file ({exc.strerror or exc})") from exc
    if size == 0:
        raise InputError(str(p), "file is empty (0 bytes)")
    if not is_sqlite(p):
        raise InputError(str(p), "not an SQLite database (wrong file header)")
    try:
        conn = sqlite3.connect(f"file:{p.resolve().as_posix()}?mode=ro&immutable=1", uri=True)
        conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(str(p), f"corrupt SQLite database ({exc})") from exc
    return conn


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("select name from sqlite_master where type in ('table','view')")}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'pragma table_info("{table}")')]


def query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> pa.Table:
    """Run ``sql`` and return its rows as an Arrow table, fetched in blocks."""
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    columns: list[list[Any]] = [[] for _ in names]
    while True:
        rows = cur.fetchmany(_FETCH)
        if not rows:
            break
        for i, col in enumerate(zip(*rows)):
            columns[i].extend(col)
    arrays = []
    for col in columns:
        try:
            arrays.append(pa.array(col))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in col], pa.string()))
    return pa.table(arrays, names=names)


def _str_join(alias: str, column: str) -> tuple[str, str]:
    """SQL select expression and join clause that resolve an id column through STRING_IDS."""
    j = f"s_{alias}"
    return f"{j}.value", f"left join STRING_IDS {j} on {j}.id = {column}"


def _pick(cols: list[str], *names: str) -> str | None:
    return next((n for n in names if n in cols), None)


def read_kernels(conn: sqlite3.Connection, notes: ConversionNotes, warnings: list[str]) -> pa.Table:
    """TASK ⋈ COMPUTE_TASK_INFO (compute kernels) plus COMMUNICATION_OP (hcom ops), by start time."""
    tables = _tables(conn)
    parts: list[pa.Table] = []
    if {"TASK", "COMPUTE_TASK_INFO"} <= tables:
        c_cols = _columns(conn, "COMPUTE_TASK_INFO")
        t_cols = _columns(conn, "TASK")
        select = ["t.startNs as start_ns", "t.endNs - t.startNs as dur_ns", "t.streamId as stream_id",
                  "t.taskId as task_id", "t.deviceId as device_id", "t.connectionId as connection_id",
                  "t.globalTaskId as global_task_id"]
        joins = []
        for canonical, src in (("name", "name"), ("op_type", "opType"), ("core_type", "taskType"),
                               ("input_shapes", "inputShapes"), ("input_dtypes", "inputDataTypes"),
                               ("input_formats", "inputFormats"), ("output_shapes", "outputShapes"),
                               ("output_dtypes", "outputDataTypes"), ("output_formats", "outputFormats"),
                               ("op_state", "opState"), ("hf32_eligible", "hf32Eligible")):
            if src in c_cols:
                expr, join = _str_join(canonical, f"c.{src}")
                select.append(f"{expr} as {canonical}")
                joins.append(join)
        block = _pick(c_cols, "blockNum", "blockDim", "block_dim")
        mix = _pick(c_cols, "mixBlockNum", "mixBlockDim")
        if block:
            select.append(f"c.{block} as block_dim")
        if mix:
            select.append(f"c.{mix} as mix_block_dim")
        if "waitNs" in c_cols:
            select.append("c.waitNs as wait_ns")
        if "modelId" in t_cols:
            select.append("t.modelId as model_id")
        sql = (f"select {', '.join(select)} from TASK t join COMPUTE_TASK_INFO c on c.globalTaskId = t.globalTaskId "
               f"{' '.join(joins)} order by t.startNs")
        raw = query(conn, sql)
        parts.append(_canonical_kernels(raw, notes))
        if "TASK_PMU_INFO" in tables and raw.num_rows:
            parts[-1] = _attach_pmu(conn, parts[-1], raw["global_task_id"])
    if "COMMUNICATION_OP" in tables:
        o_cols = _columns(conn, "COMMUNICATION_OP")
        name_expr, name_join = _str_join("opname", "o.opName")
        type_expr, type_join = _str_join("optype", "o.opType")
        sql = (f"select {name_expr} as name, {type_expr} as op_type, o.startNs as start_ns, o.endNs - o.startNs as dur_ns, "
               f"o.connectionId as connection_id{', o.waitNs as wait_ns' if 'waitNs' in o_cols else ''}"
               f"{', o.deviceId as device_id' if 'deviceId' in o_cols else ''} "
               f"from COMMUNICATION_OP o {name_join} {type_join} order by o.startNs")
        comm = query(conn, sql)
        if comm.num_rows:
            comm = comm.append_column("core_type", pa.array(["COMMUNICATION"] * comm.num_rows, pa.string()))
            parts.append(_canonical_kernels(comm, notes))
    if not parts:
        return conform("kernels", pa.table({}))
    table = pa.concat_tables(parts, promote_options="default")
    return table.sort_by([("start_ns", "ascending")]) if table.num_rows else table


def _canonical_kernels(raw: pa.Table, notes: ConversionNotes) -> pa.Table:
    cols: dict[str, Any] = {}
    for c in raw.column_names:
        a = raw[c]
        if c in ("input_shapes", "output_shapes"):
            parsed, bad, example = parse_shapes(a.cast(pa.string()))
            notes.add(c, bad, example)
            cols[c] = parsed
        elif c in ("input_dtypes", "input_formats", "output_dtypes", "output_formats"):
            cols[c] = parse_name_lists(a.cast(pa.string()))
        elif c in ("model_id", "stream_id", "task_id"):
            cols[c] = to_int(a, column=c, notes=notes)
        elif c == "global_task_id":
            continue
        elif c == "connection_id":
            cols["correlation_id"] = to_int(a, column=c, notes=notes, none_values=())
        elif pa.types.is_string(a.type):
            cols[c] = to_text(a)
        else:
            cols[c] = a
    if "core_type" in cols:
        ct = cols["core_type"].cast(pa.string())
        cols["core_type"] = pc.if_else(pc.equal(ct, "HCCL"), pa.scalar("COMMUNICATION"), ct)
    return conform("kernels", pa.table(cols))


def _attach_pmu(conn: sqlite3.Connection, kernels: pa.Table, task_ids: pa.ChunkedArray) -> pa.Table:
    """TASK_PMU_INFO (one row per metric per task) pivoted into one float64 column per metric name."""
    name_expr, name_join = _str_join("pmu", "p.name")
    pmu = query(conn, f"select p.globalTaskId as gid, {name_expr} as metric, p.value as value "
                      f"from TASK_PMU_INFO p {name_join}")
    if pmu.num_rows == 0:
        return kernels
    keyed = pa.table({"gid": task_ids.cast(pa.int64()), "_row": pa.array(range(len(task_ids)), pa.int64())})
    for metric in sorted(set(pc.unique(pmu["metric"]).to_pylist()) - {None}):
        sub = pmu.filter(pc.equal(pmu["metric"], metric)).select(["gid", "value"])
        sub = sub.group_by("gid", use_threads=False).aggregate([("value", "first")])
        sub = pa.table({"gid": sub["gid"].cast(pa.int64()), "v": sub["value_first"].cast(pa.float64())})
        joined = keyed.join(sub, "gid", join_type="left outer", use_threads=False).sort_by("_row")
        if metric not in kernels.column_names:
            kernels = kernels.append_column(metric, joined["v"])
    return kernels


def _globaltid_split(gt: pa.ChunkedArray) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    gt = gt.cast(pa.int64())
    return pc.shift_right(gt, 32), pc.bit_wise_and(gt, 0xFFFFFFFF)


def read_host_ops(conn: sqlite3.Connection, notes: ConversionNotes) -> pa.Table:
    if "PYTORCH_API" not in _tables(conn):
        return conform("host_ops", pa.table({}))
    cols = _columns(conn, "PYTORCH_API")
    name_expr, name_join = _str_join("name", "p.name")
    shapes = ""
    shape_join = ""
    if "inputShapes" in cols:
        shapes, shape_join = _str_join("shapes", "p.inputShapes")
        shapes = f", {shapes} as input_shapes"
    raw = query(conn, f"select cast(p.startNs as text) as s, cast(p.endNs as text) as e, p.globalTid as gt, "
                      f"p.connectionId as cid, {name_expr} as name{shapes} "
                      f"from PYTORCH_API p {name_join} {shape_join} order by cast(p.startNs as integer)")
    start = to_ns(raw["s"].cast(pa.string()), column="PYTORCH_API.startNs", notes=notes, unit_ns=1)
    end = to_ns(raw["e"].cast(pa.string()), column="PYTORCH_API.endNs", notes=notes, unit_ns=1)
    pid, tid = _globaltid_split(raw["gt"])
    out = {"name": raw["name"], "pid": pid, "tid": tid, "start_ns": start, "dur_ns": pc.subtract(end, start),
           "correlation_id": raw["cid"].cast(pa.int64())}
    if "input_shapes" in raw.column_names:
        out["input_shapes"] = raw["input_shapes"]
    return conform("host_ops", pa.table(out))


def read_api_calls(conn: sqlite3.Connection) -> pa.Table:
    tables = _tables(conn)
    if "CANN_API" not in tables:
        return conform("api_calls", pa.table({}))
    name_expr, name_join = _str_join("name", "a.name")
    level = "e.name as level" if "ENUM_API_TYPE" in tables else "cast(a.type as text) as level"
    level_join = "left join ENUM_API_TYPE e on e.id = a.type" if "ENUM_API_TYPE" in tables else ""
    raw = query(conn, f"select {name_expr} as name, {level}, a.globalTid as gt, a.startNs as s, a.endNs as e, "
                      f"a.connectionId as cid from CANN_API a {name_join} {level_join} order by a.startNs")
    pid, tid = _globaltid_split(raw["gt"])
    return conform("api_calls", pa.table({
        "name": raw["name"], "level": raw["level"], "pid": pid, "tid": tid, "start_ns": raw["s"].cast(pa.int64()),
        "dur_ns": pc.subtract(raw["e"].cast(pa.int64()), raw["s"].cast(pa.int64())),
        "correlation_id": raw["cid"].cast(pa.int64()),
    }))


def read_flows(conn: sqlite3.Connection, host_ops: pa.Table, kernels: pa.Table) -> pa.Table:
    """Host op → kernel links: PYTORCH_API.connectionId → CONNECTION_IDS → TASK.connectionId."""
    if "CONNECTION_IDS" not in _tables(conn) or host_ops.num_rows == 0 or kernels.num_rows == 0:
        return conform("flows", pa.table({}))
    ids = query(conn, "select id, connectionId from CONNECTION_IDS")
    if ids.num_rows == 0:
        return conform("flows", pa.table({}))
    hosts = pa.table({"id": host_ops["correlation_id"], "host_index": pa.array(range(host_ops.num_rows), pa.int64())})
    links = pa.table({"id": ids["id"].cast(pa.int64()), "cid": ids["connectionId"].cast(pa.int64())})
    devs = pa.table({"cid": kernels["correlation_id"], "kernel_index": pa.array(range(kernels.num_rows), pa.int64())})
    # inner joins (pyarrow's default is a left outer join): host ops without a task link make no flow
    joined = hosts.join(links, "id", join_type="inner", use_threads=False).join(
        devs, "cid", join_type="inner", use_threads=False)
    joined = joined.sort_by([("host_index", "ascending"), ("kernel_index", "ascending")])
    return conform("flows", pa.table({"host_index": joined["host_index"], "kernel_index": joined["kernel_index"],
                                      "kind": pa.array(["async_npu"] * joined.num_rows, pa.string())}))


def read_memory(conn: sqlite3.Connection) -> pa.Table:
    tables = _tables(conn)
    parts = []
    if "MEMORY_RECORD" in tables:
        comp, join = _str_join("comp", "m.component")
        raw = query(conn, f"select {comp} as component, m.timestamp as ts, m.totalAllocated as a, m.totalReserved as r, "
                          f"m.totalActive as act, m.deviceId as dev from MEMORY_RECORD m {join}")
        parts.append(conform("memory", pa.table({
            "component": raw["component"], "ts_ns": raw["ts"].cast(pa.int64()), "allocated_bytes": raw["a"].cast(pa.int64()),
            "reserved_bytes": raw["r"].cast(pa.int64()), "device": pc.cast(raw["dev"], pa.string()),
            "active_bytes": raw["act"].cast(pa.int64()), "source": pa.array(["memory_record"] * raw.num_rows, pa.string()),
        })))
    if "NPU_MODULE_MEM" in tables:
        mod = "e.name" if "ENUM_MODULE" in tables else "cast(m.moduleId as text)"
        join = "left join ENUM_MODULE e on e.id = m.moduleId" if "ENUM_MODULE" in tables else ""
        raw = query(conn, f"select {mod} as component, m.timestampNs as ts, m.totalReserved as r, m.deviceId as dev "
                          f"from NPU_MODULE_MEM m {join}")
        reserved = raw["r"].cast(pa.float64())
        reserved = pc.if_else(pc.less(reserved, 0), pa.scalar(None, pa.float64()), reserved)
        parts.append(conform("memory", pa.table({
            "component": raw["component"], "ts_ns": raw["ts"].cast(pa.int64()),
            "reserved_bytes": reserved.cast(pa.int64()), "device": pc.cast(raw["dev"], pa.string()),
            "source": pa.array(["npu_module_mem"] * raw.num_rows, pa.string()),
        })))
    if not parts:
        return conform("memory", pa.table({}))
    return pa.concat_tables(parts, promote_options="default")


def read_counters(conn: sqlite3.Connection) -> pa.Table:
    """AI Core frequency and HBM bandwidth samples as counter tracks."""
    tables = _tables(conn)
    parts = []
    if "AICORE_FREQ" in tables:
        raw = query(conn, "select deviceId as d, cast(timestampNs as integer) as ts, freq as v from AICORE_FREQ")
        parts.append(pa.table({"track": pc.binary_join_element_wise("AI Core Freq (MHz) dev ", pc.cast(raw["d"], pa.string()), ""),
                               "ts_ns": raw["ts"].cast(pa.int64()), "value": raw["v"].cast(pa.float64())}))
    if "HBM" in tables:
        raw = query(conn, "select deviceId as d, hbmId as h, type as t, timestampNs as ts, bandwidth as v from HBM")
        track = pc.binary_join_element_wise("HBM ", pc.cast(raw["h"], pa.string()), " type ", pc.cast(raw["t"], pa.string()),
                                            " (bytes/s) dev ", pc.cast(raw["d"], pa.string()), "")
        parts.append(pa.table({"track": track, "ts_ns": raw["ts"].cast(pa.int64()), "value": raw["v"].cast(pa.float64())}))
    if not parts:
        return conform("counters", pa.table({}))
    return conform("counters", pa.concat_tables([conform("counters", p) for p in parts]))


def read_meta(conn: sqlite3.Connection, meta: ProfileMeta) -> None:
    tables = _tables(conn)
    if "NPU_INFO" in tables:
        names = sorted({r[0] for r in conn.execute("select name from NPU_INFO") if r[0]})
        if names:
            meta.device = names[0]
    if "RANK_DEVICE_MAP" in tables:
        row = conn.execute("select rankId, deviceId from RANK_DEVICE_MAP").fetchone()
        if row:
            meta.rank = meta.rank if meta.rank is not None else _int(row[0])
            meta.device_id = _int(row[1])
    if "META_DATA" in tables:
        md = {str(k): v for k, v in conn.execute("select name, value from META_DATA")}
        if "ENV_VARIABLES" in md:
            try:
                md["ENV_VARIABLES"] = json.loads(md["ENV_VARIABLES"])
            except (TypeError, ValueError):
                pass
        meta.extra["db_metadata"] = md
        if str(md.get("SIMULATED", "")).strip().lower() in ("true", "1", "yes"):
            meta.simulated = True  # our simulator's mark (pypto_core.synth.profiler_db); never in real files
    if "SESSION_TIME_INFO" in tables:
        row = conn.execute("select startTimeNs, endTimeNs from SESSION_TIME_INFO").fetchone()
        if row:
            meta.extra["session_start_ns"], meta.extra["session_end_ns"] = _int(row[0]), _int(row[1])


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_steps(conn: sqlite3.Connection) -> pa.Table:
    if "STEP_TIME" not in _tables(conn):
        return conform("steps", pa.table({}))
    raw = query(conn, "select id, startNs, endNs from STEP_TIME order by startNs")
    return conform("steps", pa.table({"step_id": to_int(raw["id"], none_values=()), "start_ns": raw["startNs"].cast(pa.int64()),
                                      "end_ns": raw["endNs"].cast(pa.int64())}))


# analysis.db StepTraceTime (µs) → step columns (ns)
_STEP_TRACE = {
    "computing": "computing_ns", "communication_not_overlapped": "communication_not_overlapped_ns",
    "overlapped": "overlapped_ns", "communication": "communication_ns", "free": "free_ns", "stage": "stage_ns",
    "bubble": "bubble_ns", "communication_not_overlapped_and_exclude_receive": "communication_not_overlapped_exclude_receive_ns",
    "preparing": "preparing_ns",
}


def read_analysis_db(path: Path, steps: pa.Table, meta: ProfileMeta, notes: ConversionNotes) -> tuple[pa.Table, pa.Table]:
    """analysis.db: per-step breakdown merged into ``steps``; CommAnalyzerTime → ``communication``."""
    conn = connect(path)
    try:
        tables = _tables(conn)
        comm = conform("communication", pa.table({}))
        if "StepTraceTime" in tables:
            cols = [c for c in _columns(conn, "StepTraceTime") if c in _STEP_TRACE]
            # Values are stored as REAL by the profiler: read them as numbers (their text form may be 1.7e+15).
            raw = query(conn, "select cast(step as text) as step, " + ", ".join(f"cast({c} as real) as {c}" for c in cols)
                        + " from StepTraceTime")
            breakdown = {"step_id": to_int(raw["step"].cast(pa.string()), none_values=())}
            for c in cols:
                breakdown[_STEP_TRACE[c]] = to_ns(raw[c], column=c, notes=notes)
            bt = pa.table(breakdown)
            if steps.num_rows:
                keep = steps.drop_columns([c for c in bt.column_names if c != "step_id" and c in steps.column_names])
                keyed = keep.append_column("_row", pa.array(range(keep.num_rows), pa.int64()))
                steps = keyed.join(bt, "step_id", join_type="left outer", use_threads=False).sort_by("_row").drop_columns(["_row"])
            else:
                steps = bt
        if "CommAnalyzerTime" in tables:
            raw = query(conn, "select hccl_op_name as name, group_name as grp, cast(step as text) as step, "
                              "cast(start_timestamp as real) as st, cast(elapse_time as real) as el, "
                              "cast(transit_time as real) as tr, cast(wait_time as real) as wa, "
                              "cast(synchronization_time as real) as sy, cast(idle_time as real) as idl, type "
                              "from CommAnalyzerTime")
            step = pc.replace_substring_regex(raw["step"].cast(pa.string()), "^step", "")
            ms = 1_000_000
            comm = conform("communication", pa.table({
                "name": raw["name"], "group": raw["grp"], "step_id": to_int(step, none_values=()),
                "start_ns": to_ns(raw["st"], column="start_timestamp", notes=notes),
                "elapse_ns": to_ns(raw["el"], unit_ns=ms, notes=notes, column="elapse_time"),
                "transit_ns": to_ns(raw["tr"], unit_ns=ms, notes=notes, column="transit_time"),
                "wait_ns": to_ns(raw["wa"], unit_ns=ms, notes=notes, column="wait_time"),
                "synchronization_ns": to_ns(raw["sy"], unit_ns=ms, notes=notes, column="synchronization_time"),
                "idle_ns": to_ns(raw["idl"], unit_ns=ms, notes=notes, column="idle_time"),
                "kind": raw["type"],
            }))
        meta.source_files.append(str(path))
        return conform("steps", steps), comm
    finally:
        conn.close()


def read_profiler_db(path: str | os.PathLike[str], *, fmt: str = "ascend_pt_db", meta: ProfileMeta | None = None,
                     analysis_db: Path | None = None) -> Profile:
    """One SQLite export (plus an optional analysis.db) → ``Profile``."""
    p = Path(path)
    meta = meta or ProfileMeta(format=fmt, source=str(p))
    meta.format = fmt
    notes = ConversionNotes()
    conn = connect(p)
    try:
        try:
            read_meta(conn, meta)
            kernels = read_kernels(conn, notes, meta.warnings)
            host_ops = read_host_ops(conn, notes)
            api_calls = read_api_calls(conn)
            flows = read_flows(conn, host_ops, kernels)
            memory = read_memory(conn)
            counters = read_counters(conn)
            steps = read_steps(conn)
        except sqlite3.DatabaseError as exc:
            raise InputError(str(p), f"unexpected database content ({exc})") from exc
    finally:
        conn.close()
    meta.source_files.append(str(p))
    communication = conform("communication", pa.table({}))
    if analysis_db is not None and analysis_db.is_file():
        try:
            steps, communication = read_analysis_db(analysis_db, steps, meta, notes)
        except (InputError, sqlite3.DatabaseError) as exc:
            meta.warnings.append(f"skipped {analysis_db.name}: {getattr(exc, 'reason', exc)}")
    meta.warnings.extend(notes.warnings(p))
    if kernels.num_rows == 0 and host_ops.num_rows == 0 and api_calls.num_rows == 0:
        raise InputError(str(p), "database holds no tasks, operators or API calls (TASK/COMPUTE_TASK_INFO, "
                                 "PYTORCH_API, CANN_API are missing or empty)")
    return Profile(meta=meta, kernels=kernels, host_ops=host_ops, api_calls=api_calls, flows=flows,
                   counters=counters, steps=steps, memory=memory, communication=communication)
