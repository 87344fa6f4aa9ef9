"""The Celery tasks of the analysis, by name, and the one way code queues them.

The names are a contract: queued messages and ``CELERY_TASK_ROUTES`` (settings) refer to them, so they never
change. Code queues a task by its name rather than importing ``analysis.tasks``: the tasks import the steps,
and the steps queue the next task, so importing the tasks here would close a circle.
"""

from __future__ import annotations

import enum

from celery import current_app
from django.db import transaction


class TaskName(str, enum.Enum):
    INGEST = "analysis.tasks.ingest"  # one profile (or one rank of a fanned-out upload) into Parquet
    DIAGNOSE = "analysis.tasks.diagnose"  # rules, remedies and page views of a parsed profile
    COMPARE = "analysis.tasks.compare"  # a comparison of two profiles
    COMPARE_WITH_BASELINE = "analysis.tasks.compare_with_baseline"  # regression tracking (light)
    REMEDIES = "analysis.tasks.remedies"  # remedies made again for a new model file (light)
    PAGE_BUILD = "analysis.tasks.page_build"  # page views or a trace export a page asked for (heavy)
    SWEEP = "analysis.tasks.sweep"  # the recovery sweep (Celery beat)

    def __str__(self) -> str:
        return self.value


def enqueue_on_commit(task: TaskName, object_id: int) -> None:
    """Queue ``task`` for ``object_id`` once the current transaction commits (at once outside one), so a
    worker never gets a message about a row it cannot see yet."""
    transaction.on_commit(lambda: current_app.signature(task.value, args=(object_id,)).delay())
