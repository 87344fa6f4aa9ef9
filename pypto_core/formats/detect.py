"""Which profile format a path holds, decided from content (headers, table names, JSON shape), not names
alone.

``detect(path)`` returns a ``Detection`` tree: a folder of several ranks is a ``group`` whose children are
the rank folders. Nothing is parsed beyond a few KB per file, so detection is cheap on huge inputs.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sqlite3
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pypto_core.errors import InputError
from pypto_core.formats import ascend_db, csvtable, kernel_csv, msprof
from pypto_core.formats.ascend_pt import OUTPUT_DIR as ASCEND_OUTPUT
from pypto_core.formats.ascend_pt import profiler_info_files
from pypto_core.i18n import Message, msg

# kinds a Detection can have
ASCEND_PT = "ascend_pt"  # torch_npu text export folder
ASCEND_PT_DB = "ascend_pt_db"  # torch_npu folder with only the SQLite export, or the .db file itself
MSPROF = "msprof"  # PROF_* folder, text output
MSPROF_DB = "msprof_db"  # msprof_*.db file
KINETO = "kineto"  # PyTorch profiler JSON object (.json / .json.gz)
TRACE_JSON = "trace_json"  # bare chrome-trace array: trace_view.json / msprof_*.json alone
KERNEL_CSV = "kernel_csv"  # kernel_details.csv / op_summary csv alone
ANALYSIS_DB = "analysis_db"  # analysis.db alone (steps and communication only)
SAVED = "saved"  # a canonical profile written by Profile.save (profile.json + one Parquet per table)
ARCHIVE = "archive"
GROUP = "group"

_DB_GLOB = re.compile(r"^ascend_(?:pytorch|mindspore)_profiler(?:_\d+)?\.db$")
_RANK_RE = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_MAX_SCAN_DEPTH = 4
_SNIFF = 4096


@dataclass
class Detection:
    kind: str
    path: Path
    found: list[str] = field(default_factory=list)  # the files that decided it, relative to ``path``
    children: list[Detection] = field(default_factory=list)
    rank_hint: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "path": str(self.path), "found": self.found}
        if self.rank_hint is not None:
            out["rank_hint"] = self.rank_hint
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out


def detect(path: str | os.PathLike[str]) -> Detection:
    """Detect the profile format at ``path`` (file or folder); ``InputError`` when nothing is recognised."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), msg("no such file or folder"))
    if p.is_dir():
        found = detect_dir(p, depth=0)
        if found is None:
            raise InputError(str(p), _why_not_dir(p))
        return found
    return detect_file(p)


# ---------------------------------------------------------------------------------------------------
# Files


def detect_file(p: Path) -> Detection:
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as exc:
        raise InputError(str(p), msg("cannot read file ({error})", error=exc.strerror or str(exc))) from exc
    if size == 0:
        raise InputError(str(p), msg("file is empty (0 bytes)"))
    name = p.name.lower()
    if head.startswith(b"SQLite format 3\x00"):
        return Detection(_db_kind(p), p, [p.name])
    if head[:2] == b"\x1f\x8b":
        if name.endswith((".tar.gz", ".tgz")) or _is_tar_gz(p):
            return Detection(ARCHIVE, p, [p.name])
        return _json_kind(p, _gunzip_head(p), gz=True)
    if zipfile.is_zipfile(p) or (len(head) >= 262 and head[257:262] == b"ustar"):
        return Detection(ARCHIVE, p, [p.name])
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] in (b"{", b"["):
        return _json_kind(p, head, gz=False)
    if b"\x00" in head:
        raise InputError(str(p), msg("not a profile file (binary content of an unknown kind)"))
    if name.endswith(".csv") or b"," in head.split(b"\n", 1)[0]:
        header = csvtable.read_header(p)
        if kernel_csv.is_kernel_header(header):
            return Detection(KERNEL_CSV, p, [p.name])
        known = {n for names in kernel_csv.ALIASES.values() for n in names}
        if len(known.intersection(header)) >= 3:
            kernel_csv.map_columns(p, header)  # a kernel table missing a required column: say which
        raise InputError(str(p), msg("CSV is not a kernel table (kernel_details / op_summary): header "
                                     "starts {header!r}", header=", ".join(header[:5])))
    raise InputError(str(p), msg("not a recognised profile file (expected a folder, archive, .json, "
                                 ".json.gz, .csv or .db)"))


def _is_tar_gz(p: Path) -> bool:
    try:
        with tarfile.open(p, "r:gz") as tf:
            return tf.next() is not None
    except (tarfile.TarError, OSError, EOFError):
        return False


def _gunzip_head(p: Path) -> bytes:
    try:
        with gzip.open(p, "rb") as fh:
            return fh.read(_SNIFF)
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt deflate stream (fuzzing found it)
        raise InputError(str(p), msg("corrupt gzip file ({error})", error=str(exc))) from exc


def _json_kind(p: Path, head: bytes, *, gz: bool) -> Detection:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise InputError(str(p), msg("compressed file is empty" if gz else "file holds only whitespace"))
    if text[:1] == b"[":
        return Detection(TRACE_JSON, p, [p.name])
    if text[:1] == b"{":
        # Kineto objects carry traceEvents (often after schemaVersion/deviceProperties, so only hint here).
        return Detection(KINETO, p, [p.name])
    raise InputError(str(p), msg("not a JSON trace (does not start with '{{' or '[')"))


def _db_kind(p: Path) -> str:
    try:
        conn = ascend_db.connect(p)
    except InputError:
        raise
    try:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError(str(p), msg("corrupt SQLite database ({error})", error=str(exc))) from exc
    finally:
        conn.close()
    if "PYTORCH_API" in tables:
        return ASCEND_PT_DB
    if "TASK" in tables or "CANN_API" in tables:
        return MSPROF_DB
    if tables & {"StepTraceTime", "CommAnalyzerTime"}:
        return ANALYSIS_DB
    raise InputError(str(p), msg("SQLite database without profiler tables (no TASK, PYTORCH_API, CANN_API or "
                                 "StepTraceTime)"))


# ---------------------------------------------------------------------------------------------------
# Folders


def _has(folder: Path, *names: str) -> list[str]:
    return [n for n in names if (folder / n).exists()]


def _ascend_pt_dir(p: Path) -> Detection | None:
    out = p / ASCEND_OUTPUT
    infos = [f.name for f in profiler_info_files(p)] if p.is_dir() else []
    if not out.is_dir() and not infos:
        # A bare ASCEND_PROFILER_OUTPUT upload: the tables sit directly in the folder.
        text = _has(p, "kernel_details.csv", "trace_view.json", "step_trace_time.csv", "op_statistic.csv")
        if text and not (p / msprof.OUTPUT_DIR).exists():
            return Detection(ASCEND_PT, p, text)
        return None
    folder = out if out.is_dir() else p
    text = [f"{ASCEND_OUTPUT}/{n}" if folder is out else n for n in _has(
        folder, "kernel_details.csv", "trace_view.json", "step_trace_time.csv", "op_statistic.csv",
        "communication.json", "memory_record.csv", "operator_details.csv")]
    dbs = (sorted(f.name for f in folder.iterdir() if f.is_file() and _DB_GLOB.match(f.name))
           if folder.is_dir() else [])
    if text and not _has(folder, "kernel_details.csv", "trace_view.json") and dbs:
        kind = ASCEND_PT_DB  # only summaries in text: the db holds the kernels
    else:
        kind = ASCEND_PT if text or not dbs else ASCEND_PT_DB
    found = infos + text + [f"{ASCEND_OUTPUT}/{d}" if folder is out else d for d in dbs]
    if not text and not dbs:
        return Detection(ASCEND_PT, p, infos)  # profiler_info only: the reader reports what is missing
    return Detection(kind, p, found, rank_hint=_rank_hint(p))


# profile.json of a saved profile is a few KB (meta and warnings); anything far larger is something else.
_SAVED_JSON_MAX = 16 * 1024 * 1024


def _saved_dir(p: Path) -> Detection | None:
    """A folder written by ``Profile.save``: ``profile.json`` with ``schema_version`` and ``meta``, plus
    Parquet tables. Checked before the profiler layouts so that a saved profile is never re-parsed."""
    doc_path = p / "profile.json"
    if not doc_path.is_file():
        return None
    tables = sorted(f.name for f in p.iterdir() if f.is_file() and f.name.endswith(".parquet"))
    if not tables:
        return None
    try:
        if doc_path.stat().st_size > _SAVED_JSON_MAX:
            return None
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(doc, dict) and "schema_version" in doc and isinstance(doc.get("meta"), dict)):
        return None
    rank = doc["meta"].get("rank")
    return Detection(SAVED, p, ["profile.json", *tables], rank_hint=rank if isinstance(rank, int) else None)


def _msprof_dir(p: Path) -> Detection | None:
    out = p / msprof.OUTPUT_DIR
    if out.is_dir() or p.name == msprof.OUTPUT_DIR:
        folder = out if out.is_dir() else p
        names = sorted(f.name for f in folder.iterdir() if f.is_file())
        return Detection(MSPROF, p, [f"{folder.name}/{n}" for n in names[:20]])
    legacy = msprof.device_dirs(p)
    if legacy:
        return Detection(MSPROF, p, [d.name for _, d in legacy])
    dbs = sorted(f.name for f in p.iterdir() if f.is_file() and msprof.MSPROF_DB_RE.match(f.name))
    if msprof.PROF_RE.match(p.name) and dbs:
        return Detection(MSPROF, p, dbs)
    return None


def _rank_hint(p: Path) -> int | None:
    m = _RANK_RE.search(p.name)
    return int(m.group(1)) if m else None


def detect_dir(p: Path, depth: int) -> Detection | None:
    """This folder as one profile, or as a group of the profiles below it; None when there is none."""
    own = _saved_dir(p) or _ascend_pt_dir(p) or _msprof_dir(p)
    if own is not None:
        return own
    if depth >= _MAX_SCAN_DEPTH:
        return None
    try:
        entries = sorted(p.iterdir())
    except OSError:
        return None
    children: list[Detection] = []
    for child in entries:
        if child.name.startswith(".") or child.name == "__MACOSX":
            continue
        if child.is_dir():
            found = detect_dir(child, depth + 1)
            if found is not None:
                children.extend(found.children if found.kind == GROUP else [found])
    if not children:
        loose = _loose_files(entries)
        if len(loose) == 1:
            return loose[0]
        if loose:
            return Detection(GROUP, p, [], children=loose)
        return None
    if len(children) == 1:
        return children[0]
    return Detection(GROUP, p, [], children=children)


def _loose_files(entries: list[Path]) -> list[Detection]:
    """Single-file profiles (a Kineto json per rank, a kernel csv) lying in a folder with no rank folders."""
    out = []
    for f in entries:
        if not f.is_file() or f.name.startswith("."):
            continue
        if not f.name.lower().endswith((".json", ".json.gz", ".gz", ".csv", ".db")):
            continue
        try:
            d = detect_file(f)
        except InputError:
            continue
        if d.kind in (KINETO, KERNEL_CSV, ASCEND_PT_DB, MSPROF_DB, TRACE_JSON):
            d.rank_hint = _rank_hint(f)
            out.append(d)
    return out


def _why_not_dir(p: Path) -> Message:
    files = [f for f in p.rglob("*") if f.is_file()]
    if not files:
        return msg("empty folder: no files to read")
    empty = [f for f in files if f.stat().st_size == 0]
    if len(empty) == len(files):
        return msg("all {n} file(s) are empty (0 bytes), e.g. {file}", n=len(files),
                   file=str(empty[0].relative_to(p)))
    sample = ", ".join(str(f.relative_to(p)) for f in files[:3])
    return msg("no profile found among {n} file(s) (e.g. {files}); expected a *_ascend_pt folder, a PROF_* "
               "folder, kernel_details.csv, a profiler .db or a Kineto .json", n=len(files), files=sample)
