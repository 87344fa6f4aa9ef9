"""Celery tasks: thin wrappers that take ids and run a step (``analysis.pipeline``, ``analysis.comparisons``,
...).

Their names are fixed (``pipeline.queue.TaskName``): queued messages and ``CELERY_TASK_ROUTES`` refer to
them. Late acknowledgement (settings) means a task whose worker dies is redelivered; the steps' claims make
the redelivery take over exactly once. Only transient errors are retried; bad input is marked failed.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from analysis import page_builds
from analysis.artifact_services import ProfileBusy, remedies_run
from analysis.comparisons import ProfilesNotReady, comparison_run
from analysis.pipeline.diagnose import pipeline_diagnose
from analysis.pipeline.ingest import pipeline_ingest
from analysis.pipeline.queue import TaskName
from analysis.pipeline.steps import TRANSIENT_ERRORS
from analysis.recovery import recovery_sweep
from analysis.regressions import comparison_auto_create

_RETRY: dict[str, Any] = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
    "acks_late": True,
}
# How long a step waits for its profiles to leave the pipeline: 10 s steps, up to 2 hours.
_NOT_READY_COUNTDOWN_S = 10
_NOT_READY_MAX_RETRIES = 720


@shared_task(name=TaskName.INGEST.value, **_RETRY)
def ingest(profile_id: int) -> None:
    pipeline_ingest(profile_id=profile_id)


@shared_task(name=TaskName.DIAGNOSE.value, **_RETRY)
def diagnose(profile_id: int) -> None:
    pipeline_diagnose(profile_id=profile_id)


@shared_task(name=TaskName.COMPARE.value, bind=True, **_RETRY)
def compare(self: Task, comparison_id: int) -> None:
    try:
        comparison_run(comparison_id=comparison_id)
    except ProfilesNotReady as exc:
        raise self.retry(exc=exc, countdown=_NOT_READY_COUNTDOWN_S,
                         max_retries=_NOT_READY_MAX_RETRIES) from exc


@shared_task(name=TaskName.COMPARE_WITH_BASELINE.value, **_RETRY)
def compare_with_baseline(profile_id: int) -> None:
    """Regression tracking: the automatic comparison of a ready profile with its project's baseline
    (light queue)."""
    comparison_auto_create(profile_id=profile_id)


@shared_task(name=TaskName.REMEDIES.value, bind=True, **_RETRY)
def remedies(self: Task, run_id: int) -> None:
    """Remedies made again for a profile's latest analysis (a model file was attached); light queue."""
    try:
        remedies_run(run_id=run_id)
    except ProfileBusy as exc:
        raise self.retry(exc=exc, countdown=_NOT_READY_COUNTDOWN_S,
                         max_retries=_NOT_READY_MAX_RETRIES) from exc


@shared_task(name=TaskName.PAGE_BUILD.value, **_RETRY)
def page_build(build_id: int) -> None:
    """Page views or a chrome-trace export a page asked for (analysis.page_builds); diagnose queue (heavy)."""
    page_builds.build_run(build_id=build_id)


@shared_task(name=TaskName.SWEEP.value, ignore_result=True)
def sweep() -> dict[str, int]:
    """The recovery sweep (analysis.recovery), run by Celery beat every PYPTO_SWEEP_INTERVAL_S."""
    return recovery_sweep()
