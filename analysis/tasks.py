"""Celery tasks: thin wrappers that take ids and call analysis.services.

Late acknowledgement (settings) means a task whose worker dies is redelivered; the services' claims make
the redelivery take over exactly once. Only transient errors are retried; bad input is marked failed.
"""

from __future__ import annotations

from celery import shared_task

from analysis import services

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


@shared_task(name="analysis.tasks.compare", **_RETRY)
def compare(comparison_id: int) -> None:
    services.comparison_run(comparison_id=comparison_id)
