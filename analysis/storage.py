"""Where a profile's files live in storage, and the one place that fetches, stores and deletes them there.

Storage is Django's ``default_storage`` (a folder, or an S3-compatible bucket)::

    projects/<project>/archives/<uuid>/<name>                 the upload, kept untouched (Profile.archive)
    projects/<project>/parquet/<profile>/<run>-<attempt>/     Profile.parquet_prefix: a fresh folder per
        rank_0/ rank_1/ ...                                   ingest attempt, one folder of tables per rank
        views/                                                page data and timeline index (pagedata)
    projects/<project>/parquet/<profile>/cluster-<random>/    a fanned-out upload's own folder (its views):
                                                              its ranks' tables stay with each rank's profile

A fanned-out upload names where each rank's tables are in its summary (``rank_sources``); ``ProfileStore``
is what reads that, so no other module works out where a rank lives.
"""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from django.core.files import File
from django.core.files.storage import default_storage
from django.utils.translation import gettext_noop

from analysis.models import AnalysisRun
from analysis.summary import summary_of
from profiles.models import Profile
from pypto_core.errors import InputError
from pypto_core.i18n import Message, msg
from pypto_core.profile import ColumnSet
from pypto_core.profile import Profile as CoreProfile

_COPY_BLOCK = 1024 * 1024


# --- folders in storage ------------------------------------------------------------------------------


def store_folder(local: Path, prefix: str) -> list[str]:
    """Copy every file under ``local`` to ``prefix``; returns the stored names."""
    stored = []
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        name = f"{prefix}/{path.relative_to(local).as_posix()}"
        # Exact names: storage would save beside a stale file under a new name, and the folder's reader
        # would then find the stale one (a reused id after a database restore, say).
        if default_storage.exists(name):
            default_storage.delete(name)
        with open(path, "rb") as fh:
            stored.append(default_storage.save(name, File(fh, name=path.name)))
    return stored


def fetch_folder(prefix: str, local: Path) -> None:
    """Copy the storage folder ``prefix`` to ``local``."""
    dirs, files = default_storage.listdir(prefix)
    local.mkdir(parents=True, exist_ok=True)
    for name in files:
        with default_storage.open(f"{prefix}/{name}", "rb") as src, open(local / name, "wb") as dst:
            shutil.copyfileobj(src, dst, _COPY_BLOCK)
    for sub in dirs:
        fetch_folder(f"{prefix}/{sub}", local / sub)


def delete_prefix(prefix: str) -> None:
    """Delete every file under a storage folder."""
    try:
        dirs, files = default_storage.listdir(prefix)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in files:
        default_storage.delete(f"{prefix}/{name}")
    for sub in dirs:
        delete_prefix(f"{prefix}/{sub}")


def storage_full_reason(exc: BaseException) -> Message | None:
    """The reason, when ``exc`` says the disk or the store is out of space (final: retrying won't help)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return msg(gettext_noop("storage is full ({error})"), error=exc.strerror)
    response = getattr(exc, "response", None)  # botocore's ClientError
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    if code in ("QuotaExceeded", "EntityTooLarge", "InsufficientStorage", "XMinioStorageFull"):
        return msg(gettext_noop("object storage refused the write ({code})"), code=code)
    return None


# --- one profile's files -------------------------------------------------------------------------------


class ProfileStore:
    """The stored files of one profile: its kept archive and its ranks' Parquet tables."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._summary = summary_of(profile)

    # where things are

    @property
    def prefix(self) -> str:
        """The folder of this profile's parsed tables (and views); "" before ingest saved any."""
        return self.profile.parquet_prefix

    def rank_folders(self) -> list[str]:
        """The rank folders, primary (lowest rank) first."""
        return list(self._summary.rank_folders) or ["rank_0"]

    def rank_prefix(self, folder: str | None = None) -> str:
        """Where the tables of rank ``folder`` (default: the primary rank) are: under this profile, or under
        the rank's own profile for an upload that was read one rank per task."""
        folder = self._rank(folder)
        return self._summary.rank_sources.get(folder) or f"{self.prefix}/{folder}"

    def _rank(self, folder: str | None) -> str:
        """``folder`` if it is one of the rank folders, else the primary rank's."""
        folders = self.rank_folders()
        return folder if folder in folders else folders[0]

    def views_prefix(self) -> str:
        """The folder of the views built from the tables (``analysis.pagedata``): replaced with them."""
        return f"{self.prefix}/views"

    def attempt_prefix(self, run: AnalysisRun) -> str:
        """A fresh folder for one ingest attempt: a redelivered ingest never mixes its files with a dead
        attempt's."""
        return f"projects/{self.profile.project_id}/parquet/{self.profile.pk}/{run.pk}-{run.attempts}"

    def cluster_prefix(self) -> str:
        """A fresh folder of a fanned-out upload's own (its views; the tables stay with its ranks)."""
        return f"projects/{self.profile.project_id}/parquet/{self.profile.pk}/cluster-{uuid.uuid4().hex[:12]}"

    # reading

    def fetch_archive(self, dest: Path) -> Path:
        """Copy the kept archive out of storage into ``dest``, verifying the checksum recorded at upload."""
        profile = self.profile
        target = dest / profile.original_filename
        digest = hashlib.sha256()
        with profile.archive.open("rb") as src, open(target, "wb") as dst:
            while block := src.read(_COPY_BLOCK):
                digest.update(block)
                dst.write(block)
        if profile.sha256 and digest.hexdigest() != profile.sha256:
            raise InputError(profile.original_filename,
                             msg(gettext_noop("checksum mismatch: the stored archive changed since upload")))
        return target

    def load(self, dest: Path, *, folder: str | None = None, tables: tuple[str, ...] | None = None,
             columns: ColumnSet | None = None) -> CoreProfile:
        """One rank's tables (default: the primary rank), fetched to ``dest/<folder>`` and loaded; ``tables``
        and ``columns`` limit what is read (the rest stay empty)."""
        if not self.prefix:
            raise InputError(self.profile.name,
                             msg(gettext_noop("no parsed data (the readers did not run on this profile)")))
        local = self.local_folder(dest, folder)
        fetch_folder(self.rank_prefix(folder), local)
        return CoreProfile.load(local, tables=tables, columns=columns)

    def local_folder(self, dest: Path, folder: str | None = None) -> Path:
        """Where ``load`` fetches rank ``folder`` (default: the primary rank) under ``dest``."""
        return dest / self._rank(folder)

    def rank_meta(self, folder: str | None = None) -> dict[str, Any] | None:
        """A rank's saved metadata (``profile.json``), read without its tables; None when unreadable."""
        if not self.prefix:
            return None
        try:
            with default_storage.open(f"{self.rank_prefix(folder)}/profile.json", "rb") as fh:
                return dict(json.loads(fh.read()).get("meta") or {})
        except (OSError, ValueError):
            return None

    # writing

    def store_tables(self, local: Path, prefix: str) -> None:
        """Store a folder of saved ranks (``write_profiles``' output) as ``prefix``."""
        delete_prefix(prefix)
        store_folder(local, prefix)

    def delete_tables(self) -> None:
        """Delete the parsed tables and views (the archive stays: it is only deleted with the profile)."""
        if self.prefix:
            delete_prefix(self.prefix)
