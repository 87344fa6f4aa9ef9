"""Site-wide small things: the favicon at the address browsers and tools ask for without a page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    return HttpResponseRedirect(static("frontend/favicon.svg"))
