"""PyTorch Kineto chrome traces (``*.pt.trace.json[.gz]``): CPU-only, CUDA, ROCm, Triton, the 2021 schema,
and torch_npu's PrivateUse1 (MSPTI) export (FORMATS.md §2.8, §3).

Tables come from the event category, the way HTA reads these traces (FORMATS.md §3.5):

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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats.chrome_trace import to_float64, to_int64
from pypto_core.formats.eventscan import Pieces, scan_file
from pypto_core.profile import Profile, ProfileMeta, conform, empty_table

KINETO_ARG_KEYS: tuple[str, ...] = (
    "External id",
    "correlation",
    "stream",
    "device",
    "Input Dims",
    "Input dims",  # 2021 schema
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
    "host": _BASE + ["arg:External id", "arg:Input Dims", "arg:Input dims", "arg:Sequence number"],
    "api": _BASE + ["arg:correlation"],
    "kernel": _BASE + ["arg:type", "arg:stream", "arg:device", "arg:correlation", "arg:External id", "arg:bytes",
                       "arg:Collective name", "arg:Process Group Name", "arg:Process Group Description",
                       "arg:In msg nelems", "arg:dtype"],
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
_DTYPE_BYTES = {"Float": 4, "float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1, "Char": 1}
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
    p = Path(path)
    pieces = Pieces(_PIECE_COLUMNS, KINETO_ARG_KEYS)
    counts = {"events": 0}

    def on_batch(batch: pa.RecordBatch) -> None:
        # classify each batch as it is scanned and keep only what the tables need (bounded memory)
        counts["events"] += batch.num_rows
        ph = batch.column("ph")
        cat = pc.utf8_lower(pc.fill_null(batch.column("cat"), ""))
        is_x = pc.fill_null(pc.equal(ph, "X"), False)
        pieces.add("host", batch, pc.and_(is_x, pc.is_in(cat, pa.array(HOST_CATS_KEPT))))
        pieces.add("api", batch, pc.and_(is_x, pc.is_in(cat, pa.array(API_CATS))))
        pieces.add("kernel", batch, pc.and_(is_x, pc.is_in(cat, pa.array(KERNEL_CATS))))
        pieces.add("counter", batch, pc.fill_null(pc.equal(ph, "C"), False))
        pieces.add("meta", batch, pc.fill_null(pc.equal(ph, "M"), False))

    scanned = scan_file(p, KINETO_ARG_KEYS, on_batch=on_batch)
    if not scanned.wrapped:
        raise InputError(str(p), "a bare JSON array, not a Kineto trace (no traceEvents object); "
                         "is it an Ascend trace_view.json?")
    header = scanned.header
    warnings: list[str] = []
    host, api, kern = pieces.table("host"), pieces.table("api"), pieces.table("kernel")
    counter_rows, meta_rows = pieces.table("counter"), pieces.table("meta")

    # ts relative to baseTimeNanoseconds (which newer traces write after traceEvents): add it at the end
    base = header.get("baseTimeNanoseconds")
    if isinstance(base, int):
        lows = [pc.min(t["ts_ns"]).as_py() for t in (host, api, kern, counter_rows) if t.num_rows]
        lows = [v for v in lows if v is not None]
        if lows and min(lows) < _RELATIVE_BEFORE_NS:
            shift = pa.scalar(base, pa.int64())
            host, api, kern, counter_rows = (
                t.set_column(t.column_names.index("ts_ns"), "ts_ns", pc.add(t["ts_ns"], shift))
                for t in (host, api, kern, counter_rows)
            )

    host_ops = pa.table(
        {
            "name": host["name"],
            "pid": to_int64(host["pid"]),
            "tid": to_int64(host["tid"]),
            "start_ns": host["ts_ns"],
            "dur_ns": host["dur_ns"],
            "correlation_id": to_int64(host["arg:External id"]),
            "input_shapes": pc.coalesce(host["arg:Input Dims"], host["arg:Input dims"]),
            "cat": host["cat"],
            "sequence_number": to_int64(host["arg:Sequence number"]),
        }
    )

    del host  # intermediates go as soon as their table is built: peak memory is the sum of what is alive
    api_calls = pa.table(
        {
            "name": api["name"],
            "level": api["cat"],
            "pid": to_int64(api["pid"]),
            "tid": to_int64(api["tid"]),
            "start_ns": api["ts_ns"],
            "dur_ns": api["dur_ns"],
            "correlation_id": to_int64(api["arg:correlation"]),
        }
    )

    kcat = pc.utf8_lower(kern["cat"])
    npu_type = kern["arg:type"]
    core_type = pc.if_else(
        pc.is_valid(npu_type),
        _lookup(npu_type, list(_NPU_KERNEL_TYPES), list(_NPU_KERNEL_TYPES.values()), default_to_key=True),
        pc.if_else(pc.match_substring(kcat, "memcpy"), "MEMCPY",
                   pc.if_else(pc.match_substring(kcat, "memset"), "MEMSET",
                              pc.if_else(pc.match_substring_regex(kern["name"], COMM_KERNEL), "COMMUNICATION", "GPU"))),
    )
    kernels = pa.table(
        {
            "name": kern["name"],
            "core_type": core_type,
            "stream_id": pc.coalesce(to_int64(kern["arg:stream"]), to_int64(kern["tid"])),
            "device_id": pc.coalesce(to_int64(kern["arg:device"]), to_int64(kern["pid"])),
            "start_ns": kern["ts_ns"],
            "dur_ns": kern["dur_ns"],
            "correlation_id": to_int64(kern["arg:correlation"]),
            "external_id": to_int64(kern["arg:External id"]),
            "bytes": to_int64(kern["arg:bytes"]),
        }
    )

    del api
    communication = _communication(kern)
    del kern
    host_ops = conform("host_ops", host_ops)
    kernels = conform("kernels", kernels)
    api_calls = conform("api_calls", api_calls)
    flows = _flows(kernels, host_ops, api_calls)
    steps = _steps(host_ops)

    lanes = _lanes(meta_rows)
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
        meta.extra["distributed"] = {k: dist.get(k) for k in ("backend", "world_size", "pg_count", "nccl_version") if k in dist}
    if meta.rank is None and isinstance(dist, dict):
        warnings.append("distributedInfo has no rank; rank left unknown")
    for key in ("schemaVersion", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "trace_id", "baseTimeNanoseconds"):
        if key in header:
            meta.extra[key] = header[key]
    meta.extra["lanes"] = lanes
    meta.extra["events"] = counts["events"]
    meta.extra["input_bytes"] = scanned.input_bytes
    return Profile(
        meta=meta,
        kernels=kernels,
        host_ops=host_ops,
        api_calls=api_calls,
        flows=flows,
        steps=steps,
        communication=communication,
        counters=_counters(counter_rows),
    )


def _lookup(keys: pa.ChunkedArray, domain: list[str], values: list[str], default_to_key: bool = False) -> pa.ChunkedArray:
    idx = pc.index_in(keys, value_set=pa.array(domain, pa.string()))
    mapped = pc.take(pa.array(values, pa.string()), idx)
    return pc.coalesce(mapped, keys) if default_to_key else mapped


def _first_index(keys: pa.ChunkedArray | pa.Array, domain: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Row in ``domain`` of each key (first occurrence), null where absent or null."""
    domain = domain.combine_chunks() if isinstance(domain, pa.ChunkedArray) else domain
    return pc.index_in(keys, value_set=domain).cast(pa.int64())


def _flows(kernels: pa.Table, host_ops: pa.Table, api_calls: pa.Table) -> pa.Table:
    if kernels.num_rows == 0:
        return empty_table("flows").append_column("api_index", pa.array([], pa.int64()))
    api_index = _first_index(kernels["correlation_id"], api_calls["correlation_id"])
    ops = host_ops.filter(pc.equal(host_ops["cat"], "cpu_op")) if host_ops.num_rows else host_ops
    op_rows = pc.indices_nonzero(pc.fill_null(pc.equal(host_ops["cat"], "cpu_op"), False)) if host_ops.num_rows else pa.array([], pa.uint64())
    local = _first_index(kernels["external_id"], ops["correlation_id"]) if ops.num_rows else pa.nulls(kernels.num_rows, pa.int64())
    host_index = pc.take(op_rows.cast(pa.int64()), local) if ops.num_rows else local
    t = pa.table(
        {
            "host_index": host_index,
            "kernel_index": pa.array(np.arange(kernels.num_rows, dtype=np.int64)),
            "kind": pa.array(["ac2g"] * kernels.num_rows, pa.string()),
            "api_index": api_index,
        }
    )
    t = t.filter(pc.or_(pc.is_valid(t["host_index"]), pc.is_valid(t["api_index"])))
    return conform("flows", t)


def _communication(kern: pa.Table) -> pa.Table:
    nccl = kern.filter(pc.fill_null(pc.match_substring_regex(kern["name"], COMM_KERNEL), False))
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
    bw = pc.if_else(pc.greater(t["elapse_ns"], 0), pc.divide(pc.divide(pc.cast(size, pa.float64()), 1e9), dur_s), None)
    return conform("communication", t.append_column("bandwidth_gbps", bw))


def _steps(host_ops: pa.Table) -> pa.Table:
    steps = host_ops.filter(pc.starts_with(host_ops["name"], "ProfilerStep#"))
    if steps.num_rows == 0:
        return empty_table("steps")
    t = pa.table(
        {
            "step_id": to_int64(pc.utf8_slice_codeunits(steps["name"], len("ProfilerStep#"))),
            "start_ns": steps["start_ns"],
            "end_ns": pc.add(steps["start_ns"], pc.fill_null(steps["dur_ns"], 0)),
        }
    )
    return conform("steps", t.sort_by("start_ns"))


def _counters(c: pa.Table) -> pa.Table:
    if c.num_rows == 0:
        return empty_table("counters")
    return conform("counters", pa.table({"track": c["name"], "ts_ns": c["ts_ns"], "value": to_float64(c["arg0_val"]),
                                         "unit": c["arg0_key"]}))


def _lanes(meta: pa.Table) -> list[dict[str, Any]]:
    meta = meta.filter(pc.is_in(meta["name"], pa.array(["process_name", "thread_name", "process_labels"])))
    out: list[dict[str, Any]] = []
    for name, pid, tid, value, label in zip(*(meta[c].to_pylist() for c in ("name", "pid", "tid", "arg:name", "arg:labels"))):
        out.append({"kind": name, "pid": pid, "tid": tid, "value": value if name != "process_labels" else label})
    return out
