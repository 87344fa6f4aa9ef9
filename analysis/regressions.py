"""Regression tracking (issue 8): every profile that becomes ready in a project with a pinned baseline is
compared with that baseline automatically, and a headline metric worse by more than the project's threshold
(``pypto_core.compare.regression``, which ignores deltas inside the noise) flags a regression.

Writes here are services (``comparison_auto_*``, ``comparison_regression_lines``); reads are the
``*_regression*`` selectors. The comparison itself is the ordinary comparison task (analysis.comparisons).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse

from analysis.fix_ledger import fixes_found_again
from analysis.models import Comparison, JobStatus
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from profiles.models import Profile, ProfileStatus, Project
from pypto_core.compare import regression_messages
from pypto_core.i18n import Message

# --- services -----------------------------------------------------------------------------------------


def comparison_auto_queue(*, profile_id: int) -> None:
    """Call in the transaction that makes a profile ready: after the commit, queue its comparison with the
    project's baseline (a light task), when the project has one and this profile is not it."""
    wanted = Profile.objects.filter(
        pk=profile_id, group__isnull=True, project__baseline__isnull=False
    ).exclude(project__baseline_id=profile_id).exists()
    if wanted:
        enqueue_on_commit(TaskName.COMPARE_WITH_BASELINE, profile_id)


def comparison_auto_create(*, profile_id: int) -> Comparison | None:
    """The automatic comparison of a ready profile with its project's baseline: made once per
    (baseline, candidate) however often this runs; its task is queued after the commit."""
    profile = Profile.objects.select_related("project").filter(pk=profile_id).first()
    if profile is None or profile.group_id is not None or profile.status != ProfileStatus.READY:
        return None
    baseline_id = profile.project.baseline_id
    if baseline_id is None or baseline_id == profile.pk:
        return None
    existing = Comparison.objects.filter(base_id=baseline_id, candidate_id=profile.pk, auto=True).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            comparison = Comparison.objects.create(
                project_id=profile.project_id, base_id=baseline_id, candidate=profile, auto=True,
                threshold_pct=profile.project.regression_threshold_pct,
            )
            enqueue_on_commit(TaskName.COMPARE, comparison.pk)
    except IntegrityError:  # another run of this task made it first (one_auto_comparison_per_pair)
        return Comparison.objects.filter(base_id=baseline_id, candidate_id=profile.pk, auto=True).first()
    return comparison


def comparison_regression_lines(*, comparison: Comparison,
                                result: dict[str, Any]) -> tuple[list[Message], float]:
    """The regression lines of a finished comparison at its project's threshold (``pypto check``'s test), as
    messages (stored with ``stored_texts``: English ``regression`` and ``regression_messages``)."""
    threshold = comparison.threshold_pct
    if threshold is None:
        threshold = Project.objects.filter(pk=comparison.project_id).values_list(
            "regression_threshold_pct", flat=True).first() or 5.0
    lines = regression_messages(result, float(threshold))
    if comparison.auto:  # against the pinned baseline: a verified fix that came back is a regression too
        lines += fixes_found_again(profile=comparison.candidate)
    return lines, float(threshold)


# --- selectors ----------------------------------------------------------------------------------------


_SUMMARY_FIELDS = ("id", "base_id", "candidate_id", "status", "is_regression", "regression", "threshold_pct")


def regression_summary(comparison: Comparison) -> dict[str, Any]:
    return {
        "comparison": comparison.pk,
        "baseline": comparison.base_id,
        "candidate": comparison.candidate_id,
        "status": comparison.status,
        "is_regression": comparison.is_regression,
        "lines": list(comparison.regression or []),
        "threshold_pct": comparison.threshold_pct,
        "url": reverse("api-comparison", args=[comparison.pk]),
    }


def regression_of_profile(*, profile: Profile) -> dict[str, Any] | None:
    """The latest automatic comparison of this profile with a baseline, summarised; None if it has none."""
    comparison = (Comparison.objects.filter(candidate_id=profile.pk, auto=True)
                  .only(*_SUMMARY_FIELDS).order_by("-created_at", "-id").first())
    return regression_summary(comparison) if comparison is not None else None


def regressions_by_candidate(*, profile_ids: list[int]) -> dict[int, dict[str, Any]]:
    """``regression_of_profile`` for many profiles in one query (the profile list of the API)."""
    out: dict[int, dict[str, Any]] = {}
    rows = (Comparison.objects.filter(candidate_id__in=profile_ids, auto=True)
            .only(*_SUMMARY_FIELDS).order_by("-created_at", "-id"))
    for comparison in rows:
        out.setdefault(comparison.candidate_id, regression_summary(comparison))
    return out


def regressions_of_project(*, project: Project) -> QuerySet[Comparison]:
    """Regressed profiles against the project's current baseline, newest first."""
    if project.baseline_id is None:
        return Comparison.objects.none()
    return (Comparison.objects.filter(project=project, base_id=project.baseline_id, auto=True,
                                      status=JobStatus.DONE, is_regression=True)
            .select_related("base", "candidate").defer("result", "base__summary", "candidate__summary")
            .order_by("-created_at", "-id"))
