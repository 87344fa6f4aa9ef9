"""Password guessing: failed logins counted per user name and per address, for the login page and the token
API alike. Past settings.PYPTO_LOGIN_FAILURES failures in PYPTO_LOGIN_WINDOW_S, both refuse (429) until the
window has passed, the right password included; a success clears the user name's count."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache


def client_address(request: Any) -> str:
    """The caller's address: behind a trusted proxy its first X-Forwarded-For entry, else REMOTE_ADDR."""
    if settings.SECURE_PROXY_SSL_HEADER is not None:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            return forwarded.split(",")[0].strip()
    return str(request.META.get("REMOTE_ADDR", ""))


def _keys(request: Any, username: str) -> list[str]:
    name = hashlib.sha256(username.strip().lower().encode("utf-8", "replace")).hexdigest()[:32]
    return [f"login-fail:user:{name}", f"login-fail:addr:{client_address(request)}"]


def login_blocked_for(request: Any, username: str) -> int:
    """Seconds until a login may be tried again for this user name from this address; 0 when allowed."""
    now = time.time()
    waits = []
    for key in _keys(request, username):
        entry = cache.get(key)
        if entry and entry["count"] >= settings.PYPTO_LOGIN_FAILURES:
            waits.append(int(entry["since"] + settings.PYPTO_LOGIN_WINDOW_S - now) + 1)
    return max([w for w in waits if w > 0], default=0)


def login_failed(request: Any, username: str) -> None:
    now = time.time()
    for key in _keys(request, username):
        entry = cache.get(key)
        if not entry or entry["since"] + settings.PYPTO_LOGIN_WINDOW_S <= now:
            entry = {"count": 0, "since": now}
        entry["count"] += 1
        cache.set(key, entry, settings.PYPTO_LOGIN_WINDOW_S)


def login_succeeded(request: Any, username: str) -> None:
    cache.delete(_keys(request, username)[0])

