"""The SQLite exports of a simulated run: torch_npu's ``ascend_pytorch_profiler_0.db`` + ``analysis.db``
(docs/formats.md §2.7) beside the text export of an ``*_ascend_pt`` folder, or msprof's ``msprof_{ts}.db``
(§1.5) in a ``PROF_*`` folder.

The schema is copied from the real samples (samples/ascend_pt/cnn_8npu_db_level{0,1}, read with sqlite3):
the same table names, column names, declared types and column order; times INTEGER ns since the epoch,
except ``PYTORCH_API.startNs/endNs`` which are TEXT holding the digits; every text column an INTEGER id into
``STRING_IDS`` (CANN strings numbered from 0, PyTorch strings from 2**28, as in the samples); PMU metrics
one ``TASK_PMU_INFO`` row per metric per task, named like the sample (``aic_total_time``, ``aic_mte2_ratio``;
times in ns). ``variant`` cann83 uses the sample's ``COMPUTE_TASK_INFO`` (``blockDim``, ``mixBlockDim``,
``waitNs``), 2026 the documented one (``blockNum``, ``mixBlockNum``, ``opState``, ``hf32Eligible``) [DOC].
Only the tables a kernel-level export fills are written (no memory, HCCL or SoC sampling tables).

Marked simulated where the schema allows: ``META_DATA`` rows ``SIMULATED``/``PYPTO_SYNTH`` (not in real
files) and ``HOST_INFO.hostName`` ``pypto-synth``. Rows are inserted with ``executemany`` step by step, so a
long run never holds its tables in memory.
"""

from __future__ import annotations

import json
import sqlite3
from itertools import repeat
from pathlib import Path
from typing import Any

from pypto_core.synth.kernels import HOST_TYPE_NAMES, Kernel
from pypto_core.synth.model import RunConfig
from pypto_core.synth.rows import MODEL_ID_NONE, PIPE_COLUMNS_COUPLED, PIPE_COLUMNS_SPLIT
from pypto_core.synth.schedule import STREAM_ID, StepColumns, StepRecord
from pypto_core.synth.table import KernelTable
from pypto_core.synth.templates import pipe_columns
from pypto_core.synth.trace_events import _HOST_TYPES, HOST_PID, HOST_TID
from pypto_core.synth.writer_base import DEVICE_ID

PTA_STRING_BASE = 1 << 28  # PYTORCH_API names, shapes and types (268435456... in the samples)
ACL_CONNECTION_BASE = 1 << 40  # CANN_API.connectionId is the primary key: acl calls get ids of their own
GLOBAL_TID = (HOST_PID << 32) | HOST_TID  # globalTid = pid << 32 | tid
NONE_U32 = int(MODEL_ID_NONE)
# torch_npu / msprof ENUM_API_TYPE [SEEN both samples]
API_TYPES = [(5000, "runtime"), (5500, "hccl"), (10000, "node"), (15000, "model"), (20000, "acl"),
             (50001, "op"), (50002, "queue"), (50003, "trace"), (50004, "mstx")]
TASK_TYPE = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC", "MIX_AIC": "MIX_AIC",
             "MIX_AIV": "MIX_AIV"}  # TASK.taskType (runtime task) per COMPUTE_TASK_INFO.taskType [SEEN]
ENV_VARIABLES = {"ASCEND_GLOBAL_LOG_LEVEL": "", "HCCL_RDMA_TC": "", "HCCL_RDMA_SL": "",
                 "ACLNN_CACHE_LIMIT": "", "HOST_CACHE_CAPACITY": "", "ASCEND_ENHANCE_ENABLE": "",
                 "PYTORCH_NPU_ALLOC_CONF": "", "ASCEND_LAUNCH_BLOCKING": ""}

_COMPUTE_CANN83 = ("CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim "
                   "INTEGER,"
                   "mixBlockDim INTEGER,taskType INTEGER,opType INTEGER,inputFormats INTEGER,inputDataTypes "
                   "INTEGER,"
                   "inputShapes INTEGER,outputFormats INTEGER,outputDataTypes INTEGER,outputShapes INTEGER,"
                   "attrInfo INTEGER, waitNs INTEGER)")
_COMPUTE_2026 = ("CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockNum "
                 "INTEGER,"
                 "mixBlockNum INTEGER,taskType INTEGER,opType INTEGER,inputFormats INTEGER,inputDataTypes "
                 "INTEGER,"
                 "inputShapes INTEGER,outputFormats INTEGER,outputDataTypes INTEGER,outputShapes INTEGER,"
                 "attrInfo INTEGER,opState INTEGER,hf32Eligible INTEGER)")
# Verbatim from samples/ascend_pt/cnn_8npu_db_level0 (msprof's part of the schema).
_CANN_SCHEMA = [
    "CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER,endTimeNs INTEGER)",
    "CREATE TABLE HOST_INFO (hostUid TEXT,hostName TEXT)",
    "CREATE TABLE NPU_INFO (id INTEGER,name TEXT)",
    "CREATE TABLE TASK (startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId "
    "INTEGER,"
    "globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER)",
    "CREATE TABLE CANN_API (startNs INTEGER,endNs INTEGER,type INTEGER,globalTid INTEGER,"
    "connectionId INTEGER PRIMARY KEY,name INTEGER)",
    "CREATE TABLE META_DATA (name TEXT,value TEXT)",
    "CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY,name TEXT)",
    "CREATE TABLE AICORE_FREQ (deviceId INTEGER,timestampNs NUMERIC,freq INTEGER)",
    "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT)",
    "CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER,name INTEGER,value NUMERIC)",  # level1 sample
]
# torch_npu's own tables [SEEN cnn_8npu_db_level0].
_PTA_SCHEMA = [
    "CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER)",
    "CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER)",
    "CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name "
    "INTEGER, "
    "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId "
    "INTEGER, "
    "type INTEGER)",
    "CREATE TABLE CONNECTION_IDS (id INTEGER, connectionId INTEGER)",
]
_INDEXES = ["CREATE INDEX TaskIndex ON TASK (startNs,globalTaskId)"]
ANALYSIS_STEP_TRACE = ("CREATE TABLE StepTraceTime (deviceId INTEGER, step TEXT, computing NUMERIC, "
                       "communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, "
                       "free NUMERIC, "
                       "stage NUMERIC, bubble NUMERIC, communication_not_overlapped_and_exclude_receive "
                       "NUMERIC, "
                       "preparing NUMERIC)")  # CANN 8.3.RC1 sample (qwen3_0.6b_train_4npu_level2)


def pmu_metric(column: str, coupled: bool) -> tuple[str, float] | None:
    """A PipeUtilization CSV column → (TASK_PMU_INFO name, factor to the db unit), or None if the db has no
    such metric. The db names drop ``(us)`` and hold ns; ``aicore_time``/``aiv_time`` are ``aic_total_time``/
    ``aiv_total_time`` [SEEN level1 sample]; coupled chips' unprefixed names are [INF]."""
    if column == "cube_utilization(%)":
        return None  # not in the sample's TASK_PMU_INFO
    if column == "aicore_time(us)":
        return ("total_time" if coupled else "aic_total_time"), 1000.0
    if column == "aiv_time(us)":
        return "aiv_total_time", 1000.0
    if column.endswith("(us)"):
        return column.removesuffix("(us)"), 1000.0
    return column, 1.0


def db_shape(cell: str) -> str:
    """A shape cell as quoted for CSV → the STRING_IDS value
    (the same text with its own quotes: ``"1,2;3"``)."""
    return cell[1:-1].replace('""', '"') if cell.startswith('"') else cell


class _Strings:
    def __init__(self, base: int) -> None:
        self.ids: dict[str, int] = {}
        self.base = base

    def __call__(self, text: str) -> int:
        i = self.ids.get(text)
        if i is None:
            i = self.ids[text] = self.base + len(self.ids)
        return i


class ProfilerDbWriter:
    """Streams the placed steps of a run into one profiler db; ``pytorch`` adds torch_npu's tables (host ops,
    steps, connection ids) to msprof's."""

    def __init__(self, path: Path, cfg: RunConfig, *, variant: str, base_ns: int, pytorch: bool,
                 synth_meta: dict[str, Any]) -> None:
        self.path = path
        self.cfg = cfg
        self.variant = variant
        self.base_ns = base_ns
        self.pytorch = pytorch
        self.synth_meta = synth_meta
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        for sql in _CANN_SCHEMA + [_COMPUTE_2026 if variant == "2026" else _COMPUTE_CANN83] + (
                _PTA_SCHEMA if pytorch else []):
            self.conn.execute(sql)
        self.cann = _Strings(0)
        self.pta = _Strings(PTA_STRING_BASE)
        self.coupled = cfg.sku.coupled
        columns = PIPE_COLUMNS_COUPLED if self.coupled else PIPE_COLUMNS_SPLIT
        self.metrics = [(j, *m) for j, c in enumerate(columns)
                        if (m := pmu_metric(c, self.coupled)) is not None]
        self.metric_ids = [self.cann(name) for _, name, _ in self.metrics]
        self.na = self.cann("N/A")
        self.next_gid = 0
        self.next_pyid = 0
        self.next_acl = ACL_CONNECTION_BASE
        self._static: dict[int, tuple[KernelTable, list[tuple[int, ...]]]] = {}

    def _static_rows(self, table: KernelTable) -> list[tuple[int, ...]]:
        """Per kernel: the string ids that do not change with the step (a decode table serves many steps)."""
        hit = self._static.get(id(table))
        if hit is not None and hit[0] is table:
            return hit[1]
        if len(self._static) > 4:
            self._static.clear()
        c, p = self.cann, self.pta
        host_type = HOST_TYPE_NAMES[self.cfg.dtype]
        texts: list[tuple[Any, ...]] = []  # the host types' ids are given after all the others (file order)
        for k in table.kernels:
            texts.append((c(k.name), c(TASK_TYPE.get(k.core, k.core)), c(k.core), c(k.op_type),
                        c(";".join(t.fmt for t in k.inputs)), c(";".join(t.dtype for t in k.inputs)),
                        c(";".join(t.fmt for t in k.outputs)), c(";".join(t.dtype for t in k.outputs)),
                        0 if k.core.startswith("MIX") else NONE_U32, p(k.host_op), _host_types(k, host_type),
                        c(k.api)))
        out: list[tuple[int, ...]] = [row[:10] + (p(row[10]),) + row[11:] for row in texts]
        self._static[id(table)] = (table, out)
        return out

    def write_step(self, table: KernelTable, cols: StepColumns, rec: StepRecord, cache_len: int) -> None:
        n = table.n
        conn = self.conn
        if self.pytorch:
            conn.execute("INSERT INTO STEP_TIME VALUES (?,?,?)", (rec.step, rec.start_ns, rec.end_ns))
            conn.execute("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         (str(rec.start_ns), str(rec.end_ns), GLOBAL_TID, None,
                          self.pta(f"ProfilerStep#{rec.step}"), -1, 0, None, None, None, 50001))
        if not n:
            return
        static = self._static_rows(table)
        c = self.cann
        gids = list(range(self.next_gid, self.next_gid + n))
        self.next_gid += n
        start = cols.start_ns.tolist()
        end = (cols.start_ns + cols.dur_ns).tolist()
        cid = cols.connection_id.tolist()
        task = cols.task_id.tolist()
        block_arr = table.block_dims(cache_len)
        block = block_arr.tolist()
        mix = table.mix_block_dim.tolist()
        in_cells, out_cells, dims = table.shape_cells(cache_len)
        in_ids = [c(db_shape(x)) for x in in_cells]
        out_ids = [c(db_shape(x)) for x in out_cells]
        conn.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         [(start[i], end[i], DEVICE_ID, cid[i], gids[i], HOST_PID, static[i][1], static[i][8],
                          STREAM_ID, task[i], NONE_U32) for i in range(n)])
        rows: list[tuple[Any, ...]]
        if self.variant == "2026":
            dynamic, no = c("dynamic"), c("NO")
            rows = [(s[0], gids[i], block[i], mix[i], s[2], s[3], s[4], s[5], in_ids[i], s[6], s[7],
                     out_ids[i], self.na, dynamic, no) for i, s in enumerate(static)]
            conn.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        else:
            wait = cols.wait_ns.tolist()
            rows = [(s[0], gids[i], block[i], mix[i], s[2], s[3], s[4], s[5], in_ids[i], s[6], s[7],
                     out_ids[i], self.na, wait[i]) for i, s in enumerate(static)]
            conn.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        pipes = pipe_columns(table, cols, block_arr, coupled=self.coupled, freq_mhz=self.cfg.sku.freq_mhz)
        pmu: list[tuple[Any, ...]] = []
        for (j, _, factor), mid in zip(self.metrics, self.metric_ids):
            values = pipes[j] if factor == 1.0 else [v * factor for v in pipes[j]]
            pmu.extend(zip(gids, repeat(mid), values))
        conn.executemany("INSERT INTO TASK_PMU_INFO VALUES (?,?,?)", pmu)
        launch = cols.launch_start_ns.tolist()
        launch_end = (cols.launch_start_ns + cols.launch_dur_ns).tolist()
        node = (cols.launch_start_ns + cols.launch_dur_ns // 2).tolist()
        acl = list(range(self.next_acl, self.next_acl + n))
        self.next_acl += n
        launch_id = c("launch")
        conn.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)",
                         [(launch[i], launch_end[i], 20000, GLOBAL_TID, acl[i],
                           static[i][11]) for i in range(n)]
                         + [(node[i], launch_end[i], 10000, GLOBAL_TID, cid[i], launch_id) for i in range(n)])
        if self.pytorch:
            hs = cols.host_start_ns.tolist()
            he = (cols.host_start_ns + cols.host_dur_ns).tolist()
            py = list(range(self.next_pyid, self.next_pyid + n))
            self.next_pyid += n
            p = self.pta
            conn.executemany("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             [(str(hs[i]), str(he[i]), GLOBAL_TID, py[i], static[i][9], -1, 0, static[i][10],
                               p(json.loads(dims[i])), None, 50001) for i in range(n)])
            conn.executemany("INSERT INTO CONNECTION_IDS VALUES (?,?)", list(zip(py, cid)))

    def close(self, end_ns: int) -> None:
        conn = self.conn
        sku = self.cfg.sku
        conn.execute("INSERT INTO SESSION_TIME_INFO VALUES (?,?)", (self.base_ns, end_ns))
        conn.execute("INSERT INTO HOST_INFO VALUES (?,?)", ("0", "pypto-synth"))
        conn.execute("INSERT INTO NPU_INFO VALUES (?,?)", (DEVICE_ID, sku.soc))
        conn.executemany("INSERT INTO ENUM_API_TYPE VALUES (?,?)", API_TYPES)
        conn.executemany("INSERT INTO AICORE_FREQ VALUES (?,?,?)",
                         [(DEVICE_ID, self.base_ns, sku.freq_mhz), (DEVICE_ID, end_ns, sku.freq_mhz)])
        conn.executemany("INSERT INTO META_DATA VALUES (?,?)", [
            ("SCHEMA_VERSION_MICRO", "0"), ("SCHEMA_VERSION_MINOR", "0"), ("SCHEMA_VERSION_MAJOR", "1"),
            ("SCHEMA_VERSION", "1.0.0"), ("ENV_VARIABLES", json.dumps(ENV_VARIABLES)),
            # Not in real files: this profile was generated by `pypto synth`, never measured on an NPU.
            ("SIMULATED", "true"), ("PYPTO_SYNTH", json.dumps(self.synth_meta))])
        if self.pytorch:
            conn.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", (0, DEVICE_ID))
        strings = list(self.cann.ids.items()) + list(self.pta.ids.items())
        conn.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, s) for s, i in strings])
        for sql in _INDEXES:
            conn.execute(sql)
        conn.commit()
        conn.close()


def _host_types(k: Kernel, host_type: str) -> str:
    """``Input type`` of the framework op (trace_events.event_dicts), the PYTORCH_API.inputDtypes text."""
    return ";\r\n".join(_HOST_TYPES.get(t.dtype, host_type) for t in k.inputs)


def step_trace_time_rows(steps: list[StepRecord]) -> list[list[Any]]:
    """step_trace_time.csv's numbers (µs) per step, as writers_ascend_pt writes them."""
    rows = []
    for rec in steps:
        stage = (rec.end_ns - rec.start_ns) / 1000
        computing = rec.compute_ns / 1000
        rows.append([DEVICE_ID, str(rec.step), computing, 0.0, 0.0, 0.0, stage - computing, stage, 0, 0.0,
                     (rec.first_kernel_ns - rec.start_ns) / 1000])
    return rows


def write_analysis_db(path: Path, steps: list[StepRecord]) -> None:
    """torch_npu's analysis.db: StepTraceTime only (a single device has no communication tables)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(ANALYSIS_STEP_TRACE)
        conn.executemany("INSERT INTO StepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         step_trace_time_rows(steps))
        conn.commit()
    finally:
        conn.close()
