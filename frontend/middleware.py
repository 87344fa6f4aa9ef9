"""Activates the language a user picked (after LocaleMiddleware's guess from the browser).

Signed-in users: their stored choice (frontend.models.UserPreference), so it follows them to a new session
or another browser. Anonymous pages (the login page): the choice kept in the session, as before."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from frontend.selectors import user_language_get

SESSION_LANGUAGE_KEY = "pypto_language"


class SessionLanguageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.known = {code for code, _name in settings.LANGUAGES}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        chosen = user_language_get(user=getattr(request, "user", None))
        if chosen not in self.known:
            chosen = request.session.get(SESSION_LANGUAGE_KEY) if hasattr(request, "session") else None
        if chosen in self.known:
            translation.activate(chosen)
            request.LANGUAGE_CODE = chosen
        response = self.get_response(request)
        if chosen in self.known:
            response.headers.setdefault("Content-Language", chosen)
        return response
