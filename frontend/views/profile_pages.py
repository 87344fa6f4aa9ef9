"""The analysis part of the profile page (summary numbers, charts, top ops, findings with remedies), the
timeline page and the trace download page. The profile page itself is frontend/views/profiles.py; it adds
``profile_analysis_context``. What a worker builds for them (analysis/page_builds.py) is asked for here and
shown as "being prepared" meanwhile; the pages poll its state (static/frontend/js/preparing.js)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from analysis import page_builds
from analysis import selectors as analysis_selectors
from analysis.cluster import cluster_data
from analysis.models import PageBuild
from analysis.selectors import warnings_in_language
from analysis.summary import ProfileSummary, summary_of
from captures.verification import verify_targets
from frontend import charts
from frontend.taglines import profile_tagline
from profiles import selectors
from profiles.models import Profile, ProfileStatus
from pypto_core.collective_wait import P2P_WAIT_SHARE
from pypto_core.compare import block_label
from pypto_core.durations import format_duration
from pypto_core.graph import metric_label
from pypto_core.i18n import normalize_language
from pypto_core.i18n import render as render_text
from pypto_core.launches import GRAPH_REPLAY_MIN_SHARE
from pypto_core.rules.evidence_labels import shown_evidence, shown_evidence_rows
from pypto_core.workload import WORKLOAD_WORDS


def _step_count(report_profile: dict[str, Any], summary: ProfileSummary) -> int | None:
    """``report.profile.steps`` is the per-step breakdown list now and ``step_count`` the count; reports
    stored before that carry the count in ``steps``."""
    for value in (report_profile.get("step_count"), report_profile.get("steps"), summary.steps):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _facts(profile: Profile, data: dict[str, Any] | None, language: str) -> dict[str, Any]:
    s = summary_of(profile)
    report_profile = s.report_profile
    report = s.report or {}
    return {
        "format": s.format or profile.detected_format,
        "ranks": s.ranks or 1,
        "kernel_count": s.kernel_count,
        "host_op_count": s.host_op_count,
        "steps": _step_count(report_profile, s),
        "duration_ns": s.duration_ns or None,  # the whole recording, first event to last
        "sku": (data or {}).get("sku") or report_profile.get("device") or profile.sku or s.device,
        "sku_source": report_profile.get("sku_source") or (data or {}).get("sku_source"),
        "workload": workload_label(report_profile.get("workload")),
        "vendor": _label(VENDOR_LABELS, report_profile.get("device_vendor")),
        "simulated": s.is_simulated,
        "per_token_ms": s.per_token_ms,
        "tokens_per_s": s.tokens_per_s,
        # the median profiler step: a run's speed where no tokens are counted (a CUDA-graph decode, training)
        "step_time_ms": s.step_time_ms,
        "mfu": s.mfu,
        "prefill_tokens_per_s": s.prefill_tokens_per_s,
        "tokens": s.decode.get("tokens"),
        "speedup": report.get("estimated_combined_speedup"),
        "speedup_bound": report.get("combined_speedup_bound", "estimate"),
        # "replay": the headline re-times the run with every fix: not the findings' estimates combined
        "speedup_source": report_profile.get("combined_speedup_source"),
        "warnings": list(dict.fromkeys(warnings_in_language(s, language))),
    }


# What the engine detected (pypto_core.workload), in the user's words; the ids stay in the API.
VENDOR_LABELS = {"ascend": gettext_lazy("Ascend (Huawei)"), "nvidia": "NVIDIA", "amd": "AMD",
                 "cpu": gettext_lazy("CPU only"), "unknown": gettext_lazy("Unknown")}


def workload_label(workload: str | None) -> str | None:
    """A workload id in the page's language (``pypto_core.workload.WORKLOAD_WORDS``, the engine's words)."""
    if not workload:
        return None
    words = WORKLOAD_WORDS.get(workload)
    language = normalize_language(translation.get_language()) or "en"
    return render_text(words, language) if words is not None else workload


def _label(labels: dict[str, Any], key: str | None) -> str | None:
    return str(labels.get(key, key)) if key else None


def _step_label(step: dict[str, Any], index: int) -> str:
    sid = step.get("step_id")
    return _("step %(n)s") % {"n": sid if sid is not None else index + 1}


def _time_breakdown(report_profile: dict[str, Any]) -> dict[str, Any] | None:
    """The "Where the time goes" card: the run's buckets as the report has them (ns, % of wall),
    a stacked bar per step (sampled evenly past ``charts.MAX_TIME_BARS``) and, for several ranks, per rank."""
    tb = report_profile.get("time_breakdown")
    if not isinstance(tb, dict) or not tb.get("wall_ns"):
        return None
    wall = int(tb["wall_ns"])
    labels = charts.bucket_labels()
    rows = [{"key": b, "label": labels[b], "colour": charts.BUCKET_COLOURS[b], "ns": int(tb.get(b) or 0),
             "pct": 100 * int(tb.get(b) or 0) / wall}
            for b in charts.TIME_BUCKETS]
    listed = report_profile.get("steps")
    steps = [st for st in (listed if isinstance(listed, list) else [])
             if isinstance(st, dict) and isinstance(st.get("time_breakdown"), dict)]
    picked = charts.sample_evenly(len(steps))
    out: dict[str, Any] = {
        "rows": rows, "wall_ns": wall,  # the steps' windows, which the buckets split
        "overlapped_ns": int(tb.get("communication_overlapped") or 0),
        # the host's buckets read 0 where the profile records no host call: said under the table
        "host_not_recorded": report_profile.get("host_calls_recorded") is False,
        "dominant": labels.get(report_profile.get("dominant_bucket") or ""),
        "step_total": len(steps), "steps_shown": len(picked), "sampled": len(picked) < len(steps),
        "chart_steps": charts.time_breakdown_chart(
            [(_step_label(steps[i], i), steps[i]["time_breakdown"]) for i in picked]) if steps else None,
        "chart_ranks": None,
    }
    ranks = [r for r in (report_profile.get("rank_breakdowns") or [])
             if isinstance(r, dict) and isinstance(r.get("time_breakdown"), dict)]
    if ranks:
        out["chart_ranks"] = charts.time_breakdown_chart(
            [(_("rank %(r)s") % {"r": r.get("rank") if r.get("rank") is not None else i}, r["time_breakdown"])
             for i, r in enumerate(ranks)])
        out["rank_count"] = len(ranks)
    return out


def _peer_wait(profile: Profile, report_profile: dict[str, Any]) -> dict[str, Any] | None:
    """The headline of a rank that waits in collectives for other ranks: the report's one figure
    (``profile.peer_wait``, which no saving counts), and where to see which rank is late: the cluster page
    of the upload when it holds several ranks, else a call to upload them all."""
    pw = report_profile.get("peer_wait")
    if not isinstance(pw, dict) or not pw.get("wait_us"):
        return None
    share = pw.get("share_of_run")
    head = profile.group if profile.group_id is not None else profile
    ranks = max(int(pw.get("ranks_in_profile") or 1), int(report_profile.get("ranks") or 1),
                head.ranks.count() if head is not None else 0)
    parts = pw.get("collectives") or {}
    # how the figure is made, from the collectives' own split (reports made before it carry none)
    how = None
    if parts.get("elapse"):
        how = {"exposed_ms": float(pw.get("communication_not_overlapped_us") or 0) / 1e3,
               "pct": round(100 * float(pw.get("waiting_share") or 0)), "wait_ms": parts["wait"] / 1e3,
               "idle_ms": parts["idle"] / 1e3, "elapse_ms": parts["elapse"] / 1e3,
               "recorded": pw.get("transit_recorded", True),
               # the wait's notify-Wait and Idle parts (collective_wait: Idle is not a notify wait)
               "notify_part_ms": float(pw.get("notify_wait_us") or 0) / 1e3,
               "idle_part_ms": float(pw.get("idle_us") or 0) / 1e3}
    return {"ms": float(pw["wait_us"]) / 1e3, "pct": 100 * float(share) if share is not None else None,
            "how": how,
            "ranks": ranks, "several_ranks": ranks > 1, "transit_recorded": pw.get("transit_recorded", True),
            "pipeline": float(pw.get("p2p_share") or 0) >= P2P_WAIT_SHARE,
            "cluster_url": reverse("profile-cluster", args=[profile.group_id or profile.pk]),
            # Chinese sentences follow each other with no space
            "sep": "" if (translation.get_language() or "").startswith("zh") else " "}


def profile_analysis_context(profile: Profile) -> dict[str, Any]:
    """Context the profile page adds once the profile is ready (``analysis`` is None before)."""
    if profile.status != ProfileStatus.READY:
        return {"analysis": None}
    data, views = page_builds.page_data_or_build(profile=profile)
    findings = list(analysis_selectors.findings_of_profile(profile=profile))
    artifacts = list(analysis_selectors.artifacts_of_profile(profile=profile))
    by_finding: dict[int | None, list[Any]] = {}
    for a in artifacts:
        by_finding.setdefault(a.finding_id, []).append(a)
    language = normalize_language(translation.get_language()) or "en"
    facts = _facts(profile, data, language)
    steps = facts["steps"] if isinstance(facts["steps"], int) and facts["steps"] > 1 else None
    # a saving is over the whole recorded run: per step too, beside the step time it comes off
    rows = [{"finding": f, "data": f.data,
             "saving_per_step_us": (f.data.get("estimated_saving_us") or 0) / steps if steps else None,
             "evidence": shown_evidence_rows(f.data.get("evidence") or {}, language),
             "parameters": sorted(((f.data.get("details") or {}).get("parameters") or {}).items()),
             "artifacts": by_finding.get(f.pk, [])} for f in findings]
    out: dict[str, Any] = {
        "analysis": {
            "facts": facts,
            "findings": rows,
            "loose_artifacts": by_finding.get(None, []),
            "has_artifacts": bool(artifacts),
            "has_data": data is not None,
            "views": views,  # being prepared by a worker, or why that failed, while there is no data
            "verify": verify_targets(profile=profile),  # "Verify on agent" (issue 21)
            "time": _time_breakdown(summary_of(profile).report_profile),
            "peer_wait": _peer_wait(profile, summary_of(profile).report_profile),
        }
    }
    if data is not None:
        out["analysis"].update({
            "metrics": [(k, metric_label(k, language), v) for k, v in
                        sorted((data.get("metrics") or {}).items()) if v is not None],
            "has_decode": bool(data.get("decode", {}).get("steps")),
            "has_roofline": bool(data.get("roofline", {}).get("points")),
            # no kernel with an input shape: the profiler was run without record_shapes, not a model without
            # MatMuls (the A100 trace's cutlass GEMMs had no FLOP count and the page blamed the model)
            "shapes_recorded": any(r.get("shape") for r in data.get("top_ops", [])),
            # a captured graph's replay records no launching op, so no shapes whatever the profiler's options
            "graph_replayed": (summary_of(profile).report_profile.get("graph_launched_share") or 0)
            >= GRAPH_REPLAY_MIN_SHARE,
            "roofline_above": _above_hbm_roof(data.get("roofline", {})),
        })
        out["chart_op_types"] = charts.op_type_chart(data.get("op_types", []))
        out["chart_roofline"] = charts.roofline_chart(data.get("roofline", {}))
        out["chart_decode"] = charts.decode_chart(data.get("decode", {}))
        out["top_ops"] = _top_ops(data.get("top_ops", []))
    return out


def _above_hbm_roof(roof: dict[str, Any]) -> dict[str, Any] | None:
    """The roofline's op groups that run above the HBM roof (their tensors stayed in the L2 cache), for the
    hint under the chart; None when there are none."""
    above = [p for p in roof.get("points", []) if p.get("above_hbm_roof")]
    if not above:
        return None
    l2 = roof.get("l2_bytes") or 0
    in_l2 = sum(1 for p in above if p.get("bytes_per_kernel", float("inf")) <= l2)
    # what L2 cannot hold went to HBM: faster than the roof, the roof's figure (or the device) is wrong
    return {"count": in_l2, "beyond_l2": len(above) - in_l2, "l2_mib": round(l2 / 2**20) if l2 else None,
            "third_party": roof.get("hbm_tag") in ("third_party", "inferred")}


def _top_ops(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The top-ops rows with their times as the page prints every time (``format_duration``); the table's
    script sorts on the raw ``*_us`` numbers and shows the ``*_text``."""
    language = normalize_language(translation.get_language()) or "en"
    return [{**r, "block_text": block_label(str(r.get("block") or ""), language),
             "total_us_text": format_duration(r.get("total_us"), "us"),
             "avg_us_text": format_duration(r.get("avg_us"), "us")} for r in rows]


@login_required
def profile_timeline(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    ready = profile.status == ProfileStatus.READY
    views = page_builds.prepared(profile=profile, kind=PageBuild.Kind.VIEWS, request=True) if ready else None
    return render(request, "frontend/profile_timeline.html", {
        "profile": profile, "project": profile.project, "ready": ready, "views": views,
        "timeline_ready": views is not None and views.status == page_builds.READY,
        "cluster_url": _cluster_url(profile) if ready else None, "tagline": profile_tagline(profile),
    })


@login_required
def profile_trace(request: HttpRequest, profile_id: int) -> HttpResponse:
    """The "download trace" button: the file when it is exported, else a page that shows the export being
    prepared by a worker (asked for now) and starts the download once it is ready, or why it failed."""
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    ready = profile.status == ProfileStatus.READY
    trace = page_builds.prepared(profile=profile, kind=PageBuild.Kind.TRACE, request=True) if ready else None
    if trace is not None and trace.status == page_builds.READY:
        return redirect(reverse("api-profile-trace", args=[profile.pk]))
    return render(request, "frontend/profile_trace.html", {
        "profile": profile, "project": profile.project, "ready": ready, "trace": trace,
        "tagline": profile_tagline(profile),
    })


def _cluster_url(profile: Profile) -> str | None:
    """The cluster page of this profile (several ranks or a matrix) or of the upload this rank belongs to."""
    if profile.group_id is not None:
        return reverse("profile-cluster", args=[profile.group_id])
    return reverse("profile-cluster", args=[profile.pk]) if cluster_data(profile=profile) else None


@login_required
def profile_cluster(request: HttpRequest, profile_id: int) -> HttpResponse:
    """Every rank on one page (``analysis.cluster``): aligned step rows, per-rank breakdown, link heatmap."""
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    ready = profile.status == ProfileStatus.READY
    language = normalize_language(translation.get_language()) or "en"
    data = cluster_data(profile=profile, language=language) if ready else None
    if data and data.get("slow_rank"):
        data["slow_rank"]["evidence_rows"] = shown_evidence(data["slow_rank"]["evidence_rows"])
    ctx: dict[str, Any] = {"profile": profile, "project": profile.project, "ready": ready, "cluster": data,
                           "tagline": profile_tagline(profile)}
    if data:
        ranks = [r for r in data["ranks"] if isinstance(r.get("time_breakdown"), dict)]
        ctx["chart_ranks"] = charts.time_breakdown_chart(
            [(_("rank %(r)s") % {"r": r["rank"]}, r["time_breakdown"]) for r in ranks]) if ranks else None
        ctx["chart_matrix"] = (charts.communication_matrix_chart(data["links"], data["link_ranks"])
                               if data["links"] else None)
        # times as text the way the page prints every time (the script only places the bars)
        ctx["strip"] = {"span_ns": data["span_ns"], "ranks": [
            {"rank": r["rank"], "offset_ns": r["offset_ns"], "timeline": r["timeline_profile"],
             "offset_text": None if r["offset_ns"] is None else format_duration(r["offset_ns"], "ns"),
             "steps": [[s["step_id"], s["start_ns"], s["end_ns"], s["abs_start_ns"], s["abs_end_ns"],
                        format_duration(s["end_ns"] - s["start_ns"], "ns")] for s in r["steps"]]}
            for r in data["ranks"]]}
        ctx["untimed"] = any(r["offset_ns"] is None for r in data["ranks"])
    return render(request, "frontend/profile_cluster.html", ctx)
