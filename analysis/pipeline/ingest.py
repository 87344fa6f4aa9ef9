"""Ingest: the kept archive, unpacked within the deployment's limits, read into one folder of Parquet tables
per rank (``pypto_core.formats.write_profiles``) and stored; then diagnose is queued. A many-rank upload is
split instead, one ingest per rank (``pipeline.fanout``), and a rank's ingest reports to its upload.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_noop

from analysis.pipeline import fanout
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.pipeline.steps import ProfileStep, run_step
from analysis.storage import ProfileStore, storage_full_reason
from analysis.summary import ProfileSummary, summary_fields
from profiles.models import Profile, ProfileStatus
from pypto_core.archive import ExtractedFile, unpack_upload
from pypto_core.errors import InputError
from pypto_core.formats import write_profiles
from pypto_core.i18n import Text, loaded_texts, map_text, msg, stored_texts
from pypto_core.limits import Limits, use_limits
from pypto_core.profile import ProfileMeta, save_meta, saved_summary

# Uploads that are one file: read as themselves; anything else is read as its unpacked folder.
SINGLE_FILE_KINDS = ("json", "json.gz", "csv", "db")


def upload_limits() -> Limits:
    """The deployment's limits on the work one upload may cause (pypto_core.limits)."""
    return Limits(
        max_members=settings.PYPTO_MAX_ARCHIVE_MEMBERS,
        max_unpacked_bytes=settings.PYPTO_MAX_UNPACKED_BYTES,
        max_ratio=settings.PYPTO_MAX_COMPRESSION_RATIO,
        max_text_chars=settings.PYPTO_MAX_TEXT_CHARS,
        max_table_rows=settings.PYPTO_MAX_TABLE_ROWS,
        sqlite_seconds=settings.PYPTO_SQLITE_SECONDS,
    )


def pipeline_ingest(*, profile_id: int) -> None:
    run_step(IngestStep(profile_id))


class IngestStep(ProfileStep):
    kind = "ingest"
    internal_error_reason = gettext_noop("{subject}: internal error while reading ({error}: {detail})")
    claim_from = (ProfileStatus.QUEUED, ProfileStatus.PARSING)
    holding = ProfileStatus.PARSING
    release_to = ProfileStatus.QUEUED

    def subject(self) -> str:
        return self.profile.original_filename

    def not_claimed(self) -> None:
        profile = Profile.objects.filter(pk=self.profile_id).first()
        if profile is not None and profile.status == ProfileStatus.ANALYZING and profile.lease_until is None:
            # This message was redelivered after ingest committed but before diagnose was queued.
            enqueue_on_commit(TaskName.DIAGNOSE, self.profile_id)

    def work(self, workdir: Path) -> None:
        profile = self.profile
        use_limits(upload_limits())  # every reader below, whatever the wrapper of the upload
        self.progress(2, msg(gettext_noop("claimed {file} ({size} bytes)"), file=profile.original_filename,
                             size=profile.size))
        self.hold_if_asked(point="rank" if profile.group_id is not None else "upload")
        store = ProfileStore(profile)
        with self.timed("fetch_s"):
            archive = store.fetch_archive(workdir)
        self.progress(10, msg(gettext_noop("archive fetched, checksum verified")))
        unpacked = workdir / "unpacked"
        with self.timed("unpack_s"):
            files = unpack_upload(archive, unpacked, filename=profile.original_filename,
                                  limits=upload_limits())
        self.progress(30, msg(gettext_noop("unpacked {n} files, {size} bytes"), n=len(files),
                              size=sum(f.size for f in files)))
        self.hold_if_asked(point="unpacked")
        if not files:
            raise InputError(profile.original_filename, msg(gettext_noop("the archive contains no files")))
        if profile.group_id is None and fanout.fan_out(self, unpacked, workdir):
            return
        with self.timed("parse_s"):
            summary, prefix = self._read_and_store(unpacked, files, workdir)
        with transaction.atomic():
            moved = self.finish(ProfileStatus.ANALYZING, progress=60, parquet_prefix=prefix,
                                detected_format=summary.format or "unknown", **summary_fields(summary))
            if moved:
                enqueue_on_commit(TaskName.DIAGNOSE, self.profile_id)
                if profile.group_id is not None:
                    fanout.rank_finished(profile.group_id)
        self.log(msg(gettext_noop("done: format {format}, timings {timings}"), format=summary.format,
                     timings=str(self.timings)))

    def fail(self, reason: Text) -> None:
        super().fail(reason)
        if self.profile.group_id is not None:  # a rank that cannot be read is a rank done
            with transaction.atomic():
                fanout.rank_finished(self.profile.group_id)

    def internal_error(self, exc: BaseException, workdir: Path) -> Text:
        full = storage_full_reason(exc)
        if full:
            return msg(gettext_noop("{subject}: {reason} while saving the parsed tables; the uploaded "
                                    "archive is kept: run the analysis again once space is freed"),
                       subject=self.subject(), reason=full)
        return super().internal_error(exc, workdir)

    def _read_and_store(self, unpacked: Path, files: list[ExtractedFile],
                        workdir: Path) -> tuple[ProfileSummary, str]:
        """Every rank read into Parquet and stored under a fresh prefix; the summary and that prefix."""
        profile = self.profile
        biggest = sorted(files, key=lambda f: -f.size)[:20]
        # A single file is read as itself; an archive as its folder (the reader finds the ranks). Each rank is
        # streamed into its Parquet folder in turn: memory is bounded by one rank's reader, not the upload.
        single = profile.upload_kind in SINGLE_FILE_KINDS
        target = unpacked / files[0].name if single else unpacked
        local = workdir / "parquet"
        self.progress(35, msg(gettext_noop("reading with pypto_core.formats.write_profiles")))
        try:
            saved = write_profiles(target, local)
        except InputError as exc:
            inside = f"{unpacked}/"
            raise exc.with_names(lambda text: text.replace(inside, "")) from exc
        name = _UserNames(unpacked, profile.original_filename, single)
        for folder, meta in saved.ranks:  # sources as the user knows them, never the worker's folder
            name.meta(meta)
            save_meta(local / folder, meta)
        rank_folders = [folder for folder, _meta in saved.ranks]
        self.progress(50, msg(gettext_noop("read {n} rank(s) into Parquet"), n=len(rank_folders)))
        primary = saved_summary(local / saved.primary()[0])
        store = ProfileStore(profile)
        prefix = store.attempt_prefix(self.run)
        store.store_tables(local, prefix)
        summary = ProfileSummary.from_dict(primary)
        summary.files = len(files)
        summary.unpacked_bytes = sum(f.size for f in files)
        summary.largest_files = [f.to_dict() for f in biggest]
        summary.ranks = len(rank_folders)
        summary.rank_folders = rank_folders
        summary.warnings, summary.warning_messages = stored_texts(
            [map_text(w, name.text) for w in saved.warnings]
            + loaded_texts(primary["warnings"], primary.get("warning_messages")))
        if store.prefix and store.prefix != prefix:
            store.delete_tables()  # a previous run's tables
        return summary, prefix


class _UserNames:
    """Paths inside the worker's folder, written as the user knows them: ``upload.zip!member``."""

    def __init__(self, unpacked: Path, filename: str, single: bool) -> None:
        self.unpacked, self.filename, self.single = unpacked, filename, single

    def text(self, text: str) -> str:
        inside = f"{self.unpacked}/"
        text = text.replace(inside, "" if self.single else f"{self.filename}!")
        return text.replace(str(self.unpacked), self.filename)

    def meta(self, meta: ProfileMeta) -> None:
        meta.source = self.text(meta.source)
        meta.source_files = [self.text(s) for s in meta.source_files]
        meta.warnings = [map_text(w, self.text) for w in meta.warnings]
