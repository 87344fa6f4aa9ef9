"""A many-rank upload, read one rank per task: its ingest splits the archive into one small tar per rank, each
a child profile (``Profile.group``) with its own ingest; the last rank to finish moves the upload on to
diagnose, which reads every rank's tables where they are (``ProfileStore.rank_prefix``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import tarfile
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.utils.translation import gettext_noop

from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.pipeline.steps import ProfileStep
from analysis.storage import ProfileStore
from analysis.summary import ProfileSummary, summary_fields, summary_of
from analysis.texts import error_fields, stored_text
from profiles.models import Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.formats import detect_format
from pypto_core.i18n import Message, Text, join_texts, loaded_texts, msg, render, stored_texts

_HASH_BLOCK = 1024 * 1024
ARCHIVE_KINDS = ("zip", "tar", "tar.gz")
RANK_NAME_SEP = " · "  # a rank's name: the upload's, then its folder in the archive


def rank_paths(profile: Profile, unpacked: Path) -> list[Path]:
    """The rank folders (or files) of a multi-rank upload, when it has at least PYPTO_FANOUT_MIN_RANKS."""
    if profile.upload_kind not in ARCHIVE_KINDS:
        return []
    try:
        found = detect_format(unpacked)
    except InputError:
        return []  # the ordinary read names the problem
    if found.kind != "group":
        return []
    paths = sorted({Path(c.path).resolve() for c in found.children})
    root = unpacked.resolve()
    # Only disjoint parts of the archive are split; anything nested or the root itself is read whole.
    if root in paths or any(a != b and b.is_relative_to(a) for a in paths for b in paths):
        return []
    return paths if len(paths) >= max(2, settings.PYPTO_FANOUT_MIN_RANKS) else []


def fan_out(step: ProfileStep, unpacked: Path, workdir: Path) -> bool:
    """Split the upload of ``step`` (an ingest) into one child profile per rank and queue their ingests;
    False when it is not a many-rank upload. A redelivered fan-out reuses the children it already made (keyed
    by file name) and queues only the unfinished ranks."""
    profile = step.profile
    paths = rank_paths(profile, unpacked)
    if not paths:
        return False
    step.progress(32, msg(gettext_noop("{n} ranks: one ingest task per rank"), n=len(paths)))
    children = {c.original_filename: c for c in profile.ranks.all()}
    for i, path in enumerate(paths):
        rel = path.relative_to(unpacked.resolve()).as_posix()
        filename = f"{i:04d}-{rel.replace('/', '_')}.tar"[:200]
        child = children.get(filename)
        if child is not None and child.archive:
            continue
        tar_path = workdir / filename
        with tarfile.open(tar_path, "w") as tf:
            tf.add(path, arcname=rel)
        with open(tar_path, "rb") as fh:
            digest = hashlib.sha256()
            while block := fh.read(_HASH_BLOCK):
                digest.update(block)
            fh.seek(0)
            child = child or Profile(
                project_id=profile.project_id, group=profile, rank=i,
                name=f"{profile.name}{RANK_NAME_SEP}{rel}"[:200],
                sku=profile.sku, tags=profile.tags, original_filename=filename, upload_kind="tar",
                created_by_id=profile.created_by_id, status=ProfileStatus.QUEUED,
            )
            child.size = tar_path.stat().st_size
            child.sha256 = digest.hexdigest()
            child.archive.save(filename, File(fh, name=filename), save=False)
        child.save()
        children[filename] = child
        step.progress(32, msg(gettext_noop("rank archive {file} stored"), file=filename))  # renews the lease
    step.timings["fanout_ranks"] = len(paths)
    summary = ProfileSummary(ranks=len(paths), fanout=True, files=len(paths))
    with transaction.atomic():
        # The upload stays parsing, without a lease, until its last rank is read (``rank_finished``).
        Profile.objects.filter(pk=profile.pk).update(progress=35, lease_until=None, **summary_fields(summary))
        step.run_done()
        pending = [c.pk for c in children.values()
                   if c.status in (ProfileStatus.QUEUED, ProfileStatus.PARSING)]
        for pk in pending:
            enqueue_on_commit(TaskName.INGEST, pk)
        if not pending:
            rank_finished(profile.pk)
    step.log(msg(gettext_noop("fanned out to {n} ranks ({queued} queued)"), n=len(paths),
                 queued=len(pending)))
    return True


def rank_finished(group_id: int) -> None:
    """Call in the transaction of a rank's last write. When no rank is left to read, one conditional UPDATE
    moves the upload to diagnose, so exactly one finisher queues it."""
    ranks = list(Profile.objects.filter(group_id=group_id).order_by("rank", "id"))
    read = [r for r in ranks
            if r.parquet_prefix and r.status in (ProfileStatus.ANALYZING, ProfileStatus.READY)]
    waiting = [r for r in ranks
               if r.status in (ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.PARSING)]
    upload = Profile.objects.filter(pk=group_id)
    if waiting:
        share = (len(ranks) - len(waiting)) / max(len(ranks), 1)
        upload.filter(status=ProfileStatus.PARSING).update(progress=35 + int(25 * share))
        return
    failed = [r for r in ranks if r.status == ProfileStatus.FAILED]
    if not read:
        reasons = join_texts([_named_reason(r) for r in failed])
        reason = msg(gettext_noop("no rank could be read ({reasons})"), reasons=reasons)
        upload.transition(ProfileStatus.FAILED, among=(ProfileStatus.PARSING,), lease_until=None,
                          **error_fields(reason))
        return
    folders: list[str] = []
    sources: dict[str, str] = {}
    for r in read:
        store = ProfileStore(r)
        for folder in store.rank_folders():
            name = folder if folder not in sources else f"{folder}_{r.pk}"
            folders.append(name)
            sources[name] = store.rank_prefix(folder)
    primary = read[0]
    primary_summary = summary_of(primary)
    summary = dataclasses.replace(
        primary_summary, report=None, finding_count=None, fanout=True, ranks=len(folders),
        rank_folders=folders, rank_sources=sources,
        rank_profiles=[{"id": r.pk, "rank": r.rank, "name": r.name, "status": r.status} for r in ranks],
        files=sum(summary_of(r).files or 0 for r in read),
        unpacked_bytes=sum(summary_of(r).unpacked_bytes or 0 for r in read),
    )
    summary.warnings, summary.warning_messages = stored_texts(
        loaded_texts(primary_summary.warnings, primary_summary.warning_messages)
        + [msg(gettext_noop("{name} was not read: {reason}"), name=r.name, reason=_reason(r))
           for r in failed])
    group = Profile.objects.get(pk=group_id)
    moved = upload.transition(
        ProfileStatus.ANALYZING, among=(ProfileStatus.PARSING,), progress=60, lease_until=None,
        detected_format=primary.detected_format, **summary_fields(summary),
        # The upload's own folder, for its page data and timeline index (the tables stay with the ranks).
        parquet_prefix=ProfileStore(group).cluster_prefix(),
    )
    if moved:
        enqueue_on_commit(TaskName.DIAGNOSE, group_id)


def _reason(rank: Profile) -> Text:
    """Why a rank failed, as its message where one was kept."""
    return stored_text(rank.error, rank.error_message)


def _named_reason(rank: Profile) -> Text:
    """A failed rank's reason under its name; alone where the reason already starts with the rank's folder
    (the readers name the input they could not read), which read "normal: normal: no readable ..."."""
    reason = _reason(rank)
    folder = rank.name.rsplit(RANK_NAME_SEP, 1)[-1]
    if render(reason).startswith(f"{folder}: "):
        return reason
    return Message("{name}: {reason}", {"name": rank.name, "reason": reason})
