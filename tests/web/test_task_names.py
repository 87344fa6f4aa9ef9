"""The tasks are queued by name (``analysis.pipeline.queue.TaskName``): every name the code queues is a task
the worker runs, routed to the queue the settings give it, and the names are the ones queued messages and
deployments already use (docs/contract.md, "Workers")."""

from __future__ import annotations

from analysis.pipeline.queue import TaskName
from pypto_web.celery import app

# Fixed: messages already in a broker, and CELERY_TASK_ROUTES, name the tasks by these.
NAMES = {"analysis.tasks.ingest": "ingest", "analysis.tasks.diagnose": "diagnose",
         "analysis.tasks.compare": "light", "analysis.tasks.compare_with_baseline": "light",
         "analysis.tasks.remedies": "light", "analysis.tasks.page_build": "diagnose",
         "analysis.tasks.sweep": "light"}


def test_every_name_the_code_queues_is_a_registered_task_on_its_queue() -> None:
    app.loader.import_default_modules()  # what a worker imports at start (autodiscover)
    assert {task.value for task in TaskName} == set(NAMES)
    assert set(NAMES) <= set(app.tasks), sorted(set(NAMES) - set(app.tasks))
    for name, queue in NAMES.items():
        route = app.amqp.router.route({}, name)
        assert route["queue"].name == queue, (name, route)
