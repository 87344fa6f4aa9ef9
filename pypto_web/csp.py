"""The Content-Security-Policy of HTML pages (settings.PYPTO_CSP): only the app's own scripts and styles."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        html = response.get("Content-Type", "").startswith("text/html")
        if html and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.PYPTO_CSP
        return response
