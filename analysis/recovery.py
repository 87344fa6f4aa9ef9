"""The recovery sweep (Celery beat, ``analysis.tasks.sweep``): nothing stays stuck after a worker dies.

- a pipeline step whose lease ran out (its worker was killed; the filesystem broker loses the message with
  it) is queued again, or failed with the reason once it has killed its worker PYPTO_MAX_STEP_ATTEMPTS times;
- a queued profile whose message is gone (no worker took it for PYPTO_REQUEUE_AFTER_S) is queued again;
- work folders of attempts that no longer hold their profile, partial uploads nobody resumed, and capture
  jobs whose agent went silent or whose deadline passed are cleaned.

Every change is a conditional UPDATE on the state that was read, so two beats (two sweeps at once) change
each row once and queue each step once; a second message for a step is harmless (the step's claim).
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from analysis.models import AnalysisRun, JobStatus
from profiles.models import Profile, ProfileStatus

log = logging.getLogger(__name__)

# Work folders are named p<profile id>-<step>-<random> (analysis.services._workdir).
_WORKDIR_NAME = re.compile(r"^p(\d+)-(ingest|diagnose|what-if|compare|sweep)-")
_LEASED_STEPS = {"ingest": (ProfileStatus.QUEUED, ProfileStatus.PARSING),
                 "diagnose": (ProfileStatus.ANALYZING,)}


def recovery_sweep() -> dict[str, int]:
    """One pass; returns what it changed (a second pass right after changes nothing)."""
    done = {"requeued": 0, "failed": 0, "work_folders": 0, "partial_uploads": 0, "capture_jobs": 0}
    now = timezone.now()
    for profile in Profile.objects.filter(
        status__in=(ProfileStatus.PARSING, ProfileStatus.ANALYZING), lease_until__lt=now
    ).only("pk", "status", "lease_until", "group_id", "original_filename")[:500]:
        outcome = _recover_expired(profile)
        if outcome:
            done[outcome] += 1
    done["requeued"] += _requeue_lost_messages()
    done["work_folders"] = remove_dead_workdirs()
    from profiles.services import remove_stale_partials

    done["partial_uploads"] = remove_stale_partials(older_than_days=settings.PYPTO_PARTIAL_UPLOAD_DAYS)
    from captures.services import jobs_expire

    done["capture_jobs"] = jobs_expire()
    if any(done.values()):
        log.info("recovery sweep: %s", done)
    return done


def _recover_expired(profile: Profile) -> str:
    """The step of ``profile`` whose worker died: queued again, or failed after too many attempts; returns
    ``requeued``, ``failed``, or "" when another sweep or a live worker changed the row first."""
    from analysis import services, tasks

    step = AnalysisRun.Kind.INGEST if profile.status == ProfileStatus.PARSING else AnalysisRun.Kind.DIAGNOSE
    run = profile.runs.filter(kind=step, status=JobStatus.RUNNING).order_by("-id").first()
    attempts = run.attempts if run is not None else 0
    # Only the row as it was read: a live worker that renewed the lease, or another sweep, wins over us.
    same = Profile.objects.filter(pk=profile.pk, status=profile.status, lease_until=profile.lease_until)
    with transaction.atomic():
        if attempts >= settings.PYPTO_MAX_STEP_ATTEMPTS:
            reason = (f"{profile.original_filename}: the worker stopped {attempts} times while "
                      f"{'reading' if step == 'ingest' else 'diagnosing'} it (killed, or out of memory); "
                      "the uploaded archive is kept: run the analysis again once the workers have more "
                      "memory")
            if not same.update(status=ProfileStatus.FAILED, error=reason, lease_until=None,
                               updated_at=timezone.now()):
                return ""
            if run is not None:
                AnalysisRun.objects.filter(pk=run.pk).update(status=JobStatus.FAILED, error=reason,
                                                             finished_at=timezone.now())
            if profile.group_id is not None:
                services._rank_finished(profile.group_id)
            return "failed"
        queued = ProfileStatus.QUEUED if step == AnalysisRun.Kind.INGEST else ProfileStatus.ANALYZING
        if not same.update(status=queued, lease_until=None, updated_at=timezone.now()):
            return ""
        task = tasks.ingest if step == AnalysisRun.Kind.INGEST else tasks.diagnose
        transaction.on_commit(lambda: task.delay(profile.pk))
    log.warning("profile %s: %s lease expired (worker gone); queued again", profile.pk, step)
    return "requeued"


def _requeue_lost_messages() -> int:
    """Profiles waiting for a step no worker took for PYPTO_REQUEUE_AFTER_S: their message is queued again
    (a message lost with its broker or worker; if it was only slow, the step's claim makes the copy a
    no-op)."""
    from analysis import tasks

    stale = timezone.now() - timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S)
    waiting = Q(status=ProfileStatus.QUEUED) | Q(status=ProfileStatus.ANALYZING)
    count = 0
    stale_rows = Profile.objects.filter(waiting, lease_until__isnull=True, updated_at__lt=stale)
    for pk, status, updated in stale_rows.values_list("pk", "status", "updated_at")[:500]:
        with transaction.atomic():
            same = Profile.objects.filter(pk=pk, status=status, lease_until__isnull=True, updated_at=updated)
            if not same.update(updated_at=timezone.now()):
                continue
            task = tasks.ingest if status == ProfileStatus.QUEUED else tasks.diagnose
            transaction.on_commit(lambda task=task, pk=pk: task.delay(pk))
        count += 1
    return count


def remove_dead_workdirs(*, profile_id: int | None = None, step: str | None = None,
                         keep: Path | None = None) -> int:
    """Remove work folders nobody is using: a pipeline step's folder once its profile holds no live lease
    (the worker finished or died), any other folder (what-if, comparison) once older than a step can live.
    With ``profile_id`` and ``step``: that step's folders other than ``keep`` (the step just claimed it, so
    every other folder of it belongs to a dead attempt)."""
    base = Path(settings.PYPTO_WORK_DIR)
    try:
        entries = list(base.iterdir())
    except FileNotFoundError:
        return 0
    now = timezone.now()
    oldest = time.time() - settings.PYPTO_TASK_LEASE_SECONDS
    removed = 0
    for entry in entries:
        match = _WORKDIR_NAME.match(entry.name)
        if not match or not entry.is_dir() or (keep is not None and entry == keep):
            continue
        pk, kind = int(match.group(1)), match.group(2)
        if profile_id is not None:
            dead = pk == profile_id and kind == step
        elif kind in _LEASED_STEPS:
            held = Profile.objects.filter(pk=pk, status__in=_LEASED_STEPS[kind], lease_until__gte=now)
            dead = not held.exists()
        else:
            try:
                dead = entry.stat().st_mtime < oldest
            except FileNotFoundError:
                continue
        if dead:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed
