"""Reads, scoped to the caller's memberships: anything outside them is 404."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from captures.models import ACTIVE_STATUSES, Agent, CaptureJob
from captures.services import jobs_expire
from profiles.models import Project
from profiles.selectors import User, projects_for_user


def agents_of_project(*, project: Project) -> QuerySet[Agent]:
    return Agent.objects.filter(project=project).order_by("revoked_at", "name")


def agent_get_for_user(*, user: User, agent_id: int) -> Agent:
    agent = (Agent.objects.filter(pk=agent_id, project__in=projects_for_user(user))
             .select_related("project").first())
    if agent is None:
        raise Http404("No such agent")
    return agent


# Reads of jobs first fail those whose agent went silent or whose deadline passed (services.jobs_expire: one
# indexed query when nothing is overdue, conditional UPDATEs otherwise), so no page or API answer shows a
# dead agent's job as running; no periodic task is needed for it.


def jobs_of_project(*, project: Project) -> QuerySet[CaptureJob]:
    jobs_expire(project_id=project.pk)
    return (CaptureJob.objects.filter(project=project).select_related("agent", "profile")
            .order_by("-created_at", "-id"))


def job_get_for_user(*, user: User, job_id: int) -> CaptureJob:
    job = (
        CaptureJob.objects.filter(pk=job_id, project__in=projects_for_user(user))
        .select_related("agent", "project", "profile")
        .first()
    )
    if job is None:
        raise Http404("No such capture")
    if job.status in ACTIVE_STATUSES and jobs_expire(job_id=job.pk):
        job.refresh_from_db()
    return job
