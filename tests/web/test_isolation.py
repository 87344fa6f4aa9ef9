"""Isolation: a non-member gets 404 from every URL of the app that takes an id (found by walking the URL
resolver, so a new endpoint cannot escape), and viewers cannot change anything."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")
# Staff-only (Django admin); a non-staff user is sent to the admin login whatever the id.
EXCLUDED_PREFIXES = ("admin/",)
# Called by capture agents with an agent token: a user's session or token is refused before any lookup.
AGENT_PREFIXES = ("api/agent/",)


def walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def id_routes() -> list[tuple[str, URLPattern, dict[str, Any]]]:
    out = []
    for route, pattern in walk(get_resolver().url_patterns):
        converters = getattr(pattern.pattern, "converters", {})
        if converters and not route.startswith(EXCLUDED_PREFIXES):
            out.append((route, pattern, converters))
    return out


class World:
    """Everything a project can hold, owned by someone the caller shares nothing with."""

    def __init__(self, make_user: Callable[..., Any]) -> None:
        from analysis.models import Artifact, Comparison, Finding
        from profiles.models import Invitation, Profile, UploadSession

        self.owner = make_user("owner")
        self.invitee = make_user("invitee")
        self.project = project_with(self.owner)
        profiles = []
        for name in ("base", "new"):
            p = Profile(project=self.project, name=name, original_filename="a.csv", upload_kind="csv",
                        size=4, created_by=self.owner, status="ready")
            p.archive.save("a.csv", ContentFile(b"a,b\n"), save=False)
            p.save()
            profiles.append(p)
        self.profile = profiles[0]
        self.artifact = Artifact(profile=self.profile, name="aoe.json", kind="config", size=2,
                                 sha256="0" * 64)
        self.artifact.file.save("aoe.json", ContentFile(b"{}"), save=False)
        self.artifact.save()
        self.comparison = Comparison.objects.create(project=self.project, base=profiles[0],
                                                    candidate=profiles[1])
        self.finding = Finding.objects.create(profile=self.profile, rule="norm_launch_overhead",
                                              severity="high", title="norms",
                                              data={"rule": "norm_launch_overhead"})
        self.invitation = Invitation.objects.create(project=self.project, user=self.invitee,
                                                    invited_by=self.owner)
        self.upload = UploadSession.objects.create(project=self.project, created_by=self.owner,
                                                   filename="a.zip", size=10)
        self.extra: dict[str, Any] = {}
        try:
            from captures.models import Agent, CaptureJob
        except ImportError:
            pass
        else:
            agent = Agent.objects.create(project=self.project, name="npu-01",
                                         token_hash=secrets.token_hex(32), token_prefix="x")
            self.extra["agent_id"] = agent.pk
            self.extra["job_id"] = CaptureJob.objects.create(project=self.project, agent=agent,
                                                             workload="w").pk

    def ids(self) -> dict[str, Any]:
        """URL kwarg name -> an id of this world's object. A new kind of id must be added here."""
        return {
            "project_id": self.project.pk,
            "profile_id": self.profile.pk,
            "artifact_id": self.artifact.pk,
            "comparison_id": self.comparison.pk,
            "finding_id": self.finding.pk,
            "invitation_id": self.invitation.pk,
            "upload_id": self.upload.pk,
            **self.extra,
        }


def _missing(value: Any) -> Any:
    return uuid.uuid4() if isinstance(value, uuid.UUID) else 10**9


def _path(route: str, pattern: URLPattern, kwargs: dict[str, Any]) -> str:
    from django.urls import reverse

    name = pattern.name
    assert name, f"route {route} has no name: name it so it can be tested"
    return reverse(name, kwargs=kwargs)


def test_non_member_gets_404_on_every_id_route(make_user) -> None:
    world = World(make_user)
    outsider = make_user("outsider")
    known = world.ids()
    routes = id_routes()
    assert len(routes) >= 15  # the walk found the app's routes (not an empty resolver)

    session = Client()
    session.force_login(outsider)
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=outsider).key
    clients = {"session": (session, {}), "token": (Client(), {"HTTP_AUTHORIZATION": f"Token {token}"})}

    problems = []
    checked = 0
    for route, pattern, converters in routes:
        unknown = set(converters) - set(known)
        assert not unknown, f"{route}: no test object for {sorted(unknown)}; add it to World.ids()"
        kwargs = {k: known[k] for k in converters}
        missing_kwargs = {k: _missing(known[k]) for k in converters}
        path = _path(route, pattern, kwargs)
        missing_path = _path(route, pattern, missing_kwargs)
        agent_route = route.startswith(AGENT_PREFIXES)
        allowed = {401, 403, 404, 405} if agent_route else {404, 405}
        for label, (client, headers) in clients.items():
            if label == "token" and not route.startswith("api/"):
                continue  # pages use the browser session; a token only authenticates the API
            statuses = []
            for method in METHODS:
                res = getattr(client, method)(path, **headers)
                res_missing = getattr(client, method)(missing_path, **headers)
                statuses.append(res.status_code)
                checked += 1
                if res.status_code not in allowed:
                    problems.append(f"{label} {method.upper()} {path}: {res.status_code}")
                if res.status_code != res_missing.status_code:
                    problems.append(f"{label} {method.upper()} {path}: {res.status_code} for a real id but "
                                    f"{res_missing.status_code} for a missing one (an existence oracle)")
            if not agent_route and 404 not in statuses:
                problems.append(f"{label} {path}: no method answered 404 ({statuses})")
    assert not problems, "\n".join(problems)
    assert checked >= 150


def test_member_can_read_what_outsider_cannot(make_user) -> None:
    """The same URLs answer a member: the 404s above are about membership, not broken routes."""
    world = World(make_user)
    client = Client()
    client.force_login(world.owner)
    for path in (f"/api/projects/{world.project.pk}/", f"/api/profiles/{world.profile.pk}/",
                 f"/api/artifacts/{world.artifact.pk}/download/", f"/api/comparisons/{world.comparison.pk}/",
                 f"/projects/{world.project.pk}/", f"/profiles/{world.profile.pk}/"):
        assert client.get(path).status_code == 200, path
    download = client.get(f"/api/artifacts/{world.artifact.pk}/download/")
    assert download["Content-Disposition"] == 'attachment; filename="aoe.json"'
    assert download["X-Content-Type-Options"] == "nosniff"


def test_viewer_can_read_but_not_change(make_user, api_for) -> None:
    world = World(make_user)
    viewer = make_user("vera")
    from profiles.models import Membership, Profile

    Membership.objects.create(project=world.project, user=viewer, role="viewer")
    api = api_for(viewer)
    pid, prof = world.project.pk, world.profile.pk
    assert api.get(f"/api/projects/{pid}/").json()["role"] == "viewer"
    assert api.get(f"/api/profiles/{prof}/").status_code == 200
    assert api.get(f"/api/projects/{pid}/profiles/").status_code == 200

    assert api.post(f"/api/projects/{pid}/profiles/", {"file": ContentFile(b"a,b\n", name="k.csv")},
                    format="multipart").status_code == 403
    assert api.post(f"/api/projects/{pid}/uploads/", {"filename": "a.zip", "size": 10},
                    format="json").status_code == 403
    assert api.delete(f"/api/profiles/{prof}/").status_code == 403
    Profile.objects.filter(pk=prof).update(status="failed")
    assert api.post(f"/api/profiles/{prof}/rerun/").status_code == 403
    assert api.post(f"/api/projects/{pid}/invitations/", {"username": "owner"},
                    format="json").status_code == 403
    assert api.post("/api/comparisons/", {"base": prof, "candidate": world.comparison.candidate_id},
                    format="json").status_code == 403
    # The owner's open upload is not the viewer's to continue.
    assert api.get(f"/api/uploads/{world.upload.pk}/").status_code == 404

    page = Client()
    page.force_login(viewer)
    assert page.get(f"/projects/{pid}/").status_code == 200
    assert b'id="upload-link"' not in page.get(f"/projects/{pid}/").content
    assert page.get(f"/projects/{pid}/upload/").status_code == 403
    assert page.post(f"/profiles/{prof}/delete/").status_code == 403
    assert page.post(f"/profiles/{prof}/rerun/").status_code == 403
    assert Profile.objects.filter(pk=prof).exists()


def test_maintainer_can_rerun_a_failed_profile(make_user, api_for) -> None:
    world = World(make_user)
    maintainer = make_user("mo")
    from profiles.models import Membership, Profile

    Membership.objects.create(project=world.project, user=maintainer, role="maintainer")
    Profile.objects.filter(pk=world.profile.pk).update(status="failed", error="x: broken")
    res = api_for(maintainer).post(f"/api/profiles/{world.profile.pk}/rerun/")
    assert res.status_code == 202 and res.json()["status"] == "queued" and res.json()["error"] is None
    again = api_for(maintainer).post(f"/api/profiles/{world.profile.pk}/rerun/")
    assert again.status_code == 400  # already queued: a double click does not queue it twice
