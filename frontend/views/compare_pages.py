"""Comparison pages: pick a baseline and a candidate among a project's ready profiles; the comparison's own
page (stable URL /comparisons/ID/) with metrics, op-type and block diffs, finding status and exports."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.html import format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from analysis import selectors as analysis_selectors
from analysis.comparisons import comparison_create
from analysis.fix_ledger import verdicts_of_comparison
from analysis.models import JobStatus
from analysis.texts import localized_list
from frontend import charts
from frontend import selectors as frontend_selectors
from frontend.taglines import profile_tagline
from frontend.views.profile_pages import workload_label
from profiles import selectors, services
from profiles.models import Profile, ProfileStatus
from profiles.selectors import signed_in
from pypto_core.compare import block_label
from pypto_core.durations import unit_of
from pypto_core.graph import metric_label
from pypto_core.i18n import normalize_language
from pypto_core.kernel_names import readable

# Newest ready profiles offered in each select; older ones are found by name through compare_profile_search.
# 2,000 options took 214-540 ms to render with 1,000 profiles (tests/bench/bench_pages.py).
MAX_OPTIONS = 200
SEARCH_RESULTS = 50


def _options(rows: list[tuple[int, str, Any]], chosen: str) -> str:
    """``<option>`` tags, every value escaped by format_html (names are user data)."""
    return format_html_join(
        "", '<option value="{}"{}>#{} {} · {}</option>',
        ((pk, " selected" if str(pk) == chosen else "", pk, name, f"{created:%Y-%m-%d %H:%M}")
         for pk, name, created in rows))


def _profile_label(profile: Profile) -> str:
    return f"#{profile.pk} {profile.name} · {profile.created_at:%Y-%m-%d %H:%M}"


class CompareForm(forms.Form):
    base = forms.ModelChoiceField(queryset=Profile.objects.none(), label=gettext_lazy("Baseline (before)"))
    candidate = forms.ModelChoiceField(queryset=Profile.objects.none(),
                                       label=gettext_lazy("Candidate (after)"))

    def __init__(self, *args: Any, project: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ready = selectors.profiles_of_project(project=project).filter(status=ProfileStatus.READY).only(
            "id", "name", "created_at")
        for name in ("base", "candidate"):
            field = self.fields[name]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset = ready
            field.label_from_instance = _profile_label  # type: ignore[method-assign,assignment]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("base") and data.get("candidate") and data["base"].pk == data["candidate"].pk:
            raise forms.ValidationError(_("Pick two different profiles."))
        return data


@login_required
@require_http_methods(["GET", "POST"])
def compare_new(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get_for_user(user=request.user, project_id=project_id)
    initial = {k: request.GET.get(k) for k in ("base", "candidate") if request.GET.get(k, "").isdigit()}
    form = CompareForm(request.POST or None, project=project, initial=initial)
    if request.method == "POST":
        services.require_write(user=signed_in(request.user), project=project)
        if form.is_valid():
            try:
                comparison = comparison_create(
                    user=signed_in(request.user), base=form.cleaned_data["base"],
                    candidate=form.cleaned_data["candidate"])
            except ValidationError as exc:
                messages.error(request, " ".join(exc.messages))
            else:
                return redirect("comparison", comparison_id=comparison.pk)
    # Options rendered by the template from plain values: Django's Select widget renders each of a thousand
    # options through a template (seconds); the form still validates the POST against the same queryset.
    chosen = tuple(int(v) for v in (form[k].value() for k in ("base", "candidate")) if str(v or "").isdigit())
    options = frontend_selectors.ready_profile_choices(project=project, limit=MAX_OPTIONS, include=chosen)
    selects = {f"{k}_options": _options(options, str(form[k].value() or "")) for k in ("base", "candidate")}
    return render(request, "frontend/compare_new.html", {
        "project": project, "form": form, **selects, "max_options": MAX_OPTIONS,
        "can_write": selectors.can_write(user=signed_in(request.user), project=project),
        "recent": analysis_selectors.comparisons_of_project(project=project).defer(
            "result", "base__summary", "candidate__summary")[:20],
    })


@login_required
@require_http_methods(["GET"])
def compare_profile_search(request: HttpRequest, project_id: int) -> JsonResponse:
    """Ready profiles of the project whose name contains ``q`` (newest first), for the compare selects."""
    project = selectors.project_get_for_user(user=request.user, project_id=project_id)
    query = request.GET.get("q", "").strip()[:200]
    rows = frontend_selectors.ready_profile_choices(project=project, query=query, limit=SEARCH_RESULTS)
    # Plain JSON values; the page puts them into <option> elements as text, never as markup.
    return JsonResponse({"results": [{"id": pk, "name": name, "created": f"{created:%Y-%m-%d %H:%M}"}
                                     for pk, name, created in rows], "limit": SEARCH_RESULTS})


ALIGNED_ROWS = 300  # rows of the aligned table on the page (the exports have them all)


def _metric_rows(metrics: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    rows = []
    for m in metrics:
        if m.get("base") is None and m.get("new") is None:
            continue
        noise = m.get("noise") or {}
        verdict = noise.get("verdict") or ("noise" if m.get("significant") is False and m.get("delta") else (
            "better" if m.get("better") is True else "worse" if m.get("better") is False else "same"))
        share = m.get("unit") == "share"
        # a share moves in percentage points: 6.5% -> 50.6% is +44.1 pp, not "+680%"
        delta_pp = 100.0 * m["delta"] if share and m.get("delta") is not None else None
        rows.append({**m, "verdict": verdict, "is_share": share, "delta_pp": delta_pp, "noise": noise,
                     "label": metric_label(str(m.get("name")), language),
                     "unit_label": str(UNIT_LABELS.get(str(m.get("unit")), m.get("unit") or ""))})
    return rows


# The words of the comparison's ids on the page (the ids stay in the API and the exports).
NORMALISATION_LABELS = {"per_token": gettext_lazy("per decode token"),
                        "per_step": gettext_lazy("per profiler step"), "whole_run": gettext_lazy("whole run")}
# Per unit of the op times (``normalisation``, the aligned rows' ``unit``): the words beside each table, and
# the op chart's axis.
PER_UNIT = {"per_token": gettext_lazy("per token"), "per_step": gettext_lazy("per step")}
AXIS_UNIT = {"per_token": gettext_lazy("%(unit)s per token"), "per_step": gettext_lazy("%(unit)s per step")}
UNIT_LABELS = {"share": gettext_lazy("share")}


def chart_unit(times_us: list[Any]) -> tuple[str, float]:
    """The unit the page's tables print the largest of these times in (``format_duration`` picks it by size)
    and how many µs make one: the op chart draws every bar in it, so the chart and the tables beside it read
    in one unit (the chart drew µs beside tables in ms)."""
    biggest = max((abs(float(t)) for t in times_us if t), default=0.0)
    name, per_ns = unit_of(biggest * 1_000, smallest="µs")
    return name, per_ns / 1_000


def _readable_ops(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Op types with a readable label (CUDA kernels are named by their C++ symbol); the full name stays."""
    return [{**o, "label": readable(str(o["op_type"]))} for o in ops]


def _readable_blocks(blocks: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    return [{**b, "label": block_label(str(b.get("block", "")), language),
             "base_op_types": [readable(o) for o in b.get("base_op_types", [])],
             "new_op_types": [readable(o) for o in b.get("new_op_types", [])]} for b in blocks]


def _aligned_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's aligned rows for the table, with the ratio its filter reads (how many times slower)."""
    out = []
    for r in rows[:ALIGNED_ROWS]:
        lo, hi = sorted((r.get("base_us") or 0.0, r.get("new_us") or 0.0))
        out.append({**r, "times": (hi / lo) if lo > 0 else None})
    return out


@login_required
def comparison_detail(request: HttpRequest, comparison_id: int) -> HttpResponse:
    comparison = analysis_selectors.comparison_get_for_user(user=request.user, comparison_id=comparison_id)
    result = comparison.result or {}
    done = comparison.status == JobStatus.DONE
    per = result.get("normalisation", "")
    language = normalize_language(translation.get_language()) or "en"
    context: dict[str, Any] = {
        "comparison": comparison, "project": comparison.project, "result": result, "done": done,
        "finished": comparison.status in (JobStatus.DONE, JobStatus.FAILED),
        "per_note": str(PER_UNIT.get(per, "")),
        "metrics": _metric_rows(result.get("metrics", []), language) if done else [],
        "ops": _readable_ops(result.get("ops", [])[:60]),
        "blocks": _readable_blocks(result.get("blocks", []), language),
        "findings": result.get("findings", []),
        "normalisation": str(NORMALISATION_LABELS.get(result.get("normalisation", ""),
                                                      result.get("normalisation", ""))),
        "warnings": localized_list(result.get("warnings") or [], result.get("warning_messages"), language),
        "aligned": _aligned_rows(result.get("aligned") or []) if done else [],
        "alignment": result.get("alignment") or {},
        "summary": result.get("summary") or {},
        "aligned_unit": str(PER_UNIT.get((result.get("alignment") or {}).get("unit", ""), "")),
        "tagline": profile_tagline(comparison.base, comparison.candidate),
    }
    modules = sorted({r["module"] for r in context["aligned"] if r.get("module")})
    context["modules"] = modules
    context["summary_sides"] = [
        {**side, "workload": workload_label(side.get("workload"))}
        for side in (context["summary"].get("base") or {}, context["summary"].get("new") or {})]
    rank_sides = []
    for side, label in zip(context["summary_sides"], (_("Baseline"), _("Candidate"))):
        kinds = ("compute", "communication_not_overlapped", "memcpy", "idle")
        ranks = [{**r, "shares": [r.get(f"{k}_share") for k in kinds]} for r in side.get("ranks") or []]
        rank_sides.append(({"ranks": ranks}, label))
    context["rank_sides"] = rank_sides
    context["many_ranks"] = any(len(side["ranks"]) > 1 for side, _label in rank_sides)
    if done and result.get("ops"):
        labelled = [{**o, "op_type": o["label"]} for o in context["ops"]]
        name, us_per = chart_unit([t for o in labelled[:15] for t in (o.get("base_us"), o.get("new_us"))])
        axis = AXIS_UNIT[per] % {"unit": name} if per in AXIS_UNIT else name  # the op chart's axis
        context["chart_ops"] = charts.op_diff_chart(labelled, axis, us_per, name)
    # a verification job's comparison (issue 21): the verdicts, the findings it was opened on picked out
    picked = {int(v) for v in request.GET.get("findings", "").split(",") if v.isdigit()}
    verdicts = [{**v, "picked": v.get("finding") in picked}
                for v in verdicts_of_comparison(comparison=comparison)]
    context.update(verdicts=verdicts, not_npu=sorted({str(v.get("measured_on")) for v in verdicts
                                                       if not v.get("npu_figure")}))
    return render(request, "frontend/comparison.html", context)
