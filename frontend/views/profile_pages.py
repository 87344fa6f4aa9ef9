"""The analysis part of the profile page (summary numbers, charts, top ops, findings with remedies) and the
timeline page. The profile page itself is frontend/views/profiles.py; it adds ``profile_analysis_context``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from analysis import pagedata
from analysis import selectors as analysis_selectors
from frontend import charts
from profiles import selectors
from profiles.models import Profile, ProfileStatus


def _facts(profile: Profile, data: dict[str, Any] | None) -> dict[str, Any]:
    s = profile.summary or {}
    report_profile = (s.get("report") or {}).get("profile") or {}
    decode = report_profile.get("decode") or {}
    dur = s.get("duration_ns") or 0
    return {
        "format": s.get("format") or profile.detected_format,
        "ranks": s.get("ranks") or 1,
        "kernel_count": s.get("kernel_count"),
        "host_op_count": s.get("host_op_count"),
        "steps": s.get("steps"),
        "duration_ms": dur / 1e6 if dur else None,
        "sku": (data or {}).get("sku") or report_profile.get("device") or profile.sku or s.get("device"),
        "sku_source": (data or {}).get("sku_source"),
        "simulated": bool(s.get("simulated") or report_profile.get("simulated")),
        "per_token_ms": decode.get("per_token_ms_p50"),
        "tokens_per_s": decode.get("tokens_per_s"),
        "tokens": decode.get("tokens"),
        "speedup": (s.get("report") or {}).get("estimated_combined_speedup"),
        "warnings": list(dict.fromkeys((s.get("report") or {}).get("warnings") or s.get("warnings") or [])),
    }


def profile_analysis_context(profile: Profile) -> dict[str, Any]:
    """Context the profile page adds once the profile is ready (``analysis`` is None before)."""
    if profile.status != ProfileStatus.READY:
        return {"analysis": None}
    data = pagedata.page_data(profile=profile)
    findings = list(analysis_selectors.findings_of_profile(profile=profile))
    artifacts = list(analysis_selectors.artifacts_of_profile(profile=profile))
    by_finding: dict[int | None, list[Any]] = {}
    for a in artifacts:
        by_finding.setdefault(a.finding_id, []).append(a)
    rows = [{"finding": f, "data": f.data, "evidence": sorted((f.data.get("evidence") or {}).items()),
             "artifacts": by_finding.get(f.pk, [])} for f in findings]
    out: dict[str, Any] = {
        "analysis": {
            "facts": _facts(profile, data),
            "findings": rows,
            "loose_artifacts": by_finding.get(None, []),
            "has_artifacts": bool(artifacts),
            "has_data": data is not None,
        }
    }
    if data is not None:
        out["analysis"].update({
            "metrics": sorted((k, v) for k, v in (data.get("metrics") or {}).items() if v is not None),
            "has_decode": bool(data.get("decode", {}).get("steps")),
            "has_roofline": bool(data.get("roofline", {}).get("points")),
        })
        out["chart_op_types"] = charts.op_type_chart(data.get("op_types", []))
        out["chart_roofline"] = charts.roofline_chart(data.get("roofline", {}))
        out["chart_decode"] = charts.decode_chart(data.get("decode", {}))
        out["top_ops"] = data.get("top_ops", [])
    return out


@login_required
def profile_timeline(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    return render(request, "frontend/profile_timeline.html", {
        "profile": profile, "project": profile.project, "ready": profile.status == ProfileStatus.READY,
    })
