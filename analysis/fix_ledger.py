"""The fix ledger of a project (issue 21): each finding's history across its profiles, by rule.

Events, oldest first: ``found`` (the rule found it in a profile), ``verified_fixed`` / ``verified_persisting``
/ ``verified_worse`` (a verification job's measured verdict), ``regressed`` (found again in a profile
uploaded after a verified fix). The regression check against the pinned baseline reads
``fixes_found_again`` so a verified fix that comes back is a regression whatever the headline metrics say.

The verdicts themselves are written by the verification of a fix (``captures.verification``); they are read
here (``verdicts_of_comparison``), beside the ledger made of them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.translation import gettext_noop

from analysis.models import Comparison, Finding, FixVerification, Verdict
from profiles.models import Profile, Project
from pypto_core.i18n import Message, msg

STATES = {"found": "open", "verified_fixed": "fixed", "verified_persisting": "open", "verified_worse": "open",
          "regressed": "regressed"}


def fix_ledger(*, project: Project) -> dict[str, Any]:
    """``{"project", "fixes": [{"rule", "title", "state", "events": [...]}, ...]}``, most recent first."""
    events: dict[str, list[dict[str, Any]]] = {}
    titles: dict[str, str] = {}
    verifications = list(FixVerification.objects.filter(project=project).select_related("candidate")
                         .order_by("created_at", "id"))
    for v in verifications:
        titles.setdefault(v.rule, v.title)
        data = v.data or {}
        events.setdefault(v.rule, []).append({
            "event": f"verified_{v.verdict}", "at": v.created_at, "profile": v.base_id,
            "candidate": v.candidate_id, "comparison": v.comparison_id, "job": v.job_id,
            "finding": v.finding_id,
            "estimated_saving_us": data.get("estimated_saving_us"),
            "measured_saving_us": data.get("measured_saving_us"), "noise": data.get("noise"),
            "npu_figure": data.get("npu_figure"), "measured_on": data.get("measured_on"),
        })
    fixed_at = _fixed_at(verifications)
    rows = (Finding.objects.filter(profile__project=project, profile__group__isnull=True)
            .values_list("id", "rule", "title", "profile_id", "profile__name", "profile__created_at"))
    for finding_id, rule, title, profile_id, profile_name, created in rows:
        titles.setdefault(rule, title)
        back = any(created > at and profile_id != candidate for at, candidate in fixed_at.get(rule, []))
        events.setdefault(rule, []).append({"event": "regressed" if back else "found", "at": created,
                                            "profile": profile_id, "profile_name": profile_name,
                                            "finding": finding_id})
    fixes = []
    for rule, items in events.items():
        items.sort(key=lambda e: (e["at"], e["event"] != "found"))
        fixes.append({"rule": rule, "title": titles.get(rule, ""), "state": STATES[items[-1]["event"]],
                      "last_at": items[-1]["at"], "events": items})
    fixes.sort(key=lambda f: f["last_at"], reverse=True)
    return {"project": project.pk, "fixes": fixes}


def _fixed_at(verifications: list[FixVerification]) -> dict[str, list[tuple[datetime, int]]]:
    """rule -> (when the fixed run was uploaded, its profile) of every verified fix."""
    out: dict[str, list[tuple[datetime, int]]] = {}
    for v in verifications:
        if v.verdict == Verdict.FIXED:
            out.setdefault(v.rule, []).append((v.candidate.created_at, v.candidate_id))
    return out


def fixes_found_again(*, profile: Profile) -> list[Message]:
    """Regression lines: rules of this profile's findings that a verification had measured fixed in a run
    uploaded before it (messages: each page renders them in its reader's language)."""
    rules = set(profile.findings.values_list("rule", flat=True))
    if not rules:
        return []
    lines = []
    fixed = (FixVerification.objects.filter(project_id=profile.project_id, verdict=Verdict.FIXED,
                                            rule__in=rules,
                                            candidate__created_at__lt=profile.created_at)
             .exclude(candidate_id=profile.pk).order_by("rule", "-created_at"))
    seen: set[str] = set()
    for v in fixed:
        if v.rule in seen:
            continue
        seen.add(v.rule)
        lines.append(msg(gettext_noop("{rule}: verified fixed in profile {candidate} (capture job {job}) and "
                                      "found again"),
                         rule=v.rule, candidate=v.candidate_id, job=v.job_id or "-"))
    return lines


def verdicts_of_comparison(*, comparison: Comparison) -> list[dict[str, Any]]:
    return [verdict_data(row) for row in comparison.verdicts.order_by("id")]


def verdict_data(row: FixVerification) -> dict[str, Any]:
    return {**row.data, "id": row.pk, "finding": row.finding_id, "rule": row.rule,
            "title": row.title or row.data.get("title", ""), "verdict": row.verdict, "base": row.base_id,
            "candidate": row.candidate_id, "comparison": row.comparison_id, "job": row.job_id,
            "created_at": row.created_at}
