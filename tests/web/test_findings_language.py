"""The findings in the user's language (issue 18): the API picks it from ?lang= or Accept-Language and keeps
ids and numbers; the profile page and the dashboard show the finding text in the page language."""

from __future__ import annotations

import html
import re

import pytest

from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with
from tests.web.test_pages import analysed_profile

pytestmark = pytest.mark.django_db
CJK = re.compile(r"[\u4e00-\u9fff]")
TEXT = ("title", "description", "saving_model")


@pytest.fixture
def ready(make_user, tmp_path, settings):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    project = project_with(owner)
    core = decoder_profile(planted=frozenset({"matmul_tiling", "norm_launch_overhead"}), tokens=5, layers=2)
    return owner, project, analysed_profile(project, owner, core, tmp_path, "decode run")


def _without_text(findings: list[dict]) -> list[dict]:
    return [{k: v for k, v in f.items() if k not in TEXT} for f in findings]


def test_findings_api_in_chinese_has_the_same_ids_and_numbers(client, ready) -> None:
    owner, _project, p = ready
    client.force_login(owner)
    url = f"/api/profiles/{p.pk}/findings/"
    en = client.get(url).json()
    zh = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-Hans").json()
    by_param = client.get(url + "?lang=zh-Hans", HTTP_ACCEPT_LANGUAGE="en").json()
    assert len(en["findings"]) >= 2 and zh == by_param
    assert _without_text(zh["findings"]) == _without_text(en["findings"])
    assert all(isinstance(f["id"], int) for f in en["findings"])
    for f_en, f_zh in zip(en["findings"], zh["findings"]):
        for name in TEXT:
            assert not CJK.search(f_en[name]) and CJK.search(f_zh[name]), (f_zh["rule"], name)
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    assert response["Content-Language"] == "zh-Hans"
    assert client.get(url + "?lang=fr").json()["findings"][0]["title"] == en["findings"][0]["title"]


def test_pages_show_the_findings_in_the_page_language(client, ready) -> None:
    owner, project, p = ready
    client.force_login(owner)
    zh = client.get(f"/api/profiles/{p.pk}/findings/?lang=zh-Hans").json()["findings"]
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    from frontend.templatetags.finding_text import code_spans

    for f in zh:  # the saving model's setting names as code
        assert f["title"] in page and f["description"] in page and code_spans(f["saving_model"]) in page
    dashboard = client.get(f"/projects/{project.pk}/").content.decode()
    assert zh[0]["title"] in dashboard


def test_profile_page_names_each_evidence_key_in_the_page_language(client, ready) -> None:
    """Evidence rows read "label  key": the label from pypto_core.rules.evidence_labels, the id beside it."""
    from pypto_core.rules.evidence_labels import evidence_label

    owner, _project, p = ready
    client.force_login(owner)
    findings = client.get(f"/api/profiles/{p.pk}/findings/").json()["findings"]
    keys = [k for f in findings for k in f["evidence"]]
    assert "flagged_time_us" in keys
    for language in ("en", "zh-hans"):
        client.post("/language/", {"language": language, "next": "/"})
        page = client.get(f"/profiles/{p.pk}/").content.decode()
        rows = {key: html.unescape(label) for key, label in re.findall(
            r'<tr data-key="([a-z0-9_]+)"><td>([^<]*?) <span class="hint mono small">\1</span>', page)}
        assert set(keys) <= set(rows), set(keys) - set(rows)
        for key in keys:
            # a time reads as a duration ("92.1 ms"), so its label drops the engine's "(µs)"
            label = evidence_label(key, "zh-Hans" if language == "zh-hans" else "en")
            time = re.search(r"_us(_|$)", key)  # flagged_time_us, fused_us_assumed
            assert rows[key] == (label.removesuffix(" (µs)") if time else label)
        assert rows["flagged_time_us"] == ("被标记算子的耗时" if language == "zh-hans"
                                           else "Time of the flagged kernels")
    assert 'style="' not in page.split('id="findings"')[1].split("</section>")[0]


def test_a_finding_shows_the_thresholds_it_was_judged_by(client, ready) -> None:
    """Under the evidence: the rule's thresholds and assumed figures with their values (``parameters``)."""
    owner, _project, p = ready
    client.force_login(owner)
    findings = client.get(f"/api/profiles/{p.pk}/findings/").json()["findings"]
    norm = next(f for f in findings if f["rule"] == "norm_launch_overhead")
    fused = norm["details"]["parameters"]["fused_norm_us"]
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    card = page.split('data-rule="norm_launch_overhead"')[1].split("</article>")[0]
    shown = card.split('class="hint small parameters"')[1].split("</p>")[0]
    assert '<span class="mono">fused_norm_us</span> = ' + f"{fused:g}" in shown
    assert "pypto analyze --config" in shown

