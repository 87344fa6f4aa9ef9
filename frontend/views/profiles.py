"""The profile status page (live progress), and its re-run and delete buttons."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from analysis import profile_services
from analysis import selectors as analysis_selectors
from analysis.summary import summary_of
from frontend.taglines import profile_tagline
from frontend.views.profile_pages import profile_analysis_context
from profiles import selectors
from profiles.models import ProfileStatus
from profiles.selectors import signed_in


@login_required
def profile_detail(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    ranks = selectors.ranks_of_upload(profile=profile)
    return render(request, "frontend/profile_detail.html", {
        "profile": profile,
        "ranks": ranks,  # the rank selector, in rank order
        # the upload's own page shows one rank's numbers: it says which ("This rank" read as the cluster)
        "shown_rank": selectors.rank_shown_for_upload(profile=profile, ranks=ranks),
        "summary": summary_of(profile).to_dict(),
        "project": profile.project,
        "tagline": profile_tagline(profile),  # the top bar says this profile's device and workload
        "can_write": selectors.can_write(user=signed_in(request.user), project=profile.project),
        "findings": analysis_selectors.findings_of_profile(profile=profile),
        "artifacts": analysis_selectors.artifacts_of_profile(profile=profile),
        "runs": analysis_selectors.runs_with_logs(profile=profile),
        "status_labels": dict(ProfileStatus.choices),  # status.js shows the live status in the page language
        **profile_analysis_context(profile),  # charts, top ops, findings with remedies (issue 7)
    })


@login_required
@require_POST
def profile_rerun(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    try:
        profile_services.profile_rerun(profile=profile, user=signed_in(request.user))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, _("The pipeline runs again from the kept archive."))
    return redirect("profile", profile_id=profile.pk)


@login_required
@require_POST
def profile_delete(request: HttpRequest, profile_id: int) -> HttpResponse:
    profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    project_id = profile.project_id
    profile_services.profile_delete(profile=profile, user=signed_in(request.user))
    messages.success(request, _("Profile deleted."))
    return redirect("project", project_id=project_id)
