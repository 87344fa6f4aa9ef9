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
from pypto_core.formats.csvtable import ConversionNotes, read_header
from pypto_core.formats.jsonfile import load_json
from pypto_core.formats.kernel_csv import kernel_device_ids, read_kernels
from pypto_core.formats.timeline_merge import attach_trace
from pypto_core.profile import Profile, ProfileMeta

OUTPUT_DIR = "mindstudio_profiler_output"
PROF_RE = re.compile(r"^PROF_\d{6}_\d{17}_\w+$")
_DEVICE_RE = re.compile(r"^device_(\d+)$")
_SLICE_RE = re.compile(r"_slice_(\d+)_")
MSPROF_DB_RE = re.compile(r"^msprof_\d+\.db$")
_INFO_JSON_RE = re.compile(r"^info\.json\.(\d+)$")
# Keys our simulator sets (in info.json.N and profiler_info) to mark data never measured on an NPU.
SIMULATED_KEYS = ("simulated", "pypto_simulated")
# The first line of the README.txt that `pypto synth` writes into mindstudio_profiler_output.
_SIMULATED_README = "SIMULATED"


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
        meta = ProfileMeta(format="msprof_db", source=str(base))
        read_device_info(base, meta)
        return [read_profiler_db(dbs[0], fmt="msprof_db", meta=meta)]
    raise InputError(str(base), "msprof folder without op_summary, msprof timeline or msprof_*.db output")


def device_info_files(root: Path) -> list[tuple[int, Path]]:
    """``device_N/info.json.N`` files under a ``PROF_*`` folder (or in a ``device_N`` folder itself)."""
    folders = [root] if _DEVICE_RE.match(root.name) else sorted(root.iterdir()) if root.is_dir() else []
    out = []
    for folder in folders:
        if not (folder.is_dir() and _DEVICE_RE.match(folder.name)):
            continue
        for p in sorted(folder.iterdir()):
            m = _INFO_JSON_RE.match(p.name)
            if m and p.is_file():
                out.append((int(m.group(1)), p))
    return out


def read_device_info(root: Path, meta: ProfileMeta, device_id: int | None = None) -> None:
    """Fill ``meta`` from the device ``info.json.N`` files (chip name, device id, CANN version, rank, the
    simulated mark) and from the ``README.txt`` beside the summaries. All optional.

    ``info.json.N`` is msprof's own description of the device [SRC hicann/runtime info_json.cpp]:
    ``DeviceInfo[i]`` has ``id``, ``ai_core_num``, ``aiv_num``, ``aic_frequency`` (MHz), ...; top level
    ``platform_version``, ``rank_id``, ``cannVersion``. ``chip_name`` is written by our simulator [SEEN
    pypto synth]; real exports may lack it, so the chip name is taken where present and never guessed.
    ``device_id`` restricts the files read to that device's (legacy per-device layout).
    """
    files = [(dev, p) for dev, p in device_info_files(root) if device_id is None or dev == device_id]
    ids: list[int] = []
    for dev, path in files:
        try:
            info = load_json(path)
        except InputError as exc:
            meta.warnings.append(f"skipped {path.parent.name}/{path.name}: {exc.reason}")
            continue
        if not isinstance(info, dict):
            meta.warnings.append(f"skipped {path.parent.name}/{path.name}: not a JSON object")
            continue
        meta.source_files.append(str(path))
        if any(_truthy(info.get(k)) for k in SIMULATED_KEYS) or (
            isinstance(info.get("pypto_synth"), dict) and _truthy(info["pypto_synth"].get("simulated"))
        ):
            meta.simulated = True
        devices = [d for d in info.get("DeviceInfo") or [] if isinstance(d, dict)]
        first = devices[0] if devices else {}
        ids.append(_int(first.get("id"), dev))
        chip = first.get("chip_name") or info.get("chip_name")
        if isinstance(chip, str) and chip.strip() and meta.device is None:
            meta.device = chip.strip()
        if meta.cann_version is None and isinstance(info.get("cannVersion"), str) and info["cannVersion"].strip():
            meta.cann_version = info["cannVersion"].strip()
        rank = _int(info.get("rank_id"), -1)
        if meta.rank is None and rank >= 0:  # msprof writes -1 when RANK_ID is unset
            meta.rank = rank
        hw = {k: first[k] for k in ("ai_core_num", "aiv_num", "aic_frequency", "aiv_frequency", "hwts_frequency")
              if k in first}
        if info.get("platform_version") not in (None, ""):
            hw["platform_version"] = info["platform_version"]
        if hw:
            meta.extra.setdefault("device_info", {})[str(ids[-1])] = hw
    if meta.device_id is None and len(set(ids)) == 1:
        meta.device_id = ids[0]
    readme = root / OUTPUT_DIR / "README.txt"
    readme = readme if readme.is_file() else root / "README.txt"  # a bare mindstudio_profiler_output upload
    if readme.is_file():
        try:
            with readme.open("r", encoding="utf-8", errors="replace") as fh:
                if fh.readline().lstrip().upper().startswith(_SIMULATED_README):
                    meta.simulated = True
        except OSError:
            pass


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1", "yes"))


def _int(v: Any, default: int) -> int:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return default


def _read_step_trace(path: Path, notes: ConversionNotes) -> pa.Table:
    """msprof's ``Iteration ID`` step_trace or torch_npu's ``Step`` step_trace_time, by header."""
    if "Iteration ID" in read_header(path, allow_duplicates=True):
        return summary_csv.read_msprof_step_trace(path, notes)
    return summary_csv.read_step_trace_time(path, notes)


def _read_text(base: Path, summary: Path, timeline: Path, device_id: int | None) -> Profile:
    meta = ProfileMeta(format="msprof", source=str(base), device_id=device_id)
    read_device_info(base, meta, device_id)
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
        ids = kernel_device_ids(tables["kernels"])
        if meta.device_id is None and len(ids) == 1:
            meta.device_id = ids[0]
        elif len(ids) > 1:
            meta.extra["device_ids"] = ids
    steps = each("step_trace", "csv", lambda p: _read_step_trace(p, notes))
    if steps:
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
