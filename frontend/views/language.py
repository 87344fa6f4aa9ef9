"""The language switch: stored on the user when signed in (every later session gets it), and in the session
(the fallback for anonymous pages). frontend/middleware.py applies it."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from frontend import services
from frontend.middleware import SESSION_LANGUAGE_KEY


@require_POST
def set_language(request: HttpRequest) -> HttpResponseRedirect:
    code = request.POST.get("language", "")
    if code in {c for c, _n in settings.LANGUAGES}:
        request.session[SESSION_LANGUAGE_KEY] = code
        if request.user.is_authenticated:
            services.user_language_set(user=request.user, language=code)
    target = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = "/"
    return HttpResponseRedirect(target)
