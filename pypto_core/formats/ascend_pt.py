"""torch_npu ``*_ascend_pt`` folders (text export) → a saved profile.

Layout (docs/formats.md §2.1): ``profiler_info[_N].json``, ``profiler_metadata.json`` and
``ASCEND_PROFILER_OUTPUT/`` with kernel_details.csv, trace_view.json, step_trace_time.csv, memory CSVs,
op/api statistics, communication(_matrix).json. Every file is optional on its own (profiler levels and
versions write different subsets); each one that cannot be read becomes a warning naming it and the reason,
and only a folder with nothing usable is an error. The db export of the same folder is ``ascend_db``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

from pypto_core.errors import InputError
from pypto_core.formats import summary_csv
from pypto_core.formats.communication_json import read_communication
from pypto_core.formats.jsonfile import load_json
from pypto_core.formats.kernel_csv import kernels_to_parquet
from pypto_core.formats.saved_folder import (
    FolderFiles,
    join_saved_l2_cache,
    note_device_ids,
    write_folder_profile,
)
from pypto_core.i18n import msg
from pypto_core.memory import release_freed_memory
from pypto_core.profile import ProfileMeta

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info(?:_(\d+))?\.json$")

# torch_npu's _aic_metrics constants → the counter group names users know (docs/formats.md §2.2).
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
            meta.warnings.append(exc.skipped(path.name))
            continue
        if not isinstance(info, dict):
            meta.warnings.append(msg("skipped {file}: not a JSON object", file=path.name))
            continue
        meta.source_files.append(str(path))
        meta.cann_version = _str_or_none(info.get("cann_version"))
        meta.torch_npu_version = _str_or_none(info.get("torch_npu_version"))
        rank = info.get("rank_id")
        m = _INFO_RE.match(path.name)
        if rank is None and m and m.group(1) is not None:
            rank = m.group(1)
        meta.rank = _int_or_none(rank)
        config = info.get("config")
        exp = (config.get("experimental_config") or {}) if isinstance(config, dict) else {}
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
            meta.warnings.append(exc.skipped(md_path.name))
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


def write_ascend_pt(
    root: str | os.PathLike[str], folder: str | os.PathLike[str], *, rank_hint: int | None = None
) -> ProfileMeta:
    """Stream one rank's ``*_ascend_pt`` folder into a saved profile folder (as ``Profile.save`` writes it).

    The big files go straight to Parquet with bounded memory: kernel_details.csv through
    ``kernels_to_parquet``, trace_view.json through ``write_trace_view``; the l2_cache join, the flows'
    re-pointing onto the CSV's kernels and the step bounds then read those files one row group at a time.
    The small files (steps, memory, communication, statistics) are read in memory. ``rank_hint``: the rank
    when the folder does not state it. A failed read leaves no folder behind.
    """
    base, out = Path(root), Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    try:
        meta = _write_folder(base, out, rank_hint)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return meta


def _write_folder(base: Path, out: Path, rank_hint: int | None) -> ProfileMeta:
    meta = ProfileMeta(format="ascend_pt", source=str(base))
    read_profiler_info(base, meta)
    files = FolderFiles(output_dir(base), meta)
    trace = files.folder / "trace_view.json"
    write_folder_profile(out, files, [trace] if trace.is_file() else [], lambda: _write_tables(files, out),
                         str(base), rank_hint)
    return meta


def _write_tables(files: FolderFiles, out: Path) -> dict[str, pa.Table]:
    """Every file but the timeline: the kernel table streamed into ``out``, the small tables returned."""
    meta, notes = files.meta, files.notes
    tables: dict[str, pa.Table] = {}
    kernels_path = out / "kernels.parquet"

    def write_kernels(path: Path) -> int:
        rows, warnings = kernels_to_parquet(path, kernels_path)
        meta.warnings.extend(warnings)
        return rows

    if files.read("kernel_details.csv", write_kernels) is not None:
        release_freed_memory()
        note_device_ids(kernels_path, meta)  # kernel_details has Device_id since 2025 (docs/formats.md §0.9)
        l2 = files.read("l2_cache.csv", lambda p: summary_csv.read_l2_cache(p, notes))
        if l2 is not None:
            join_saved_l2_cache(kernels_path, l2, meta.warnings)

    steps = files.read("step_trace_time.csv", lambda p: summary_csv.read_step_trace_time(p, notes))
    if steps is not None:
        tables["steps"] = steps

    memory_parts = [
        files.read("memory_record.csv", lambda p: summary_csv.read_memory_record(p, notes)),
        files.read("npu_module_mem.csv", lambda p: summary_csv.read_npu_module_mem(p, notes)),
        files.read("operator_memory.csv", lambda p: summary_csv.read_operator_memory(p, notes)),
    ]
    memory_parts = [m for m in memory_parts if m is not None]
    if memory_parts:
        tables["memory"] = pa.concat_tables(memory_parts, promote_options="default")

    comm = files.read("communication.json", lambda p: read_communication(p, meta.warnings))
    if comm is not None:
        tables["communication"] = comm
    matrix = files.read("communication_matrix.json", load_json)
    if isinstance(matrix, dict):
        meta.extra["communication_matrix"] = matrix
    for stat in ("op_statistic.csv", "api_statistic.csv"):
        rows = files.read(stat, summary_csv.read_statistic)
        if rows is not None:
            meta.extra[stat.removesuffix(".csv")] = rows
    return tables
