"""The database or the broker not answering is a 503 with a reason (the client retries), never a 500 page.

``api_exception_handler`` for DRF and ``ServiceUnavailableMiddleware`` for pages. Nothing is retried here:
the next request reconnects (``conn_health_checks``), so the service recovers by itself once the database
is back.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from rest_framework.response import Response
from rest_framework.views import exception_handler

log = logging.getLogger(__name__)

UNAVAILABLE: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
try:  # the broker (Redis) not answering when a task is sent
    from kombu.exceptions import OperationalError as KombuOperationalError

    UNAVAILABLE += (KombuOperationalError,)
except ImportError:  # pragma: no cover
    pass
RETRY_AFTER_S = "10"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (OperationalError, InterfaceError)):
        return _("Service temporarily unavailable: the database is not answering. "
                 "Try again in a few seconds.")
    return _("Service temporarily unavailable: the task queue is not answering. Try again in a few seconds.")


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, UNAVAILABLE):
        log.warning("503 for %s: %s: %s", context.get("request") and context["request"].path,
                    type(exc).__name__, exc)
        return Response({"detail": _reason(exc)}, status=503, headers={"Retry-After": RETRY_AFTER_S})
    return exception_handler(exc, context)


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, UNAVAILABLE):
            log.warning("503 for %s: %s: %s", request.path, type(exc).__name__, exc)
            response = HttpResponse(_reason(exc), status=503, content_type="text/plain; charset=utf-8")
            response["Retry-After"] = RETRY_AFTER_S
            return response
        return None
