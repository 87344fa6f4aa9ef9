"""A small JSON-over-HTTP client with retry and backoff (standard library only).

Used by ``pypto upload`` and the capture agent. Transient failures (no connection, a reset, a timeout,
HTTP 429/502/503/504) are retried with exponential backoff and jitter; anything else is returned or
raised at once, since retrying bad input only repeats the refusal.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pypto_core.errors import PyptoError

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class ApiError(PyptoError):
    """The server answered with an error status (after any retries)."""

    def __init__(self, method: str, url: str, status: int, body: Any) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.body = body
        detail = body.get("detail") if isinstance(body, dict) else None
        super().__init__(f"{method} {url}: HTTP {status}"
                         + (f": {detail}" if detail else f": {str(body)[:200]}"))


class ConnectionLost(PyptoError):
    """The server could not be reached within the retry budget."""


@dataclass
class Response:
    status: int
    body: Any  # decoded JSON, or text when the body is not JSON
    headers: Mapping[str, str]


@dataclass
class Backoff:
    """Exponential backoff with full jitter; ``attempts`` is the number of tries in all (0: forever)."""

    attempts: int = 6
    base_s: float = 0.5
    max_s: float = 30.0

    def delay(self, attempt: int) -> float:
        # the exponent capped: retried forever (attempts=0), 2**attempt outgrew a float after ~1000 tries and
        # the agent's loop died with an OverflowError after hours without its server
        return random.uniform(0, min(self.max_s, self.base_s * 2.0 ** min(attempt, 60)))


class ApiClient:
    """JSON requests against one server, authenticated by ``Authorization: <scheme> <token>``."""

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        scheme: str = "Token",
        timeout_s: float = 60.0,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.scheme = scheme
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self._stopped = stopped  # a retry loop asked to end (the agent stopping): the call gives up

    def url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return urllib.parse.urljoin(self.server + "/", path.lstrip("/"))

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        ok: tuple[int, ...] = (200, 201, 202, 204),
        retry: bool = True,
    ) -> Response:
        """Send one request, retrying transient failures; raise ``ApiError`` for a status not in ``ok``."""
        url = self.url(path)
        all_headers = {"Accept": "application/json"}
        if self.token:
            all_headers["Authorization"] = f"{self.scheme} {self.token}"
        if json_body is not None:
            data = json.dumps(json_body).encode()
            all_headers["Content-Type"] = "application/json"
        elif data is not None:
            all_headers["Content-Type"] = "application/octet-stream"
        all_headers.update(headers or {})
        attempt = 0
        while True:
            try:
                response = self._send(method, url, data, all_headers, timeout_s or self.timeout_s)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                if not retry or not self._may_retry(attempt):
                    raise ConnectionLost(f"{method} {url}: {getattr(exc, 'reason', exc)}") from exc
            else:
                if response.status in ok:
                    return response
                if not (retry and response.status in RETRY_STATUSES and self._may_retry(attempt)):
                    raise ApiError(method, url, response.status, response.body)
            if self._stopped():
                raise ConnectionLost(f"{method} {url}: stopped while retrying")
            self._sleep(self.backoff.delay(attempt))
            attempt += 1

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw).body

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, json_body=body if body is not None else {}, **kw).body

    def _may_retry(self, attempt: int) -> bool:
        return self.backoff.attempts == 0 or attempt + 1 < self.backoff.attempts

    @staticmethod
    def _send(method: str, url: str, data: bytes | None, headers: dict[str, str],
              timeout_s: float) -> Response:
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (server URL is the user's)
                return Response(resp.status, _decode(resp.read()), dict(resp.headers))
        except urllib.error.HTTPError as err:
            return Response(err.code, _decode(err.read()), dict(err.headers or {}))


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")
