"""The project dashboard: headline numbers over time, open findings, recent comparisons. The project page
(frontend/views/projects.py) adds ``project_dashboard_context`` to its own context."""

from __future__ import annotations

from typing import Any

from analysis import selectors as analysis_selectors
from analysis.fix_ledger import fix_ledger
from analysis.models import FixVerification
from analysis.regressions import regressions_of_project
from frontend import charts
from profiles.models import Profile, ProfileStatus

# The newest ready profiles drawn in the history chart, one category slot each. 500 made the project page
# miss 200 ms with 1,000 profiles (~80 KB of chart JSON, when the figures were still read out of the
# summary JSON); 200 slots are about as many as a 1,000 px wide chart can show apart.
HISTORY_POINTS = 200
# Open findings listed on the project page, worst first; the rest are counted (each profile's page lists all
# of its own). The walk's 7 real samples have 18: the whole list made the card 3 times the chart's height.
OPEN_FINDINGS = 10


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def project_dashboard_context(project: Any) -> dict[str, Any]:
    # one point per upload: the ranks of a multi-rank upload are its own profile's parts (an 8-rank
    # training run drew nine points, the upload's and each rank's, as if nine runs had been profiled)
    ready = Profile.objects.filter(project=project, status=ProfileStatus.READY, group__isnull=True)
    rows = list(
        ready.order_by("-created_at", "-id")
        .values("id", "name", "created_at", "per_token_ms", "tokens_per_s", "step_time_ms",
                "simulated")[:HISTORY_POINTS]
    )
    rows.reverse()
    # a run that counts no tokens (a CUDA-graph decode, training) shows its step time instead
    history = [{"id": r["id"], "name": r["name"], "when": r["created_at"].isoformat(),
                "per_token_ms": _positive(r["per_token_ms"]), "tokens_per_s": _positive(r["tokens_per_s"]),
                "step_time_ms": None if r["per_token_ms"] else _positive(r["step_time_ms"])}
               for r in rows]
    open_findings, open_total = analysis_selectors.open_findings_of_project(project=project,
                                                                             limit=OPEN_FINDINGS)
    has_history = any(h["per_token_ms"] or h["tokens_per_s"] or h["step_time_ms"] for h in history)
    return {
        "dashboard": {
            "ready_count": len(rows),
            "open_findings": open_findings,
            "open_more": open_total - len(open_findings),
            "comparisons": list(analysis_selectors.comparisons_of_project(project=project).defer(
                "result", "base__summary", "candidate__summary")[:10]),
            "has_history": has_history,
        },
        "chart_history": charts.history_chart(history) if has_history else None,
        # Regression tracking (issue 8): profiles worse than the pinned baseline beyond the threshold.
        "regressions": _regressions(project),
        "fixes": _fixes(project),  # the fix ledger (issue 21), once a fix was verified
    }


def _fixes(project: Any) -> list[dict[str, Any]]:
    if not FixVerification.objects.filter(project=project).exists():
        return []
    return [f for f in fix_ledger(project=project)["fixes"]
            if any(e["event"] != "found" for e in f["events"])]


def _regressions(project: Any) -> dict[str, Any]:
    baseline = None
    if project.baseline_id:
        baseline = Profile.objects.filter(pk=project.baseline_id).only("id", "name").first()
    return {"baseline": baseline, "threshold_pct": project.regression_threshold_pct,
            "items": list(regressions_of_project(project=project)[:20])}
