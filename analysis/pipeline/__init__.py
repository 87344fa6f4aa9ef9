"""The pipeline of a profile: ``start`` (an upload is queued; re-run, delete) -> ``ingest`` (read into
Parquet; ``fanout`` for a many-rank upload, one ingest per rank) -> ``diagnose`` (rules, remedies, page
views) -> ready. Each step runs under ``steps.run_step`` (claim, progress, the failure ladder) and queues
the next one by name (``queue``); the Celery tasks that run them are ``analysis.tasks``.
"""
