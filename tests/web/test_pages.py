"""Dashboard pages (issue 7) on profiles analysed in-process: the project dashboard, the profile page
(numbers, charts as json_script, top ops, findings with remedy links), the timeline page and its API,
comparisons and their exports, membership 404s, and hostile op names shown as text everywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from pypto_core.durations import format_duration
from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db

HOSTILE = ["<script>alert(1)</script>", "</script><img src=x onerror=alert(2)>", "{{ secret }}"]
ALL_RULES = frozenset({"matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead"})


def hostile_core(planted: frozenset[str]) -> Any:
    """A small decoder profile whose kernel names (and one op type) are hostile strings."""
    core = decoder_profile(planted=planted, tokens=4, layers=2)
    k = core.kernels
    names = k["name"].to_pylist()
    types = k["op_type"].to_pylist()
    names = [HOSTILE[i % len(HOSTILE)] if t in ("MatMulV2", "RmsNorm", "Add") else n
             for i, (n, t) in enumerate(zip(names, types))]
    types = [HOSTILE[1] if t == "Cast" else t for t in types]
    k = k.set_column(k.schema.get_field_index("name"), "name", pa.array(names))
    k = k.set_column(k.schema.get_field_index("op_type"), "op_type", pa.array(types))
    # a PMU counter no rule reads: the diagnose step leaves it on disk, the timeline's details read it there
    k = k.append_column("aic_mac_ratio", pa.array([0.25] * k.num_rows, pa.float64()))
    core.kernels = k
    core.meta.simulated = True
    return core


def analysed_profile(project: Any, owner: Any, core: Any, tmp: Path, name: str) -> Any:
    """A profile row with its Parquet in storage, taken through the real diagnose step in this process."""
    from analysis.pipeline.diagnose import pipeline_diagnose
    from analysis.storage import store_folder
    from profiles.models import Profile, ProfileStatus

    profile = Profile.objects.create(project=project, name=name, original_filename="p.zip", upload_kind="zip",
                                     created_by=owner, status=ProfileStatus.ANALYZING, progress=60)
    profile.archive.save("p.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18), save=True)
    local = tmp / f"pq-{profile.pk}"
    core.save(local / "rank_0")
    prefix = f"projects/{project.pk}/parquet/{profile.pk}/t"
    store_folder(local, prefix)
    summary = core.summary()
    summary.update({"ranks": 1, "rank_folders": ["rank_0"], "warnings": [HOSTILE[0] + " could not be read"]})
    Profile.objects.filter(pk=profile.pk).update(parquet_prefix=prefix, summary=summary)
    pipeline_diagnose(profile_id=profile.pk)
    profile.refresh_from_db()
    assert profile.status == ProfileStatus.READY, profile.error
    return profile


@pytest.fixture
def world(make_user, tmp_path, settings):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner, viewer, stranger = make_user("owner"), make_user("viewer"), make_user("stranger")
    project = project_with(owner, viewer=viewer)
    before = analysed_profile(project, owner, hostile_core(ALL_RULES), tmp_path, HOSTILE[2] + " before")
    after = analysed_profile(project, owner, hostile_core(frozenset()), tmp_path, "after")
    return {"owner": owner, "viewer": viewer, "stranger": stranger, "project": project, "before": before,
            "after": after}


def _json_scripts(html: str) -> dict[str, Any]:
    return {m.group(1): json.loads(m.group(2))
            for m in re.finditer(r'<script id="([^"]+)" type="application/json">(.*?)</script>', html, re.S)}


def assert_inert(html: str) -> None:
    """No hostile string appears unescaped: no script tag, no img tag, no rendered template syntax leak."""
    for bad in HOSTILE[:2]:
        assert bad not in html
    assert "<img src=x" not in html
    assert html.count("<script") == html.count("</script>")  # no tag closed early or opened by data


def test_profile_page_numbers_charts_table_findings(client, world) -> None:
    client.force_login(world["owner"])
    p = world["before"]
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    assert_inert(html)
    assert 'id="simulated"' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; could not be read" in html  # the warning, escaped
    assert "{{ secret }} before" in html  # template syntax in a name is shown literally, never evaluated
    data = _json_scripts(html)
    op_types = data["chart-op-types"]["yAxis"][0]["data"]
    assert HOSTILE[1] in op_types and "MatMulV2" in op_types  # the chart JSON carries the text as data
    assert data["chart-roofline"]["series"][0]["data"], "roof line drawn"
    assert any(s["type"] == "scatter" and s["name"] == "MatMulV2" for s in data["chart-roofline"]["series"])
    assert len(data["chart-decode"]["series"][0]["data"]) == 4  # one latency per decode token
    top = data["top-ops-data"]
    assert {r["name"] for r in top} >= set(HOSTILE)
    assert top == sorted(top, key=lambda r: -r["total_us"])
    # the table's script shows each time as the page prints every time, and sorts on the numbers
    assert all(r["total_us_text"] == format_duration(r["total_us"], "us")
               and r["avg_us_text"] == format_duration(r["avg_us"], "us") for r in top)
    # a finding's saving reads like the tables' times (it printed raw µs beside tables in ms)
    for f in p.findings.all():
        article = html.split(f'data-finding-id="{f.pk}"')[1].split("</article>")[0]
        saving = format_duration(f.data["estimated_saving_us"], "us")
        # then, for a run of several steps, a step's share of it
        per_step = r"( \([^)]* a step, over \d+ steps\))?"
        assert re.search(rf"estimated saving(, at most)? {re.escape(saving)}{per_step} ·", article), \
            (f.rule, saving)
    # every planted rule is reported, with its remedy downloads linked
    rules = set(re.findall(r'class="finding" data-rule="([a-z_]+)"', html))
    assert ALL_RULES <= rules
    links = re.findall(r'href="(/api/artifacts/\d+/download/)"', html)
    assert links
    res = client.get(links[0])
    assert res.status_code == 200 and res["Content-Disposition"].startswith("attachment")
    assert f'href="/profiles/{p.pk}/timeline/"' in html and f'href="/profiles/{p.pk}/trace/"' in html


def test_dashboard_history_findings_comparisons(client, world) -> None:
    from django.utils.html import escape

    from analysis.comparisons import comparison_create, comparison_run
    from analysis.models import Finding
    from profiles.models import Profile, ProfileStatus

    c = comparison_create(user=world["owner"], base=world["before"], candidate=world["after"])
    comparison_run(comparison_id=c.pk)
    client.force_login(world["viewer"])
    html = client.get(f"/projects/{world['project'].pk}/").content.decode()
    assert_inert(html)
    history = _json_scripts(html)["chart-history"]
    latency = history["series"][0]["data"]
    assert [row[2] for row in latency] == [world["before"].name, "after"]  # oldest first, names as data
    assert latency[0][1] > latency[1][1]  # the fixed run decodes faster
    assert f'href="/comparisons/{c.pk}/"' in html
    # "Open findings": those of the newest ready profile of each name, across the project, worst first
    before, after = world["before"], world["after"]
    assert before.findings.exists() and not after.findings.exists()  # "after" fixed them all
    assert open_findings(html) == expected_open([before])[:OPEN_FINDINGS]
    link = f'<a class="finding-profile" href="/profiles/{before.pk}/#findings">{escape(before.name)}</a>'
    assert link in html

    # another upload with findings of its own: both profiles' findings on one list, each linked to its profile
    other = Profile.objects.create(project=world["project"], name="serving run", original_filename="p.zip",
                                   status=ProfileStatus.READY)
    Finding.objects.create(profile=other, rule="sync_stall", severity="high", title="The host synchronises",
                           data={"rule": "sync_stall", "estimated_saving_us": 1_500_000.0})
    for i in range(8):  # with the before profile's, more than the card lists
        Finding.objects.create(profile=other, rule="block_dim", severity="low", title="Cores left idle",
                               data={"estimated_saving_us": 10.0 * i})
    # neither a failed profile nor a rank of a multi-rank upload has findings of its own to list
    failed = Profile.objects.create(project=world["project"], name="broken", original_filename="p.zip",
                                    status=ProfileStatus.FAILED)
    rank = Profile.objects.create(project=world["project"], name="serving run · rank 1",
                                  original_filename="p.zip", status=ProfileStatus.READY, group=other, rank=1)
    for row in (failed, rank):
        Finding.objects.create(profile=row, rule="slow_rank", severity="high", title="x", data={})
    # a rank that waits 2 s in collectives for its peers, whose own overlap saves 3 ms: the wait is what the
    # job loses, so it comes first though no saving counts it, and the row says it
    waits = Profile.objects.create(project=world["project"], name="training rank 0",
                                   original_filename="p.zip", status=ProfileStatus.READY)
    Finding.objects.create(profile=waits, rule="communication_not_overlapped", severity="high",
                           title="Communication not overlapped",
                           data={"estimated_saving_us": 3000.0, "peer_wait_us": 2_000_000.0})
    html = client.get(f"/projects/{world['project'].pk}/").content.decode()
    shown = open_findings(html)
    assert shown[0] == ("communication_not_overlapped", waits.pk)
    first = html.split('id="open-findings"')[1].split("</li>")[0]
    assert "estimated saving 3\u00a0ms" in first and "wait for other ranks 2\u00a0s" in first, first
    assert shown[1] == ("sync_stall", other.pk)  # high, and the largest saving: 1.5 s
    assert "estimated saving 1.5\u00a0s" in html.split('id="open-findings"')[1].split("</li>")[1]
    waits.delete()
    html = client.get(f"/projects/{world['project'].pk}/").content.decode()
    shown = open_findings(html)
    assert shown == expected_open([before, other])[:OPEN_FINDINGS]
    assert {pk for _rule, pk in shown} == {before.pk, other.pk}
    for pk, name in ((before.pk, before.name), (other.pk, other.name)):
        assert f'<a class="finding-profile" href="/profiles/{pk}/#findings">{escape(name)}</a>' in html
    more = before.findings.count() + other.findings.count() - OPEN_FINDINGS
    assert more > 0 and f"and {more} more finding" in html

    # a newer upload under the same name is that run's new capture: its findings replace the older one's
    Profile.objects.create(project=world["project"], name="serving run", original_filename="p.zip",
                           status=ProfileStatus.READY)
    html = client.get(f"/projects/{world['project'].pk}/").content.decode()
    assert open_findings(html) == expected_open([before])[:OPEN_FINDINGS]
    Finding.objects.filter(profile=before).delete()
    html = client.get(f"/projects/{world['project'].pk}/").content.decode()
    assert 'id="open-findings"' not in html and "No open findings in the newest ready profiles." in html

OPEN_FINDINGS = 10  # frontend/views/dashboard.py


def open_findings(html: str) -> list[tuple[str, int]]:
    """(rule, profile id) of each open finding the project page lists, in its order."""
    if 'id="open-findings"' not in html:
        return []
    block = html.split('id="open-findings"')[1].split("</ul>")[0]
    items = re.findall(r'<li data-rule="([a-z_]+)" data-profile="(\d+)">', block)
    return [(rule, int(pk)) for rule, pk in items]


def expected_open(profiles: list[Any]) -> list[tuple[str, int]]:
    """Worst first: high, medium, low; then the larger of the estimated saving and the wait for other ranks
    (which no saving counts); then the newer profile."""
    from analysis.models import Finding

    rank = {"high": 0, "medium": 1, "low": 2}
    rows = sorted(Finding.objects.filter(profile__in=profiles).select_related("profile"),
                  key=lambda f: (rank.get(f.severity, 3), -max(f.data.get("estimated_saving_us") or 0.0,
                                                               f.data.get("peer_wait_us") or 0.0),
                                 -f.profile.created_at.timestamp(), f.profile_id, f.order, f.pk))
    return [(f.rule, f.profile_id) for f in rows]


def test_comparison_page_and_exports(client, world) -> None:
    client.force_login(world["owner"])
    before, after = world["before"], world["after"]
    page = client.get(f"/projects/{world['project'].pk}/compare/?base={before.pk}")
    assert page.status_code == 200 and f'<option value="{before.pk}" selected>' in page.content.decode()
    res = client.post(f"/projects/{world['project'].pk}/compare/",
                      {"base": before.pk, "candidate": before.pk})
    assert res.status_code == 200 and "Pick two different profiles." in res.content.decode()
    res = client.post(f"/projects/{world['project'].pk}/compare/", {"base": before.pk, "candidate": after.pk})
    assert res.status_code == 302
    cid = int(res["Location"].rstrip("/").rsplit("/", 1)[1])
    waiting = client.get(res["Location"]).content.decode()
    assert 'data-finished="0"' in waiting and "spinner" in waiting

    from analysis.comparisons import comparison_run

    comparison_run(comparison_id=cid)
    html = client.get(f"/comparisons/{cid}/").content.decode()
    assert_inert(html)
    assert 'id="metrics-table"' in html and 'data-metric="per_token_latency_ms"' in html
    assert "Per-token latency, p50 (ms)" in html  # the metric in words, its id beside it
    # the device's cores by their name on its vendor (the demo's 910B: AI Cores, never a GPU's SMs)
    assert re.search(r"\d+ AI Cores", html) and " SMs" not in html
    # a simulated kernel table links its kernels to no framework op: said, with what they align by instead
    assert 'id="aligned-without-operators"' in html and "aligned by op type, else by kernel name" in html
    # a share's change in percentage points, a time's in percent
    idle_row = re.search(r'data-metric="device_idle_share".*?</tr>', html, re.S)
    assert idle_row and re.search(r'<td class="num">[+-]?\d+\.\d pp</td>', idle_row.group(0))
    # each value in its unit as the other pages print it: a share as a percent, a time as a duration (the
    # table printed 0.0390 and 27.2142); the exact figure in its cell's title
    result = client.get(f"/api/comparisons/{cid}/").json()["result"]
    metric = {m["name"]: m for m in result["metrics"]}
    idle = metric["device_idle_share"]
    assert f'<td class="num" title="{idle["base"]}">{100 * idle["base"]:.1f}%</td>' in idle_row.group(0)
    latency = metric["per_token_latency_ms"]
    latency_row = re.search(r'data-metric="per_token_latency_ms".*?</tr>', html, re.S).group(0)
    assert f'>{format_duration(latency["new"], "ms")}</td>' in latency_row
    # the noise test per metric (issue 22): a column, and the per-step medians behind the latency verdict
    assert 'id="noise-col"' in html and "medians of 4 / 4 steps" in html
    assert 'id="aligned-table"' in html and 'id="summary-table"' in html
    assert 'id="ranks-table"' not in html  # one rank each side: nothing per rank to add
    from analysis.models import Comparison

    # every time as the pages print times (the aligned table printed bare µs under a "µs per step" title)
    stored = Comparison.objects.get(pk=cid)
    from django.utils.html import escape

    for row in stored.result["aligned"][:5]:
        cells = re.search(rf'<tr data-key="{re.escape(escape(row["key"]))}".*?</tr>', html, re.S).group(0)
        assert (f'<td class="num">{format_duration(row["base_us"], "us")}</td><td class="num">'
                f'{format_duration(row["new_us"], "us")}</td>') in cells
    summary = re.search(r'id="summary-table">.*?</table>', html, re.S).group(0)
    step_ms = stored.result["summary"]["base"]["per_step"]["wall_ms"]
    assert f'<td class="num">{format_duration(step_ms, "ms")}</td>' in summary

    # a side of several ranks (its diagnosis report's rank breakdowns): each rank gets a row
    one = stored.result["summary"]["base"]["ranks"][0]
    stored.result["summary"]["base"]["ranks"] = [one, {**one, "rank": 7, "compute_share": 0.25}]
    stored.save(update_fields=["result"])
    html = client.get(f"/comparisons/{cid}/").content.decode()
    ranks = re.search(r'<table class="grid small" id="ranks-table">.*?</table>', html, re.S).group(0)
    assert ranks.count("<tr>") == 1 + 3 and "<td>7</td>" in ranks and ">25%<" in ranks
    statuses = dict(re.findall(r'<td class="mono">([a-z_]+)</td><td>[^<]*</td>\s*<td class="st-([a-z]+)">',
                               html))
    assert statuses.get("matmul_tiling") == "fixed", statuses
    # a finding's saving is over the run; beside it, per profiler step as the profile page gives it, never
    # per token (the run's saving holds the prefill's part: 2 prefill and 2 decode steps here)
    mm = next(f for f in stored.result["findings"] if f["rule"] == "matmul_tiling")
    assert stored.result["normalisation"] == "per_token"
    assert mm["per_unit"]["unit"] == "per_step" and mm["per_unit"]["count"] == 4
    status_table = re.search(r'id="finding-status">.*?</table>\s*<p class="hint">([^<]*)</p>', html, re.S)
    per_step = format_duration(mm["per_unit"]["estimated_saving_us"], "us")
    assert f'<span class="hint per-unit">({per_step} a step)</span>' in status_table.group(0)
    assert "in brackets, per profiler step" in status_table.group(1)
    # a new finding whose time a step did not grow says the step got shorter (compare._threshold_only), and a
    # persisting one whose time fell by half its estimate says it was reduced
    stored.result["findings"] += [
        {"rule": "sync_stall", "status": "new", "title": "t", "estimated_saving_us": 600.0,
         "measured_saving_us": None, "threshold_only": True,
         "time_per_step_us": {"base": 153.5, "new": 149.2}},
        {"rule": "host_bound_gaps", "status": "persisting", "reduced": True, "title": "t",
         "estimated_saving_us": 99_000.0, "measured_saving_us": 78_800.0}]
    stored.save(update_fields=["result"])
    html = client.get(f"/comparisons/{cid}/").content.decode()
    before, after = format_duration(153.5, "us"), format_duration(149.2, "us")
    assert (f"its time a step did not grow ({before} → {after}): the step got shorter, so its share crossed "
            "the threshold") in html
    assert "persisting, reduced: its time fell by at least half the estimate" in html
    assert HOSTILE[1] in _json_scripts(html)["chart-ops"]["yAxis"][0]["data"]
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html  # op-type table cell, escaped
    md = client.get(f"/api/comparisons/{cid}/export/?format=md")
    assert md.status_code == 200 and md["Content-Disposition"].endswith('.md"')
    md_text = md.content.decode()
    # escaped for Markdown (a backslash before each markup character), never with HTML entities (issue 22)
    assert "per_token_latency_ms" in md_text
    assert not re.search(r"(?<!\\)<img", md_text) and "&lt;" not in md_text
    assert "\\<img src=x onerror=alert(2)\\>" in md_text
    csv_text = client.get(f"/api/comparisons/{cid}/export/?format=csv").content.decode()
    assert csv_text.startswith("section,name,unit")
    # the model blocks in words, in the page's language (the id in the cell's title)
    blocks = re.search(r'id="blocks-table">.*?</table>', html, re.S).group(0)
    assert '<td title="matmul">MatMul</td>' in blocks
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    blocks = re.search(r'id="blocks-table">.*?</table>', client.get(f"/comparisons/{cid}/").content.decode(),
                       re.S).group(0)
    assert '<td title="norm">Norm 归一化</td>' in blocks
    client.post("/language/", {"language": "en", "next": "/"})
    assert client.get(f"/api/comparisons/{cid}/export/?format=xlsx").status_code == 404


def test_timeline_page_and_api(client, world) -> None:
    client.force_login(world["viewer"])
    p = world["before"]
    html = client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    assert f'data-timeline-url="/api/profiles/{p.pk}/timeline/"' in html
    # the step markers' names ("Step 4" in the index and the Perfetto export) are shown in the page's words
    assert 'data-step-name="Step {n}"' in html
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    zh = client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    assert 'data-step-name="迭代 {n}"' in zh and 'data-step="迭代"' in zh
    client.post("/language/", {"language": "en", "next": "/"})
    res = client.get(f"/api/profiles/{p.pk}/timeline/?width_px=800")
    assert res.status_code == 200, res.content[:300]
    window = res.json()
    assert window["start_ns"] < window["end_ns"] and window["width_px"] == 800 and window["lanes"]
    slices = [t for t in window["tracks"] if t["kind"] == "slices"]
    assert slices and window["bars"] == sum(len(t["start"]) for t in slices)
    for t in slices:  # aligned columns, names as indices into the answer's name table
        assert len(t["start"]) == len(t["dur"]) == len(t["depth"]) == len(t["name"]) == len(t["count"])
        assert all(0 <= i < len(window["names"]) for i in t["name"])
    found = client.get(f"/api/profiles/{p.pk}/timeline/search/", {"q": "onerror"}).json()
    assert found["total"] > 0 and found["matches"][0]["name"] == HOSTILE[1]
    m = found["matches"][0]
    event = client.get(f"/api/profiles/{p.pk}/timeline/event/", {"lane": m["lane"], "idx": m["idx"]}).json()
    assert event["name"] == HOSTILE[1]
    # every column of the kernel's row, the counter the diagnose step did not load included
    assert event["table"] == "kernels" and event["args"]["aic_mac_ratio"] == 0.25
    assert event["args"]["name"] == HOSTILE[1]
    assert client.get(f"/api/profiles/{p.pk}/timeline/event/", {"idx": 10**9}).status_code == 404
    # the trace is exported by a worker (here: the build run in this process), never in the request
    from analysis.models import PageBuild
    from analysis.page_builds import build_run

    pending = client.get(f"/api/profiles/{p.pk}/trace/")
    assert pending.status_code == 202 and pending.json()["status"] == "queued", pending.content[:300]
    assert pending["Retry-After"]
    build_run(build_id=PageBuild.objects.get(profile=p, kind="trace").pk)
    trace = client.get(f"/api/profiles/{p.pk}/trace/")
    assert trace.status_code == 200 and trace["Content-Disposition"].startswith("attachment")
    body = b"".join(trace.streaming_content)
    assert json.loads(body)["traceEvents"]


def test_non_members_get_404_everywhere(client, world) -> None:
    from analysis.comparisons import comparison_create

    p = world["before"]
    c = comparison_create(user=world["owner"], base=world["before"], candidate=world["after"])
    client.force_login(world["stranger"])
    for url in (f"/profiles/{p.pk}/", f"/profiles/{p.pk}/timeline/", f"/projects/{world['project'].pk}/",
                f"/projects/{world['project'].pk}/compare/", f"/comparisons/{c.pk}/",
                f"/api/profiles/{p.pk}/timeline/", f"/api/profiles/{p.pk}/timeline/search/?q=a",
                f"/api/profiles/{p.pk}/timeline/event/?idx=0", f"/api/profiles/{p.pk}/trace/",
                f"/api/profiles/{p.pk}/pagedata/", f"/api/comparisons/{c.pk}/export/?format=md",
                f"/profiles/{p.pk}/trace/", f"/api/profiles/{p.pk}/builds/"):
        assert client.get(url).status_code == 404, url
    # viewers read but cannot start comparisons
    client.force_login(world["viewer"])
    res = client.post(f"/projects/{world['project'].pk}/compare/",
                      {"base": p.pk, "candidate": world["after"].pk})
    assert res.status_code in (403, 404)


def test_views_missing_are_built_by_a_worker_while_the_page_shows_it(client, world) -> None:
    """A profile analysed before page data existed: its page renders what it has and says the views are
    being prepared (the build is queued, not run in the request); once a worker built them, the charts."""
    from analysis.models import PageBuild
    from analysis.page_builds import build_run
    from analysis.storage import delete_prefix

    p = world["after"]
    delete_prefix(f"{p.parquet_prefix}/views")
    client.force_login(world["owner"])
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    assert 'id="views-preparing"' in html and f'data-builds-url="/api/profiles/{p.pk}/builds/"' in html
    assert "chart-op-types" not in _json_scripts(html) and 'id="findings"' in html  # what it has
    assert "frontend/js/preparing.js" in html
    assert not default_storage.exists(f"{p.parquet_prefix}/views/pages.json")
    assert client.get(f"/api/profiles/{p.pk}/builds/").json()["views"]["status"] == "queued"
    timeline = client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    assert 'id="views-preparing"' in timeline and "timeline.js" not in timeline
    assert client.get(f"/api/profiles/{p.pk}/timeline/").status_code == 202
    assert client.get(f"/api/profiles/{p.pk}/pagedata/").status_code == 202
    assert PageBuild.objects.filter(profile=p).count() == 1  # one build however many pages asked
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    assert "工作进程正在准备图表和表格" in client.get(f"/profiles/{p.pk}/").content.decode()
    assert "工作进程正在准备时间线" in client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    client.post("/language/", {"language": "en", "next": "/"})
    build_run(build_id=PageBuild.objects.get(profile=p, kind="views").pk)
    assert client.get(f"/api/profiles/{p.pk}/builds/").json()["views"] == {"status": "ready", "error": "",
                                                                         "error_localized": ""}
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    assert "chart-op-types" in _json_scripts(html) and 'id="views-preparing"' not in html
    assert client.get(f"/api/profiles/{p.pk}/timeline/").status_code == 200


def test_language_switch_chinese(client, world) -> None:
    client.force_login(world["owner"])
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    html = client.get(f"/profiles/{world['before'].pk}/").content.decode()
    assert "发现" in html  # "Findings"
    assert "时间线" in html  # "timeline"
    # the top operators' blocks in the page's language; the filter's values stay the ids
    top = _json_scripts(html)["top-ops-data"]
    assert {(r["block"], r["block_text"]) for r in top} >= {("matmul", "MatMul"), ("norm", "Norm 归一化")}
