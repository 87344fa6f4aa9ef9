"""Reads of analysis results, scoped to the caller's projects (404 outside them)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import F, Max, QuerySet, Window
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Greatest, RowNumber
from django.http import Http404

from analysis.models import Artifact, Comparison, Finding
from analysis.summary import ProfileSummary, summary_of
from analysis.texts import localized_list, page_language
from profiles.models import Profile, ProfileStatus
from profiles.selectors import projects_for_user
from pypto_core.i18n import DEFAULT_LANGUAGE
from pypto_core.rules.finding import localize_finding


def findings_of_profile(*, profile: Profile) -> QuerySet[Finding]:
    return profile.findings.order_by("order", "id")


# Worst first on the project page: high before medium before low (anything else last).
_SEVERITY_ORDER = models.Case(*(models.When(severity=s, then=models.Value(i))
                                for i, s in enumerate(("high", "medium", "low"))),
                              default=models.Value(3), output_field=models.IntegerField())


def latest_ready_profiles_of_project(*, project: Any) -> QuerySet[Profile]:
    """The newest ready upload of each name (ranks of a multi-rank upload are under their group's row): an
    upload named as an earlier one is taken as its new capture, whose findings replace the earlier ones'."""
    ready = Profile.objects.filter(project=project, status=ProfileStatus.READY, group__isnull=True)
    # one window over the project's rows (a NOT EXISTS on a newer row of the same name took 680 ms with
    # 1,000 profiles, tests/bench/bench_pages.py)
    newest_first = Window(RowNumber(), partition_by=[F("name")],
                          order_by=[F("created_at").desc(), F("pk").desc()])
    return ready.annotate(newest=newest_first).filter(newest=1)


def open_findings_of_project(*, project: Any, limit: int) -> tuple[list[Finding], int]:
    """The project's open findings, those of ``latest_ready_profiles_of_project``, worst first (severity,
    then the larger of the estimated saving and the wait for other ranks, then the newer profile): at most
    ``limit`` rows with their profile, and how many there are in all. One query each, whatever the number of
    profiles."""
    found = Finding.objects.filter(profile__in=latest_ready_profiles_of_project(project=project))
    rows = (found.select_related("profile")
            .only("id", "rule", "severity", "title", "data", "order", "profile__id", "profile__name",
                  "profile__created_at")
            .annotate(severity_order=_SEVERITY_ORDER,
                      # what the job loses: the saving here, or the wait for other ranks (peer_wait_us) that
                      # only a fix on the late rank removes, whichever is larger; by saving alone a rank's
                      # small local savings listed above the wait that costs it most
                      at_stake_us=Greatest(
                          Coalesce(Cast(KT("data__estimated_saving_us"), models.FloatField()), 0.0),
                          Coalesce(Cast(KT("data__peer_wait_us"), models.FloatField()), 0.0)))
            .order_by("severity_order", F("at_stake_us").desc(nulls_last=True), "-profile__created_at",
                      "profile_id", "order", "id"))
    return list(rows[:limit]), found.count()


def finding_in_language(finding: Finding, language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    """A stored finding (``Finding.data``) with its text in ``language`` (pypto_core.i18n), plus its row id;
    findings stored before their messages were kept show their stored text."""
    data = localize_finding({"title": finding.title, **(finding.data or {})}, language)
    return {**data, "id": finding.pk}


def findings_report(*, profile: Profile, language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    """The ``analyze --format json`` shape (docs/contract.md) from stored rows, the text in ``language``."""
    summary = summary_of(profile)
    report = dict(summary.report or {})
    return {
        "profile": report.get("profile", {k: v for k, v in summary.to_dict().items() if k != "report"}),
        "findings": [finding_in_language(f, language) for f in findings_of_profile(profile=profile)],
        "estimated_combined_speedup": report.get("estimated_combined_speedup", 1.0),
        "combined_speedup_bound": report.get("combined_speedup_bound", "estimate"),
        "warnings": warnings_in_language(summary, language),
    }


def warnings_in_language(summary: ProfileSummary, language: str | None = None) -> list[str]:
    """What could not be read or assumed, in ``language`` (default: the page's): the diagnosis's report's
    warnings when it has any (they include the readers'), else the upload's."""
    report = summary.report or {}
    if report.get("warnings"):
        return localized_list(report.get("warnings") or [], report.get("warning_messages"), language)
    return localized_list(summary.warnings, summary.warning_messages, language)


def runs_with_logs(*, profile: Profile, language: str | None = None) -> list[dict[str, Any]]:
    """The profile's pipeline steps, each with its log in ``language`` (default: the page's); ``english``:
    a run logged before its lines were kept as messages, shown as it was written."""
    language = language or page_language()
    out = []
    for run in profile.runs.order_by("id"):
        entries = [e for e in run.log_messages or [] if isinstance(e, dict)]
        if not entries:
            out.append({"run": run, "log": run.log, "english": bool(run.log)})
            continue
        lines = localized_list([e.get("msgid", "") for e in entries], entries, language)
        log = "".join(f"[{e.get('at', '')}] {line}\n" for e, line in zip(entries, lines))
        out.append({"run": run, "log": log, "english": False})
    return out


def finding_get_for_user(*, user: Any, finding_id: int) -> Finding:
    finding = (Finding.objects.filter(pk=finding_id, profile__project__in=projects_for_user(user))
               .select_related("profile", "profile__project").first())
    if finding is None:
        raise Http404("No such finding")
    return finding


def artifacts_of_profile(*, profile: Profile, version: int | None = None) -> QuerySet[Artifact]:
    """One stored set: the latest analysis's (default) or ``version``'s. A run that made no remedies stored
    an empty set, so a profile whose findings went away lists nothing rather than stale files."""
    if version is None:
        version = artifact_latest_version(profile=profile)
    if version is None:
        return profile.artifacts.none()
    return profile.artifacts.filter(version=version).order_by("name", "id")


def artifact_latest_version(*, profile: Profile) -> int | None:
    """The version of the last stored set (which may be empty), or None when no set was ever stored."""
    top_run = profile.runs.filter(artifact_version__isnull=False).aggregate(v=Max("artifact_version"))["v"]
    top_artifact = profile.artifacts.aggregate(v=Max("version"))["v"]
    versions = [v for v in (top_run, top_artifact) if v is not None]
    return max(versions) if versions else None


def artifacts_history_of_profile(*, profile: Profile) -> QuerySet[Artifact]:
    """Every stored version, newest first."""
    return profile.artifacts.order_by("-version", "name", "id")


def artifact_get_for_user(*, user: Any, artifact_id: int) -> Artifact:
    artifact = (
        Artifact.objects.filter(pk=artifact_id, profile__project__in=projects_for_user(user))
        .select_related("profile")
        .first()
    )
    if artifact is None:
        raise Http404("No such artifact")
    return artifact


def comparison_get_for_user(*, user: Any, comparison_id: int) -> Comparison:
    comparison = (
        Comparison.objects.filter(pk=comparison_id, project__in=projects_for_user(user))
        .select_related("base", "candidate")
        .first()
    )
    if comparison is None:
        raise Http404("No such comparison")
    return comparison


def comparisons_of_project(*, project: Any) -> QuerySet[Comparison]:
    return project.comparisons.select_related("base", "candidate")
