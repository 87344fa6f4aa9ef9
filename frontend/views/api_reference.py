"""The browsable API reference (the header's "API" link): the OpenAPI schema as a page, served by the app."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation

from frontend.api_reference import reference


@login_required
def api_reference(request: HttpRequest) -> HttpResponse:
    ref = reference(translation.get_language() or "en")
    return render(request, "frontend/api_reference.html", {"ref": ref})
