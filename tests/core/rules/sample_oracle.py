"""What the real samples' own files say, read with the standard library only, never with pypto_core.

``tests/core/rules/test_real_samples.py`` expects exactly the rules that this reading predicts, so a rule that
starts firing (or stops) on a real profile fails the test unless the files themselves back it. Each predicate
below states the evidence a person would check by hand: torch_npu's ``step_trace_time.csv`` and
``communication.json`` (or their ``analysis.db`` tables), ``kernel_details.csv``'s ``OP State`` and ``Block
Dim``, the CANN API calls in ``trace_view.json``, and for Kineto traces the kernels, copies and the runtime
calls that launched them (HTA's "host wait" idle rule). The thresholds are the rules' documented ones (their
@rule); the arithmetic here is our own, written a second time on purpose.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

Interval = tuple[float, float]

# Hardware facts of the SKU the Ascend samples ran on (910B3: 20 AI Cores, 40 AI Vector cores; docs/domain.md
# chip table); the rules' thresholds (each rule's @rule(thresholds=...)).
AI_CORES, VECTOR_CORES = 20, 40
CUBE_CORE_TYPES = {"AI_CORE", "MIX_AIC"}
VECTOR_CORE_TYPES = {"AI_VECTOR_CORE", "MIX_AIV"}
COMM_CORE_TYPES = {"HCCL", "COMMUNICATION"}
# Host calls that wait for the device (docs/domain.md): runtime syncs, synchronous copies, and the framework
# ops
# that read a device value on the host (.item(), nonzero).
SYNC_CALL = re.compile(r"synchroniz|MemCopySync|(^|@)aclrtMemcpy$|(^|@)(cuda|hip)Memcpy$|"
                       r"^aten::(item|_local_scalar_dense|nonzero|tolist)$", re.I)


def union(spans: list[Interval]) -> list[Interval]:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(spans: list[Interval]) -> float:
    return sum(e - s for s, e in union(spans))


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    return _gaps_within(union(b), union(a))


def _gaps_within(busy: list[Interval], frame: list[Interval]) -> list[Interval]:
    """The parts of ``frame`` not covered by ``busy`` (both unions)."""
    out = []
    for fs, fe in frame:
        cursor = fs
        for s, e in busy:
            if e <= cursor or s >= fe:
                continue
            if s > cursor:
                out.append((cursor, s))
            cursor = max(cursor, e)
        if cursor < fe:
            out.append((cursor, fe))
    return out


@dataclass
class Kernel:
    name: str
    core: str
    start: float  # us
    dur: float  # us
    block_dim: int = 0
    op_state: str = ""


@dataclass
class Facts:
    """What one sample records, in microseconds on the sample's own clock."""
    vendor: str = "unknown"
    step_rows: list[dict[str, float]] = field(default_factory=list)  # per rank: computing, comm_no, free
    kernels: list[Kernel] = field(default_factory=list)  # Ascend device tasks with their core type
    comm_elapse: float = 0.0
    comm_wait: float = 0.0
    comm_transit: float = 0.0
    compile_calls: list[Interval] = field(default_factory=list)
    host_present: bool = False
    syncs: list[Interval] = field(default_factory=list)
    loaders: list[Interval] = field(default_factory=list)
    device: list[Interval] = field(default_factory=list)  # any device task
    # torch_npu's own "Overlap Analysis" (Computing and Communication intervals): where present, the device is
    # idle outside them, exactly as step_trace_time counts Free + Preparing (copies over PCIe count as free)
    profiler_busy: list[Interval] = field(default_factory=list)
    compute: list[Interval] = field(default_factory=list)
    comm: list[Interval] = field(default_factory=list)
    copies: list[Interval] = field(default_factory=list)
    steps: list[Interval] = field(default_factory=list)  # ProfilerStep#N on the host
    host_wait: float = 0.0  # Kineto: idle gaps whose next kernel was launched after the gap began

    @property
    def span(self) -> list[Interval]:
        if self.steps:
            return [(min(s for s, _ in self.steps), max(e for _, e in self.steps))]
        if self.device:
            return [(min(s for s, _ in self.device), max(e for _, e in self.device))]
        return []

    @property
    def idle(self) -> list[Interval]:
        return _gaps_within(union(self.profiler_busy or self.device), self.span)

    @property
    def total(self) -> float:
        return length(self.span)

    def step_share(self, column: str) -> float | None:
        if not self.step_rows:
            return None
        row = self.step_rows[0]
        total = row["computing"] + row["comm_no"] + row["free"]
        return row[column] / total if total else None


# ---------------------------------------------------------------------------------------------------- readers


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return [{k.strip(): (v or "").strip().strip('"').strip() for k, v in row.items() if k} for row in
                csv.DictReader(fh)]


def _num(text: str) -> float:
    try:
        return float(text.strip().strip("\t"))
    except ValueError:
        return 0.0


def _read_kernel_csv(path: Path, facts: Facts) -> None:
    for row in _csv_rows(path):
        core = row.get("Accelerator Core") or row.get("Task Type") or ""
        start = _num(row.get("Start Time(us)", "0"))
        dur = _num(row.get("Duration(us)") or row.get("Task Duration(us)") or "0")
        k = Kernel(row.get("Name") or row.get("Op Name") or "", core, start, dur,
                   int(_num(row.get("Block Dim", "0"))), row.get("OP State", "").lower())
        facts.kernels.append(k)
        facts.device.append((start, start + dur))
        comm = core in COMM_CORE_TYPES or k.name.lower().startswith("hcom")
        (facts.comm if comm else facts.compute).append(
            (start, start + dur))


def _read_step_csv(path: Path) -> dict[str, float]:
    rows = _csv_rows(path)
    return {"computing": sum(_num(r["Computing"]) for r in rows),
            "comm_no": sum(_num(r["Communication(Not Overlapped)"]) for r in rows),
            "free": sum(_num(r["Free"]) for r in rows)}


def _read_communication_json(path: Path, facts: Facts) -> None:
    doc = json.loads(path.read_text())
    for step in doc.values():
        for group in step.values():
            for info in group.values():
                t = info.get("Communication Time Info", {})
                facts.comm_elapse += 1e3 * float(t.get("Elapse Time(ms)", 0))
                facts.comm_wait += 1e3 * float(t.get("Wait Time(ms)", 0))
                transit = float(t.get("Transit Time(ms)", 0))
                if transit <= 0:  # some exports write 0 here and the links' transit in the bandwidth info
                    links = info.get("Communication Bandwidth Info", {}).values()
                    transit = min(max((float(x.get("Transit Time(ms)", 0)) for x in links
                                       if isinstance(x, dict)), default=0.0),
                                  float(t.get("Elapse Time(ms)", 0)))  # never longer than the collective
                facts.comm_transit += 1e3 * transit


def _trace_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return doc.get("traceEvents", []) if isinstance(doc, dict) else doc


def _outermost(spans: list[Interval]) -> list[Interval]:
    """Calls not nested in another of the same list (aclopCompileAndExecute wraps opCompile: one compile)."""
    out: list[Interval] = []
    for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
        if out and s >= out[-1][0] and e <= out[-1][1]:
            continue
        out.append((s, e))
    return out


def _framework_call(facts: Facts, name: str, span: Interval) -> None:
    """A framework-level host event: a sync (.item()), a profiler step, or the data loader."""
    if SYNC_CALL.search(name):
        facts.syncs.append(span)
    if name.startswith("ProfilerStep#"):
        facts.steps.append(span)
    if name.startswith("enumerate(DataLoader)"):
        facts.loaders.append(span)


def _read_ascend_trace_view(path: Path, facts: Facts) -> None:
    events = _trace_events(path)
    names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    compiles, has_table = [], bool(facts.kernels)  # the kernel table, where read, lists the AI_CPU tasks
    for e in events:
        if e.get("ph") != "X":
            continue
        proc, name = names.get(e["pid"], ""), e.get("name", "")
        s = float(e["ts"])
        span = (s, s + float(e.get("dur", 0)))
        if proc == "Overlap Analysis" and name in ("Computing", "Communication"):
            facts.profiler_busy.append(span)
        if proc in ("Ascend Hardware", "HCCL"):
            facts.device.append(span)
            if proc == "Ascend Hardware" and e.get("args", {}).get("Task Type") == "AI_CPU" and not has_table:
                facts.kernels.append(Kernel(name, "AI_CPU", span[0], span[1] - span[0]))
        elif proc == "CANN":
            facts.host_present = True
            if "compile" in name.lower():
                compiles.append(span)
            if SYNC_CALL.search(name):
                facts.syncs.append(span)
        elif proc == "Python":
            facts.host_present = True
            _framework_call(facts, name, span)
    facts.compile_calls = _outermost(compiles)


def _read_ascend_db(folder: Path, facts: Facts) -> None:
    prof = next(folder.glob("ascend_pytorch_profiler*.db"))
    db = sqlite3.connect(f"file:{prof}?mode=ro", uri=True)
    text = dict(db.execute("select id, value from STRING_IDS"))
    tasks = {gid: (s / 1e3, e / 1e3) for gid, s, e in db.execute("select globalTaskId, startNs, endNs from "
                                                                 "TASK")}
    facts.device = list(tasks.values())
    tables = {n for (n,) in db.execute("select name from sqlite_master where type = 'table'")}
    if "OVERLAP_ANALYSIS" in tables:  # types 0 computing, 1 communication, 2 not overlapped, 3 free
        facts.profiler_busy = [(s / 1e3, e / 1e3) for s, e in
                               db.execute("select startNs, endNs from OVERLAP_ANALYSIS where type in (0, 1)")]
    if "COMMUNICATION_OP" in tables:
        facts.comm = [(s / 1e3, e / 1e3) for s, e in db.execute("select startNs, endNs from "
                                                                "COMMUNICATION_OP")]
    for name, gid, block, task_type in db.execute(
            "select name, globalTaskId, blockDim, taskType from COMPUTE_TASK_INFO"):
        s, e = tasks[gid]
        facts.kernels.append(Kernel(text.get(name, ""), text.get(task_type, ""), s, e - s, int(block or 0)))
        facts.compute.append((s, e))
    apis = [(text.get(n, ""), s / 1e3, e / 1e3) for n, s, e in db.execute("select name, startNs, endNs from "
                                                                          "CANN_API")]
    facts.host_present = bool(apis)
    facts.compile_calls = _outermost([(s, e) for n, s, e in apis if "compile" in n.lower()])
    facts.syncs = [(s, e) for n, s, e in apis if SYNC_CALL.search(n)]
    for n, s, e in db.execute("select name, startNs, endNs from PYTORCH_API"):  # ns stored as text here
        label, span = text.get(n, ""), (int(s) / 1e3, int(e) / 1e3)
        if label.startswith("ProfilerStep#"):
            facts.steps.append(span)
        if label.startswith("enumerate(DataLoader)"):
            facts.loaders.append(span)
        if SYNC_CALL.search(label):
            facts.syncs.append(span)
    analysis = folder / "analysis.db"
    if analysis.exists():
        adb = sqlite3.connect(f"file:{analysis}?mode=ro", uri=True)
        row = adb.execute("select sum(computing), sum(communication_not_overlapped), sum(free) "
                          "from StepTraceTime").fetchone()
        facts.step_rows.append({"computing": row[0], "comm_no": row[1], "free": row[2]})
        tables = {n for (n,) in adb.execute("select name from sqlite_master where type = 'table'")}
        if "CommAnalyzerTime" in tables:  # level0 runs analyse no communication
            elapse, wait, transit = adb.execute("select sum(elapse_time), sum(wait_time), sum(transit_time) "
                                                "from CommAnalyzerTime").fetchone()
            facts.comm_elapse, facts.comm_wait = 1e3 * (elapse or 0), 1e3 * (wait or 0)
            facts.comm_transit = 1e3 * (transit or 0)


def _read_kineto(path: Path, facts: Facts) -> None:
    events = _trace_events(path)
    launches: dict[int, float] = {}
    kernels: list[tuple[float, float, int]] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), e.get("name", "")
        s = float(e["ts"])
        span = (s, s + float(e.get("dur", 0)))
        corr = e.get("args", {}).get("correlation")
        if cat == "kernel":
            facts.device.append(span)
            (facts.comm if "nccl" in name.lower() or "rccl" in name.lower() else facts.compute).append(span)
            if corr is not None:
                kernels.append((span[0], span[1], corr))
        elif cat in ("gpu_memcpy", "gpu_memset"):
            facts.device.append(span)
            facts.copies.append(span)
        elif cat in ("cuda_runtime", "cuda_driver", "hip_runtime"):
            facts.host_present = True
            if corr is not None:
                launches[corr] = span[0]
            if SYNC_CALL.search(name):
                facts.syncs.append(span)
        elif cat in ("cpu_op", "user_annotation", "python_function"):
            _framework_call(facts, name, span)
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    facts.vendor = "nvidia" if gpu else "cpu"
    if any("hip" in e.get("cat", "") for e in events[:20000]):
        facts.vendor = "amd"
    # HTA's idle rule: an idle gap is "host wait" when the kernel after it was launched after the gap began.
    busy = union(facts.device)
    frame = facts.span
    starts = sorted(kernels)
    for (_, e0), (s1, _) in zip(busy, busy[1:]):
        if not frame or e0 < frame[0][0] or s1 > frame[0][1]:
            continue
        nxt = next((k for k in starts if k[0] >= s1 - 1e-6), None)
        if nxt is not None and launches.get(nxt[2], -1e30) > e0:
            facts.host_wait += s1 - e0


def read_facts(sample: Path) -> Facts:
    """Facts of the first (primary) rank of a sample folder or file, with every rank's step row."""
    facts = Facts()
    if sample.is_file():
        _read_kineto(sample, facts)
        return facts
    facts.vendor = "ascend"
    data = ("kernel_details.csv", "op_summary_1.csv", "step_trace_time.csv", "trace_view.json")
    outputs = sorted({p.parent for p in sample.rglob("*") if p.name in data or p.suffix == ".db"}, key=str)
    first = outputs[0]
    for out in outputs:  # every rank's step row, the primary rank's first
        if (out / "step_trace_time.csv").exists():
            facts.step_rows.append(_read_step_csv(out / "step_trace_time.csv"))
    for name in ("kernel_details.csv", "op_summary_1.csv"):
        if (first / name).exists():
            _read_kernel_csv(first / name, facts)
    if (first / "communication.json").exists():
        _read_communication_json(first / "communication.json", facts)
    if (first / "trace_view.json").exists():
        _read_ascend_trace_view(first / "trace_view.json", facts)
    if list(first.glob("ascend_pytorch_profiler*.db")):
        _read_ascend_db(first, facts)
    return facts


# ----------------------------------------------------------------------------------------------------
# verdicts


def _share(part: float, facts: Facts) -> float:
    return part / facts.total if facts.total else 0.0


def expected_rules(facts: Facts) -> dict[str, str]:
    """rule -> the evidence that predicts it, for every rule this reading can predict."""
    out: dict[str, str] = {}
    device_idle = facts.idle
    ascend = facts.vendor == "ascend"

    comm_share = facts.step_share("comm_no")
    if comm_share is None:
        comm_share = _share(length(subtract(facts.comm, facts.compute)), facts)
    if comm_share >= 0.10:
        out["communication_not_overlapped"] = f"communication not overlapped {comm_share:.1%} of the step"

    if facts.comm_elapse and facts.comm_wait / facts.comm_elapse >= 0.20 \
            and _share(facts.comm_elapse, facts) >= 0.02:
        out["communication_wait"] = f"Wait Time {facts.comm_wait / facts.comm_elapse:.1%} of Elapse Time"

    if len(facts.step_rows) > 1:
        # msprof-analyze's advisor (SlowRankAnalyzer.produce_bottleneck): a column's spread over the ranks,
        # max - min, above 5% of the ranks' mean step time (Computing + Communication + Free)
        step = sum(r["computing"] + r["comm_no"] + r["free"] for r in facts.step_rows) / len(facts.step_rows)
        for column in ("computing", "comm_no", "free"):
            values = [r[column] for r in facts.step_rows]
            if step and (max(values) - min(values)) / step > 0.05:
                out["slow_rank"] = f"{column}: spread {(max(values) - min(values)) / step:.1%} of the step"

    states = [k.op_state for k in facts.kernels if k.op_state not in ("", "n/a")]
    if ascend and ((states and all(s == "dynamic" for s in states)) or len(facts.compile_calls) >= 20):
        out["dynamic_shape"] = (f"OP State all dynamic ({len(states)} ops), "
                                f"{len(facts.compile_calls)} compiles")

    aicpu = [k for k in facts.kernels if k.core == "AI_CPU" and k.dur > 20]
    if aicpu:
        out["aicpu_operators"] = f"{len(aicpu)} AI_CPU tasks over 20 us"

    def occupancy(k: Kernel) -> float:
        cores = VECTOR_CORES if k.core in VECTOR_CORE_TYPES else AI_CORES
        waves = -(-k.block_dim // cores)
        return k.block_dim / (waves * cores)

    short = [k for k in facts.kernels if k.core in CUBE_CORE_TYPES | VECTOR_CORE_TYPES and k.block_dim > 0
             and k.dur > 20 and occupancy(k) < 0.8]
    if short and _share(sum(k.dur for k in short), facts) >= 0.02:
        out["block_dim"] = f"{len(short)} kernels over 20 us fill under 80% of the cores"

    n_kernels = len(facts.device) if ascend else len(facts.compute) + len(facts.comm)
    if ascend:
        free = facts.step_share("free")
        if free is None:
            free = _share(length(device_idle), facts)
        if facts.host_present and n_kernels >= 50 and free > 0.10:
            out["host_bound_gaps"] = f"free {free:.1%} of the step with host calls recorded"
    elif facts.vendor == "nvidia" and n_kernels >= 50 and _share(facts.host_wait, facts) > 0.10:
        out["host_bound_gaps"] = f"HTA host wait {_share(facts.host_wait, facts):.1%} of the step"

    stalled = _share(length(intersect(facts.syncs, device_idle)), facts)
    if stalled >= 0.05:
        out["sync_stall"] = f"device idle inside host syncs {stalled:.1%}"
    loading = _share(length(intersect(facts.loaders, device_idle)), facts)
    if loading >= 0.05:
        out["data_loading"] = f"device idle inside the data loader {loading:.1%}"
    copying = _share(length(subtract(facts.copies, facts.compute + facts.comm)), facts)
    if copying >= 0.10:
        out["memcpy_bound"] = f"copies alone {copying:.1%} of the step"
    return out


# Rules whose verdict this reading does not predict (they fire on none of the samples; the test still requires
# that they stay silent): the seed's LLM decode patterns and the PMU-counter rules.
UNPREDICTED = re.compile(r"^(matmul_tiling|attention_memory_bound|kv_cache_layout|norm_launch_overhead"
                         r"|unfused_.*|format_churn|aicore_frequency)$")
