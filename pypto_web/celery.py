"""The Celery app. Broker from CELERY_BROKER_URL (Redis
in production, a local filesystem broker by default)."""

from __future__ import annotations

import os

from celery import Celery

from pypto_core.memory import use_returning_allocator

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pypto_web.settings")

use_returning_allocator()  # workers stream big traces: freed Arrow memory goes back (pypto_core/memory.py)

app = Celery("pypto_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
