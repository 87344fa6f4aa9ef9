"""What the folder readers (``ascend_pt``, ``msprof``) share to write a saved profile in bounded memory.

They stream their kernel tables (and timelines, ``timeline_merge.SavedTimeline``) into Parquet, read the
small files in memory, then join what the other files add (l2_cache rates, step bounds, device ids) with
passes over the saved kernel table one row group at a time: memory stays bounded by a row group whatever
the table's size.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.errors import InputError
from pypto_core.formats.csvtable import ConversionNotes
from pypto_core.formats.kernel_csv import kernel_device_ids
from pypto_core.formats.parquet_sink import concat_parquet, pieces, rewrite_parquet
from pypto_core.formats.timeline_merge import SavedTimeline
from pypto_core.i18n import Message, Text, join_texts, msg
from pypto_core.profile import STREAM_ENCODING, TABLE_NAMES, ProfileMeta, conform, empty_table, save_tables


class FolderFiles:
    """Reads a folder's files one by one: a file that cannot be read becomes a warning naming it and the
    reason; the files read are the profile's sources."""

    def __init__(self, folder: Path, meta: ProfileMeta) -> None:
        self.folder = folder
        self.meta = meta
        self.notes = ConversionNotes()
        self.usable: list[str] = []

    def read(self, name: str | Path, fn: Callable[[Path], Any]) -> Any:
        """``fn(path)`` for the file ``name`` (in ``folder``, or a path); None where it is absent or fails."""
        path = name if isinstance(name, Path) else self.folder / name
        if not path.is_file():
            return None
        self.notes.bad_values.clear()
        try:
            result = fn(path)
        except InputError as exc:
            self.meta.warnings.append(exc.skipped(path.name))
            return None
        self.meta.warnings.extend(self.notes.warnings(path))
        self.meta.source_files.append(str(path))
        self.usable.append(path.name)
        return result

    def nothing_usable(self) -> Message:
        """The reason a folder with nothing usable cannot be read, with the warnings that say why."""
        if not self.meta.warnings:
            return msg("no readable profiler output in this {format} folder", format=self.meta.format)
        return msg("no readable profiler output in this {format} folder ({warnings})",
                   format=self.meta.format, warnings=join_texts(self.meta.warnings))


def write_folder_profile(out: Path, files: FolderFiles, timelines: Sequence[Path],
                         write_tables: Callable[[], dict[str, pa.Table]], source: str,
                         rank_hint: int | None) -> None:
    """The steps every folder reader takes: its timeline file(s) streamed into a scratch folder and, at the
    same time on another core, ``write_tables()`` (the kernel table streamed into ``out``, the small tables
    returned); then the timeline merged, the profile finished. A folder with no readable file is an error
    naming ``source`` and every file's reason.

    The timeline's scan keeps about one core busy and the kernel table's the other one, so with two cores
    the folder takes about as long as its timeline (``parallel_reads``); their peaks then add up."""
    scratch = out / "_timeline"
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pypto-folder-tables") as pool:
            # the thread is joined when the block ends, also when the timeline fails: nothing writes after it
            pending = pool.submit(write_tables) if timelines and parallel_reads() else None
            timeline = SavedTimeline(timelines, scratch)
            tables = pending.result() if pending is not None else write_tables()
        timeline.merge(out, tables, files.meta, files.usable)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not files.usable:
        raise InputError(source, files.nothing_usable())
    finish_saved_profile(out, files.meta, tables, rank_hint)


def parallel_reads() -> bool:
    """Whether a folder's timeline and its other files are read at the same time: with two cores or more
    available to this process (``PYPTO_SERIAL_READS=1`` reads them one after the other)."""
    if os.environ.get("PYPTO_SERIAL_READS") == "1":
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores >= 2


def finish_saved_profile(out: Path, meta: ProfileMeta, tables: dict[str, pa.Table],
                         rank_hint: int | None) -> None:
    """Complete a folder reader's saved profile: step bounds from the saved kernels where the steps lack
    them, the rank from the file name where the files do not state it, the small tables and the tables
    nothing wrote (empty) saved, and ``profile.json``."""
    kernels_path = out / "kernels.parquet"
    if "steps" in tables and kernels_path.exists():
        tables["steps"] = fill_step_bounds(tables["steps"], saved_step_bounds(kernels_path))
    if meta.rank is None:
        meta.rank = rank_hint
    save_tables(out, meta, {name: tables.get(name, empty_table(name)) for name in TABLE_NAMES
                            if not (out / f"{name}.parquet").exists()})


def note_device_ids(kernels_path: Path, meta: ProfileMeta) -> None:
    """The device id the saved kernels name, or all of them in ``extra`` when they name several."""
    ids = saved_device_ids(kernels_path)
    if meta.device_id is None and len(ids) == 1:
        meta.device_id = ids[0]
    elif len(ids) > 1:
        meta.extra["device_ids"] = ids


def concat_kernel_parts(parts: Sequence[Path], dest: Path) -> None:
    """Kernel tables streamed slice by slice (msprof's ``op_summary_slice_N``, in order) joined into
    ``dest`` one row group at a time; parts that were not written (no rows) are left out."""
    present = [p for p in parts if p.exists()]
    if present:
        concat_parquet(present, dest, **STREAM_ENCODING)


def saved_device_ids(kernels_path: Path) -> list[int]:
    """``kernel_device_ids`` of a saved kernels table."""
    if not kernels_path.exists():
        return []
    ids: set[int] = set()
    for chunk in pieces(kernels_path, ["device_id"]):
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

    def warning(self) -> Message | None:
        if self.matched >= self.l2_rows:
            return None
        return msg("{file}: {n} row(s) match no kernel by stream/task id", file="l2_cache.csv",
                   n=self.l2_rows - self.matched)


def join_saved_l2_cache(kernels_path: Path, l2: pa.Table, warnings: list[Text]) -> None:
    """l2_cache.csv's rates joined onto a saved kernels table, rewritten one row group at a time."""
    if l2.num_rows == 0 or not kernels_path.exists():
        return
    if not any(pc.any(pc.is_valid(chunk["stream_id"])).as_py()
               for chunk in pieces(kernels_path, ["stream_id"])):
        return
    join = L2CacheJoin(l2)
    rewrite_parquet(kernels_path, join, **STREAM_ENCODING)
    if warning := join.warning():
        warnings.append(warning)


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
    parts = [b for chunk in pieces(kernels_path, ["step_id", "start_ns", "dur_ns"])
             if (b := kernel_step_bounds(chunk)) is not None]
    if not parts:
        return None
    merged = pa.concat_tables(parts).group_by("step_id", use_threads=False).aggregate(
        [("s_min", "min"), ("e_max", "max")])
    return merged.rename_columns(["step_id", "s_min", "e_max"])


def fill_step_bounds(steps: pa.Table, bounds: pa.Table | None) -> pa.Table:
    """Fill empty step start/end from ``bounds`` (:func:`saved_step_bounds`): the first kernel start and
    last kernel end of each step."""
    if steps.num_rows == 0 or bounds is None or not pc.any(pc.is_null(steps["start_ns"])).as_py():
        return steps
    keyed = pa.table({"_row": pa.array(np.arange(steps.num_rows, dtype=np.int64)),
                      "step_id": steps["step_id"]})
    joined = keyed.join(bounds, "step_id", join_type="left outer", use_threads=False).sort_by("_row")
    start = pc.coalesce(steps["start_ns"], joined["s_min"])
    end = pc.coalesce(steps["end_ns"], joined["e_max"])
    out = steps.set_column(steps.schema.get_field_index("start_ns"), "start_ns", start)
    out = out.set_column(out.schema.get_field_index("end_ns"), "end_ns", end)
    return conform("steps", out)
