"""Project pages: the list (with pending invitations), a project (profiles, members, invite), upload."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from frontend.forms import InviteForm, ProjectForm
from frontend.views.dashboard import project_dashboard_context
from profiles import selectors, services
from profiles.models import ProfileStatus
from profiles.selectors import signed_in

PROFILES_PER_PAGE = 50  # 200 rows took 320-470 ms to render with 1,000 profiles (tests/bench/bench_pages.py)


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


@login_required
@require_http_methods(["GET", "POST"])
def project_list(request: HttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = services.project_create(user=signed_in(request.user), **form.cleaned_data)
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        else:
            return redirect("project", project_id=project.pk)
    projects = selectors.projects_for_user(request.user).prefetch_related("memberships")
    rows = [
        {"project": p,
         "role": next((m.get_role_display() for m in p.memberships.all() if m.user_id == request.user.pk),
                      None),
         "profiles": p.profiles.count()}
        for p in projects
    ]
    return render(request, "frontend/project_list.html", {
        "rows": rows, "form": form, "invitations": selectors.invitations_pending_for_user(request.user),
    })


@login_required
@require_POST
def invitation_answer(request: HttpRequest, invitation_id: int, action: str) -> HttpResponse:
    invitation = selectors.invitation_get_for_invitee(user=request.user, invitation_id=invitation_id)
    if action == "accept":
        services.invitation_accept(invitation=invitation, user=signed_in(request.user))
        messages.success(request, _("You joined %(name)s.") % {"name": invitation.project.name})
        return redirect("project", project_id=invitation.project_id)
    services.invitation_decline(invitation=invitation, user=signed_in(request.user))
    return redirect("projects")


@login_required
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get_for_user(user=request.user, project_id=project_id)
    membership = selectors.membership_get(user=signed_in(request.user), project=project)
    status = request.GET.get("status", "")
    profiles = selectors.profiles_of_project(project=project)
    if status in ProfileStatus.values:
        profiles = profiles.filter(status=status)
    else:
        status = ""
    # Newest first, one page at a time; Paginator clamps a page number out of range to the last page.
    page = Paginator(profiles.defer("summary").select_related("created_by"), PROFILES_PER_PAGE).get_page(
        request.GET.get("page"))
    return render(request, "frontend/project_detail.html", {
        "project": project,
        "membership": membership,
        "can_write": selectors.can_write(user=signed_in(request.user), project=project),
        "profiles": page,
        "status_filter": status,
        "statuses": ProfileStatus.choices,
        "members": selectors.members_of_project(project=project),
        "pending": selectors.invitations_pending_of_project(project=project),
        "invite_form": InviteForm(),
        **project_dashboard_context(project),  # history chart, open findings, comparisons (issue 7)
    })


@login_required
@require_POST
def project_invite(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get_for_user(user=request.user, project_id=project_id)
    form = InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation = services.invitation_create(project=project, invited_by=signed_in(request.user),
                                                    **form.cleaned_data)
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        else:
            messages.success(request, _("Invited %(user)s as %(role)s.") % {
                "user": invitation.user.username, "role": invitation.get_role_display()})
    else:
        messages.error(request, _("Give a username and a role."))
    return redirect("project", project_id=project.pk)


@login_required
def project_upload(request: HttpRequest, project_id: int) -> HttpResponse:
    project = selectors.project_get_for_user(user=request.user, project_id=project_id)
    services.require_write(user=signed_in(request.user), project=project)
    return render(request, "frontend/upload.html", {
        "project": project, "chunk_bytes": settings.PYPTO_CHUNK_BYTES,
        "max_bytes": settings.PYPTO_MAX_UPLOAD_BYTES,
    })
