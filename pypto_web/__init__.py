"""The Django project. The Celery app is imported here so ``celery -A pypto_web worker`` finds it."""

from pypto_web.celery import app as celery_app

__all__ = ["celery_app"]
