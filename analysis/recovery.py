"""The recovery sweep (Celery beat, ``analysis.tasks.sweep``): nothing stays stuck after a worker dies.

- a pipeline step whose lease ran out (its worker was killed; the filesystem broker loses the message with
  it) is queued again, or failed with the reason once it has killed its worker PYPTO_MAX_STEP_ATTEMPTS times;
- a queued profile whose message is gone (no worker took it for PYPTO_REQUEUE_AFTER_S) is queued again;
- work folders of attempts that no longer hold their profile and partial uploads nobody resumed are
  removed, and the apps above clean what they own (``signals.recovery_sweep``: captures fails the capture
  jobs whose agent went silent or whose deadline passed).

Every change is a conditional UPDATE on the state that was read, so two beats (two sweeps at once) change
each row once and queue each step once; a second message for a step is harmless (the step's claim).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from analysis import signals
from analysis.models import AnalysisRun, JobStatus
from analysis.pipeline.fanout import rank_finished
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.texts import error_fields
from analysis.workdirs import remove_dead_workdirs
from profiles.models import Profile, ProfileStatus
from profiles.services import remove_stale_partials
from pypto_core.i18n import msg

log = logging.getLogger(__name__)


def recovery_sweep() -> dict[str, int]:
    """One pass; returns what it changed (a second pass right after changes nothing)."""
    done = {"requeued": 0, "failed": 0, "work_folders": 0, "partial_uploads": 0}
    now = timezone.now()
    for profile in Profile.objects.filter(
        status__in=(ProfileStatus.PARSING, ProfileStatus.ANALYZING), lease_until__lt=now
    ).only("pk", "status", "lease_until", "group_id", "original_filename")[:500]:
        outcome = _recover_expired(profile)
        if outcome:
            done[outcome] += 1
    done["requeued"] += _requeue_lost_messages()
    done["work_folders"] = remove_dead_workdirs()
    done["partial_uploads"] = remove_stale_partials(older_than_days=settings.PYPTO_PARTIAL_UPLOAD_DAYS)
    for _receiver, counts in signals.recovery_sweep.send(sender=None):  # what the apps above clean
        if isinstance(counts, dict):
            done.update(counts)
    if any(done.values()):
        log.info("recovery sweep: %s", done)
    return done


def _recover_expired(profile: Profile) -> str:
    """The step of ``profile`` whose worker died: queued again, or failed after too many attempts; returns
    ``requeued``, ``failed``, or "" when another sweep or a live worker changed the row first."""
    ingest = profile.status == ProfileStatus.PARSING
    step = AnalysisRun.Kind.INGEST if ingest else AnalysisRun.Kind.DIAGNOSE
    run = profile.runs.filter(kind=step, status=JobStatus.RUNNING).order_by("-id").first()
    attempts = run.attempts if run is not None else 0
    # Only the row as it was read: a live worker that renewed the lease, or another sweep, wins over us.
    same = Profile.objects.filter(pk=profile.pk, lease_until=profile.lease_until)
    with transaction.atomic():
        if attempts >= settings.PYPTO_MAX_STEP_ATTEMPTS:
            reading = gettext_noop(
                "{file}: the worker stopped {n} times while reading it (killed, or out of memory); the "
                "uploaded archive is kept: run the analysis again once the workers have more memory")
            diagnosing = gettext_noop(
                "{file}: the worker stopped {n} times while diagnosing it (killed, or out of memory); the "
                "uploaded archive is kept: run the analysis again once the workers have more memory")
            reason = msg(reading if ingest else diagnosing, file=profile.original_filename, n=attempts)
            failed = same.transition(ProfileStatus.FAILED, among=(profile.status,), lease_until=None,
                                     **error_fields(reason))
            if not failed:
                return ""
            if run is not None:
                AnalysisRun.objects.filter(pk=run.pk).update(
                    status=JobStatus.FAILED, finished_at=timezone.now(), **error_fields(reason))
            if profile.group_id is not None:
                rank_finished(profile.group_id)
            return "failed"
        queued = ProfileStatus.QUEUED if ingest else ProfileStatus.ANALYZING
        if not same.transition(queued, among=(profile.status,), lease_until=None):
            return ""
        enqueue_on_commit(TaskName.INGEST if ingest else TaskName.DIAGNOSE, profile.pk)
    log.warning("profile %s: %s lease expired (worker gone); queued again", profile.pk, step)
    return "requeued"


def _requeue_lost_messages() -> int:
    """Profiles waiting for a step no worker took for PYPTO_REQUEUE_AFTER_S: their message is queued again
    (a message lost with its broker or worker; if it was only slow, the step's claim makes the copy a
    no-op)."""
    stale = timezone.now() - timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S)
    waiting = Q(status=ProfileStatus.QUEUED) | Q(status=ProfileStatus.ANALYZING)
    count = 0
    stale_rows = Profile.objects.filter(waiting, lease_until__isnull=True, updated_at__lt=stale)
    for pk, status, updated in stale_rows.values_list("pk", "status", "updated_at")[:500]:
        with transaction.atomic():
            same = Profile.objects.filter(pk=pk, status=status, lease_until__isnull=True, updated_at=updated)
            if not same.update(updated_at=timezone.now()):  # the status stays: only the message is new
                continue
            enqueue_on_commit(TaskName.INGEST if status == ProfileStatus.QUEUED else TaskName.DIAGNOSE, pk)
        count += 1
    return count
