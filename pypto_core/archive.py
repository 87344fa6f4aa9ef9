"""Safe unpacking of uploaded profiles: archives are hostile until proven otherwise.

Used by the web pipeline and the CLI alike. Every refusal is an ``InputError`` whose message names the
archive, the member and the reason. Sizes are enforced on the bytes actually written, never on the sizes
an archive's headers claim (a forged header is the classic zip bomb).
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from pypto_core.errors import InputError
from pypto_core.i18n import Message, msg
from pypto_core.limits import (  # noqa: F401 - the archive limits' names, kept importable from here
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_UNPACKED_BYTES,
    RATIO_FLOOR_BYTES,
    Limits,
    current_limits,
)

# Kinds of upload, by file name. A folder is uploaded as one of the archive kinds.
ARCHIVE_KINDS = ("zip", "tar", "tar.gz")
SINGLE_FILE_KINDS = ("json", "json.gz", "csv", "db")
_SUFFIXES: tuple[tuple[str, str], ...] = (  # longest suffix first
    (".tar.gz", "tar.gz"),
    (".json.gz", "json.gz"),
    (".tgz", "tar.gz"),
    (".zip", "zip"),
    (".tar", "tar"),
    (".json", "json"),
    (".csv", "csv"),
    (".db", "db"),
)

_COPY_BLOCK = 1024 * 1024


@dataclass(frozen=True)
class ExtractedFile:
    """One file written under the destination folder."""

    name: str  # POSIX path relative to the destination folder
    size: int  # bytes written

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "size": self.size}


def detect_upload_kind(filename: str) -> str:
    """``zip | tar | tar.gz | json | json.gz | csv | db`` from the file name, or ``InputError``."""
    lower = filename.lower()
    for suffix, kind in _SUFFIXES:
        if lower.endswith(suffix) and len(lower) > len(suffix):
            return kind
    accepted = ", ".join(s for s, _ in _SUFFIXES)
    raise InputError(filename, msg("unsupported file type (accepted: {accepted})", accepted=accepted))


def safe_member_path(archive: str, member: str) -> PurePosixPath:
    """The member's relative path, or ``InputError`` for absolute paths, ``..`` and odd names."""
    raw = member.replace("\\", "/")  # archives made on Windows use backslashes
    if "\x00" in raw:
        raise InputError(archive, msg("member {member}: NUL byte in name", member=_shown(member)))
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise InputError(archive, msg("member {member}: absolute path", member=_shown(member)))
    parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
    if ".." in parts:
        raise InputError(archive, msg("member {member}: path traversal ('..')", member=_shown(member)))
    if not parts:
        raise InputError(archive, msg("member {member}: empty name", member=_shown(member)))
    shown = _shown(member)
    if any(len(p.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES for p in parts):
        raise InputError(archive, msg("member {member}: a name in its path is longer than {n} bytes",
                                      member=shown, n=_MAX_NAME_BYTES))
    if len(raw.encode("utf-8", "surrogateescape")) > _MAX_PATH_BYTES:
        raise InputError(archive, msg("member {member}: path longer than {n} bytes", member=shown,
                                      n=_MAX_PATH_BYTES))
    return PurePosixPath(*parts)


# What file systems allow (NAME_MAX, PATH_MAX): longer names are refused by name, before any write fails.
_MAX_NAME_BYTES = 255
_MAX_PATH_BYTES = 4096


def _shown(member: str) -> str:
    """A member name for a message: cut, so that a hostile name cannot make the message huge."""
    return repr(member if len(member) <= 200 else member[:200] + "…")


class _Budget:
    """Counts members and written bytes against the limits, for one archive."""

    def __init__(self, archive: str, archive_bytes: int, limits: Limits) -> None:
        self.archive = archive
        self.archive_bytes = max(archive_bytes, 1)
        self.limits = limits
        self.members = 0
        self.written = 0

    def add_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise InputError(self.archive, msg("member {member}: too many members (limit {n})",
                                               member=_shown(name), n=self.limits.max_members))

    def check_declared(self, name: str, declared: int) -> None:
        # A cheap early refusal from the header; the real check is on written bytes.
        if self.written + declared > self.limits.max_unpacked_bytes:
            raise InputError(self.archive, self._too_big(name))

    def add_bytes(self, name: str, n: int) -> None:
        self.written += n
        if self.written > self.limits.max_unpacked_bytes:
            raise InputError(self.archive, self._too_big(name))
        if self.written > RATIO_FLOOR_BYTES and self.written / self.archive_bytes > self.limits.max_ratio:
            raise InputError(self.archive, msg(
                "member {member}: compression ratio above {ratio:g}:1 ({written} bytes unpacked from "
                "{size}), refused as a zip bomb", member=_shown(name), ratio=self.limits.max_ratio,
                written=self.written, size=self.archive_bytes))

    def _too_big(self, name: str) -> Message:
        return msg("member {member}: unpacked size exceeds {n} bytes", member=_shown(name),
                   n=self.limits.max_unpacked_bytes)


def _copy_limited(src: IO[bytes], dest: Path, name: str, budget: _Budget) -> int:
    _make_folder(dest.parent, name, budget.archive)
    size = 0
    # "xb": never overwrite (a duplicate member name would otherwise replace an earlier file silently).
    try:
        out = open(dest, "xb")
    except FileExistsError as exc:
        reason = (msg("member {member}: a folder of that name is in the archive too", member=_shown(name))
                  if dest.is_dir() else msg("member {member}: duplicate member name", member=_shown(name)))
        raise InputError(budget.archive, reason) from exc
    except OSError as exc:
        raise InputError(budget.archive, _unwritable(name, exc)) from exc
    with out:
        while True:
            block = src.read(_COPY_BLOCK)
            if not block:
                break
            out.write(block)
            size += len(block)
            budget.add_bytes(name, len(block))
    return size


def _make_folder(folder: Path, name: str, archive: str) -> None:
    """``folder`` and its parents, or a named refusal: a member ``a`` then ``a/b`` (``a`` is a file)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        reason = msg("member {member}: a folder in its path is a file in the archive", member=_shown(name))
        raise InputError(archive, reason) from exc
    except OSError as exc:
        raise InputError(archive, _unwritable(name, exc)) from exc


def _unwritable(name: str, exc: OSError) -> Message:
    return msg("member {member}: cannot be written ({error})", member=_shown(name), error=exc.strerror)


def _special(name: str) -> Message:
    return msg("member {member}: special file (device or fifo) refused", member=_shown(name))


def _zip_members(archive: str, zf: zipfile.ZipFile) -> Iterator[zipfile.ZipInfo]:
    for info in zf.infolist():
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise InputError(archive, msg("member {member}: symbolic link refused",
                                          member=_shown(info.filename)))
        if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and stat.S_IFMT(mode):
            raise InputError(archive, _special(info.filename))
        yield info


def _extract_zip(path: Path, dest: Path, budget: _Budget) -> list[ExtractedFile]:
    archive = str(path)
    out: list[ExtractedFile] = []
    with zipfile.ZipFile(path) as zf:
        for info in _zip_members(archive, zf):
            budget.add_member(info.filename)
            rel = safe_member_path(archive, info.filename)
            if info.is_dir():
                _make_folder(dest / rel, info.filename, archive)
                continue
            budget.check_declared(info.filename, info.file_size)
            try:
                with zf.open(info) as src:
                    size = _copy_limited(src, dest / rel, info.filename, budget)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
                reason = msg("member {member}: corrupt or unreadable ({error})", member=_shown(info.filename),
                             error=str(exc))
                raise InputError(archive, reason) from exc
            out.append(ExtractedFile(rel.as_posix(), size))
    return out


def _extract_tar(path: Path, dest: Path, budget: _Budget) -> list[ExtractedFile]:
    archive = str(path)
    out: list[ExtractedFile] = []
    # Streaming mode ("r|*") reads each member once, in order: no random access into a gzip stream.
    with tarfile.open(path, mode="r|*") as tf:
        for info in tf:
            budget.add_member(info.name)
            if info.issym():
                raise InputError(archive, msg("member {member}: symbolic link refused",
                                              member=_shown(info.name)))
            if info.islnk():
                raise InputError(archive, msg("member {member}: hard link refused",
                                              member=_shown(info.name)))
            if info.ischr() or info.isblk() or info.isfifo() or info.isdev():
                raise InputError(archive, _special(info.name))
            rel = safe_member_path(archive, info.name)
            if info.isdir():
                _make_folder(dest / rel, info.name, archive)
                continue
            if not info.isreg():
                raise InputError(archive, msg("member {member}: unsupported member type",
                                              member=_shown(info.name)))
            budget.check_declared(info.name, info.size)
            src = tf.extractfile(info)
            if src is None:  # pragma: no cover - isreg() members always have data
                raise InputError(archive, msg("member {member}: unreadable", member=_shown(info.name)))
            try:
                size = _copy_limited(src, dest / rel, info.name, budget)
            except (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile) as exc:
                reason = msg("member {member}: corrupt or truncated ({error})", member=_shown(info.name),
                             error=str(exc))
                raise InputError(archive, reason) from exc
            out.append(ExtractedFile(rel.as_posix(), size))
    return out


def safe_extract(
    archive_path: str | os.PathLike[str],
    dest_dir: str | os.PathLike[str],
    *,
    max_members: int | None = None,
    max_unpacked_bytes: int | None = None,
    max_ratio: float | None = None,
) -> list[ExtractedFile]:
    """Extract a .zip, .tar or .tar.gz into ``dest_dir`` and list the files written, with their sizes.

    Refuses (``InputError`` naming the member and the reason): absolute paths, ``..``, symbolic and hard
    links, device files and fifos, more than ``max_members`` members, more than ``max_unpacked_bytes``
    written, an unpacked/archive size ratio above ``max_ratio``, duplicate names, and corrupt archives.
    On refusal, what was already written stays in ``dest_dir`` for the caller to remove; the archive itself
    is never touched.
    """
    path = Path(archive_path)
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    given = current_limits()  # the deployment's (pypto_core.limits.use_limits), where not given here
    limits = Limits(
        max_members=given.max_members if max_members is None else max_members,
        max_unpacked_bytes=given.max_unpacked_bytes if max_unpacked_bytes is None else max_unpacked_bytes,
        max_ratio=given.max_ratio if max_ratio is None else max_ratio,
    )
    try:
        archive_bytes = path.stat().st_size
    except OSError as exc:
        raise InputError(str(path), msg("cannot read archive ({error})",
                                        error=exc.strerror or str(exc))) from exc
    budget = _Budget(str(path), archive_bytes, limits)
    try:
        if zipfile.is_zipfile(path):
            return _extract_zip(path, dest, budget)
        return _extract_tar(path, dest, budget)
    except InputError:
        raise
    except zipfile.BadZipFile as exc:
        raise InputError(str(path), msg("corrupt zip archive ({error})", error=str(exc))) from exc
    except OSError as exc:  # writing under dest failed in a way not named above
        raise InputError(str(path), msg("cannot be unpacked ({error})",
                                        error=exc.strerror or type(exc).__name__)) from exc
    except (NotImplementedError, RuntimeError, ValueError, UnicodeError, struct.error, OverflowError) as exc:
        # what zipfile and tarfile raise on headers they cannot decode (tests/core/test_fuzz_limits.py)
        raise InputError(str(path), msg("corrupt or unsupported archive ({error}: {detail})",
                                        error=type(exc).__name__, detail=str(exc)[:200])) from exc
    except (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(str(path), msg("corrupt or unrecognised archive ({error})",
                                        error=str(exc))) from exc


def unpack_upload(
    upload_path: str | os.PathLike[str],
    dest_dir: str | os.PathLike[str],
    *,
    filename: str,
    limits: Limits | None = None,
) -> list[ExtractedFile]:
    """Put an upload's content under ``dest_dir``: archives safely extracted, single files copied as is.

    ``filename`` is the name the user gave the upload (it decides the kind; the stored file may be named
    otherwise). Single ``.json.gz`` files are kept compressed: the readers open them directly.
    """
    limits = limits or current_limits()
    kind = detect_upload_kind(filename)
    if kind in ARCHIVE_KINDS:
        return safe_extract(
            upload_path,
            dest_dir,
            max_members=limits.max_members,
            max_unpacked_bytes=limits.max_unpacked_bytes,
            max_ratio=limits.max_ratio,
        )
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    rel = PurePosixPath(safe_member_path(filename, filename).name)
    src_size = Path(upload_path).stat().st_size
    if src_size > limits.max_unpacked_bytes:
        raise InputError(filename, msg("file size {size} exceeds {n} bytes", size=src_size,
                                       n=limits.max_unpacked_bytes))
    shutil.copyfile(upload_path, dest / rel)
    return [ExtractedFile(rel.as_posix(), src_size)]
