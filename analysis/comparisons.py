"""Comparisons of two profiles of one project (``pypto_core.compare``): made by a user, by regression tracking
(``regressions``) or by a verification job, and computed by a task once both profiles are ready.

The findings' status (fixed, persisting, new) comes from each profile's stored findings (no second
diagnosis); the metrics (per-token latency...) are measured on the tables, of which only the columns a
comparison reads are fetched (``COMPARE_COLUMNS``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from analysis import signals
from analysis.models import Comparison, JobStatus
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.pipeline.steps import Step, run_step
from analysis.regressions import comparison_regression_lines
from analysis.selectors import findings_report
from analysis.storage import ProfileStore
from analysis.summary import summary_of
from analysis.texts import NO_ERROR, error_fields
from profiles.models import IN_PIPELINE, Profile, ProfileStatus
from pypto_core.compare import COMPARE_COLUMNS, ProfileComparer
from pypto_core.errors import InputError
from pypto_core.i18n import Text, msg, stored_texts
from pypto_core.profile import Profile as CoreProfile


def comparison_create(*, user: Any, base: Profile, candidate: Profile) -> Comparison:
    """A comparison of two profiles of one project, queued after the commit."""
    if base.project_id != candidate.project_id:
        raise ValidationError(_("Both profiles must belong to the same project."))
    if base.pk == candidate.pk:
        raise ValidationError(_("Compare two different profiles."))
    with transaction.atomic():
        comparison = Comparison.objects.create(
            project_id=base.project_id, base=base, candidate=candidate, created_by=user
        )
        enqueue_on_commit(TaskName.COMPARE, comparison.pk)
    return comparison


class ProfilesNotReady(Exception):
    """A comparison's profiles are still in the pipeline: the task retries later instead of failing."""


def comparison_run(*, comparison_id: int) -> None:
    run_step(CompareStep(comparison_id))


class CompareStep(Step):
    """The claim is the comparison's status (queued -> running); a transient error puts it back in the
    queue."""

    kind = "compare"
    internal_error_reason = gettext_noop("{subject}: internal error while comparing ({error}: {detail})")
    comparison: Comparison

    def __init__(self, comparison_id: int) -> None:
        super().__init__()
        self.comparison_id = comparison_id

    @property
    def owner_id(self) -> int:
        return self.comparison.base_id

    def subject(self) -> str:
        return f"{self.comparison.base.name} vs {self.comparison.candidate.name}"

    def claim(self) -> bool:
        queued = Comparison.objects.filter(pk=self.comparison_id, status=JobStatus.QUEUED)
        if queued.filter(Q(base__status__in=IN_PIPELINE) | Q(candidate__status__in=IN_PIPELINE)).exists():
            raise ProfilesNotReady(self.comparison_id)  # e.g. made right after both uploads (the demo, CI)
        if not queued.update(status=JobStatus.RUNNING):
            return False
        self.comparison = Comparison.objects.select_related("base", "candidate").get(pk=self.comparison_id)
        return True

    def work(self, workdir: Path) -> None:
        comparison = self.comparison
        base, candidate = comparison.base, comparison.candidate
        for p in (base, candidate):
            if p.status != ProfileStatus.READY:
                raise InputError(p.name, msg(gettext_noop("profile is {status}, not ready"), status=p.status))
        same_sku = base.sku if base.sku == candidate.sku else ""
        # loaders: one profile in memory at a time (the baseline is reduced to what the comparison reads
        # before the candidate loads)
        def side(profile: Profile, folder: str) -> Callable[[], CoreProfile]:
            return lambda: ProfileStore(profile).load(workdir / folder, columns=COMPARE_COLUMNS)

        result = ProfileComparer(side(base, "base"), side(candidate, "new"), sku=same_sku or None,
                                 base_report=stored_report(base),
                                 candidate_report=stored_report(candidate)).compare().to_dict()
        lines, threshold = comparison_regression_lines(comparison=comparison, result=result)
        english, messages = stored_texts(lines)
        Comparison.objects.filter(pk=comparison.pk).update(
            status=JobStatus.DONE, result=result, finished_at=timezone.now(), **NO_ERROR,
            regression=english, regression_messages=messages, is_regression=bool(lines),
            threshold_pct=threshold,
        )
        signals.comparison_done.send(sender=Comparison, comparison_id=comparison.pk)

    def fail(self, reason: Text) -> None:
        Comparison.objects.filter(pk=self.comparison_id).update(
            status=JobStatus.FAILED, finished_at=timezone.now(), **error_fields(reason))

    def release(self, exc: BaseException) -> None:
        running = Comparison.objects.filter(pk=self.comparison_id, status=JobStatus.RUNNING)
        running.update(status=JobStatus.QUEUED)


def stored_report(profile: Profile) -> dict[str, Any] | None:
    """The ``analyze`` JSON of a profile from its stored Finding rows; None when it was never diagnosed."""
    if summary_of(profile).report is None and not profile.findings.exists():
        return None
    return findings_report(profile=profile)
