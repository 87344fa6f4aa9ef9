"""Reads, scoped to the caller's memberships: anything outside them is 404."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from captures.models import Agent, CaptureJob
from profiles.models import Project
from profiles.selectors import User, projects_for_user


def agents_of_project(*, project: Project) -> QuerySet[Agent]:
    return Agent.objects.filter(project=project).order_by("revoked_at", "name")


def agent_get_for_user(*, user: User, agent_id: int) -> Agent:
    agent = Agent.objects.filter(pk=agent_id, project__in=projects_for_user(user)).select_related("project").first()
    if agent is None:
        raise Http404("No such agent")
    return agent


def jobs_of_project(*, project: Project) -> QuerySet[CaptureJob]:
    return CaptureJob.objects.filter(project=project).select_related("agent", "profile").order_by("-created_at", "-id")


def job_get_for_user(*, user: User, job_id: int) -> CaptureJob:
    job = (
        CaptureJob.objects.filter(pk=job_id, project__in=projects_for_user(user))
        .select_related("agent", "project", "profile")
        .first()
    )
    if job is None:
        raise Http404("No such capture")
    return job
