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
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.errors import InputError
from pypto_core.formats import summary_csv
from pypto_core.formats.chrome_trace import write_trace_view
from pypto_core.formats.communication_json import read_communication
from pypto_core.formats.csvtable import ConversionNotes
from pypto_core.formats.jsonfile import load_json
from pypto_core.formats.kernel_csv import kernel_device_ids, kernels_to_parquet
from pypto_core.formats.parquet_sink import rewrite_parquet
from pypto_core.formats.timeline_merge import merge_steps, repoint_saved_flows
from pypto_core.memory import release_freed_memory
from pypto_core.profile import (TABLE_NAMES, TIME_COLUMNS, Profile, ProfileMeta, conform, empty_table,
                                parquet_dictionary_columns, read_table, save_tables)

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
    """Read one rank's ``*_ascend_pt`` folder (or a bare ASCEND_PROFILER_OUTPUT folder) into memory: the
    folder is streamed into Parquet (:func:`write_ascend_pt`) and loaded, one code path for both."""
    with tempfile.TemporaryDirectory(prefix="pypto_ascend_pt_") as tmp:
        write_ascend_pt(root, Path(tmp) / "profile")
        return Profile.load(Path(tmp) / "profile")


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


class _Files:
    """Reads the folder's files one by one: a file that cannot be read becomes a warning naming it."""

    def __init__(self, folder: Path, meta: ProfileMeta) -> None:
        self.folder = folder
        self.meta = meta
        self.notes = ConversionNotes()
        self.usable: list[str] = []

    def read(self, filename: str, fn: Callable[[Path], Any]) -> Any:
        path = self.folder / filename
        if not path.is_file():
            return None
        self.notes.bad_values.clear()
        try:
            result = fn(path)
        except InputError as exc:
            self.meta.warnings.append(f"skipped {filename}: {exc.reason}")
            return None
        self.meta.warnings.extend(self.notes.warnings(path))
        self.meta.source_files.append(str(path))
        self.usable.append(filename)
        return result


def _write_folder(base: Path, out: Path, rank_hint: int | None) -> ProfileMeta:
    meta = ProfileMeta(format="ascend_pt", source=str(base))
    read_profiler_info(base, meta)
    files = _Files(output_dir(base), meta)
    scratch = out / "_trace_view"
    try:
        # the timeline first: it is the biggest phase, so what the later ones keep cannot stack under its peak
        trace = _write_trace(files.folder / "trace_view.json", scratch)
        release_freed_memory()
        tables = _write_tables(files, out)
        _merge_trace(trace, files, scratch, out, tables)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not files.usable:
        raise InputError(str(base), "no readable profiler output in this ascend_pt folder" + _why(meta))
    kernels_path = out / "kernels.parquet"
    if "steps" in tables and kernels_path.exists():
        tables["steps"] = fill_step_bounds_from(tables["steps"], saved_step_bounds(kernels_path))
    if meta.rank is None:
        meta.rank = rank_hint
    save_tables(out, meta, {name: tables.get(name, empty_table(name)) for name in TABLE_NAMES
                            if not (out / f"{name}.parquet").exists()})
    return meta


def _write_tables(files: _Files, out: Path) -> dict[str, pa.Table]:
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
        ids = saved_device_ids(kernels_path)  # kernel_details has Device_id since 2025 (FORMATS.md §0.9)
        if meta.device_id is None and len(ids) == 1:
            meta.device_id = ids[0]
        elif len(ids) > 1:
            meta.extra["device_ids"] = ids
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


def _write_trace(path: Path, scratch: Path) -> ProfileMeta | InputError | None:
    """trace_view.json streamed into a scratch folder: its meta, the reason it could not be read, or None
    when the folder has none."""
    if not path.is_file():
        return None
    try:
        return write_trace_view(path, scratch)
    except InputError as exc:
        return exc


def _merge_trace(trace: ProfileMeta | InputError | None, files: _Files, scratch: Path, out: Path,
                 tables: dict[str, pa.Table]) -> None:
    """Merge the scratch timeline as ``timeline_merge.attach_trace`` merges one in memory: its host ops,
    API calls and counters are taken; its device tasks only where kernel_details.csv gave no kernel
    (otherwise its flows are re-pointed at the CSV's kernels); its ProfilerStep bounds join the steps."""
    meta = files.meta
    if isinstance(trace, InputError):
        meta.warnings.append(f"skipped trace_view.json: {trace.reason}")
        return
    if trace is None:
        return
    meta.source_files.append(str(files.folder / "trace_view.json"))
    files.usable.append("trace_view.json")
    for hint in ("device", "device_id", "rank"):
        if getattr(meta, hint) is None:
            setattr(meta, hint, getattr(trace, hint))
    meta.warnings.extend(trace.warnings)
    csv_kernels = out / "kernels.parquet"
    has_csv_kernels = csv_kernels.exists() and pq.ParquetFile(csv_kernels).metadata.num_rows > 0
    for name in ("host_ops", "api_calls", "counters") + (() if has_csv_kernels else ("kernels", "flows")):
        os.replace(scratch / f"{name}.parquet", out / f"{name}.parquet")
    if has_csv_kernels:
        tables["flows"] = repoint_saved_flows(scratch / "flows.parquet", scratch / "kernels.parquet", csv_kernels)
    trace_steps = read_table(scratch / "steps.parquet", "steps")
    if trace_steps.num_rows:
        tables["steps"] = merge_steps(tables.get("steps"), trace_steps)


def _why(meta: ProfileMeta) -> str:
    return f" ({'; '.join(meta.warnings)})" if meta.warnings else ""


def _row_groups(path: Path, columns: list[str]) -> Iterator[pa.Table]:
    """A saved table's columns one row group at a time (what bounds the memory of the passes over it)."""
    source = pq.ParquetFile(path)
    try:
        for i in range(source.metadata.num_row_groups):
            yield source.read_row_group(i, columns=columns)
    finally:
        source.close()


def saved_device_ids(kernels_path: Path) -> list[int]:
    """``kernel_device_ids`` of a saved kernels table."""
    if not kernels_path.exists():
        return []
    ids: set[int] = set()
    for chunk in _row_groups(kernels_path, ["device_id"]):
        ids.update(kernel_device_ids(chunk))
    return sorted(ids)


class L2CacheJoin:
    """Adds l2_hit_rate / l2_victim_rate to kernels with the same (stream, task) id, first l2 row only; called
    once per chunk of kernels, counting the kernels matched."""

    def __init__(self, l2: pa.Table) -> None:
        self.l2_rows = l2.num_rows
        self.matched = 0
        self._l2 = l2.group_by(["stream_id", "task_id"], use_threads=False).aggregate(
            [("l2_hit_rate", "first"), ("l2_victim_rate", "first")]
        ).rename_columns(["stream_id", "task_id", "l2_hit_rate", "l2_victim_rate"])

    def __call__(self, kernels: pa.Table) -> pa.Table:
        keyed = pa.table({"_row": pa.array(np.arange(kernels.num_rows, dtype=np.int64)),
                          "stream_id": kernels["stream_id"], "task_id": kernels["task_id"]})
        joined = keyed.join(self._l2, ["stream_id", "task_id"], join_type="left outer", use_threads=False)
        joined = joined.sort_by("_row")
        self.matched += pc.sum(pc.cast(pc.is_valid(joined["l2_victim_rate"]), pa.int64())).as_py() or 0
        return kernels.append_column("l2_hit_rate", joined["l2_hit_rate"]).append_column(
            "l2_victim_rate", joined["l2_victim_rate"])

    def warning(self) -> str | None:
        if self.matched >= self.l2_rows:
            return None
        return f"l2_cache.csv: {self.l2_rows - self.matched} row(s) match no kernel by stream/task id"


def join_saved_l2_cache(kernels_path: Path, l2: pa.Table, warnings: list[str]) -> None:
    """l2_cache.csv's rates joined onto a saved kernels table, rewritten one row group at a time."""
    if l2.num_rows == 0 or not kernels_path.exists():
        return
    if not any(pc.any(pc.is_valid(chunk["stream_id"])).as_py() for chunk in _row_groups(kernels_path, ["stream_id"])):
        return
    join = L2CacheJoin(l2)
    rewrite_parquet(kernels_path, join, dictionary_columns=parquet_dictionary_columns,
                    statistics_columns=TIME_COLUMNS)
    if join.warning():
        warnings.append(join.warning())


def kernel_step_bounds(kernels: pa.Table) -> pa.Table | None:
    """(step_id, s_min, e_max): the first kernel start and last kernel end of each step; None when no
    kernel has a step."""
    if kernels.num_rows == 0 or pc.all(pc.is_null(kernels["step_id"])).as_py():
        return None
    ends = pc.add(kernels["start_ns"], pc.fill_null(kernels["dur_ns"], 0))
    return (pa.table({"step_id": kernels["step_id"], "s": kernels["start_ns"], "e": ends})
            .group_by("step_id", use_threads=False).aggregate([("s", "min"), ("e", "max")]))


def saved_step_bounds(kernels_path: Path) -> pa.Table | None:
    """:func:`kernel_step_bounds` of a saved kernels table, one row group at a time."""
    parts = [b for chunk in _row_groups(kernels_path, ["step_id", "start_ns", "dur_ns"])
             if (b := kernel_step_bounds(chunk)) is not None]
    if not parts:
        return None
    merged = pa.concat_tables(parts).group_by("step_id", use_threads=False).aggregate(
        [("s_min", "min"), ("e_max", "max")])
    return merged.rename_columns(["step_id", "s_min", "e_max"])


def fill_step_bounds(steps: pa.Table, kernels: pa.Table) -> pa.Table:
    """Fill empty step start/end from the first kernel start and last kernel end of each step."""
    return fill_step_bounds_from(steps, kernel_step_bounds(kernels) if steps.num_rows else None)


def fill_step_bounds_from(steps: pa.Table, bounds: pa.Table | None) -> pa.Table:
    """Fill empty step start/end from ``bounds`` (:func:`kernel_step_bounds`)."""
    if steps.num_rows == 0 or bounds is None or not pc.any(pc.is_null(steps["start_ns"])).as_py():
        return steps
    keyed = pa.table({"_row": pa.array(np.arange(steps.num_rows, dtype=np.int64)), "step_id": steps["step_id"]})
    joined = keyed.join(bounds, "step_id", join_type="left outer", use_threads=False).sort_by("_row")
    start = pc.coalesce(steps["start_ns"], joined["s_min"])
    end = pc.coalesce(steps["end_ns"], joined["e_max"])
    out = steps.set_column(steps.schema.get_field_index("start_ns"), "start_ns", start)
    out = out.set_column(out.schema.get_field_index("end_ns"), "end_ns", end)
    return conform("steps", out)
