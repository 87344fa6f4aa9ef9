"""Browser forms: CSRF is enforced, login/logout, projects, invitations, language switch, escaping."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db


def _csrf_client(user=None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def _token(client: Client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert match, "the form carries a CSRF token"
    return match.group(1).decode()


def test_forms_refuse_posts_without_csrf_token(make_user) -> None:
    from profiles.models import Invitation, Project

    owner = make_user("olivia")
    make_user("victor")
    project = project_with(owner)
    client = _csrf_client(owner)
    assert client.post("/", {"name": "forged"}).status_code == 403
    assert client.post(f"/projects/{project.pk}/invite/", {"username": "victor", "role": "viewer"}).status_code == 403
    assert client.post("/logout/").status_code == 403
    assert client.post("/language/", {"language": "zh-hans"}).status_code == 403
    # The API with a browser session is CSRF-protected too (token auth is not).
    assert client.post("/api/projects/", {"name": "forged"}, content_type="application/json").status_code == 403
    assert not Project.objects.filter(name="forged").exists()
    assert not Invitation.objects.exists()

    token = _token(client, "/")
    res = client.post("/", {"name": "Real", "csrfmiddlewaretoken": token})
    assert res.status_code == 302
    assert Project.objects.filter(name="Real", memberships__user=owner, memberships__role="owner").exists()


def test_login_invite_accept_flow(make_user) -> None:
    from profiles.models import Membership

    owner = make_user("ann", password="s3cret-pass-A")
    viewer = make_user("vic", password="s3cret-pass-V")
    project = project_with(owner)

    anon = _csrf_client()
    assert anon.get(f"/projects/{project.pk}/").status_code == 302  # to the login page
    token = _token(anon, "/login/")
    bad = anon.post("/login/", {"username": "ann", "password": "wrong", "csrfmiddlewaretoken": token})
    assert b"Wrong username or password" in bad.content
    token = _token(anon, "/login/")
    assert anon.post("/login/", {"username": "ann", "password": "s3cret-pass-A",
                                 "csrfmiddlewaretoken": token}).status_code == 302
    token = _token(anon, f"/projects/{project.pk}/")
    res = anon.post(f"/projects/{project.pk}/invite/", {"username": "vic", "role": "viewer", "csrfmiddlewaretoken": token})
    assert res.status_code == 302
    page = anon.get(f"/projects/{project.pk}/")
    assert b"vic" in page.content and b"Invited vic as Viewer" in page.content
    # Unknown usernames get a message, not an invitation.
    token = _token(anon, f"/projects/{project.pk}/")
    anon.post(f"/projects/{project.pk}/invite/", {"username": "nobody", "role": "viewer", "csrfmiddlewaretoken": token})
    assert b"No active user" in anon.get(f"/projects/{project.pk}/").content
    token = _token(anon, "/")
    assert anon.post("/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert anon.get("/").status_code == 302

    v = _csrf_client(viewer)
    home = v.get("/")
    assert b"invites you to" in home.content
    inv = viewer.invitations.get()
    token = _token(v, "/")
    assert v.post(f"/invitations/{inv.pk}/accept/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert Membership.objects.get(project=project, user=viewer).role == "viewer"
    assert v.get(f"/projects/{project.pk}/").status_code == 200


def test_language_switch_is_kept_in_the_session(make_user) -> None:
    user = make_user("li")
    client = _csrf_client(user)
    token = _token(client, "/")
    res = client.post("/language/", {"language": "zh-hans", "next": "/", "csrfmiddlewaretoken": token})
    assert res.status_code == 302 and res["Location"] == "/"
    assert client.session["pypto_language"] == "zh-hans"
    page = client.get("/")
    assert b'<html lang="zh-hans">' in page.content
    # An off-site ``next`` is not followed.
    token = _token(client, "/")
    res = client.post("/language/", {"language": "en", "next": "https://evil.example/", "csrfmiddlewaretoken": token})
    assert res["Location"] == "/"


def test_user_data_is_escaped(make_user) -> None:
    from profiles.models import Profile

    owner = make_user("esc")
    project = project_with(owner)
    project.name = "<script>alert(1)</script>{{ secret }}"
    project.save()
    Profile.objects.create(project=project, name="<img src=x onerror=alert(1)>", original_filename="a.csv",
                           size=1, status="failed", error="<b>bad</b>", summary={"k": "</script><script>x()"})
    client = Client()
    client.force_login(owner)
    body = client.get(f"/projects/{project.pk}/").content
    assert b"<script>alert(1)" not in body and b"&lt;script&gt;alert(1)&lt;/script&gt;{{ secret }}" in body
    assert b"<img src=x" not in body
    prof = Profile.objects.get(project=project)
    body = client.get(f"/profiles/{prof.pk}/").content
    assert b"<b>bad</b>" not in body and b"&lt;b&gt;bad&lt;/b&gt;" in body
    assert b"</script><script>x()" not in body  # the summary goes through json_script


def test_api_token_endpoint(make_user) -> None:
    make_user("tok", password="s3cret-pass-T")
    client = Client(enforce_csrf_checks=True)
    res = client.post("/api/auth/token/", {"username": "tok", "password": "s3cret-pass-T"},
                      content_type="application/json")
    assert res.status_code == 200 and len(res.json()["token"]) == 40
    again = client.post("/api/auth/token/", {"username": "tok", "password": "s3cret-pass-T"},
                        content_type="application/json")
    assert again.json()["token"] == res.json()["token"]
    assert client.post("/api/auth/token/", {"username": "tok", "password": "x"},
                       content_type="application/json").status_code == 400
    listed = Client().get("/api/projects/", HTTP_AUTHORIZATION=f"Token {res.json()['token']}")
    assert listed.status_code == 200 and listed.json() == []
    assert Client().get("/api/projects/").status_code in (401, 403)


def test_openapi_schema_lists_the_contract(make_user) -> None:
    client = Client()
    client.force_login(make_user("sch"))
    res = client.get("/api/schema/")
    assert res.status_code == 200
    text = res.content.decode()
    for path in ("/api/projects/", "/api/projects/{project_id}/profiles/", "/api/profiles/{profile_id}/",
                 "/api/profiles/{profile_id}/findings/", "/api/artifacts/{artifact_id}/download/",
                 "/api/comparisons/", "/api/auth/token/", "/api/uploads/{upload_id}/"):
        assert path in text, path
