"""Writes of the frontend app (HackSoft style: ``<entity>_<action>``, keyword-only arguments)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from frontend.models import UserPreference


def user_language_set(*, user: Any, language: str) -> UserPreference:
    """Remember the user's language; the middleware applies it on every request of every session."""
    if language not in {code for code, _name in settings.LANGUAGES}:
        raise ValidationError(f"unknown language {language!r}")
    pref, _created = UserPreference.objects.update_or_create(user=user, defaults={"language": language})
    return pref

