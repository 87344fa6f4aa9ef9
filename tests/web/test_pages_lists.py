"""Project pages with many profiles (issue 7 polish): the profiles table is paginated and filtered by status,
newest first; the compare selects are bounded with a search by name for older profiles; the dashboard's
history chart has one slot per profile; the language follows the user into a new session; the compiled
Chinese catalogue matches django.po."""

from __future__ import annotations

import ast
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.paths import REPO
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"


def add_profiles(project: Any, owner: Any, n: int, *, status: str = "ready", start: int = 0,
                 seconds_apart: int = 60) -> list[int]:
    """``n`` profile rows (no files), ``seconds_apart`` seconds apart, the highest number the newest."""
    from analysis.summary import ProfileSummary, summary_fields
    from profiles.models import Profile

    def summary(i: int) -> dict[str, Any]:  # as diagnose writes it: the JSON and its headline columns
        decode = {"per_token_ms_p50": 40 + i % 5, "tokens_per_s": 25.0}
        return summary_fields(ProfileSummary.from_dict({"report": {"profile": {"decode": decode}}}))

    now = timezone.now()
    rows = [Profile(project=project, name=f"run {start + i}", original_filename="p.zip", upload_kind="zip",
                    status=status, progress=100 if status == "ready" else 10, created_by=owner, size=1000,
                    **summary(i))
            for i in range(n)]
    made = Profile.objects.bulk_create(rows)
    for i, p in enumerate(made):  # created_at is auto_now_add: set it after the insert
        Profile.objects.filter(pk=p.pk).update(
            created_at=now - timedelta(seconds=seconds_apart * (10_000 - start - i)))
    return [p.pk for p in made]


def names_in_table(html: str) -> list[str]:
    table = re.search(r'<table class="grid" id="profiles">(.*?)</table>', html, re.S)
    assert table, "no profiles table"
    return re.findall(r'<a href="/profiles/\d+/">([^<]*)</a>', table.group(1))


def test_profiles_table_paginated_newest_first_with_status_filter(client, make_user) -> None:
    owner = make_user("owner")
    project = project_with(owner)
    add_profiles(project, owner, 110)
    add_profiles(project, owner, 7, status="failed", start=200)  # the newest seven
    client.force_login(owner)
    url = f"/projects/{project.pk}/"
    html = client.get(url).content.decode()
    first = names_in_table(html)
    assert len(first) == 50
    assert first[:8] == [f"run {i}" for i in range(206, 199, -1)] + ["run 109"]  # newest first
    assert "Page 1 of 3" in html and 'href="?page=2"' in html and 'rel="prev"' not in html
    last = client.get(url, {"page": 3}).content.decode()
    assert names_in_table(last)[-1] == "run 0" and len(names_in_table(last)) == 17
    assert names_in_table(client.get(url, {"page": 99}).content.decode()) == names_in_table(last)  # clamped
    failed = client.get(url, {"status": "failed"}).content.decode()
    assert names_in_table(failed) == [f"run {i}" for i in range(206, 199, -1)]
    assert 'id="profiles-pager"' not in failed and '<option value="failed" selected>' in failed
    ready2 = client.get(url, {"status": "ready", "page": 2}).content.decode()
    assert names_in_table(ready2)[0] == "run 59" and 'href="?status=ready&amp;page=1"' in ready2
    assert "No profiles with this status." in client.get(url, {"status": "queued"}).content.decode()
    assert len(names_in_table(client.get(url, {"status": "bogus"}).content.decode())) == 50  # ignored


def test_project_page_queries_do_not_grow_with_profiles(client, make_user) -> None:
    owner = make_user("owner")
    project = project_with(owner)
    client.force_login(owner)
    add_profiles(project, owner, 60)
    client.get(f"/projects/{project.pk}/")  # warm the session and the content types
    with CaptureQueriesContext(connection) as few:
        assert client.get(f"/projects/{project.pk}/").status_code == 200
    add_profiles(project, owner, 140, start=1000)
    with CaptureQueriesContext(connection) as many:
        html = client.get(f"/projects/{project.pk}/").content.decode()
    assert len(names_in_table(html)) == 50
    assert len(many.captured_queries) == len(few.captured_queries), \
        [q["sql"][:90] for q in many.captured_queries]


def test_project_header_above_dashboard_and_history_slots(client, make_user) -> None:
    owner = make_user("owner")
    project = project_with(owner)
    ids = add_profiles(project, owner, 3, seconds_apart=2)  # seconds apart: crowded on a time axis
    client.force_login(owner)
    html = client.get(f"/projects/{project.pk}/").content.decode()
    assert html.index('id="project-header"') < html.index('id="dashboard"') < html.index('id="profiles-card"')
    assert html.index("<h1>") < html.index('id="history-chart"')
    chart = json.loads(re.search(r'<script id="chart-history" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["xAxis"]["type"] == "category"
    # one slot each, oldest first
    assert chart["xAxis"]["data"] == [f"#{pk} run {i}" for i, pk in enumerate(ids)]
    assert [row[0] for row in chart["series"][0]["data"]] == chart["xAxis"]["data"]
    # the axes name what they plot, in the page's language
    assert chart["xAxis"]["name"] == "Profile (#id name), oldest first"
    assert [a["name"] for a in chart["yAxis"]] == ["Per-token latency or step time (ms)", "Tokens/s"]
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    html = client.get(f"/projects/{project.pk}/").content.decode()
    chart = json.loads(re.search(r'<script id="chart-history" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    assert chart["xAxis"]["name"] == "性能数据（#ID 名称），按上传时间从早到晚"
    assert [a["name"] for a in chart["yAxis"]] == ["每 token 时延或迭代时间 (ms)", "吞吐 (tokens/s)"]
    assert chart["xAxis"]["data"] == [f"#{pk} run {i}" for i, pk in enumerate(ids)]


def test_compare_form_bounded_with_search(client, make_user) -> None:
    from frontend.views.compare_pages import MAX_OPTIONS

    owner, stranger = make_user("owner"), make_user("stranger")
    project = project_with(owner)
    old = add_profiles(project, owner, 1, start=0)[0]
    Profile = type(project.profiles.first())
    Profile.objects.filter(pk=old).update(name=HOSTILE + " oldest")
    add_profiles(project, owner, MAX_OPTIONS + 20, start=1)
    add_profiles(project, owner, 3, status="failed", start=5000)
    client.force_login(owner)
    url = f"/projects/{project.pk}/compare/"
    html = client.get(url).content.decode()
    base = re.search(r'<select name="base" id="id_base" required>(.*?)</select>', html, re.S).group(1)
    values = re.findall(r'<option value="(\d+)"', base)
    assert len(values) == MAX_OPTIONS and str(old) not in values
    assert HOSTILE not in html
    # an older profile preselected by the link is offered too
    html = client.get(url, {"base": old}).content.decode()
    assert f'<option value="{old}" selected>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; oldest" in html
    assert HOSTILE not in html
    # the search finds it by name; failed profiles are never offered
    found = client.get(url + "profiles/", {"q": "OLDEST"}).json()
    assert [r["id"] for r in found["results"]] == [old] and found["results"][0]["name"] == HOSTILE + " oldest"
    assert client.get(url + "profiles/", {"q": "run 500"}).json()["results"] == []  # "run 500x" are failed
    assert len(client.get(url + "profiles/", {"q": "run"}).json()["results"]) == found["limit"]
    # a profile outside the list is still a valid choice
    newest = project.profiles.filter(status="ready").order_by("-created_at").first()
    res = client.post(url, {"base": old, "candidate": newest.pk})
    assert res.status_code == 302 and "/comparisons/" in res["Location"]
    stranger_client = Client()
    stranger_client.force_login(stranger)
    assert stranger_client.get(url + "profiles/", {"q": "run"}).status_code == 404


def test_language_follows_the_user_into_a_new_session(client, make_user) -> None:
    from frontend.models import UserPreference

    owner = make_user("li")
    project_with(owner)
    assert client.login(username="li", password="pw-for-tests-1")
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    assert UserPreference.objects.get(user=owner).language == "zh-hans"
    client.post("/logout/")
    fresh = Client(HTTP_ACCEPT_LANGUAGE="en")  # another browser: no session, English by its headers
    assert "项目" not in fresh.get("/login/").content.decode()
    res = fresh.post("/login/", {"username": "li", "password": "pw-for-tests-1"})
    assert res.status_code == 302
    page = fresh.get("/")
    assert page["Content-Language"] == "zh-hans" and "项目" in page.content.decode()
    # the language menu names each language in its own words, in either page language (not "英语")
    menu = page.content.decode().split('name="language"')[1].split("</select>")[0]
    assert ">English</option>" in menu and ">简体中文</option>" in menu and "英语" not in menu
    # another user is not affected; anonymous pages keep the session's choice
    other = Client(HTTP_ACCEPT_LANGUAGE="en")
    other.force_login(make_user("bob"))
    assert "项目" not in other.get("/").content.decode()
    anon = Client(HTTP_ACCEPT_LANGUAGE="en")
    anon.post("/language/", {"language": "zh-hans", "next": "/login/"})
    assert anon.get("/login/")["Content-Language"] == "zh-hans"


def _po_entries(path: Path) -> dict[str, str]:
    """msgid -> msgstr of the translated, non-fuzzy, singular entries of a .po file."""
    out: dict[str, str] = {}
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith("#~")]
        if any(line.startswith("#,") and "fuzzy" in line for line in lines):
            continue
        if any(line.startswith(("msgctxt", "msgid_plural")) for line in lines):
            continue
        field, parts = None, {"msgid": [], "msgstr": []}
        for line in lines:
            if line.startswith("msgid "):
                field, line = "msgid", line[6:]
            elif line.startswith("msgstr "):
                field, line = "msgstr", line[7:]
            elif not line.startswith('"'):
                continue
            if field:
                parts[field].append(ast.literal_eval(line))
        msgid, msgstr = "".join(parts["msgid"]), "".join(parts["msgstr"])
        if msgid and msgstr:
            out[msgid] = msgstr
    return out


def test_compiled_chinese_catalogue_matches_the_po() -> None:
    """A stale django.mo (compiled before the .po changed) shows English or old text: scripts/setup.sh
    compiles it on every run; this says so when the pages would not show what django.po says."""
    from django.utils import translation

    entries = _po_entries(REPO / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po")
    assert len(entries) > 150
    with translation.override("zh-hans"):
        stale = {k: v for k, v in entries.items() if translation.gettext(k) != v}
    assert not stale, ("django.mo is stale: run scripts/setup.sh (manage.py compilemessages); "
                       f"{list(stale)[:5]}")


def test_project_without_decode_profiles_has_no_history_card(client, make_user) -> None:
    """A training project: no half-width card that only says there is nothing to draw."""
    from profiles.models import Profile

    owner = make_user("owner")
    project = project_with(owner)
    ids = add_profiles(project, owner, 2)
    Profile.objects.filter(pk__in=ids).update(per_token_ms=None, tokens_per_s=None)
    client.force_login(owner)
    html = client.get(f"/projects/{project.pk}/").content.decode()
    assert "Per-token latency, tokens/s and step time over time" not in html
    assert 'id="history-chart"' not in html
    assert 'id="dashboard"' in html and '<div class="two" id="dashboard">' not in html
    # one decode profile brings the card back, beside the findings
    Profile.objects.filter(pk=ids[0]).update(per_token_ms=40.0, tokens_per_s=25.0)
    html = client.get(f"/projects/{project.pk}/").content.decode()
    assert 'id="history-chart"' in html and '<div class="two" id="dashboard">' in html


def test_a_run_without_tokens_shows_its_step_time_in_the_history(client, make_user) -> None:
    """A CUDA-graph decode counts no tokens (its replays record no shapes): its median step goes on the
    history chart, where it had been missing beside its eager twin's per-token latency."""
    from analysis.summary import ProfileSummary, summary_fields
    from profiles.models import Profile

    owner = make_user("owner")
    project = project_with(owner)
    eager, graph = add_profiles(project, owner, 2, seconds_apart=2)
    graph_run = {"report": {"profile": {"metrics": {"step_time_ms": 3.46}}}}
    fields = summary_fields(ProfileSummary.from_dict(graph_run))
    assert fields["step_time_ms"] == 3.46 and fields["per_token_ms"] is None  # written as diagnose writes it
    Profile.objects.filter(pk=graph).update(**fields)
    Profile.objects.filter(pk=eager).update(step_time_ms=27.2)  # it counts tokens: its latency is plotted
    client.force_login(owner)
    html = client.get(f"/projects/{project.pk}/").content.decode()
    chart = json.loads(re.search(r'<script id="chart-history" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    latency, _, steps = chart["series"]
    assert [row[0] for row in latency["data"]] == [f"#{eager} run 0"]
    assert steps["data"] == [[f"#{graph} run 1", 3.46, "run 1"]] and steps["yAxisIndex"] == 0


def test_the_history_draws_an_upload_once_not_once_per_rank(client, make_user) -> None:
    """A multi-rank upload's ranks are parts of its profile: the history chart and the ready count show the
    upload, as the project's profile list does, not one run per rank."""
    from profiles.models import Profile

    owner = make_user("owner")
    project = project_with(owner)
    head, later = add_profiles(project, owner, 2, seconds_apart=2)
    upload = Profile.objects.get(pk=head)
    for rank in range(3):  # ready ranks with figures of their own
        Profile.objects.create(project=project, name=f"{upload.name} · rank {rank}",
                               original_filename="p.zip", upload_kind="zip", status="ready", progress=100,
                               created_by=owner, size=1000, group=upload, rank=rank, per_token_ms=40.0 + rank)
    client.force_login(owner)
    html = client.get(f"/projects/{project.pk}/").content.decode()
    chart = json.loads(re.search(r'<script id="chart-history" type="application/json">(.*?)</script>',
                                 html, re.S).group(1))
    plotted = {row[0].split()[0] for series in chart["series"] for row in series["data"]}
    assert plotted == {f"#{head}", f"#{later}"}  # no rank point beside its upload's
