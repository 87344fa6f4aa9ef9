"""A worker started as every Celery guide starts one, `celery -A pypto_web worker` with no -Q, consumes every
queue the pipeline sends to (it once consumed only `light`, and uploads waited for ever)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import Worker, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_bare_worker_consumes_every_pipeline_queue(tmp_path) -> None:
    from django.conf import settings

    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    routed.add(settings.CELERY_TASK_DEFAULT_QUEUE)
    bare = Worker(env=worker_env(), log_path=tmp_path / "bare.log", queues="").start()
    try:
        banner = bare.log_path.read_text()
    finally:
        bare.stop()
    section = banner.split("[queues]", 1)[1].split("[tasks]", 1)[0]
    consumed = set(re.findall(r"\.> (\S+)", section))
    assert routed == {"ingest", "diagnose", "light"} and routed <= consumed, section
