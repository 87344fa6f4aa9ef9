"""The doors a public deployment needs (issue 17, items 5 and 7): password guessing is throttled per user
name and per address on the token API and the login page, API tokens expire and rotate, and every HTML
page carries a Content-Security-Policy allowing only the app's own scripts and styles."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import REPO
from tests.web.helpers import project_with

pytestmark = [pytest.mark.django_db]
PASSWORD = "pw-for-tests-1"


@pytest.fixture(autouse=True)
def _fresh_counters():  # type: ignore[no-untyped-def]
    cache.clear()
    yield
    cache.clear()


def _token(client: APIClient, username: str, password: str, address: str = "10.0.0.1",
           **extra: str) -> Any:
    return client.post("/api/auth/token/", {"username": username, "password": password, **extra},
                       format="json", REMOTE_ADDR=address)


def test_token_api_refuses_the_right_password_after_too_many_wrong_ones(make_user) -> None:
    make_user("ann")
    make_user("bob")
    client = APIClient()
    limit = settings.PYPTO_LOGIN_FAILURES
    for _ in range(limit):
        assert _token(client, "ann", "wrong", address=f"10.0.1.{_}").status_code == 400
    refused = _token(client, "ann", PASSWORD, address="10.0.2.1")  # per user name, whatever the address
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many failed logins" in refused.json()["detail"]
    assert _token(client, "bob", PASSWORD, address="10.0.2.1").status_code == 200  # others are not locked out

    for i in range(limit):  # per address, whatever the user names tried
        _token(client, f"guess{i}", "wrong", address="10.0.3.3")
    assert _token(client, "bob", PASSWORD, address="10.0.3.3").status_code == 429
    assert _token(client, "bob", PASSWORD, address="10.0.3.4").status_code == 200


def test_login_page_throttled_like_the_api(make_user) -> None:
    make_user("cy")
    page = Client(REMOTE_ADDR="10.0.4.1")
    for _ in range(settings.PYPTO_LOGIN_FAILURES):
        res = page.post("/login/", {"username": "cy", "password": "wrong"})
        assert res.status_code == 200 and "Wrong username or password" in res.content.decode()
    res = page.post("/login/", {"username": "cy", "password": PASSWORD})
    assert res.status_code == 429 and "Too many failed logins" in res.content.decode()
    assert "_auth_user_id" not in page.session


def test_tokens_expire_and_rotate(make_user) -> None:
    from rest_framework.authtoken.models import Token

    user = make_user("di")
    project_with(user)
    client = APIClient()
    first = _token(client, "di", PASSWORD).json()
    assert _token(client, "di", PASSWORD).json()["token"] == first["token"]  # the same while valid
    expires = timezone.datetime.fromisoformat(first["expires"])
    assert timedelta(seconds=settings.PYPTO_TOKEN_TTL_S - 60) < expires - timezone.now() \
        <= timedelta(seconds=settings.PYPTO_TOKEN_TTL_S)

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {first['token']}")
    assert api.get("/api/projects/").status_code == 200
    Token.objects.filter(key=first["token"]).update(
        created=timezone.now() - timedelta(seconds=settings.PYPTO_TOKEN_TTL_S + 1))
    expired = api.get("/api/projects/")
    # 403, not 401: the session scheme comes first and sends no WWW-Authenticate (DRF's rule)
    assert expired.status_code == 403 and "Token expired" in expired.json()["detail"]
    fresh = _token(client, "di", PASSWORD).json()["token"]
    assert fresh != first["token"]

    rotated = _token(client, "di", PASSWORD, rotate="true").json()["token"]
    assert rotated != fresh
    api.credentials(HTTP_AUTHORIZATION=f"Token {fresh}")
    assert api.get("/api/projects/").status_code == 403  # the old key stopped working at once
    api.credentials(HTTP_AUTHORIZATION=f"Token {rotated}")
    assert api.get("/api/projects/").status_code == 200


def test_every_html_page_has_the_csp_and_no_template_has_inline_script_or_style(make_user) -> None:
    user = make_user("ed")
    project = project_with(user)
    page = Client()
    assert page.get("/login/")["Content-Security-Policy"] == settings.PYPTO_CSP
    page.force_login(user)
    for url in ("/", f"/projects/{project.pk}/", f"/projects/{project.pk}/upload/"):
        res = page.get(url)
        assert res.status_code == 200, url
        policy = res["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "unsafe-inline" not in policy
    templates = [p for app in ("frontend", "captures", "profiles", "analysis")
                 for p in (REPO / app / "templates").rglob("*.html") if (REPO / app / "templates").exists()]
    assert templates
    for path in templates:
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), path  # every script is a file
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", text), path  # no inline style or handler
