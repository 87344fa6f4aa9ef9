"""What a worker writes for a user is shown in the reader's language (analysis/texts.py), end to end: the
readers' warnings (engine -> profile.json -> summary and report -> API -> page), the comparison's warnings,
the reason a step or a page build failed, and the pipeline log. Each is stored as its English text (the API's
``error``, ``warnings``, ``log`` stay as they were) beside its message; rows stored before the messages were
kept show their English text.

The pipeline's steps run in this process (``pipeline_ingest``, ``pipeline_diagnose``, ``comparison_run``):
the code a worker runs, without a worker.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with
from tests.web.test_pages import analysed_profile

pytestmark = pytest.mark.django_db
CJK = re.compile(r"[\u4e00-\u9fff]")

# A kernel table a reader takes with two warnings: a text column it does not know, a counter cell that is
# not a number.
WARNED_CSV = ("Name,Type,Accelerator Core,Start Time(us),Duration(us),Mystery,aic_mac_ratio\n"
              + "".join(f"k{i},MatMulV2,AI_CORE,{1000 + 3 * i}.5,1.5,hello,0.5\n" for i in range(40))
              + "bad,MatMulV2,AI_CORE,2000.5,1.5,hello,oops\n").encode()


def _uploaded(project: Any, owner: Any, name: str, content: bytes, filename: str) -> Any:
    """An upload taken through the real ingest and diagnose steps in this process."""
    from analysis.pipeline.diagnose import pipeline_diagnose
    from analysis.pipeline.ingest import pipeline_ingest
    from analysis.profile_services import profile_upload

    profile = profile_upload(project=project, user=owner, file=SimpleUploadedFile(filename, content),
                             filename=filename, name=name)
    pipeline_ingest(profile_id=profile.pk)
    profile.refresh_from_db()
    if profile.status == "analyzing":
        pipeline_diagnose(profile_id=profile.pk)
        profile.refresh_from_db()
    return profile


def _in_chinese(client: Any) -> None:
    client.post("/language/", {"language": "zh-hans", "next": "/"})


@pytest.fixture
def owner_project(make_user, tmp_path, settings):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    return owner, project_with(owner)


def test_readers_warnings_are_messages_shown_in_the_page_language(client, owner_project) -> None:
    owner, project = owner_project
    p = _uploaded(project, owner, "warned", WARNED_CSV, "kernel_details.csv")
    assert p.status == "ready", p.error
    client.force_login(owner)
    # stored: the English text the API always had, and beside it the reader's template and parameters
    summary = client.get(f"/api/profiles/{p.pk}/").json()["summary"]
    english = "kernel_details.csv: column 'Mystery' is not a known kernel column and not numeric; skipped"
    assert english in summary["report"]["warnings"] and english in summary["warnings"]
    stored = summary["report"]["warning_messages"][summary["report"]["warnings"].index(english)]
    template = "{file}: column {column!r} is not a known kernel column and not numeric; skipped"
    assert stored == {"msgid": template, "params": {"file": "kernel_details.csv", "column": "Mystery"}}
    # the API in either language: the same number of warnings, the reader's in Chinese, names kept
    url = f"/api/profiles/{p.pk}/findings/"
    en = client.get(url, HTTP_ACCEPT_LANGUAGE="en").json()["warnings"]
    zh = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-Hans").json()["warnings"]
    assert english in en and len(en) == len(zh)
    chinese = "kernel_details.csv：列 'Mystery' 不是已知的算子列，也不是数值列，已跳过"
    junk = "kernel_details.csv：列 'aic_mac_ratio' 中有 1 个值无法解析为数字（例如 'oops'），已置为空"
    assert chinese in zh and junk in zh and english not in zh
    # the page in Chinese: the warnings card reads Chinese, not the English templates
    _in_chinese(client)
    page = html.unescape(client.get(f"/profiles/{p.pk}/").content.decode())
    warnings = page.split('id="warnings"')[1].split("</div>")[0]
    assert chinese in warnings and junk in warnings
    shown = page.split('id="summary-raw"')[0]  # the stored summary's JSON below is the API's, in English
    assert "is not a known kernel column" not in shown and "could not be read as numbers" not in shown
    assert not [w for w in re.findall(r"<li>(.*?)</li>", warnings) if not CJK.search(w)]


def test_warnings_stored_as_plain_strings_still_show(client, owner_project) -> None:
    """A report stored before its warnings kept their messages: the English text, as it was."""
    from analysis.summary import summary_fields, summary_of
    from profiles.models import Profile

    owner, project = owner_project
    p = _uploaded(project, owner, "old", WARNED_CSV, "kernel_details.csv")
    summary = summary_of(p)
    assert summary.report is not None
    summary.report = {k: v for k, v in summary.report.items() if k != "warning_messages"}
    summary.report["warnings"] = ["an old reader's note"]
    Profile.objects.filter(pk=p.pk).update(**summary_fields(summary))
    client.force_login(owner)
    _in_chinese(client)
    assert "an old reader's note" in html.unescape(client.get(f"/profiles/{p.pk}/").content.decode())
    zh = client.get(f"/api/profiles/{p.pk}/findings/?lang=zh-Hans").json()["warnings"]
    assert zh == ["an old reader's note"]


def test_failure_reason_and_pipeline_log_in_the_page_language(client, owner_project) -> None:
    owner, project = owner_project
    broken = b"Step Id,Name,Type,Accelerator Core,Duration(us)\n1,a,MatMulV2,AI_CORE,1.0\n"
    p = _uploaded(project, owner, "broken", broken, "kernel_details.csv")
    assert p.status == "failed"
    english = "not a kernel table: required column"
    assert english in p.error and p.error_message["params"]["reason"]["msgid"].startswith(english)
    client.force_login(owner)
    # the API keeps its English ``error``; ``error_localized`` follows the request's language
    body = client.get(f"/api/profiles/{p.pk}/", HTTP_ACCEPT_LANGUAGE="zh-Hans").json()
    assert body["error"] == p.error and english in body["error"]
    assert body["error_localized"].startswith("kernel_details.csv: 不是算子表：缺少必需的列")
    assert client.get(f"/api/profiles/{p.pk}/?lang=en").json()["error_localized"] == p.error
    _in_chinese(client)
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    error = re.search(r'<p class="error" id="error">(.*?)</p>', page, re.S).group(1)
    assert "不是算子表：缺少必需的列" in error and english not in page
    # the worker's log: each line in Chinese, none of the English lines it wrote
    log = re.search(r'<pre class="mono small pipeline-log">(.*?)</pre>', page, re.S).group(1)
    assert "已领取 kernel_details.csv" in log and "已取回压缩包，校验和一致" in log and "失败：" in log
    for line in ("claimed kernel_details.csv", "archive fetched", "unpacked 1 files", "failed:"):
        assert line not in page
    assert 'lang="en"' not in page.split('id="summary-raw"')[1]
    # in English, the same rows read as the worker wrote them
    client.post("/language/", {"language": "en", "next": "/"})
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    assert "claimed kernel_details.csv" in page and english in page


def test_a_run_logged_before_the_messages_shows_its_english_log(client, owner_project) -> None:
    from analysis.models import AnalysisRun

    owner, project = owner_project
    p = _uploaded(project, owner, "broken", b"x,y\n1,2\n", "kernel_details.csv")
    AnalysisRun.objects.filter(profile=p).update(log="[10:00:00] an old line\n", log_messages=[])
    client.force_login(owner)
    _in_chinese(client)
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    assert '<pre class="mono small pipeline-log" lang="en">[10:00:00] an old line' in page


def test_comparison_warnings_in_the_page_language(client, owner_project, tmp_path) -> None:
    from analysis.comparisons import comparison_create, comparison_run
    from analysis.models import Comparison

    owner, project = owner_project
    base = analysed_profile(project, owner, decoder_profile(tokens=4, layers=2), tmp_path, "b3")
    new = analysed_profile(project, owner, decoder_profile(tokens=4, layers=2, sku="910B4",
                                                           device="Ascend910B4"), tmp_path, "b4")
    c = comparison_create(user=owner, base=base, candidate=new)
    comparison_run(comparison_id=c.pk)
    c.refresh_from_db()
    english = ("different devices: 910B3 vs 910B4; shares and utilisations are each relative to their own "
               "device's peaks")
    assert c.result["warnings"] == [english]
    assert c.result["warning_messages"][0]["params"] == {"base": "910B3", "new": "910B4"}
    chinese = "设备不同：910B3 对比 910B4；各项占比和利用率分别相对于各自设备的峰值"
    client.force_login(owner)
    api = client.get(f"/api/comparisons/{c.pk}/", HTTP_ACCEPT_LANGUAGE="zh-Hans").json()
    assert api["result"]["warnings"] == [english] and api["warnings_localized"] == [chinese]
    assert client.get(f"/api/comparisons/{c.pk}/?lang=en").json()["warnings_localized"] == [english]
    _in_chinese(client)
    page = client.get(f"/comparisons/{c.pk}/").content.decode()
    assert chinese in page and "different devices" not in page
    # the comparison's ids beside them read as words too: its normalisation, the units, the workloads
    assert "<dd>按 Decode 阶段的每个 token</dd>" in page and "<td>占比</td>" in page
    assert "<dd>per_token</dd>" not in page and "<td>share</td>" not in page
    assert "<td>llm_decode</td>" not in page
    # a row of two workloads' comparison (``different_work``) reads as such, in the page's language
    marked = {"better": None, "different_work": True}
    metrics = [{**m, **marked, "noise": {**m["noise"], "verdict": "different_work"}}
               if m["name"] == "step_time_ms" else m for m in c.result["metrics"]]
    Comparison.objects.filter(pk=c.pk).update(result={**c.result, "metrics": metrics})
    assert "工作负载不同：并非同一改动的前后对比" in client.get(f"/comparisons/{c.pk}/").content.decode()
    Comparison.objects.filter(pk=c.pk).update(result=c.result)
    # a comparison stored before its warnings kept their messages shows them as they were
    Comparison.objects.filter(pk=c.pk).update(result={**c.result, "warning_messages": None})
    assert "different devices: 910B3 vs 910B4" in client.get(f"/comparisons/{c.pk}/").content.decode()


def test_comparison_failure_reason_in_the_page_language(client, owner_project, tmp_path) -> None:
    from analysis.comparisons import comparison_create, comparison_run
    from profiles.models import Profile

    owner, project = owner_project
    base = analysed_profile(project, owner, decoder_profile(tokens=2, layers=1), tmp_path, "base")
    new = analysed_profile(project, owner, decoder_profile(tokens=2, layers=1), tmp_path, "new")
    c = comparison_create(user=owner, base=base, candidate=new)
    Profile.objects.filter(pk=new.pk).update(status="failed")
    comparison_run(comparison_id=c.pk)
    c.refresh_from_db()
    assert c.status == "failed" and c.error == "new: profile is failed, not ready"
    client.force_login(owner)
    api = client.get(f"/api/comparisons/{c.pk}/?lang=zh-Hans").json()
    assert api["error"] == c.error and api["error_localized"] == "new: 性能数据状态为 failed，尚未就绪"
    _in_chinese(client)
    page = client.get(f"/comparisons/{c.pk}/").content.decode()
    assert "new: 性能数据状态为 failed，尚未就绪" in page and "not ready" not in page
