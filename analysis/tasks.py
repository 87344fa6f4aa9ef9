"""Celery tasks: thin wrappers that take ids and call analysis.services.

Late acknowledgement (settings) means a task whose worker dies is redelivered; the services' claims make
the redelivery take over exactly once. Only transient errors are retried; bad input is marked failed.
"""

from __future__ import annotations

from celery import shared_task

from analysis import page_builds, services

_RETRY = {
    "autoretry_for": services.TRANSIENT_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
    "acks_late": True,
}


@shared_task(name="analysis.tasks.ingest", **_RETRY)
def ingest(profile_id: int) -> None:
    services.pipeline_ingest(profile_id=profile_id)


@shared_task(name="analysis.tasks.diagnose", **_RETRY)
def diagnose(profile_id: int) -> None:
    services.pipeline_diagnose(profile_id=profile_id)


# How long a comparison waits for its profiles to leave the pipeline: 10 s steps, up to 2 hours.
_NOT_READY_COUNTDOWN_S = 10
_NOT_READY_MAX_RETRIES = 720


@shared_task(name="analysis.tasks.compare", bind=True, **_RETRY)
def compare(self, comparison_id: int) -> None:  # type: ignore[no-untyped-def]
    try:
        services.comparison_run(comparison_id=comparison_id)
    except services.ProfilesNotReady as exc:
        raise self.retry(exc=exc, countdown=_NOT_READY_COUNTDOWN_S, max_retries=_NOT_READY_MAX_RETRIES)


@shared_task(name="analysis.tasks.compare_with_baseline", **_RETRY)
def compare_with_baseline(profile_id: int) -> None:
    """Regression tracking: the automatic comparison of a ready profile with its project's baseline (light)."""
    from analysis.regressions import comparison_auto_create

    comparison_auto_create(profile_id=profile_id)


@shared_task(name="analysis.tasks.remedies", bind=True, **_RETRY)
def remedies(self, run_id: int) -> None:  # type: ignore[no-untyped-def]
    """Remedies made again for a profile's latest analysis (a model file was attached); light queue."""
    from analysis import artifact_services

    try:
        artifact_services.remedies_run(run_id=run_id)
    except artifact_services.ProfileBusy as exc:
        raise self.retry(exc=exc, countdown=_NOT_READY_COUNTDOWN_S, max_retries=_NOT_READY_MAX_RETRIES)


@shared_task(name="analysis.tasks.page_build", **_RETRY)
def page_build(build_id: int) -> None:
    """Page views or a chrome-trace export a page asked for (analysis.page_builds); diagnose queue (heavy)."""
    page_builds.build_run(build_id=build_id)


@shared_task(name="analysis.tasks.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    """The recovery sweep (analysis.recovery), run by Celery beat every PYPTO_SWEEP_INTERVAL_S."""
    from analysis.recovery import recovery_sweep

    return recovery_sweep()
