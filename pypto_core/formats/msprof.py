"""msprof ``PROF_*`` folders → saved profiles (one per device).

Two layouts (docs/formats.md §1.1): CANN ≥8.0 ``mindstudio_profiler_output/{module}_{ts}.csv|json``
(large outputs
sliced: ``op_summary_slice_0_{ts}.csv``, ``_slice_1_`` ...; read in slice order and concatenated) with the
DB export ``msprof_{ts}.db`` beside it; CANN ≤7.0 ``device_N/summary/*.csv`` and ``device_N/timeline/*.json``.
op_summary is kernel_details under its original column names, so the same kernel reader serves both.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from pypto_core.errors import InputError
from pypto_core.formats import summary_csv
from pypto_core.formats.ascend_db import write_profiler_db
from pypto_core.formats.communication_json import read_communication
from pypto_core.formats.csvtable import ConversionNotes, read_header
from pypto_core.formats.jsonfile import load_json
from pypto_core.formats.kernel_csv import kernels_to_parquet
from pypto_core.formats.saved_folder import (
    FolderFiles,
    concat_kernel_parts,
    note_device_ids,
    write_folder_profile,
)
from pypto_core.i18n import msg
from pypto_core.memory import release_freed_memory
from pypto_core.profile import ProfileMeta

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
    """``{module}_{ts}.{ext}`` and its slices in ``folder``,
    in slice order (``op_summary`` ≠ ``op_summary_x``)."""
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


def write_msprof(root: str | os.PathLike[str],
                 folder: str | os.PathLike[str]) -> list[tuple[str, ProfileMeta]]:
    """Every device of one ``PROF_*`` folder saved under ``folder`` (a subfolder each, as ``Profile.save``
    writes it): (subfolder name, meta) per device. The text export's kernel tables and timelines stream
    into Parquet (bounded memory, whatever their size), and so does the db export."""
    base, out = Path(root), Path(folder)
    summary = base / OUTPUT_DIR if (base / OUTPUT_DIR).is_dir() else base
    legacy = device_dirs(base)
    if module_files(summary, "op_summary", "csv") or module_files(summary, "msprof", "json"):
        devices: list[tuple[int | None, Path, Path, str]] = [(None, summary, summary, "device")]
    elif legacy:
        devices = [(dev, d / "summary", d / "timeline", f"device_{dev}") for dev, d in legacy]
    else:
        dbs = (sorted(p for p in base.iterdir() if p.is_file() and MSPROF_DB_RE.match(p.name))
               if base.is_dir() else [])
        if not dbs:
            raise InputError(str(base),
                             msg("msprof folder without op_summary, msprof timeline or msprof_*.db output"))
        meta = ProfileMeta(format="msprof_db", source=str(base))
        read_device_info(base, meta)
        return [("db", write_profiler_db(dbs[0], out / "db", fmt="msprof_db", meta=meta))]
    written = []
    for dev, summary_dir, timeline_dir, name in devices:
        dest = out / name
        dest.mkdir(parents=True, exist_ok=True)
        try:
            written.append((name, _write_text(base, summary_dir, timeline_dir, dev, dest)))
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return written


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
            meta.warnings.append(exc.skipped(f"{path.parent.name}/{path.name}"))
            continue
        if not isinstance(info, dict):
            meta.warnings.append(msg("skipped {file}: not a JSON object",
                                     file=f"{path.parent.name}/{path.name}"))
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
        cann = info.get("cannVersion")
        if meta.cann_version is None and isinstance(cann, str) and cann.strip():
            meta.cann_version = info["cannVersion"].strip()
        rank = _int(info.get("rank_id"), -1)
        if meta.rank is None and rank >= 0:  # msprof writes -1 when RANK_ID is unset
            meta.rank = rank
        hw = {k: first[k] for k in ("ai_core_num", "aiv_num", "aic_frequency", "aiv_frequency",
                                    "hwts_frequency")
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


def _write_text(base: Path, summary: Path, timeline: Path, device_id: int | None, out: Path) -> ProfileMeta:
    meta = ProfileMeta(format="msprof", source=str(base), device_id=device_id)
    read_device_info(base, meta, device_id)
    files = FolderFiles(summary, meta)
    write_folder_profile(out, files, module_files(timeline, "msprof", "json"),
                         lambda: _write_tables(base, files, out), str(base), None)
    return meta


def _write_tables(base: Path, files: FolderFiles, out: Path) -> dict[str, pa.Table]:
    """Every file but the timeline: the kernel table (op_summary, its slices in order) streamed into
    ``out``, the small tables returned."""
    meta, notes = files.meta, files.notes
    tables: dict[str, pa.Table] = {}

    def each(module: str, fn: Callable[[Path], Any]) -> list[Any]:
        results = [files.read(path, fn) for path in module_files(files.folder, module, "csv")]
        return [r for r in results if r is not None]

    kernels_path = out / "kernels.parquet"
    slices = module_files(files.folder, "op_summary", "csv")
    parts = [kernels_path.with_name(f"kernels.slice_{i}.parquet") for i in range(len(slices))]

    def write_kernels(path: Path) -> int:
        rows, warnings = kernels_to_parquet(path, parts[slices.index(path)])
        meta.warnings.extend(warnings)
        return rows

    if [r for r in (files.read(path, write_kernels) for path in slices) if r is not None]:
        concat_kernel_parts(parts, kernels_path)
        release_freed_memory()
        note_device_ids(kernels_path, meta)
    steps = each("step_trace", lambda p: _read_step_trace(p, notes))
    if steps:
        tables["steps"] = pa.concat_tables(steps, promote_options="default")
    memory = (each("memory_record", lambda p: summary_csv.read_memory_record(p, notes))
              + each("npu_module_mem", lambda p: summary_csv.read_npu_module_mem(p, notes))
              + each("operator_memory", lambda p: summary_csv.read_operator_memory(p, notes)))
    if memory:
        tables["memory"] = pa.concat_tables(memory, promote_options="default")
    for stat in ("op_statistic", "api_statistic"):
        rows = each(stat, summary_csv.read_statistic)
        if rows:
            meta.extra[stat] = [r for part in rows for r in part]
    comm = files.read(base / "analyze" / "communication.json", lambda p: read_communication(p, meta.warnings))
    if comm is not None:
        tables["communication"] = comm
    return tables
