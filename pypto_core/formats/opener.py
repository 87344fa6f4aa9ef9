"""``open_profile`` / ``open_profiles``: detect, extract archives safely, dispatch to the reader, group ranks."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from pypto_core.errors import InputError
from pypto_core.formats import detect as det
import pyarrow as pa

from pypto_core.profile import SCHEMA_VERSION, Profile, ProfileGroup, ProfileMeta


def open_profiles(path: str | os.PathLike[str]) -> ProfileGroup:
    """Every rank at ``path``; archives are unpacked into a temporary folder removed afterwards."""
    p = Path(path)
    found = det.detect(p)
    if found.kind == det.ARCHIVE:
        tmp = Path(tempfile.mkdtemp(prefix="pypto_extract_"))
        try:
            _extract(p, tmp)
            try:
                inner = det.detect(tmp)
            except InputError as exc:
                raise InputError(str(p), f"archive holds no profile: {exc.reason}") from exc
            group = _read(inner)
            _relabel(group, tmp, p)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        group.source = str(p)
        return group
    group = _read(found)
    group.source = str(p)
    return group


def open_profile(path: str | os.PathLike[str]) -> Profile:
    """One profile; with several ranks, the lowest one, with a warning naming how many there were."""
    group = open_profiles(path)
    profile = group.primary()
    if group.ranks > 1:
        profile.meta.warnings.append(
            f"{group.ranks} ranks found in {Path(path).name}; this profile is rank {profile.meta.rank} "
            "(open_profiles reads them all)"
        )
    profile.meta.warnings.extend(w for w in group.warnings if w not in profile.meta.warnings)
    return profile


def write_profile(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> ProfileMeta | None:
    """Stream a single-file input straight into a saved profile folder, where its reader can do so with
    memory bounded by its batches in flight and link columns (a Kineto trace, a kernel table, an Ascend
    timeline); None for every other input, which :func:`open_profile` reads in memory.
    ``Profile.load(folder)`` gives ``open_profile(path)``."""
    p = Path(path)
    found = det.detect(p)
    if found.kind == det.KINETO:
        from pypto_core.formats.kineto import write_kineto

        return write_kineto(p, folder, rank_hint=found.rank_hint)
    if found.kind == det.KERNEL_CSV:
        from pypto_core.formats.kernel_csv import write_kernel_table

        return write_kernel_table(p, folder, rank_hint=found.rank_hint)
    if found.kind == det.TRACE_JSON:
        from pypto_core.formats.chrome_trace import write_trace_view

        return write_trace_view(p, folder, rank_hint=found.rank_hint)
    return None


def _extract(archive: Path, dest: Path) -> None:
    try:
        from pypto_core.archive import safe_extract
    except ImportError:  # pragma: no cover - archive.py is part of the engine
        raise InputError(str(archive), "archive support is not available in this build")
    safe_extract(archive, dest)


def _relabel(group: ProfileGroup, tmp: Path, archive: Path) -> None:
    """Name sources as ``archive.zip!member/path`` instead of the temporary folder."""
    prefix = str(tmp)
    for prof in group.profiles:
        prof.meta.source = prof.meta.source.replace(prefix, f"{archive}!", 1)
        prof.meta.source_files = [s.replace(prefix, f"{archive}!", 1) for s in prof.meta.source_files]
        prof.meta.warnings = [w.replace(prefix, f"{archive}!", 1) for w in prof.meta.warnings]


def _read(found: det.Detection) -> ProfileGroup:
    if found.kind == det.GROUP:
        profiles: list[Profile] = []
        warnings: list[str] = []
        for child in found.children:
            try:
                profiles.extend(_read(child).profiles)
            except InputError as exc:
                warnings.append(f"skipped {child.path.name}: {exc.reason}")
        if not profiles:
            raise InputError(str(found.path), "no readable rank: " + "; ".join(warnings))
        _number_ranks(profiles)
        return ProfileGroup(profiles=profiles, source=str(found.path), warnings=warnings)
    profiles = read_one(found)
    for prof in profiles:
        if prof.meta.rank is None and found.rank_hint is not None:
            prof.meta.rank = found.rank_hint
    return ProfileGroup(profiles=profiles, source=str(found.path))


def _number_ranks(profiles: list[Profile]) -> None:
    """Ranks the files did not state are numbered after the known ones, in folder order."""
    used = {p.meta.rank for p in profiles if p.meta.rank is not None}
    nxt = 0
    for prof in profiles:
        if prof.meta.rank is None:
            while nxt in used:
                nxt += 1
            prof.meta.rank = nxt
            prof.meta.warnings.append(f"rank not stated in the files; numbered {nxt} by folder order")
            used.add(nxt)


def read_one(found: det.Detection) -> list[Profile]:
    """Read a non-group detection; msprof folders may hold several devices (one profile each)."""
    path = found.path
    if found.kind == det.SAVED:
        return [_load_saved(path)]
    if found.kind == det.ASCEND_PT:
        from pypto_core.formats.ascend_pt import read_ascend_pt

        return [read_ascend_pt(path)]
    if found.kind == det.ASCEND_PT_DB:
        from pypto_core.formats.ascend_db import read_profiler_db
        from pypto_core.formats.ascend_pt import output_dir, read_profiler_info

        if path.is_file():
            analysis = path.parent / "analysis.db"
            return [read_profiler_db(path, fmt="ascend_pt_db", analysis_db=analysis)]
        meta = ProfileMeta(format="ascend_pt_db", source=str(path))
        read_profiler_info(path, meta)
        out = output_dir(path)
        dbs = sorted(f for f in out.iterdir() if f.is_file() and det._DB_GLOB.match(f.name))
        return [read_profiler_db(dbs[0], fmt="ascend_pt_db", meta=meta, analysis_db=out / "analysis.db")]
    if found.kind == det.MSPROF:
        from pypto_core.formats.msprof import read_msprof

        return read_msprof(path)
    if found.kind == det.MSPROF_DB:
        from pypto_core.formats.ascend_db import read_profiler_db

        return [read_profiler_db(path, fmt="msprof_db")]
    if found.kind == det.ANALYSIS_DB:
        return [_read_analysis_only(path)]
    if found.kind == det.KERNEL_CSV:
        from pypto_core.formats.kernel_csv import read_kernels

        kernels, warnings = read_kernels(path)
        fmt = "msprof" if path.name.startswith("op_summary") else "ascend_pt"
        meta = ProfileMeta(format=fmt, source=str(path), source_files=[str(path)], warnings=warnings)
        return [Profile(meta=meta, kernels=kernels)]
    if found.kind == det.TRACE_JSON:
        from pypto_core.formats.chrome_trace import read_trace_file

        return [read_trace_file(path)]
    if found.kind == det.KINETO:
        reader = _optional("pypto_core.formats.kineto", "read_kineto")
        if reader is None:
            raise InputError(str(path), "Kineto JSON reader is not available in this build")
        return [reader(path)]
    raise InputError(str(path), f"unsupported input kind {found.kind!r}")


def _load_saved(path: Path) -> Profile:
    """A folder written by ``Profile.save``; one from a newer schema is refused rather than misread."""
    doc = json.loads((path / "profile.json").read_text(encoding="utf-8"))
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(str(path), f"saved profile has schema_version {version!r}; this PyPTO reads up to "
                                    f"{SCHEMA_VERSION}")
    try:
        return Profile.load(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise InputError(str(path), f"saved profile could not be loaded ({exc})") from exc


def _read_analysis_only(path: Path) -> Profile:
    from pypto_core.formats.ascend_db import read_analysis_db
    from pypto_core.formats.csvtable import ConversionNotes
    from pypto_core.profile import empty_table

    meta = ProfileMeta(format="ascend_pt_db", source=str(path))
    meta.warnings.append(f"{path.name} holds only step and communication summaries; no kernels")
    steps, comm = read_analysis_db(path, empty_table("steps"), meta, ConversionNotes())
    return Profile(meta=meta, steps=steps, communication=comm)


def _optional(module: str, name: str):
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
    return getattr(mod, name, None)
