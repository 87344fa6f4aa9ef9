"""The step runner: what every step does around its work, written once.

A step (ingest, a rank's ingest, diagnose, remedies, a comparison) runs as ``run_step(step)``:

1. claim its row with one conditional UPDATE (for a profile: ``ProfileQuerySet.transition`` under a lease),
   so a message delivered twice runs once, and one redelivered after its worker died takes over once that
   worker's lease ran out;
2. work in a fresh work folder, writing progress (which renews the lease) and timings;
3. end one of four ways, the failure ladder:

   - done: the step's own last write (``ProfileStep.finish`` for a profile);
   - ``InputError`` (bad input): failed, the reason naming the file as the user knows it;
   - a transient error (the database or the storage blinked): the claim is given back and the error raised
     again, so that Celery retries the task with backoff (``analysis.tasks``);
   - anything else (a bug): failed as an internal error, logged with its traceback.
"""

from __future__ import annotations

import logging
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_noop

from analysis.models import AnalysisRun, JobStatus
from analysis.texts import NO_ERROR, error_fields
from analysis.workdirs import make_workdir, remove_dead_workdirs, without_workdir
from profiles.models import Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.i18n import Message, Text, msg, render, stored_message

log = logging.getLogger(__name__)

# Errors worth a retry with backoff: the database, or an S3-compatible store, did not answer.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError, InterfaceError, ConnectionError, TimeoutError,
    BotoConnectionError, ConnectTimeoutError, ReadTimeoutError,
)
LOG_LINES = 2000  # the lines a run keeps as messages (its English log keeps its last 100 000 characters)


class Step(ABC):
    """One step on one row. Subclasses say how to claim, work, fail and release; ``run_step`` runs them."""

    kind: ClassVar[str]  # names the work folder and the log lines: "ingest", "diagnose", "compare"...
    # the reason an internal error gives, with {subject}, {error} and {detail} (a gettext_noop template)
    internal_error_reason: ClassVar[str]
    leased: ClassVar[bool] = False  # held under a lease: other folders of this step are a dead attempt's

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @property
    @abstractmethod
    def owner_id(self) -> int:
        """The profile whose work folder this is (``p<id>-<kind>-...``)."""

    @abstractmethod
    def subject(self) -> str:
        """What the user calls the thing worked on (a file or profile name): internal errors name it."""

    @abstractmethod
    def claim(self) -> bool:
        """Take the row; False when it is gone, finished, or held by another live worker."""

    @abstractmethod
    def work(self, workdir: Path) -> None:
        """The step itself, ending with its own last write."""

    @abstractmethod
    def fail(self, reason: Text) -> None:
        """A final failure, with the reason the user reads (a message: the page shows it in its language)."""

    @abstractmethod
    def release(self, exc: BaseException) -> None:
        """Give the claim back before a retry (the task retries after a transient error)."""

    def internal_error(self, exc: BaseException, workdir: Path) -> Text:
        return Message(self.internal_error_reason, {"subject": self.subject(), "error": type(exc).__name__,
                                                    "detail": without_workdir(str(exc), workdir)})

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time a phase into ``timings`` (``<phase>_s``, seconds), kept with the run."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(time.monotonic() - t0, 3)


def run_step(step: Step) -> None:
    """Claim, work, and end ``step`` by the failure ladder (module docstring)."""
    if not step.claim():
        return
    workdir = make_workdir(step.owner_id, step.kind)
    if step.leased:  # the claim is ours: every other folder of this step belongs to a dead attempt
        remove_dead_workdirs(profile_id=step.owner_id, step=step.kind, keep=workdir)
    try:
        step.work(workdir)
    except InputError as exc:
        step.fail(exc.with_names(lambda text: without_workdir(text, workdir)).message)
    except TRANSIENT_ERRORS as exc:
        step.release(exc)
        raise
    except Exception as exc:
        log.exception("%s of %s failed", step.kind, step.subject())
        step.fail(step.internal_error(exc, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --- a step of a profile's pipeline: the claim is the profile's status, held under a lease -------------


def lease_end() -> datetime:
    return timezone.now() + timedelta(seconds=settings.PYPTO_TASK_LEASE_SECONDS)


def run_log(run: AnalysisRun, line: Text) -> None:
    """A line of the run's log (shown on the profile page in its language), time-stamped: in English, the
    last 100 000 characters kept, and as messages, the last ``LOG_LINES``."""
    stamp = timezone.now().strftime("%H:%M:%S")
    text = render(line)
    log.info("profile %s %s: %s", run.profile_id, run.kind, text)
    if run.log_messages or not run.log:  # a run logged before the messages were kept goes on in English
        run.log_messages = [*run.log_messages, log_entry(stamp, line)][-LOG_LINES:]
    run.log = (run.log + f"[{stamp}] {text}\n")[-100_000:]
    AnalysisRun.objects.filter(pk=run.pk).update(log=run.log, log_messages=run.log_messages)


def log_entry(stamp: str, line: Text) -> dict[str, object]:
    """One line of ``AnalysisRun.log_messages``: its time, and its message (a plain string as a template
    without parameters is not translated: no catalog has it)."""
    return {"at": stamp, **(stored_message(line) or {"msgid": "{text}", "params": {"text": line}})}


def run_for(profile: Profile, kind: str) -> AnalysisRun:
    """The step's run row, counting an attempt: a redelivered step reuses the row of the attempt that died."""
    run = (profile.runs.filter(kind=kind, status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
           .order_by("-id").first())
    if run is None:
        run = AnalysisRun.objects.create(profile=profile, kind=kind)
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=JobStatus.RUNNING, attempts=F("attempts") + 1, started_at=timezone.now(), **NO_ERROR)
    run.refresh_from_db()
    if run.attempts > 1:
        run_log(run, msg(gettext_noop("attempt {n}: taking over from an attempt that did not finish"),
                         n=run.attempts))
    return run


class ProfileStep(Step):
    """A step that moves a profile along its status: claimed from ``claim_from`` into ``holding`` under a
    lease, given back to ``release_to`` for a retry, failed from ``holding``. One ``AnalysisRun`` row per step
    keeps its progress, log and timings."""

    leased = True
    claim_from: ClassVar[tuple[str, ...]]
    holding: ClassVar[str]
    release_to: ClassVar[str]

    profile: Profile
    run: AnalysisRun

    def __init__(self, profile_id: int) -> None:
        super().__init__()
        self.profile_id = profile_id

    @property
    def owner_id(self) -> int:
        return self.profile_id

    def subject(self) -> str:
        return self.profile.name

    def claim(self) -> bool:
        claimed = Profile.objects.filter(pk=self.profile_id).unleased().transition(
            self.holding, among=self.claim_from, lease_until=lease_end(), **NO_ERROR)
        if not claimed:
            self.not_claimed()
            return False
        self.profile = Profile.objects.get(pk=self.profile_id)
        self.run = run_for(self.profile, self.kind)
        return True

    def not_claimed(self) -> None:
        """Another worker holds the profile, or it moved on: nothing to do (a hook for a lost follow-up)."""

    def log(self, line: Text) -> None:
        run_log(self.run, line)

    def progress(self, percent: int, note: Text = "") -> None:
        """Write progress (shown live) and renew the lease: a live worker keeps its claim."""
        percent = max(0, min(100, int(percent)))
        Profile.objects.filter(pk=self.profile_id).update(progress=percent, lease_until=lease_end())
        AnalysisRun.objects.filter(pk=self.run.pk).update(progress=percent)
        if note:
            self.log(note)

    def finish(self, to: str, **fields: object) -> bool:
        """The step's last write (call it in the transaction of the step's results): the profile moves on to
        ``to`` with ``fields`` and gives up its lease, and the run is done with its timings. False when the
        profile had moved meanwhile (a re-run, the sweep)."""
        moved = Profile.objects.filter(pk=self.profile_id).transition(
            to, among=(self.holding,), lease_until=None, **fields)
        self.run_done()
        return bool(moved)

    def run_done(self) -> None:
        AnalysisRun.objects.filter(pk=self.run.pk).update(
            status=JobStatus.DONE, progress=100, finished_at=timezone.now(), timings=self.timings)

    def fail(self, reason: Text) -> None:
        """Failed with the reason. The archive stays in storage for a re-run."""
        Profile.objects.filter(pk=self.profile_id).transition(
            ProfileStatus.FAILED, among=(self.holding,), lease_until=None, **error_fields(reason))
        AnalysisRun.objects.filter(pk=self.run.pk).update(status=JobStatus.FAILED, finished_at=timezone.now(),
                                                          **error_fields(reason))
        self.log(msg(gettext_noop("failed: {reason}"), reason=reason))

    def release(self, exc: BaseException) -> None:
        """Give the claim back, so the retried message can claim at once. The reason stays on the profile (a
        database or storage that does not answer) until the retry claims it."""
        Profile.objects.filter(pk=self.profile_id).transition(
            self.release_to, among=(self.holding,), lease_until=None,
            **error_fields(msg(gettext_noop("waiting to retry: {error}: {detail}"), error=type(exc).__name__,
                               detail=str(exc))))

    def hold_if_asked(self, *, point: str) -> None:
        """Pause while the hold file (PYPTO_PIPELINE_HOLD_FILE, for tests and demos) exists. An empty file
        holds right after the claim (points ``upload``, ``rank``); a file naming points (``upload``, ``rank``,
        ``unpacked``: after unpacking) holds only at those."""
        hold = settings.PYPTO_PIPELINE_HOLD_FILE
        if not hold or not Path(hold).exists():
            return
        try:
            named = set(Path(hold).read_text().split())
        except OSError:
            named = set()
        if (named and point not in named) or (not named and point == "unpacked"):
            return
        self.log(msg(gettext_noop("holding while {file} exists"), file=hold))
        while Path(hold).exists():
            time.sleep(0.2)
