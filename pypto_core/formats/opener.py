"""``write_profiles`` / ``open_profiles`` / ``open_profile``: detect, extract archives safely, dispatch to the
reader, group ranks."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pypto_core.errors import InputError
from pypto_core.formats import detect as det
from pypto_core.i18n import Text, join_texts, map_text, msg
from pypto_core.memory import release_freed_memory
from pypto_core.profile import (
    SCHEMA_VERSION,
    TABLE_NAMES,
    ColumnSet,
    Profile,
    ProfileGroup,
    ProfileMeta,
    save_meta,
    scratch_output,
)


@dataclass
class SavedProfiles:
    """What :func:`write_profiles` wrote: one saved profile folder per rank (its name under the output
    folder, and its metadata, as in its ``profile.json``), where it came from, and the group's warnings."""

    ranks: list[tuple[str, ProfileMeta]] = field(default_factory=list)
    source: str = ""
    warnings: list[Text] = field(default_factory=list)

    def primary(self) -> tuple[str, ProfileMeta]:
        """The lowest rank, which single-profile consumers use."""
        return sorted(self.ranks, key=lambda r: (r[1].rank is None, r[1].rank or 0))[0]


def write_profiles(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> SavedProfiles:
    """Every rank at ``path`` saved under ``folder`` (``rank_N/``, as ``Profile.save`` writes it), one rank at
    a time. Timelines, Kineto traces, kernel tables, ``*_ascend_pt`` and ``PROF_*`` folders and the SQLite
    exports are streamed into Parquet with memory bounded by the reader's batches in flight, whatever their
    size; saved profiles and a lone analysis.db (summaries) are read in memory and saved. Archives are
    unpacked into a temporary folder removed afterwards. ``Profile.load`` of each folder gives the profiles
    of :func:`open_profiles`. ``folder`` must be new or empty; a failed read leaves it empty."""
    p, out = Path(path), Path(folder)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(str(out), msg("the output folder must be new or empty (a failed read empties it)"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        found = det.detect(p)
        if found.kind != det.ARCHIVE:
            saved = _write_detected(found, out)
        else:
            # Unpacked inside the output folder (the caller's work folder), never in a shared temporary one.
            tmp = Path(tempfile.mkdtemp(prefix=".unpacked_", dir=out))
            try:
                _extract(p, tmp)
                try:
                    inner = det.detect(tmp)
                except InputError as exc:
                    raise InputError(str(p), msg("archive holds no profile: {reason}",
                                                 reason=exc.reason_text)) from exc
                saved = _write_detected(inner, out)
                _relabel(saved, tmp, p)
            except InputError as exc:  # named as archive!member, without the folder it was unpacked in
                inside = str(tmp)
                raise InputError(exc.path.replace(inside, f"{p}!", 1), map_text(
                    exc.reason_text, lambda s: s.replace(inside + "/", "").replace(inside, ""))) from exc
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        saved.source = str(p)
        for name, meta in saved.ranks:
            save_meta(out / name, meta)
    except InputError as exc:
        for child in out.iterdir():
            shutil.rmtree(child, ignore_errors=True)
        if not exc.path:  # a limit reached while writing (pypto_core.limits): the input is what is named
            raise InputError(str(p), exc.reason_text) from exc
        raise
    except BaseException:
        for child in out.iterdir():
            shutil.rmtree(child, ignore_errors=True)
        raise
    return saved


def open_profiles(path: str | os.PathLike[str], columns: ColumnSet | None = None) -> ProfileGroup:
    """Every rank at ``path``, in memory: :func:`write_profiles` into a temporary folder, then loaded (one
    way of reading for both). A saved profile folder is loaded directly. ``columns``: only those are
    loaded (``Profile.load``), e.g. ``rules.diagnose_columns()`` for an analysis."""
    p = Path(path)
    found = det.detect(p)
    if found.kind == det.SAVED:  # the folder itself, or its one rank (what `pypto convert` writes: rank_0/)
        return ProfileGroup(profiles=[_load_saved(found.path, columns)], source=str(p))
    with tempfile.TemporaryDirectory(prefix="pypto_read_") as tmp:
        with scratch_output():  # read back once, then deleted: the cheapest codec
            saved = write_profiles(p, tmp)
        profiles = [Profile.load(Path(tmp) / name, columns=columns) for name, _ in saved.ranks]
    return ProfileGroup(profiles=profiles, source=saved.source, warnings=saved.warnings)


def open_profile(path: str | os.PathLike[str]) -> Profile:
    """One profile; with several ranks, the lowest one, with a warning naming how many there were."""
    group = open_profiles(path)
    profile = group.primary()
    if group.ranks > 1:
        profile.meta.warnings.append(msg(
            "{ranks} ranks found in {file}; this profile is rank {rank} (open_profiles reads them all)",
            ranks=group.ranks, file=Path(path).name, rank=profile.meta.rank))
    profile.meta.warnings.extend(w for w in group.warnings if w not in profile.meta.warnings)
    return profile


def _extract(archive: Path, dest: Path) -> None:
    try:
        from pypto_core.archive import safe_extract
    except ImportError as exc:  # pragma: no cover - archive.py is part of the engine
        raise InputError(str(archive), msg("archive support is not available in this build")) from exc
    safe_extract(archive, dest)  # with the deployment's limits (pypto_core.limits.use_limits)


def _relabel(saved: SavedProfiles, tmp: Path, archive: Path) -> None:
    """Name sources as ``archive.zip!member/path`` instead of the temporary folder."""
    prefix = str(tmp)

    def member(text: str) -> str:
        return text.replace(prefix, f"{archive}!", 1)

    for _, meta in saved.ranks:
        meta.source = member(meta.source)
        meta.source_files = [member(s) for s in meta.source_files]
        meta.warnings = [map_text(w, member) for w in meta.warnings]
    saved.warnings = [map_text(w, member) for w in saved.warnings]


def _write_detected(found: det.Detection, out: Path) -> SavedProfiles:
    """Each rank of ``found`` saved in ``out``; a group's unreadable ranks become warnings."""
    children = found.children if found.kind == det.GROUP else [found]
    written: list[tuple[Path, ProfileMeta]] = []
    warnings: list[Text] = []
    for child in children:
        try:
            written.extend(_write_one(child, out, len(written)))
        except InputError as exc:
            if found.kind != det.GROUP:
                raise
            warnings.append(exc.skipped(child.path.name))
        release_freed_memory()  # one rank's freed memory is not carried into the next one's peak
    if not written:
        raise InputError(str(found.path), msg("no readable rank: {reasons}", reasons=join_texts(warnings)))
    metas = [meta for _, meta in written]
    if found.kind == det.GROUP:
        _number_ranks(metas)
    ranks: list[tuple[str, ProfileMeta]] = []
    for i, (part, meta) in enumerate(written):
        name = f"rank_{meta.rank if meta.rank is not None else i}"
        if name in (n for n, _ in ranks):
            name = f"{name}_{i}"
        part.rename(out / name)
        ranks.append((name, meta))
    return SavedProfiles(ranks=ranks, source=str(found.path), warnings=warnings)


# The readers that stream a file or folder into Parquet themselves (module, function).
_STREAMING_WRITERS = {
    det.KINETO: ("pypto_core.formats.kineto", "write_kineto"),
    det.KERNEL_CSV: ("pypto_core.formats.kernel_csv", "write_kernel_table"),
    det.TRACE_JSON: ("pypto_core.formats.chrome_trace", "write_trace_view"),
    det.ASCEND_PT: ("pypto_core.formats.ascend_pt", "write_ascend_pt"),
    det.ASCEND_PT_DB: ("pypto_core.formats.ascend_db", "write_ascend_pt_db"),
    det.MSPROF_DB: ("pypto_core.formats.ascend_db", "write_msprof_db"),
}


def _write_one(found: det.Detection, out: Path, index: int) -> list[tuple[Path, ProfileMeta]]:
    """One detection (not a group) saved as ``out/part_N`` folders (an msprof folder may hold several
    devices); the rank from its file name where the files do not state it."""
    if found.kind in _STREAMING_WRITERS:
        module, name = _STREAMING_WRITERS[found.kind]
        writer = getattr(importlib.import_module(module), name)
        dest = out / f"part_{index}"
        return [(dest, writer(found.path, dest, rank_hint=found.rank_hint))]
    written: list[tuple[Path, ProfileMeta]] = []
    if found.kind == det.MSPROF:  # streamed too, but one folder per device
        from pypto_core.formats.msprof import write_msprof

        devices = out / f"part_{index}_devices"
        for name, meta in write_msprof(found.path, devices):
            dest = out / f"part_{index + len(written)}"
            (devices / name).rename(dest)
            if meta.rank is None:
                meta.rank = found.rank_hint  # profile.json is rewritten with the final meta
            written.append((dest, meta))
        shutil.rmtree(devices, ignore_errors=True)
        return written
    if found.kind == det.SAVED:  # already canonical: its files are copied, not loaded and saved again
        meta = _checked_saved(found.path)
        dest = out / f"part_{index}"
        dest.mkdir()
        for name in ("profile.json", *(f"{table}.parquet" for table in TABLE_NAMES)):
            if (found.path / name).exists():
                shutil.copyfile(found.path / name, dest / name)
        if meta.rank is None and found.rank_hint is not None:
            meta.rank = found.rank_hint
        return [(dest, meta)]
    for prof in _read_in_memory(found):
        if prof.meta.rank is None and found.rank_hint is not None:
            prof.meta.rank = found.rank_hint
        dest = out / f"part_{index + len(written)}"
        prof.save(dest)
        written.append((dest, prof.meta))
    return written


def _number_ranks(metas: list[ProfileMeta]) -> None:
    """Ranks the files did not state are numbered after the known ones, in folder order."""
    used = {m.rank for m in metas if m.rank is not None}
    nxt = 0
    for meta in metas:
        if meta.rank is None:
            while nxt in used:
                nxt += 1
            meta.rank = nxt
            meta.warnings.append(msg("rank not stated in the files; numbered {rank} by folder order",
                                     rank=nxt))
            used.add(nxt)


def _read_in_memory(found: det.Detection) -> list[Profile]:
    """The formats read whole (a lone analysis.db of summaries); the SQLite exports stream."""
    path = found.path
    if found.kind == det.ANALYSIS_DB:
        return [_read_analysis_only(path)]
    raise InputError(str(path), msg("unsupported input kind {kind!r}", kind=found.kind))


def _load_saved(path: Path, columns: ColumnSet | None = None) -> Profile:
    """A folder written by ``Profile.save``, loaded (see :func:`_checked_saved`)."""
    _checked_saved(path)
    try:
        return Profile.load(path, columns=columns)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise InputError(str(path), msg("saved profile could not be loaded ({error})",
                                        error=str(exc))) from exc


def _checked_saved(path: Path) -> ProfileMeta:
    """The meta of a folder written by ``Profile.save``, once its tables' Parquet footers read; one from a
    newer schema is refused rather than misread."""
    doc = json.loads((path / "profile.json").read_text(encoding="utf-8"))
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(str(path), msg("saved profile has schema_version {version!r}; this PyPTO reads up "
                                        "to {supported}", version=version, supported=SCHEMA_VERSION))
    for table in TABLE_NAMES:
        if (path / f"{table}.parquet").exists():
            try:
                pq.read_schema(path / f"{table}.parquet")
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise InputError(str(path), msg("saved profile could not be loaded ({error})",
                                                error=str(exc))) from exc
    return ProfileMeta.from_dict(doc.get("meta", {}))


def _read_analysis_only(path: Path) -> Profile:
    from pypto_core.formats.ascend_db import read_analysis_db
    from pypto_core.formats.csvtable import ConversionNotes
    from pypto_core.profile import empty_table

    meta = ProfileMeta(format="ascend_pt_db", source=str(path))
    meta.warnings.append(msg("{file} holds only step and communication summaries; no kernels",
                             file=path.name))
    steps, comm = read_analysis_db(path, empty_table("steps"), meta, ConversionNotes())
    return Profile(meta=meta, steps=steps, communication=comm)
