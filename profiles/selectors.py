"""Reads, always scoped to the caller's memberships: anything outside them is 404, never 403."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as Account
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from profiles.models import (
    WRITE_ROLES,
    Invitation,
    Membership,
    Profile,
    ProfileStatus,
    Project,
    UploadSession,
)

# Whoever asks: a signed-in account or an anonymous visitor (``request.user``).
User = Account | AnonymousUser


def signed_in(user: User) -> Account:
    """The account behind a request that needs one (the views that ask require a login)."""
    if not isinstance(user, Account):
        raise PermissionDenied("sign in first")
    return user


def projects_for_user(user: User) -> QuerySet[Project]:
    if not isinstance(user, Account):
        return Project.objects.none()
    return Project.objects.filter(memberships__user=user).distinct()


def membership_get(*, user: User, project: Project) -> Membership | None:
    if not isinstance(user, Account):
        return None
    return Membership.objects.filter(user=user, project=project).first()


def can_write(*, user: User, project: Project) -> bool:
    membership = membership_get(user=user, project=project)
    return membership is not None and membership.role in WRITE_ROLES


def project_get_for_user(*, user: User, project_id: int) -> Project:
    project = projects_for_user(user).filter(pk=project_id).first()
    if project is None:
        raise Http404("No such project")
    return project


def profiles_for_user(user: User) -> QuerySet[Profile]:
    if not isinstance(user, Account):
        return Profile.objects.none()
    return Profile.objects.filter(project__memberships__user=user)


def profile_get_for_user(*, user: User, profile_id: int) -> Profile:
    profile = profiles_for_user(user).select_related("project").filter(pk=profile_id).first()
    if profile is None:
        raise Http404("No such profile")
    return profile


def profiles_of_project(*, project: Project) -> QuerySet[Profile]:
    """Newest first; rank profiles of a multi-rank upload are listed under their group."""
    return project.profiles.filter(group__isnull=True).order_by("-created_at", "-id")


def members_of_project(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("user__username")


def upload_session_get_for_user(*, user: User, session_id: uuid.UUID) -> UploadSession:
    # Only the user who started an upload may continue it (and only while still a member).
    session = (
        UploadSession.objects.filter(pk=session_id, created_by=user, project__memberships__user=user)
        .select_related("project")
        .first()
        if isinstance(user, Account)
        else None
    )
    if session is None:
        raise Http404("No such upload")
    return session


def invitations_pending_for_user(user: User) -> QuerySet[Invitation]:
    if not isinstance(user, Account):
        return Invitation.objects.none()
    return Invitation.objects.filter(user=user, status=Invitation.Status.PENDING).select_related(
        "project", "invited_by"
    )


def invitation_get_for_invitee(*, user: User, invitation_id: int) -> Invitation:
    invitation = invitations_pending_for_user(user).filter(pk=invitation_id).first()
    if invitation is None:
        raise Http404("No such invitation")
    return invitation


def invitations_pending_of_project(*, project: Project) -> QuerySet[Invitation]:
    return project.invitations.filter(status=Invitation.Status.PENDING).select_related("user")


def ranks_of_upload(*, profile: Profile) -> list[Profile]:
    """The rank profiles of ``profile``'s multi-rank upload (it may be the upload or one of its ranks), in
    rank order 0, 1, …, 10 (the model's name order put "rank 10" before "rank 2"); empty for one rank."""
    head_id = profile.group_id if profile.group_id is not None else profile.pk
    return list(Profile.objects.filter(group_id=head_id).order_by("rank", "id"))


def rank_shown_for_upload(*, profile: Profile, ranks: list[Profile]) -> int | None:
    """The rank whose numbers the upload's own page shows: the first rank that was read (the fan-out takes
    the lowest readable rank as the upload's primary, analysis/pipeline/fanout.py). None on a rank's page
    or a one-rank upload."""
    if profile.group_id is not None or not ranks:
        return None
    readable = [r for r in ranks if r.status == ProfileStatus.READY] or \
        [r for r in ranks if r.status != ProfileStatus.FAILED] or ranks
    return readable[0].rank if readable[0].rank is not None else 0
