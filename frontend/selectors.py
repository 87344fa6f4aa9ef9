"""Reads of the frontend app."""

from __future__ import annotations

from typing import Any

from frontend.models import UserPreference
from profiles import selectors as profile_selectors
from profiles.models import ProfileStatus


def user_language_get(*, user: Any) -> str | None:
    """The language the user picked, or None (one indexed query; none for anonymous users)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return UserPreference.objects.filter(user_id=user.pk).values_list("language", flat=True).first() or None


def ready_profile_choices(*, project: Any, query: str = "", limit: int = 200,
                          include: tuple[int, ...] = ()) -> list[tuple[int, str, Any]]:
    """(id, name, created_at) of a project's ready profiles for the compare selects, newest first: the latest
    ``limit`` (optionally whose name contains ``query``), plus the ids in ``include`` (a preselected pair)."""
    ready = profile_selectors.profiles_of_project(project=project).filter(status=ProfileStatus.READY)
    matching = ready.filter(name__icontains=query) if query else ready
    rows = list(matching.values_list("id", "name", "created_at")[:limit])
    missing = [pk for pk in include if pk not in {r[0] for r in rows}]
    if missing:
        rows += list(ready.filter(pk__in=missing).values_list("id", "name", "created_at"))
    return rows
