"""Page views and trace exports built by a worker, never in a web request.

A page that finds an output missing (the page data and timeline index of a profile analysed before they
existed, or the chrome-trace export the download asks for) calls ``prepared(request=True)``: it queues the
build unless one is queued or running for this parse, and answers the state the page shows meanwhile
(``queued``, ``running``, ``failed`` with its reason, ``ready``). The ``PageBuild`` row is the only state:
one conditional UPDATE queues a build, so a storm of refreshes queues one; the worker claims it with
another (a lease, as the pipeline's steps), so a message delivered twice builds once. A failed build stays
failed for its parse (the page says why) until the profile is parsed again.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from analysis import pagedata
from analysis.models import JobStatus, PageBuild
from analysis.pipeline.queue import TaskName
from analysis.pipeline.steps import TRANSIENT_ERRORS
from analysis.texts import NO_ERROR, error_fields, localized
from analysis.workdirs import make_workdir
from profiles.models import Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.i18n import Text, msg

log = logging.getLogger(__name__)

# Sent by name: analysis.tasks imports this module, so importing the task here would make a cycle.
BUILD_TASK = TaskName.PAGE_BUILD.value

# The states a page shows: a build's own (queued, running, failed), or ready / absent.
READY = "ready"
QUEUED = JobStatus.QUEUED.value
RUNNING = JobStatus.RUNNING.value
FAILED = JobStatus.FAILED.value
ABSENT = "absent"
_LIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
# What a build that failed on a bug says (the server log has the traceback).
_TRACE_FAILED = gettext_noop("{name}: internal error during the export of the chrome trace ({error}); "
                             "running the pipeline again may help, the server log has the details")
_VIEWS_FAILED = gettext_noop("{name}: internal error during the build of the page views ({error}); "
                             "running the pipeline again may help, the server log has the details")


@dataclass(frozen=True)
class BuildState:
    """What a page shows for one output: ``ready``, ``queued``, ``running``, ``failed`` (``error`` says why)
    or ``absent`` (no build asked for this parse, or no parsed tables to build from)."""

    status: str
    error: str = ""  # in English
    error_message: dict[str, Any] | None = None  # ``error`` as its message (analysis.texts)

    @property
    def preparing(self) -> bool:
        return self.status in (QUEUED, RUNNING)

    def localized_error(self, language: str | None = None) -> str:
        """Why the build failed, in ``language`` (default: the page's)."""
        return localized(self.error, self.error_message, language)

    @classmethod
    def of(cls, row: PageBuild) -> BuildState:
        """A build row's state as a page shows it (its reason only when it failed)."""
        if row.status != JobStatus.FAILED:
            return cls(row.status)
        return cls(row.status, row.error, row.error_message)


class NotPrepared(Exception):
    """The output a request needs is being built (or its build failed): the request answers ``state``."""

    def __init__(self, state: BuildState) -> None:
        super().__init__(state.status)
        self.state = state


# --- what a request calls ----------------------------------------------------------------------------


def prepared(*, profile: Profile, kind: str, request: bool) -> BuildState:
    """The state of ``kind`` (``PageBuild.Kind``) for the profile's current parse. ``request``: queue its
    build when missing. Without it, only a build already asked for is kept alive (one whose message was lost
    or whose worker died is queued again), so polling the state never starts a build of its own."""
    if not profile.parquet_prefix:
        return BuildState(ABSENT)
    row = PageBuild.objects.filter(profile=profile, kind=kind).first()
    if _output_ready(profile, kind, row):
        return BuildState(READY)
    if not request and (row is None or row.source != profile.parquet_prefix):
        return BuildState(ABSENT)
    return build_request(profile=profile, kind=kind)


def build_request(*, profile: Profile, kind: str, stale: bool = False) -> BuildState:
    """Queue the build of ``kind`` unless one is queued or running for this parse (or failed for it): one
    conditional UPDATE, so of many concurrent requests one queues it. ``stale``: the stored output is
    unusable (built by an older version), so a finished build of this parse is redone."""
    source = profile.parquet_prefix
    if not source:
        return BuildState(ABSENT)
    row, created = PageBuild.objects.get_or_create(
        profile=profile, kind=kind, defaults={"source": source, "lease_until": _queue_lease()})
    if created:
        _send_after_commit(row.pk)
        return BuildState(QUEUED)
    finished = row.source == source and row.status == JobStatus.DONE
    if finished and not stale and _output_ready(profile, kind, row):
        return BuildState(READY)  # finished between the caller's look and this one
    now = timezone.now()
    lost = row.status in _LIVE and (row.lease_until is None or row.lease_until < now)  # message or worker
    if row.source == source and row.status != JobStatus.DONE and not lost:
        return BuildState.of(row)
    # Conditional on the row as read: of the requests that saw it so, one queues it; a request that read it
    # before a worker changed it (finished it, say) changes nothing and reports the row as it is now.
    queued = PageBuild.objects.filter(pk=row.pk, source=row.source, status=row.status,
                                      lease_until=row.lease_until).update(
        source=source, status=JobStatus.QUEUED, lease_until=_queue_lease(), requested_at=now,
        started_at=None, finished_at=None, **NO_ERROR)
    if queued:
        _send_after_commit(row.pk)
        return BuildState(QUEUED)
    row.refresh_from_db()
    if row.status == JobStatus.DONE and _output_ready(profile, kind, row):
        return BuildState(READY)
    return BuildState.of(row)


def page_data_or_build(*, profile: Profile) -> tuple[dict[str, Any] | None, BuildState]:
    """The profile page's data when its views are ready; else None and the state of their build (queued
    now if missing)."""
    state = prepared(profile=profile, kind=PageBuild.Kind.VIEWS, request=True)
    if state.status != READY:
        return None, state
    return pagedata.page_data(profile=profile), state


def timeline_index_or_build(*, profile: Profile) -> Any:
    """The profile's open ``TimelineIndex``; raises ``NotPrepared`` while a worker builds it (queued now if
    missing or built by an older version)."""
    index = pagedata.timeline_index_cached(profile=profile)
    if index is not None:
        return index
    state = prepared(profile=profile, kind=PageBuild.Kind.VIEWS, request=True)
    if state.status != READY:
        raise NotPrepared(state)
    try:
        return pagedata.timeline_index(profile=profile)
    except pagedata.ViewsMissing as exc:
        state = build_request(profile=profile, kind=PageBuild.Kind.VIEWS, stale=exc.stale)
        raise NotPrepared(state) from None


def trace_or_build(*, profile: Profile) -> str:
    """The storage name of the profile's chrome-trace export; raises ``NotPrepared`` while a worker exports
    it (queued now if missing) or when its export failed."""
    state = prepared(profile=profile, kind=PageBuild.Kind.TRACE, request=True)
    if state.status != READY:
        raise NotPrepared(state)
    return pagedata.trace_name(profile)


def _output_ready(profile: Profile, kind: str, row: PageBuild | None) -> bool:
    """Whether the output is complete in storage. A trace only exists once its build finished; the views
    also come from the pipeline, and are not read while a build of this parse rewrites them."""
    status = row.status if row is not None and row.source == profile.parquet_prefix else None
    if kind == PageBuild.Kind.TRACE:
        return status == JobStatus.DONE and default_storage.exists(pagedata.trace_name(profile))
    return status not in _LIVE and pagedata.views_stored(profile=profile)


def _queue_lease() -> datetime:
    """A queued build no worker took by then is queued again (its message was lost)."""
    return timezone.now() + timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S)


def _work_lease() -> datetime:
    return timezone.now() + timedelta(seconds=settings.PYPTO_TASK_LEASE_SECONDS)


def _send_after_commit(build_id: int) -> None:
    transaction.on_commit(lambda: _send(build_id))


def _send(build_id: int) -> None:
    try:
        current_app.send_task(BUILD_TASK, args=[build_id])
    except Exception:
        # The broker did not take it: the next request queues it again rather than waiting out the lease.
        PageBuild.objects.filter(pk=build_id, status=JobStatus.QUEUED).update(lease_until=None)
        raise


# --- what the worker calls ---------------------------------------------------------------------------


def build_run(*, build_id: int) -> None:
    """Build one output (the task ``analysis.tasks.page_build``): claim the row, build, record the end."""
    now = timezone.now()
    claimed = PageBuild.objects.filter(pk=build_id).filter(
        Q(status=JobStatus.QUEUED) | Q(status=JobStatus.RUNNING, lease_until__lt=now)
    ).update(status=JobStatus.RUNNING, lease_until=_work_lease(), attempts=F("attempts") + 1, started_at=now,
             **NO_ERROR)
    if not claimed:
        return  # built, failed, or a live worker has it
    build = PageBuild.objects.select_related("profile").get(pk=build_id)
    profile = build.profile
    if profile.status != ProfileStatus.READY or profile.parquet_prefix != build.source:
        # Parsed again since it was asked for: the new diagnosis builds the views, a new request the trace.
        _finish(build_id, JobStatus.DONE)
        return
    workdir = make_workdir(profile.pk, str(build.kind))  # "views" or "trace"
    try:
        if build.kind == PageBuild.Kind.TRACE:
            events = pagedata.trace_export(profile=profile, workdir=workdir)
            log.info("profile %s: chrome trace exported (%s events)", profile.pk, events)
        else:
            timings = pagedata.views_rebuild(profile=profile, workdir=workdir)
            log.info("profile %s: views built, timings %s", profile.pk, timings)
        _finish(build_id, JobStatus.DONE)
    except InputError as exc:
        named = exc.with_names(lambda text: _without_folder(text, workdir))
        _finish(build_id, JobStatus.FAILED, named.message)
    except TRANSIENT_ERRORS:
        # Given back before the retry, which claims it again; requests meanwhile see it queued.
        PageBuild.objects.filter(pk=build_id, status=JobStatus.RUNNING).update(
            status=JobStatus.QUEUED, lease_until=_queue_lease())
        raise
    except Exception as exc:  # a bug or a broken table: the log has the traceback, the page a clear reason
        log.exception("page build %s (%s) of profile %s failed", build_id, build.kind, profile.pk)
        reason = _TRACE_FAILED if build.kind == PageBuild.Kind.TRACE else _VIEWS_FAILED
        _finish(build_id, JobStatus.FAILED, msg(reason, name=profile.name, error=type(exc).__name__))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _finish(build_id: int, status: str, error: Text = "") -> None:
    PageBuild.objects.filter(pk=build_id, status=JobStatus.RUNNING).update(
        status=status, lease_until=None, finished_at=timezone.now(), **error_fields(error))


def _without_folder(text: str, workdir: Path) -> str:
    """A reason as the user may read it: the worker's folders never appear in it."""
    for folder in (f"{workdir}/", str(workdir), f"{settings.PYPTO_WORK_DIR}/", str(settings.PYPTO_WORK_DIR)):
        text = text.replace(folder, "")
    return text
