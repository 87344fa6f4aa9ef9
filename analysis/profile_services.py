"""A profile's way into and out of the pipeline: an upload is stored and queued, a finished (or stuck) profile
is run again, a deleted profile takes its stored tables and artifacts with it, and a new model file makes its
remedies again. ``profiles.services`` stores the bytes and the rows; these add what concerns the analysis,
in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from analysis.artifact_services import remedies_start
from analysis.models import AnalysisRun
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.storage import ProfileStore, delete_prefix
from analysis.texts import NO_ERROR
from profiles.models import Profile, ProfileStatus, Project, UploadSession
from profiles.services import (
    profile_create,
    profile_model_file_set,
    require_write,
    upload_session_complete,
)

# --- starting the pipeline ----------------------------------------------------------------------------


def pipeline_start(*, profile: Profile) -> None:
    """uploaded -> queued, then ingest is queued once the row is committed (a no-op for any other status)."""
    if Profile.objects.filter(pk=profile.pk).transition(ProfileStatus.QUEUED, among=(ProfileStatus.UPLOADED,),
                                                         progress=0):
        profile.status = ProfileStatus.QUEUED
        enqueue_on_commit(TaskName.INGEST, profile.pk)


def pipeline_restart(*, profile: Profile) -> Profile:
    """Queue a finished profile again from its kept archive, or one that is stuck (``ValidationError`` while
    a live worker holds it)."""
    now = timezone.now()
    # Stuck: a step whose worker's lease ran out, or one no worker took for PYPTO_REQUEUE_AFTER_S (its
    # message was lost). A fanned-out upload waiting for its ranks (parsing, no lease) is not stuck.
    waited = now - timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S)
    stuck = Q(status__in=(ProfileStatus.PARSING, ProfileStatus.ANALYZING), lease_until__lt=now) | Q(
        status__in=(ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.ANALYZING),
        lease_until__isnull=True, updated_at__lt=waited)
    finished = Q(status__in=(ProfileStatus.FAILED, ProfileStatus.READY))
    with transaction.atomic():
        moved = Profile.objects.filter(finished | stuck, pk=profile.pk).transition(
            ProfileStatus.QUEUED, progress=0, lease_until=None, **NO_ERROR)
        if not moved:
            raise ValidationError(_("A worker is working on this profile now; it can be run again once it "
                                    "finishes, or once its claim runs out if that worker stopped."))
        # A fanned-out upload reads every rank again.
        Profile.objects.filter(group_id=profile.pk).transition(ProfileStatus.QUEUED, progress=0,
                                                               lease_until=None, **NO_ERROR)
        enqueue_on_commit(TaskName.INGEST, profile.pk)
    profile.refresh_from_db()
    return profile


# --- what users do to profiles ------------------------------------------------------------------------


def profile_upload(*, project: Project, user: Account, file: File, filename: str, name: str = "",
                   sku: str = "", tags: Iterable[str] | str | None = None, model_file: File | None = None,
                   concurrency: bool = True) -> Profile:
    """Store the upload (``profiles.services.profile_create``) and queue its analysis."""
    with transaction.atomic():
        profile = profile_create(project=project, user=user, file=file, filename=filename, name=name, sku=sku,
                                 tags=tags, model_file=model_file, concurrency=concurrency)
        pipeline_start(profile=profile)
    return profile


def upload_complete(*, session: UploadSession, user: Account) -> Profile:
    """A fully received chunked upload becomes a profile whose analysis is queued (once, however often this
    is called)."""
    with transaction.atomic():
        profile = upload_session_complete(session=session, user=user)
        pipeline_start(profile=profile)
    return profile


def profile_rerun(*, profile: Profile, user: Account) -> Profile:
    """Run the pipeline again from the kept archive (after a failure, or after the engine improved)."""
    require_write(user=user, project=profile.project)
    return pipeline_restart(profile=profile)


def profile_delete(*, profile: Profile, user: Account) -> None:
    """Delete a profile on a member's request: the only way its archive is ever removed. Its stored files go
    after the commit: the archive, the model file, the artifacts and the parsed tables, of the profile and of
    the rank profiles of a multi-rank upload (whose rows cascade)."""
    require_write(user=user, project=profile.project)
    names: list[str] = []
    prefixes: list[str] = []
    for p in [profile, *profile.ranks.all()]:
        names += [f.name for f in (p.archive, p.model_file) if f.name]
        names += [artifact.file.name for artifact in p.artifacts.all() if artifact.file.name]
        prefixes.append(ProfileStore(p).prefix)

    def remove_files() -> None:
        for name in names:
            default_storage.delete(name)
        for prefix in filter(None, prefixes):
            delete_prefix(prefix)

    with transaction.atomic():
        profile.delete()
        transaction.on_commit(remove_files)


def profile_model_file_attach(*, profile: Profile, user: Account, file: File,
                              filename: str) -> AnalysisRun | None:
    """Attach (or replace) the profile's model file and make the remedies again for its latest analysis, so
    each patch also comes as a unified diff against this file (a new artifact version).

    Returns the queued remedies run, or None when there is nothing to make them for yet (a failed profile;
    a re-run reads the file). A profile still in the pipeline gets them from its diagnosis and the queued run.
    """
    with transaction.atomic():
        profile_model_file_set(profile=profile, user=user, file=file, filename=filename)
        return remedies_start(profile=profile)
