"""Nothing heavy in a request (issue 19): the chrome-trace export and the page views of a profile analysed
before they existed are built by a real Celery worker, never by the request that finds them missing.

The proof that the request does not do the work: in this process (where the requests run) the functions
that build (``pagedata.trace_export``, ``views_rebuild``, ``views_build`` and the engine's
``export_chrome_trace``) raise; the worker is another process, untouched. Its requests answer "being prepared"
(202 / the page's state), a storm of them sends one message, and once the worker built the output the same
routes serve it. The queueing rules (dedupe, a lost message, a failed build, a new parse) are checked without
a worker, the messages recorded instead of sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.storage import default_storage

from tests.conftest import wait_until
from tests.web.helpers import project_with
from tests.web.test_pages import ALL_RULES, analysed_profile, hostile_core

STORM = 8


def _heavy(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("heavy work in a web request")


def _no_heavy_work_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Building in this process fails the test; returns the list of build ids sent to the broker."""
    from analysis import page_builds, pagedata
    from pypto_core import timeline

    for name in ("trace_export", "views_rebuild", "views_build"):
        monkeypatch.setattr(pagedata, name, _heavy)
    monkeypatch.setattr(timeline, "export_chrome_trace", _heavy)
    sent: list[int] = []
    send = page_builds._send

    def counted(build_id: int) -> None:
        sent.append(build_id)
        send(build_id)

    monkeypatch.setattr(page_builds, "_send", counted)
    return sent


@pytest.fixture
def ready(make_user, tmp_path) -> dict[str, Any]:
    owner = make_user("ana")
    project = project_with(owner)
    profile = analysed_profile(project, owner, hostile_core(ALL_RULES), tmp_path, "trace me")
    return {"owner": owner, "profile": profile}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_trace_export_runs_on_the_worker_and_the_download_then_serves_it(worker, client, ready,
                                                                          monkeypatch) -> None:
    from analysis.models import PageBuild
    from analysis.pagedata import trace_name

    sent = _no_heavy_work_here(monkeypatch)
    p = ready["profile"]
    client.force_login(ready["owner"])
    first = client.get(f"/api/profiles/{p.pk}/trace/")
    assert first.status_code == 202, first.content[:300]  # answered without the file
    assert first.json()["status"] == "queued" and first["Retry-After"]
    # a refresh storm, on the API and on the page: still one build
    codes = {client.get(f"/api/profiles/{p.pk}/trace/").status_code for _ in range(STORM)}
    page = client.get(f"/profiles/{p.pk}/trace/")
    assert codes <= {200, 202} and page.status_code in (200, 302)
    if page.status_code == 200:  # still exporting: the page says so and polls the state
        assert b'id="trace-preparing"' in page.content and b"frontend/js/preparing.js" in page.content
    assert len(sent) == 1, sent

    def served() -> Any:
        res = client.get(f"/api/profiles/{p.pk}/trace/")
        return res if res.status_code == 200 else None

    res = wait_until(served, "the worker to export the trace", worker)
    assert res["Content-Disposition"].startswith("attachment")
    assert json.loads(b"".join(res.streaming_content))["traceEvents"]
    build = PageBuild.objects.get(profile=p, kind="trace")
    assert (build.status, build.attempts, build.source) == ("done", 1, p.parquet_prefix)
    assert default_storage.exists(trace_name(p))
    # the page's button now goes straight to the file
    page = client.get(f"/profiles/{p.pk}/trace/")
    assert page.status_code == 302 and page["Location"] == f"/api/profiles/{p.pk}/trace/"
    assert client.get(f"/api/profiles/{p.pk}/builds/").json()["trace"] == {"status": "ready", "error": "",
                                                                         "error_localized": ""}
    assert len(sent) == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_missing_views_are_built_on_the_worker_while_the_pages_say_so(worker, client, ready,
                                                                      monkeypatch) -> None:
    from analysis.models import PageBuild
    from analysis.storage import delete_prefix as storage_delete_prefix

    p = ready["profile"]
    storage_delete_prefix(f"{p.parquet_prefix}/views")  # analysed before the views existed
    sent = _no_heavy_work_here(monkeypatch)
    client.force_login(ready["owner"])
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    assert 'id="views-preparing"' in html and 'id="findings"' in html  # what the page has, and the state
    assert "chart-op-types" not in html
    for _ in range(STORM):
        assert client.get(f"/api/profiles/{p.pk}/timeline/").status_code in (200, 202)
        assert client.get(f"/profiles/{p.pk}/timeline/").status_code == 200
    assert len(sent) == 1, sent

    def built() -> bool:
        return client.get(f"/api/profiles/{p.pk}/builds/").json()["views"]["status"] == "ready"

    wait_until(built, "the worker to build the views", worker)
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    assert "chart-op-types" in html and 'id="views-preparing"' not in html
    window = client.get(f"/api/profiles/{p.pk}/timeline/?width_px=500")
    assert window.status_code == 200 and window.json()["lanes"]
    assert 'id="timeline"' in client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    build = PageBuild.objects.get(profile=p, kind="views")
    assert (build.status, build.attempts) == ("done", 1)
    assert len(sent) == 1


@pytest.mark.django_db
def test_queueing_rules_one_build_per_parse(make_user, tmp_path, settings, monkeypatch) -> None:
    """Dedupe, a message lost (queued past its lease: sent again), a failed build (stays failed: no build
    on every refresh), a new parse (built again), and the route to the heavy queue."""
    from datetime import timedelta

    from django.utils import timezone

    from analysis import page_builds
    from analysis.models import PageBuild
    from profiles.models import Profile
    from pypto_web.celery import app

    settings.PYPTO_WORK_DIR = tmp_path / "work"
    import analysis.tasks  # noqa: F401  (registers the task)

    assert page_builds.BUILD_TASK in app.tasks
    assert app.amqp.router.route({}, page_builds.BUILD_TASK, (1,), {})["queue"].name == "diagnose"

    owner = make_user("bo")
    p = analysed_profile(project_with(owner), owner, hostile_core(frozenset()), tmp_path, "rules")
    sent: list[int] = []
    monkeypatch.setattr(page_builds, "_send_after_commit", sent.append)
    kind = PageBuild.Kind.TRACE

    def ask() -> page_builds.BuildState:
        return page_builds.prepared(profile=Profile.objects.get(pk=p.pk), kind=kind, request=True)

    assert page_builds.prepared(profile=p, kind=kind, request=False).status == "absent"  # polling starts none
    assert sent == []
    assert [ask().status for _ in range(5)] == ["queued"] * 5 and len(sent) == 1
    row = PageBuild.objects.get(profile=p, kind=kind)
    PageBuild.objects.filter(pk=row.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert ask().status == "queued" and len(sent) == 2  # no worker took it in time: sent again, once
    assert ask().status == "queued" and len(sent) == 2
    live = timezone.now() + timedelta(hours=1)
    PageBuild.objects.filter(pk=row.pk).update(status="running", lease_until=live)
    assert ask().status == "running" and len(sent) == 2
    PageBuild.objects.filter(pk=row.pk).update(status="failed", error="r.zip: bad table", lease_until=None)
    assert ask() == page_builds.BuildState("failed", "r.zip: bad table") and len(sent) == 2
    Profile.objects.filter(pk=p.pk).update(parquet_prefix=p.parquet_prefix + "-again")  # parsed again
    assert ask().status == "queued" and len(sent) == 3
    assert PageBuild.objects.get(pk=row.pk).source == p.parquet_prefix + "-again"


@pytest.mark.django_db
def test_failed_export_is_a_clear_message_without_server_paths(client, make_user, tmp_path, settings,
                                                               monkeypatch) -> None:
    from analysis import page_builds
    from analysis.storage import delete_prefix as storage_delete_prefix

    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("cy")
    p = analysed_profile(project_with(owner), owner, hostile_core(frozenset()), tmp_path, "broken")
    storage_delete_prefix(f"{p.parquet_prefix}/rank_0")  # the saved tables are gone
    sent: list[int] = []
    monkeypatch.setattr(page_builds, "_send_after_commit", sent.append)
    client.force_login(owner)
    assert client.get(f"/api/profiles/{p.pk}/trace/").status_code == 202
    page_builds.build_run(build_id=sent[0])  # what the worker runs
    res = client.get(f"/api/profiles/{p.pk}/trace/")
    assert res.status_code == 409, res.content[:300]
    body = res.json()
    assert body["status"] == "failed" and body["code"] == "build_failed"
    assert body["detail"].startswith("The Chrome trace could not be exported: broken: internal error")
    html = client.get(f"/profiles/{p.pk}/trace/").content.decode()
    assert 'id="trace-failed"' in html and "internal error during the export of the chrome trace" in html
    for text in (body["detail"], html):
        for folder in (str(settings.MEDIA_ROOT), str(settings.PYPTO_WORK_DIR), str(tmp_path)):
            assert folder not in text
    assert len(sent) == 1  # a failed export is not tried again on every refresh
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    # the reason too is in the page's language (stored as its message, analysis/texts.py)
    reason = "broken：导出 Chrome trace 时发生内部错误（"
    zh_html = client.get(f"/profiles/{p.pk}/trace/").content.decode()
    assert "trace 导出失败" in zh_html and reason in zh_html and "internal error" not in zh_html
    detail = client.get(f"/api/profiles/{p.pk}/trace/").json()["detail"]
    assert detail.startswith("Chrome trace 导出失败") and reason in detail and "internal error" not in detail
    state = client.get(f"/api/profiles/{p.pk}/builds/").json()["trace"]
    assert state["status"] == "failed" and "internal error" in state["error"]  # ``error``: English, as always
    assert state["error_localized"].startswith(reason)
