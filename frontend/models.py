"""Per-user settings of the pages (issue 7: the language is chosen per user, not per browser session)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UserPreference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # A code of settings.LANGUAGES; empty: no choice yet (the session's or the browser's language applies).
    language = models.CharField(max_length=16, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.language or '-'}"
