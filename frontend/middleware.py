"""Activates the language a user picked, kept in their session (after LocaleMiddleware's guess)."""

from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

SESSION_LANGUAGE_KEY = "pypto_language"


class SessionLanguageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.known = {code for code, _name in settings.LANGUAGES}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        chosen = request.session.get(SESSION_LANGUAGE_KEY) if hasattr(request, "session") else None
        if chosen in self.known:
            translation.activate(chosen)
            request.LANGUAGE_CODE = chosen
        response = self.get_response(request)
        if chosen in self.known:
            response.headers.setdefault("Content-Language", chosen)
        return response
