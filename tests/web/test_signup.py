"""Self sign-up is a setting, off by default (issue 2):
accounts otherwise come from an admin or an invitation."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from profiles.models import Project
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db


def test_sign_up_is_off_by_default(client: Client) -> None:
    assert client.get("/signup/").status_code == 404
    assert client.post("/signup/", {"username": "mallory"}).status_code == 404
    login_page = client.get("/login/").content.decode()
    assert "/signup/" not in login_page and "invitation" in login_page


@override_settings(PYPTO_ALLOW_SIGNUP=True)
def test_sign_up_when_allowed_creates_an_account_with_no_projects(make_user) -> None:
    project_with(make_user("alice"))  # somebody else's project stays invisible
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/signup/")
    assert page.status_code == 200 and "/signup/" in browser.get("/login/").content.decode()
    form = {"username": "newcomer", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9"}
    assert browser.post("/signup/", form).status_code == 403, "CSRF is checked on the sign-up form"
    form["csrfmiddlewaretoken"] = page.cookies["csrftoken"].value
    done = browser.post("/signup/", form)
    assert done.status_code == 302 and done["Location"] == "/"
    user = get_user_model().objects.get(username="newcomer")
    assert browser.get("/").status_code == 200
    assert not Project.objects.filter(memberships__user=user).exists()


@override_settings(PYPTO_ALLOW_SIGNUP=True)
def test_sign_up_refuses_a_weak_or_mismatched_password(client: Client) -> None:
    page = client.post("/signup/", {"username": "x", "password1": "abc", "password2": "abd"})
    assert page.status_code == 200 and not get_user_model().objects.filter(username="x").exists()
    assert 'class="error"' in page.content.decode()
