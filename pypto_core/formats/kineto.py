"""PyTorch Kineto chrome traces (``*.pt.trace.json[.gz]``): CPU-only, CUDA, ROCm, Triton, the 2021 schema,
and torch_npu's PrivateUse1 (MSPTI) export (docs/formats.md §2.8, §3).

Tables come from the event category, the way HTA reads these traces (docs/formats.md §3.5):

=============================================  ===============================================
cat                                            becomes
=============================================  ===============================================
cpu_op, user_annotation (Operator in 2021)     host_ops; ProfilerStep#N -> steps
cuda_runtime, cuda_driver, privateuse1_runtime api_calls (level = cat)
(Runtime in 2021)
kernel, gpu_memcpy, gpu_memset                 kernels (stream = args.stream or tid, device = args.device
(Kernel, Memcpy, Memset in 2021)               or pid, correlation = args.correlation)
nccl* kernels                                  also communication
=============================================  ===============================================

Links: kernel -> launching runtime call by ``correlation`` (the ac2g flow id), kernel -> host op by
``External id``; each linked kernel gives one ``flows`` row of kind ``ac2g``.
Times: ``ts`` µs kept exact to the ns; when the trace carries ``baseTimeNanoseconds`` and its ts are
relative (before 2001 as epoch), the base is added so that every time is ns since the Unix epoch.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats import launch_shapes
from pypto_core.formats.chrome_trace import host_op_rows, steps_from_host, to_float64, to_int64
from pypto_core.formats.eventscan import scan_file
from pypto_core.formats.flow_binding import LINK, SpillDir, link_first_rows
from pypto_core.formats.table_sink import TableSink
from pypto_core.i18n import Text, msg
from pypto_core.profile import Profile, ProfileMeta, conform, empty_table, save_tables

KINETO_ARG_KEYS: tuple[str, ...] = (
    "External id",
    "correlation",
    "stream",
    "device",
    "Input Dims",
    "Input dims",  # 2021 schema
    "Input type",
    "Sequence number",
    "type",  # torch_npu MSPTI kernels: KERNEL_AICORE, ...
    "bytes",
    "Collective name",
    "Process Group Name",
    "Process Group Description",
    "In msg nelems",
    "dtype",
    "name",  # M events
    "labels",
)

HOST_CATS_KEPT = ["cpu_op", "user_annotation", "operator"]  # python_function: stack frames, not operators
API_CATS = ["cuda_runtime", "cuda_driver", "privateuse1_runtime", "runtime", "privateuse1_driver"]
KERNEL_CATS = ["kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"]
_BASE = ["name", "cat", "pid", "tid", "ts_ns", "dur_ns"]
_PIECE_COLUMNS = {
    "host": _BASE + ["arg:External id", "arg:Input Dims", "arg:Input dims", "arg:Input type",
                     "arg:Sequence number"],
    "api": _BASE + ["arg:correlation"],
    "kernel": _BASE + ["arg:type", "arg:stream", "arg:device", "arg:correlation", "arg:External id",
                       "arg:bytes", "arg:Collective name", "arg:Process Group Name",
                       "arg:Process Group Description", "arg:In msg nelems", "arg:dtype"],
    "counter": ["name", "ts_ns", "arg0_key", "arg0_val"],
    "meta": ["name", "pid", "tid", "arg:name", "arg:labels"],
}
# HTA's communication-kernel pattern (hta/common/types.py), plus hccl for Ascend names
COMM_KERNEL = r"(?i)(^nccl)|(ncclKernel)|(ncclDevKernel)|(^hccl)"

_NPU_KERNEL_TYPES = {  # torch_npu MSPTI args.type -> canonical core_type
    "KERNEL_AICORE": "AI_CORE",
    "KERNEL_AIVEC": "AI_VECTOR_CORE",
    "KERNEL_MIX_AIC": "MIX_AIC",
    "KERNEL_MIX_AIV": "MIX_AIV",
    "KERNEL_AICPU": "AI_CPU",
}
_DTYPE_BYTES = {"Float": 4, "float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1,
                "Char": 1}
_RELATIVE_BEFORE_NS = 10**18  # an absolute ts before 2001-09-09 means "relative to baseTimeNanoseconds"


def device_name(props: list[dict[str, Any]] | None) -> str | None:
    """The SKU from Kineto ``deviceProperties`` (A100, H100, H200, V100, MI250, ...), else the raw name."""
    if not props:
        return None
    p = props[0] if isinstance(props[0], dict) else {}
    name = str(p.get("name") or "")
    for sku in ("H200", "H100", "A100", "V100", "A10G", "L40S", "L4", "MI300X", "MI250X", "MI250", "MI210"):
        if re.search(rf"\b{sku}\b", name, re.IGNORECASE) or sku in name:
            return sku
    if "AMD" in name.upper() and p.get("computeMajor") == 9 and p.get("computeMinor") == 0:
        # gfx90a reports itself as "AMD Radeon Graphics"; the CU count tells the MI200 part (per GCD)
        return {104: "MI250", 110: "MI250X", 52: "MI210"}.get(int(p.get("numSms") or 0), name)
    return name or None


def read_kineto(path: str | os.PathLike[str]) -> Profile:
    """Read a Kineto trace (``.json`` or ``.json.gz``) into a canonical ``Profile``.

    Raises ``InputError`` naming the file when it is empty, not JSON, truncated, or has no ``traceEvents``.
    """
    meta, tables = _convert(Path(path), None)
    return Profile(meta=meta, **tables)


def write_kineto(path: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                 rank_hint: int | None = None) -> ProfileMeta:
    """Read a Kineto trace straight into a saved profile folder (as ``Profile.save`` writes it).

    The big tables (host ops, API calls, kernels, counters, communication) are streamed into their Parquet
    files batch by batch; the ids the flows link by (9 bytes a row) are spilled to a temporary folder inside
    ``folder`` and paired in partitions of bounded size at the end (``flow_binding``), so that peak memory
    does not grow with the file. ``Profile.load(folder)`` then gives the profile
    that :func:`read_kineto` gives. A failed read leaves no folder behind. ``rank_hint``: the rank when
    the trace does not state it (from the file's name, as ``open_profile`` does).
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    try:
        meta, tables = _convert(Path(path), out)
        if meta.rank is None and rank_hint is not None:
            meta.rank = rank_hint
        save_tables(out, meta, tables)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return meta


_STREAMED = ("host_ops", "api_calls", "kernels", "counters", "communication")


class _Links:
    """The ids the flows are built from (``LINK`` records, 9 bytes a row), spilled while the tables
    themselves stream away."""

    def __init__(self, spills: SpillDir) -> None:
        self._spills = spills
        self.kernel_correlation = spills.spill(LINK)
        self.kernel_external = spills.spill(LINK)
        self.host_correlation = spills.spill(LINK)  # cpu_op rows only: other host ops link to nothing
        self.api_correlation = spills.spill(LINK)

    @staticmethod
    def of(ids: pa.ChunkedArray | pa.Array, ok: pa.ChunkedArray | pa.Array | None = None) -> np.ndarray:
        rec = np.empty(len(ids), LINK)
        rec["key"] = pc.fill_null(ids, 0).to_numpy()
        valid = pc.is_valid(ids) if ok is None else pc.and_(pc.is_valid(ids), pc.fill_null(ok, False))
        rec["ok"] = valid.to_numpy(zero_copy_only=False)
        return rec

    def flows(self, folder: Path | None) -> pa.Table | None:
        """One ``ac2g`` row per kernel linked to its launching runtime call (``correlation``) and/or its
        host op (``External id`` of a ``cpu_op``), first match in file order, as HTA links them; a kernel
        without the id links to nothing. None once written into ``folder``."""
        sink = TableSink("flows", folder)
        sink.add(empty_table("flows").append_column("api_index", pa.array([], pa.int64())))
        n = len(self.kernel_correlation)
        ranges = self._spills.buckets(n)
        width = max(1, -(-n // ranges))
        api = link_first_rows(self.kernel_correlation, self.api_correlation, self._spills, width, ranges)
        host = link_first_rows(self.kernel_external, self.host_correlation, self._spills, width, ranges)
        for r in range(ranges if n else 0):
            lo = r * width
            api_index, host_index = (np.full(min(width, n - lo), -1, np.int64) for _ in range(2))
            for index, matches in ((api_index, api[r]), (host_index, host[r])):
                m = matches.read(remove=True)
                index[m["row"] - lo] = m["match"]
            keep = np.flatnonzero((api_index >= 0) | (host_index >= 0))
            kind = pa.DictionaryArray.from_arrays(np.zeros(len(keep), np.int32), ["ac2g"])
            sink.add(conform("flows", pa.table({
                "host_index": pa.array(host_index[keep], pa.int64(), mask=host_index[keep] < 0),
                "kernel_index": pa.array((lo + keep).astype(np.int64)),
                "kind": kind.cast(pa.string()),
                "api_index": pa.array(api_index[keep], pa.int64(), mask=api_index[keep] < 0),
            })))
        return sink.finish()


def _convert(p: Path, folder: Path | None) -> tuple[ProfileMeta, dict[str, pa.Table]]:
    """The profile's metadata and the tables not streamed into ``folder`` (all of them without one)."""
    sinks = {name: TableSink(name, folder) for name in _STREAMED}
    spills = SpillDir(folder)
    links = _Links(spills)
    small: dict[str, list[pa.Table]] = {"steps": [], "meta": []}
    state: dict[str, Any] = {"events": 0, "min_ts": None}

    def lowest(ts: pa.Array) -> None:
        low = pc.min(ts).as_py()
        if low is not None and (state["min_ts"] is None or low < state["min_ts"]):
            state["min_ts"] = low

    def on_batch(batch: pa.RecordBatch) -> None:
        # classify each batch as it is scanned and turn it into canonical rows at once (bounded memory)
        state["events"] += batch.num_rows
        ph = batch.column("ph")
        cat = pc.utf8_lower(pc.fill_null(batch.column("cat"), ""))
        is_x = pc.fill_null(pc.equal(ph, "X"), False)

        def part(kind: str, mask: Any) -> pa.Table | None:
            rows = pa.Table.from_batches([batch.select(_PIECE_COLUMNS[kind]).filter(mask)])
            return rows if rows.num_rows else None

        if (host := part("host", pc.and_(is_x, pc.is_in(cat, pa.array(HOST_CATS_KEPT))))) is not None:
            ops = _host_ops(host)
            sinks["host_ops"].add(ops)
            links.host_correlation.add(links.of(ops["correlation_id"], pc.equal(ops["cat"], "cpu_op")))
            lowest(ops["start_ns"])
            small["steps"].append(_step_rows(ops))
        if (api := part("api", pc.and_(is_x, pc.is_in(cat, pa.array(API_CATS))))) is not None:
            calls = _api_calls(api)
            sinks["api_calls"].add(calls)
            links.api_correlation.add(links.of(calls["correlation_id"]))
            lowest(calls["start_ns"])
        if (kern := part("kernel", pc.and_(is_x, pc.is_in(cat, pa.array(KERNEL_CATS))))) is not None:
            is_comm = _is_communication(kern["name"])
            kernels = _kernels(kern, is_comm)
            sinks["kernels"].add(kernels)
            links.kernel_correlation.add(links.of(kernels["correlation_id"]))
            links.kernel_external.add(links.of(kernels["external_id"]))
            lowest(kernels["start_ns"])
            sinks["communication"].add(_communication(kern.filter(is_comm)))
        if (counter := part("counter", pc.fill_null(pc.equal(ph, "C"), False))) is not None:
            sinks["counters"].add(_counters(counter))
            lowest(counter["ts_ns"])
        if (meta_rows := part("meta", pc.fill_null(pc.equal(ph, "M"), False))) is not None:
            small["meta"].append(meta_rows)

    try:
        scanned = scan_file(p, KINETO_ARG_KEYS, on_batch=on_batch)
        if not scanned.wrapped:
            raise InputError(str(p), msg("a bare JSON array, not a Kineto trace (no traceEvents object); is "
                                         "it an Ascend trace_view.json?"))
        header = scanned.header
        # ts relative to baseTimeNanoseconds (which newer traces write after traceEvents): added at the end
        base = header.get("baseTimeNanoseconds")
        relative = state["min_ts"] is not None and state["min_ts"] < _RELATIVE_BEFORE_NS
        shift = base if isinstance(base, int) and relative else 0
        shifted = _shifted(shift) if shift else None
        tables = {name: sinks[name].finish(shifted) for name in _STREAMED if name != "kernels"}
        tables["flows"] = links.flows(folder)
        # the kernels' shapes are their launching ops' (they carry none): given in the same pass as the shift
        host_ops = tables["host_ops"]
        if host_ops is not None:  # in memory
            flows = tables["flows"]
            launched = {c: host_ops[c] for c in ("input_shapes", "input_types") if c in host_ops.column_names}
        else:  # written into the folder
            assert folder is not None
            flows, launched = launch_shapes.saved_links(folder)
        del host_ops
        fill = launch_shapes.filler(sinks["kernels"].rows, flows, launched)
        del flows, launched
        tables["kernels"] = sinks["kernels"].finish(_chain(shifted, fill))
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise
    finally:
        spills.remove()
    tables = {name: t for name, t in tables.items() if t is not None}
    tables["steps"] = _shifted(shift)(steps_from_host(_concat(small["steps"])))

    warnings: list[Text] = []
    meta = ProfileMeta(
        format="kineto",
        source=str(p),
        device=device_name(header.get("deviceProperties")),
        source_files=[p.name],
        warnings=warnings,
    )
    dist = header.get("distributedInfo")
    if isinstance(dist, dict):
        rank = dist.get("rank")
        meta.rank = rank if isinstance(rank, int) else None
        meta.extra["distributed"] = {k: dist.get(k) for k in ("backend", "world_size", "pg_count",
                                                              "nccl_version") if k in dist}
    if meta.rank is None and isinstance(dist, dict):
        warnings.append(msg("distributedInfo has no rank; rank left unknown"))
    for key in ("schemaVersion", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "trace_id",
                "baseTimeNanoseconds"):
        if key in header:
            meta.extra[key] = header[key]
    meta.extra["lanes"] = _lanes(_concat(small["meta"]) if small["meta"] else
                                 pa.table({c: pa.array([], pa.string()) for c in _PIECE_COLUMNS["meta"]}))
    meta.extra["events"] = state["events"]
    meta.extra["input_bytes"] = scanned.input_bytes
    return meta, tables


def _chain(*transforms: Callable[[pa.Table], pa.Table] | None) -> Callable[[pa.Table], pa.Table] | None:
    steps = [t for t in transforms if t is not None]
    if not steps:
        return None

    def apply(table: pa.Table) -> pa.Table:
        for step in steps:
            table = step(table)
        return table

    return apply


def _concat(parts: list[pa.Table], name: str | None = None) -> pa.Table:
    parts = [t for t in parts if t.num_rows]
    if parts:
        return pa.concat_tables(parts)
    return empty_table(name) if name else pa.table({})


def _shifted(shift: int) -> Callable[[pa.Table], pa.Table]:
    """Adds ``shift`` ns to a table's time columns (start_ns / ts_ns / end_ns)."""

    def apply(t: pa.Table) -> pa.Table:
        if not shift:
            return t
        for col in ("start_ns", "ts_ns", "end_ns"):
            if col in t.column_names:
                t = t.set_column(t.column_names.index(col), col, pc.add(t[col], pa.scalar(shift, pa.int64())))
        return t

    return apply


def _host_ops(host: pa.Table) -> pa.Table:
    rows = host_op_rows(host, host["arg:External id"],
                        pc.coalesce(host["arg:Input Dims"], host["arg:Input dims"]))
    # the inputs' dtypes as the profiler wrote them (JSON text), for the kernels the op launches
    return rows.append_column("input_types", host["arg:Input type"])


def _api_calls(api: pa.Table) -> pa.Table:
    return conform("api_calls", pa.table({
        "name": api["name"],
        "level": api["cat"],
        "pid": to_int64(api["pid"]),
        "tid": to_int64(api["tid"]),
        "start_ns": api["ts_ns"],
        "dur_ns": api["dur_ns"],
        "correlation_id": to_int64(api["arg:correlation"]),
    }))


def _is_communication(names: pa.ChunkedArray) -> pa.Array:
    """Per kernel, whether its name is a collective's (HTA's pattern), matched once per distinct name."""
    distinct = pc.dictionary_encode(names.combine_chunks())
    matches = pc.fill_null(pc.match_substring_regex(distinct.dictionary, COMM_KERNEL), False)
    return pc.fill_null(pc.take(matches, distinct.indices), False)


def _kernels(kern: pa.Table, is_comm: pa.Array) -> pa.Table:
    kcat = pc.utf8_lower(kern["cat"])
    npu_type = kern["arg:type"]
    core_type = pc.if_else(
        pc.is_valid(npu_type),
        _lookup(npu_type, list(_NPU_KERNEL_TYPES), list(_NPU_KERNEL_TYPES.values()), default_to_key=True),
        pc.if_else(pc.match_substring(kcat, "memcpy"), "MEMCPY",
                   pc.if_else(pc.match_substring(kcat, "memset"), "MEMSET",
                              pc.if_else(is_comm, "COMMUNICATION", "GPU"))),
    )
    return conform("kernels", pa.table({
        "name": kern["name"],
        "core_type": core_type,
        "stream_id": pc.coalesce(to_int64(kern["arg:stream"]), to_int64(kern["tid"])),
        "device_id": pc.coalesce(to_int64(kern["arg:device"]), to_int64(kern["pid"])),
        "start_ns": kern["ts_ns"],
        "dur_ns": kern["dur_ns"],
        "correlation_id": to_int64(kern["arg:correlation"]),
        "external_id": to_int64(kern["arg:External id"]),
        "bytes": to_int64(kern["arg:bytes"]),
    }))


def _step_rows(host_ops: pa.Table) -> pa.Table:
    return host_ops.select(["name", "start_ns", "dur_ns"]).filter(
        pc.fill_null(pc.starts_with(host_ops["name"], "ProfilerStep#"), False))


def _lookup(keys: pa.ChunkedArray, domain: list[str], values: list[str],
            default_to_key: bool = False) -> pa.ChunkedArray:
    idx = pc.index_in(keys, value_set=pa.array(domain, pa.string()))
    mapped = pc.take(pa.array(values, pa.string()), idx)
    return pc.coalesce(mapped, keys) if default_to_key else mapped


def _communication(nccl: pa.Table) -> pa.Table:
    """Collective kernels (raw rows, see :func:`_is_communication`) -> the communication table."""
    if nccl.num_rows == 0:
        return empty_table("communication")
    nelems = to_int64(nccl["arg:In msg nelems"])
    width = _lookup(nccl["arg:dtype"], list(_DTYPE_BYTES), [str(v) for v in _DTYPE_BYTES.values()])
    size = pc.multiply(nelems, to_int64(width))
    t = pa.table(
        {
            "name": pc.coalesce(nccl["arg:Collective name"], nccl["name"]),
            "group": pc.coalesce(nccl["arg:Process Group Description"], nccl["arg:Process Group Name"]),
            "start_ns": nccl["ts_ns"],
            "elapse_ns": nccl["dur_ns"],
            "size_bytes": size,
            "kernel_name": nccl["name"],
        }
    )
    dur_s = pc.divide(pc.cast(t["elapse_ns"], pa.float64()), 1e9)
    bw = pc.if_else(pc.greater(t["elapse_ns"], 0),
                    pc.divide(pc.divide(pc.cast(size, pa.float64()), 1e9), dur_s), None)
    return conform("communication", t.append_column("bandwidth_gbps", bw))


def _counters(c: pa.Table) -> pa.Table:
    if c.num_rows == 0:
        return empty_table("counters")
    return conform("counters", pa.table({"track": c["name"], "ts_ns": c["ts_ns"],
                                         "value": to_float64(c["arg0_val"]), "unit": c["arg0_key"]}))


def _lanes(meta: pa.Table) -> list[dict[str, Any]]:
    meta = meta.filter(pc.is_in(meta["name"], pa.array(["process_name", "thread_name", "process_labels"])))
    out: list[dict[str, Any]] = []
    columns = ("name", "pid", "tid", "arg:name", "arg:labels")
    for name, pid, tid, value, label in zip(*(meta[c].to_pylist() for c in columns)):
        out.append({"kind": name, "pid": pid, "tid": tid,
                    "value": value if name != "process_labels" else label})
    return out
