"""Capture pages: a project's agents (online/offline, capabilities), the capture form, a job's live page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from captures import selectors, services
from captures.models import JobStatus
from captures.verification import VerificationRefused, verification_create, verification_of_job
from profiles import selectors as profile_selectors
from pypto_core.capture.options import schema_description


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


@login_required
@require_http_methods(["GET", "POST"])
def agents_page(request: HttpRequest, project_id: int) -> HttpResponse:
    project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
    can_write = profile_selectors.can_write(user=request.user, project=project)
    new_token = None
    if request.method == "POST":
        try:
            agent, new_token = services.agent_create(project=project,
                                                     user=profile_selectors.signed_in(request.user),
                                                     name=request.POST.get("name", ""))
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, _errors(exc) if isinstance(exc, ValidationError) else str(exc))
        else:
            messages.success(request, _("Agent %(name)s registered. Copy its token now: it is not shown "
                                        "again.") % {"name": agent.name})
    return render(request, "captures/agents.html", {
        "project": project, "agents": selectors.agents_of_project(project=project), "can_write": can_write,
        "new_token": new_token, "jobs": selectors.jobs_of_project(project=project)[:20],
    })


@login_required
@require_POST
def agent_revoke(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = selectors.agent_get_for_user(user=request.user, agent_id=agent_id)
    services.agent_revoke(agent=agent, user=profile_selectors.signed_in(request.user))
    messages.success(request, _("Agent %(name)s's token was revoked.") % {"name": agent.name})
    return redirect("project-agents", project_id=agent.project_id)


def _params_from_form(post: dict) -> dict:
    """Form fields -> params: only whitelisted names, typed per the schema (the service validates again)."""
    params: dict = {}
    for item in schema_description():
        name = item["name"]
        if item["type"] == "bool":
            params[name] = post.get(name) == "on"
        elif name in post and post[name] != "":
            raw = post[name]
            if item["type"] == "int":
                try:
                    params[name] = int(raw)
                except ValueError:
                    params[name] = raw  # refused with a message by the validation
            else:
                params[name] = raw
    return params


@login_required
@require_http_methods(["GET", "POST"])
def capture_form(request: HttpRequest, project_id: int) -> HttpResponse:
    project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
    agents = [a for a in selectors.agents_of_project(project=project) if not a.revoked]
    if request.method == "POST":
        choice = request.POST.get("target", "")  # "<agent id>:<workload>"
        agent_id, _sep, workload = choice.partition(":")
        try:
            job = services.capture_create(
                project=project, user=profile_selectors.signed_in(request.user), agent_id=int(agent_id or 0),
                workload=workload, params=_params_from_form(request.POST),
            )
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        except PermissionDenied as exc:
            messages.error(request, str(exc))
        else:
            return redirect("capture-job", job_id=job.pk)
    return render(request, "captures/capture_form.html", {
        "project": project, "agents": agents, "schema": schema_description(),
        "can_write": profile_selectors.can_write(user=request.user, project=project),
    })


@login_required
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    job = selectors.job_get_for_user(user=request.user, job_id=job_id)
    return render(request, "captures/job.html", {
        "status_labels": dict(JobStatus.choices),  # job.js shows the live status in the page's language
        "verification": verification_of_job(job=job),  # a verification job: its findings, remedies, verdicts
        "job": job, "project": job.project,
        "can_write": profile_selectors.can_write(user=request.user, project=job.project),
    })


@login_required
@require_POST
def profile_verify(request: HttpRequest, profile_id: int) -> HttpResponse:
    """"Verify on agent" from the profile page: one finding (``only``) or the ticked ones (``finding``)."""
    profile = profile_selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
    raw = [request.POST["only"]] if request.POST.get("only") else request.POST.getlist("finding")
    ids = [int(v) for v in raw if v.isdigit()]
    agent_id, _sep, workload = request.POST.get("target", "").partition(":")
    try:
        job = verification_create(user=profile_selectors.signed_in(request.user), profile=profile,
                                  finding_ids=ids, agent_id=int(agent_id) if agent_id.isdigit() else None,
                                  workload=workload or None)
    except VerificationRefused as exc:
        reasons = "; ".join(f"{item['name']}: {item['reason']}" for item in exc.left_out)
        messages.error(request, exc.detail + (f" ({reasons})" if reasons else ""))
        return redirect("profile", profile_id=profile.pk)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return redirect("profile", profile_id=profile.pk)
    return redirect("capture-job", job_id=job.pk)


@login_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = selectors.job_get_for_user(user=request.user, job_id=job_id)
    services.capture_cancel(job=job, user=profile_selectors.signed_in(request.user))
    return redirect("capture-job", job_id=job.pk)
