"""msprof ``PROF_*`` folders → ``Profile`` (one per device).

Two layouts (FORMATS.md §1.1): CANN ≥8.0 ``mindstudio_profiler_output/{module}_{ts}.csv|json`` (large outputs
sliced: ``op_summary_slice_0_{ts}.csv``, ``_slice_1_`` ...; read in slice order and concatenated) with the
DB export ``msprof_{ts}.db`` beside it; CANN ≤7.0 ``device_N/summary/*.csv`` and ``device_N/timeline/*.json``.
op_summary is kernel_details under its original column names, so the same kernel reader serves both.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from pypto_core.errors import InputError
from pypto_core.formats import summary_csv
from pypto_core.formats.ascend_db import read_profiler_db
from pypto_core.formats.ascend_pt import fill_step_bounds
from pypto_core.formats.communication_json import read_communication
from pypto_core.formats.csvtable import ConversionNotes
from pypto_core.formats.kernel_csv import read_kernels
from pypto_core.formats.timeline_merge import attach_trace
from pypto_core.profile import Profile, ProfileMeta

OUTPUT_DIR = "mindstudio_profiler_output"
PROF_RE = re.compile(r"^PROF_\d{6}_\d{17}_\w+$")
_DEVICE_RE = re.compile(r"^device_(\d+)$")
_SLICE_RE = re.compile(r"_slice_(\d+)_")
MSPROF_DB_RE = re.compile(r"^msprof_\d+\.db$")


def module_files(folder: Path, module: str, ext: str) -> list[Path]:
    """``{module}_{ts}.{ext}`` and its slices in ``folder``, in slice order (``op_summary`` ≠ ``op_summary_x``)."""
    pat = re.compile(rf"^{re.escape(module)}(?:_slice_\d+)?(?:_\d+)+\.{ext}$")
    files = [p for p in folder.iterdir() if p.is_file() and pat.match(p.name)] if folder.is_dir() else []

    def order(p: Path) -> tuple[int, str]:
        m = _SLICE_RE.search(p.name)
        return (int(m.group(1)) if m else -1, p.name)

    return sorted(files, key=order)


def device_dirs(root: Path) -> list[tuple[int, Path]]:
    """CANN ≤7.0 ``device_N`` folders that hold summary or timeline output."""
    out = []
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        m = _DEVICE_RE.match(p.name)
        if m and p.is_dir() and ((p / "summary").is_dir() or (p / "timeline").is_dir()):
            out.append((int(m.group(1)), p))
    return out


def read_msprof(root: str | os.PathLike[str]) -> list[Profile]:
    """All devices of one ``PROF_*`` folder (or a bare ``mindstudio_profiler_output`` folder)."""
    base = Path(root)
    out = base / OUTPUT_DIR if (base / OUTPUT_DIR).is_dir() else base
    legacy = device_dirs(base)
    if module_files(out, "op_summary", "csv") or module_files(out, "msprof", "json"):
        return [_read_text(base, out, out, None)]
    if legacy:
        return [_read_text(base, d / "summary", d / "timeline", dev) for dev, d in legacy]
    dbs = sorted(p for p in base.iterdir() if p.is_file() and MSPROF_DB_RE.match(p.name)) if base.is_dir() else []
    if dbs:
        return [read_profiler_db(dbs[0], fmt="msprof_db", meta=ProfileMeta(format="msprof_db", source=str(base)))]
    raise InputError(str(base), "msprof folder without op_summary, msprof timeline or msprof_*.db output")


def _read_text(base: Path, summary: Path, timeline: Path, device_id: int | None) -> Profile:
    meta = ProfileMeta(format="msprof", source=str(base), device_id=device_id)
    notes = ConversionNotes()
    tables: dict[str, pa.Table] = {}
    usable: list[str] = []

    def each(module: str, ext: str, fn, folder: Path = summary) -> list[Any]:
        results = []
        for path in module_files(folder, module, ext):
            notes.bad_values.clear()
            try:
                results.append(fn(path))
            except InputError as exc:
                meta.warnings.append(f"skipped {path.name}: {exc.reason}")
                continue
            meta.warnings.extend(notes.warnings(path))
            meta.source_files.append(str(path))
            usable.append(path.name)
        return results

    kernel_parts = each("op_summary", "csv", read_kernels)
    if kernel_parts:
        tables["kernels"] = pa.concat_tables([k for k, _ in kernel_parts], promote_options="default")
        for _, w in kernel_parts:
            meta.warnings.extend(w)
    steps = each("step_trace", "csv", lambda p: summary_csv.read_step_trace_time(p, notes))
    if steps:
        # msprof's step_trace has Iteration columns, not torch_npu's breakdown; keep what matches.
        tables["steps"] = pa.concat_tables(steps, promote_options="default")
    memory = (each("memory_record", "csv", lambda p: summary_csv.read_memory_record(p, notes))
              + each("npu_module_mem", "csv", lambda p: summary_csv.read_npu_module_mem(p, notes))
              + each("operator_memory", "csv", lambda p: summary_csv.read_operator_memory(p, notes)))
    if memory:
        tables["memory"] = pa.concat_tables(memory, promote_options="default")
    for stat in ("op_statistic", "api_statistic"):
        rows = each(stat, "csv", summary_csv.read_statistic)
        if rows:
            meta.extra[stat] = [r for part in rows for r in part]
    comm_file = base / "analyze" / "communication.json"
    if comm_file.is_file():
        try:
            tables["communication"] = read_communication(comm_file, meta.warnings)
            usable.append(comm_file.name)
        except InputError as exc:
            meta.warnings.append(f"skipped {comm_file.name}: {exc.reason}")
    merged = attach_trace(module_files(timeline, "msprof", "json"), tables, meta, usable)
    if not usable:
        raise InputError(str(base), "no readable msprof output" + (f" ({'; '.join(meta.warnings)})" if meta.warnings else ""))
    profile = Profile(meta=meta, **merged)
    profile.steps = fill_step_bounds(profile.steps, profile.kernels)
    return profile
