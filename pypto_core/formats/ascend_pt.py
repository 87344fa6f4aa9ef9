"""torch_npu ``*_ascend_pt`` folders (text export) → ``Profile``.

Layout (FORMATS.md §2.1): ``profiler_info[_N].json``, ``profiler_metadata.json`` and
``ASCEND_PROFILER_OUTPUT/`` with kernel_details.csv, trace_view.json, step_trace_time.csv, memory CSVs,
op/api statistics, communication(_matrix).json. Every file is optional on its own (profiler levels and
versions write different subsets); each one that cannot be read becomes a warning naming it and the reason,
and only a folder with nothing usable is an error. The db export of the same folder is ``ascend_db``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats import summary_csv
from pypto_core.formats.communication_json import read_communication
from pypto_core.formats.csvtable import ConversionNotes
from pypto_core.formats.jsonfile import load_json
from pypto_core.formats.kernel_csv import kernel_device_ids, read_kernels
from pypto_core.formats.timeline_merge import attach_trace
from pypto_core.profile import Profile, ProfileMeta, conform

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")

# torch_npu's _aic_metrics constants → the counter group names users know (FORMATS.md §2.2).
AIC_METRICS_NAMES = {
    "ACL_AICORE_NONE": "AiCoreNone",
    "ACL_AICORE_PIPE_UTILIZATION": "PipeUtilization",
    "ACL_AICORE_ARITHMETIC_UTILIZATION": "ArithmeticUtilization",
    "ACL_AICORE_MEMORY_BANDWIDTH": "Memory",
    "ACL_AICORE_L0B_AND_WIDTH": "MemoryL0",
    "ACL_AICORE_RESOURCE_CONFLICT_RATIO": "ResourceConflictRatio",
    "ACL_AICORE_MEMORY_UB": "MemoryUB",
    "ACL_AICORE_L2_CACHE": "L2Cache",
    "ACL_AICORE_MEMORY_ACCESS": "MemoryAccess",
}
# Keys our own simulator (and anyone faking data honestly) sets in profiler_info / profiler_metadata.
SIMULATED_KEYS = ("simulated", "pypto_simulated")


def output_dir(root: Path) -> Path:
    """Where the tables are: ``root/ASCEND_PROFILER_OUTPUT`` or, for a bare upload of it, ``root``."""
    sub = root / OUTPUT_DIR
    return sub if sub.is_dir() else root


def profiler_info_files(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_file() and _INFO_RE.match(p.name))


def read_profiler_info(root: Path, meta: ProfileMeta) -> None:
    """Fill ``meta`` from profiler_info_N.json and profiler_metadata.json (both optional)."""
    for path in profiler_info_files(root)[:1]:
        try:
            info = load_json(path)
        except InputError as exc:
            meta.warnings.append(f"skipped {path.name}: {exc.reason}")
            continue
        if not isinstance(info, dict):
            meta.warnings.append(f"skipped {path.name}: not a JSON object")
            continue
        meta.source_files.append(str(path))
        meta.cann_version = _str_or_none(info.get("cann_version"))
        meta.torch_npu_version = _str_or_none(info.get("torch_npu_version"))
        rank = info.get("rank_id")
        m = _INFO_RE.match(path.name)
        if rank is None and m and m.group(1) is not None:
            rank = m.group(1)
        meta.rank = _int_or_none(rank)
        exp = ((info.get("config") or {}).get("experimental_config") or {}) if isinstance(info.get("config"), dict) else {}
        if isinstance(exp, dict):
            meta.profiler_level = _str_or_none(exp.get("_profiler_level"))
            aic = _str_or_none(exp.get("_aic_metrics"))
            meta.aic_metrics = AIC_METRICS_NAMES.get(aic or "", aic)
        end = info.get("end_info") or {}
        if isinstance(end, dict) and _int_or_none(end.get("collectionTimeEnd")) is not None:
            meta.extra["collection_end_ns"] = _int_or_none(end.get("collectionTimeEnd"))
        if any(bool(info.get(k)) for k in SIMULATED_KEYS):
            meta.simulated = True
    md_path = root / "profiler_metadata.json"
    if md_path.is_file():
        try:
            md = load_json(md_path)
        except InputError as exc:
            meta.warnings.append(f"skipped {md_path.name}: {exc.reason}")
            return
        if isinstance(md, dict):
            meta.source_files.append(str(md_path))
            meta.extra["metadata"] = md
            if any(bool(md.get(k)) for k in SIMULATED_KEYS):
                meta.simulated = True
            dist = md.get("distributed_args")
            if meta.rank is None and isinstance(dist, dict):
                meta.rank = _int_or_none(dist.get("rank"))
            for key in ("device", "sku", "npu"):
                if isinstance(md.get(key), str) and meta.device is None:
                    meta.device = md[key]


def _str_or_none(v: Any) -> str | None:
    return str(v) if v not in (None, "") else None


def _int_or_none(v: Any) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def read_ascend_pt(root: str | os.PathLike[str]) -> Profile:
    """Read one rank's ``*_ascend_pt`` folder (or a bare ASCEND_PROFILER_OUTPUT folder)."""
    base = Path(root)
    meta = ProfileMeta(format="ascend_pt", source=str(base))
    read_profiler_info(base, meta)
    out = output_dir(base)
    notes = ConversionNotes()
    tables: dict[str, pa.Table] = {}
    usable: list[str] = []

    def attempt(filename: str, fn) -> Any:
        path = out / filename
        if not path.is_file():
            return None
        notes.bad_values.clear()
        try:
            result = fn(path)
        except InputError as exc:
            meta.warnings.append(f"skipped {filename}: {exc.reason}")
            return None
        meta.warnings.extend(notes.warnings(path))
        meta.source_files.append(str(path))
        usable.append(filename)
        return result

    kernels = attempt("kernel_details.csv", read_kernels)
    if kernels is not None:
        tables["kernels"], kernel_warnings = kernels
        meta.warnings.extend(kernel_warnings)
        ids = kernel_device_ids(tables["kernels"])  # kernel_details has Device_id since 2025 (FORMATS.md §0.9)
        if meta.device_id is None and len(ids) == 1:
            meta.device_id = ids[0]
        elif len(ids) > 1:
            meta.extra["device_ids"] = ids
        l2 = attempt("l2_cache.csv", lambda p: summary_csv.read_l2_cache(p, notes))
        if l2 is not None:
            tables["kernels"] = join_l2_cache(tables["kernels"], l2, meta.warnings)

    steps = attempt("step_trace_time.csv", lambda p: summary_csv.read_step_trace_time(p, notes))
    if steps is not None:
        tables["steps"] = steps

    memory_parts = [
        attempt("memory_record.csv", lambda p: summary_csv.read_memory_record(p, notes)),
        attempt("npu_module_mem.csv", lambda p: summary_csv.read_npu_module_mem(p, notes)),
        attempt("operator_memory.csv", lambda p: summary_csv.read_operator_memory(p, notes)),
    ]
    memory_parts = [m for m in memory_parts if m is not None]
    if memory_parts:
        tables["memory"] = pa.concat_tables(memory_parts, promote_options="default")

    comm = attempt("communication.json", lambda p: read_communication(p, meta.warnings))
    if comm is not None:
        tables["communication"] = comm
    matrix = attempt("communication_matrix.json", load_json)
    if isinstance(matrix, dict):
        meta.extra["communication_matrix"] = matrix
    for stat in ("op_statistic.csv", "api_statistic.csv"):
        rows = attempt(stat, summary_csv.read_statistic)
        if rows is not None:
            meta.extra[stat.removesuffix(".csv")] = rows

    profile_tables = attach_trace(out / "trace_view.json", tables, meta, usable)

    if not usable:
        raise InputError(str(base), "no readable profiler output in this ascend_pt folder" + _why(meta))
    profile = Profile(meta=meta, **profile_tables)
    profile.steps = fill_step_bounds(profile.steps, profile.kernels)
    return profile


def _why(meta: ProfileMeta) -> str:
    return f" ({'; '.join(meta.warnings)})" if meta.warnings else ""


def join_l2_cache(kernels: pa.Table, l2: pa.Table, warnings: list[str]) -> pa.Table:
    """Add l2_hit_rate / l2_victim_rate to the kernels with the same (stream, task) id, first match only."""
    if l2.num_rows == 0 or "stream_id" not in kernels.column_names or pc.all(pc.is_null(kernels["stream_id"])).as_py():
        return kernels
    l2 = l2.group_by(["stream_id", "task_id"], use_threads=False).aggregate(
        [("l2_hit_rate", "first"), ("l2_victim_rate", "first")]
    ).rename_columns(["stream_id", "task_id", "l2_hit_rate", "l2_victim_rate"])
    idx = pa.array(range(kernels.num_rows), pa.int64())
    keyed = pa.table({"_row": idx, "stream_id": kernels["stream_id"], "task_id": kernels["task_id"]})
    joined = keyed.join(l2, ["stream_id", "task_id"], join_type="left outer", use_threads=False).sort_by("_row")
    matched = pc.sum(pc.cast(pc.is_valid(joined["l2_victim_rate"]), pa.int64())).as_py() or 0
    if matched < l2.num_rows:
        warnings.append(f"l2_cache.csv: {l2.num_rows - matched} row(s) match no kernel by stream/task id")
    return kernels.append_column("l2_hit_rate", joined["l2_hit_rate"]).append_column(
        "l2_victim_rate", joined["l2_victim_rate"]
    )


def fill_step_bounds(steps: pa.Table, kernels: pa.Table) -> pa.Table:
    """Fill empty step start/end from the first kernel start and last kernel end of each step."""
    if steps.num_rows == 0 or kernels.num_rows == 0 or pc.all(pc.is_null(kernels["step_id"])).as_py():
        return steps
    if not pc.any(pc.is_null(steps["start_ns"])).as_py():
        return steps
    ends = pc.add(kernels["start_ns"], pc.fill_null(kernels["dur_ns"], 0))
    bounds = (
        pa.table({"step_id": kernels["step_id"], "s": kernels["start_ns"], "e": ends})
        .group_by("step_id", use_threads=False)
        .aggregate([("s", "min"), ("e", "max")])
    )
    keyed = pa.table({"_row": pa.array(range(steps.num_rows), pa.int64()), "step_id": steps["step_id"]})
    joined = keyed.join(bounds, "step_id", join_type="left outer", use_threads=False).sort_by("_row")
    start = pc.coalesce(steps["start_ns"], joined["s_min"])
    end = pc.coalesce(steps["end_ns"], joined["e_max"])
    out = steps.set_column(steps.schema.get_field_index("start_ns"), "start_ns", start)
    out = out.set_column(out.schema.get_field_index("end_ns"), "end_ns", end)
    return conform("steps", out)
