"""The header's "API" link opens a browsable API reference served by the app (issue 18): every operation of
drf-spectacular's schema with its summary, parameters and body shapes, grouped by tag, in the user's language,
with the YAML one click away; no inline script or style (a strict CSP allows only the app's own files).
The favicon is the app's own file, linked from every page and answered at /favicon.ico."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
import yaml
from django.test import Client

from frontend.api_reference import schema_for_language
from pypto_web.api_docs import SUMMARIES

pytestmark = pytest.mark.django_db


class _Tags(HTMLParser):
    """Every start tag's name and attributes, and the text inside <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.script_text.append(data)


def _client(make_user, language: str = "en") -> Client:
    make_user("dev")
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    assert client.login(username="dev", password="pw-for-tests-1")
    client.post("/language/", {"language": language, "next": "/"})
    return client


def test_every_operation_has_a_summary() -> None:
    schema = schema_for_language("en")
    ids = {op["operationId"] for ops in schema["paths"].values() for op in ops.values()}
    assert len(ids) > 40
    assert ids - set(SUMMARIES) == set(), "add a summary in pypto_web/api_docs.py"
    assert set(SUMMARIES) - ids == set(), "a summary for an operation that no longer exists"


def test_reference_page_lists_every_operation_without_inline_script_or_style(make_user) -> None:
    client = _client(make_user)
    assert Client().get("/api/docs/").status_code == 302  # signed-in users only, as every page
    home = client.get("/").content.decode()
    assert re.search(r'<a href="/api/docs/" id="api-link">API</a>', home)
    resp = client.get("/api/docs/")
    assert resp.status_code == 200
    html = resp.content.decode()
    schema = schema_for_language("en")
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            block = re.search(rf'<details class="api-op" id="op-{op["operationId"]}".*?</details>', html,
                              re.S)
            assert block, op["operationId"]
            assert f'<code class="path">{path}</code>' in block.group(0)
            assert f">{method.upper()}</span>" in block.group(0)
            assert str(SUMMARIES[op["operationId"]]).replace("'", "&#x27;") in block.group(0)
    # parameters, request and response shapes are shown, named schemas are linked to their section
    timeline = re.search(r'id="op-profiles_timeline_retrieve".*?</details>', html, re.S).group(0)
    assert all(f"<code>{p}</code>" in timeline for p in ("start_ns", "end_ns", "width_px"))
    create = re.search(r'id="op-comparisons_create".*?</details>', html, re.S).group(0)
    assert '<a href="#schema-ComparisonCreate">' in create and '<a href="#schema-Comparison">' in create
    assert 'id="schema-Profile"' in html and "<code>sha256</code>" in html
    parser = _Tags()
    parser.feed(html)
    scripts = [a for t, a in parser.tags if t == "script"]
    assert scripts and all(a.get("src", "").startswith("/static/") for a in scripts)
    assert parser.script_text == []
    assert [t for t, a in parser.tags if "style" in a] == []
    assert not [t for t, a in parser.tags if any(k.startswith("on") for k in a)]


def test_reference_in_chinese_and_the_yaml_download(make_user) -> None:
    client = _client(make_user, "zh-hans")
    html = client.get("/api/docs/").content.decode()
    assert "API 参考" in html and "列出你所属的项目。" in html  # heading and the projects_list summary
    assert '<a href="#tag-profiles">性能数据' in html
    yaml_link = re.search(r'href="(/api/schema/\?format=yaml)" download="pypto-openapi.yaml"', html)
    assert yaml_link
    resp = client.get(yaml_link.group(1))
    assert resp.status_code == 200
    schema = yaml.safe_load(b"".join(resp) if resp.streaming else resp.content)
    assert schema["paths"]["/api/projects/"]["get"]["summary"] == str(SUMMARIES["projects_list"])


def test_the_schema_is_for_signed_in_users_only(client, make_user) -> None:
    assert client.get("/api/schema/").status_code in (401, 403)
    assert _client(make_user).get("/api/schema/").status_code == 200


def test_favicon_is_the_apps_own_file(make_user) -> None:
    client = _client(make_user)
    html = client.get("/").content.decode()
    href = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', html).group(1)
    assert href.startswith("/static/")
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 302 and redirect["Location"] == href
