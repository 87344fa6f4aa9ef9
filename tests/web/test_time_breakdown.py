"""The profile page's "Where the time goes" card (pypto_core/attribution.py): the run's seven buckets in a
table whose times are the report's numbers (the findings API is the source of truth) printed as every time
on the page is, the wall time told apart from the time span, stacked bars per step and per rank, sampling
past 200 steps, and the workload / vendor / SKU-source words in the numbers row."""

from __future__ import annotations

import copy
import html as htmllib
import re
from typing import Any

import pytest

from pypto_core.durations import format_duration
from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with
from tests.web.test_pages import _json_scripts, analysed_profile

pytestmark = pytest.mark.django_db

BUCKETS = ("compute", "communication_not_overlapped", "memcpy", "sync_wait", "data_loading",
           "host_launch_bound", "idle_other")
EN_LABELS = ["Compute", "Communication (not overlapped)", "Memory copy", "Sync wait", "Data loading",
             "Host launch bound", "Other idle"]


@pytest.fixture
def ready(make_user, tmp_path, settings):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    project = project_with(owner)
    core = decoder_profile(planted=frozenset({"matmul_tiling"}), tokens=5, layers=2)
    return owner, analysed_profile(project, owner, core, tmp_path, "decode run")


def _table(html: str) -> dict[str, tuple[int, str, float, str]]:
    """bucket -> (ns, time as printed, %, label) as the page's table shows them."""
    body = re.search(r'<table class="grid small" id="time-table">(.*?)</table>', html, re.S)
    assert body, "the time table is on the page"
    rows = re.findall(r'<tr data-bucket="([a-z_]+)"><td><span class="swatch"[^>]*></span>'
                      r'<span class="bucket">([^<]*)</span></td>'
                      r'<td class="num ms" data-ns="(\d+)">([^<]+)</td>'
                      r'<td class="num pct">([^<]+)%</td></tr>', body.group(1))
    return {key: (int(ns), text, float(pct), htmllib.unescape(label)) for key, label, ns, text, pct in rows}


def _set_report_profile(profile: Any, **changes: Any) -> None:
    from profiles.models import Profile

    summary = copy.deepcopy(profile.summary)
    summary["report"]["profile"].update(changes)
    Profile.objects.filter(pk=profile.pk).update(summary=summary)


def test_table_and_chart_match_the_findings_api(client, ready) -> None:
    owner, p = ready
    client.force_login(owner)
    report = client.get(f"/api/profiles/{p.pk}/findings/").json()["profile"]
    tb, steps = report["time_breakdown"], report["steps"]
    assert tb["wall_ns"] > 0 and len(steps) == 5 and report["step_count"] == 5
    assert sum(tb[b] for b in BUCKETS) == tb["wall_ns"]

    html = client.get(f"/profiles/{p.pk}/").content.decode()
    table = _table(html)
    assert list(table) == list(BUCKETS)  # every bucket, in the stacking order
    for b in BUCKETS:
        ns, text, pct, label = table[b]
        assert ns == tb[b], (b, ns, tb[b])  # the report's own ns
        assert text == format_duration(tb[b], "ns"), (b, text)  # printed as every time on the page
        assert abs(pct - 100 * tb[b] / tb["wall_ns"]) <= 0.05 + 1e-9, (b, pct)
    assert [table[b][3] for b in BUCKETS] == EN_LABELS
    assert any(text.endswith(("\u00a0ms", "\u00a0µs")) for _ns, text, _p, _l in table.values())
    # every time has its unit, zero too ("Memory copy 0" read as a bare number)
    assert any(ns == 0 for ns, *_ in table.values()), "a bucket with no time: the case this checks"
    assert all(re.fullmatch(r"-?[\d.]+\u00a0(ns|µs|ms|s)", text)
               for _ns, text, _p, _l in table.values()), table
    wall = re.search(r'id="time-wall" data-ns="(\d+)">([^<]+)<', html)
    assert wall and int(wall.group(1)) == tb["wall_ns"] and wall.group(2) == format_duration(tb["wall_ns"])
    over = re.search(r'id="time-overlapped" data-ns="(\d+)">Communication overlapped with compute: ([^<]+)<',
                     html)
    assert over and int(over.group(1)) == tb["communication_overlapped"]
    assert over.group(2) == format_duration(tb["communication_overlapped"])
    # two different times, each named for what it is: the recording's span and the steps' wall time
    span = re.search(r'id="time-span"><b>([^<]+)</b><span>Time span · the whole recording, first event to '
                     r'last</span>', html)
    assert span and span.group(1) == format_duration(p.summary["duration_ns"])
    assert p.summary["duration_ns"] != tb["wall_ns"]  # they differ here too, so each needs its name
    hint = re.search(r'id="time-wall-hint">([^<]+)<', html)
    assert hint and "steps' windows" in hint.group(1) and "whole recording" in htmllib.unescape(hint.group(1))

    chart = _json_scripts(html)["chart-time-steps"]
    assert [s["name"] for s in chart["series"]] == EN_LABELS  # one series per bucket, in order
    assert all(s["type"] == "bar" and s["stack"] == "time" for s in chart["series"])
    colours = [s["itemStyle"]["color"] for s in chart["series"]]
    assert len(set(colours)) == 7
    assert chart["yAxis"]["data"] == [f"step {st['step_id']}" for st in steps]  # one category per step
    for s, b in zip(chart["series"], BUCKETS):
        assert s["data"] == pytest.approx([st["time_breakdown"][b] / 1e6 for st in steps], abs=1e-6)
    assert "chart-time-ranks" not in _json_scripts(html)  # one rank: no rank bars
    assert 'id="time-steps-sampled"' not in html

    # the numbers row names the workload and the vendor the report gives, in words
    assert (report["workload"], report["device_vendor"]) == ("llm_decode", "ascend")
    assert 'id="workload"><b>LLM decode</b>' in html and 'id="vendor"><b>Ascend (Huawei)</b>' in html


def test_many_steps_sampled_one_step_and_ranks(client, ready) -> None:
    owner, p = ready
    client.force_login(owner)
    base = p.summary["report"]["profile"]
    one = base["steps"][0]
    many = [dict(one, step_id=i) for i in range(1000)]
    ranks = [{"rank": r, "source": "timeline", "time_breakdown": base["time_breakdown"],
              "dominant_bucket": base["dominant_bucket"], "steps": []} for r in (0, 1, 3)]
    _set_report_profile(p, steps=many, rank_breakdowns=ranks, sku_source="unknown", device_vendor="nvidia",
                        workload="training")
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    data = _json_scripts(html)
    cats = data["chart-time-steps"]["yAxis"]["data"]
    assert len(cats) == 200 and cats[0] == "step 0" and cats[-1] == "step 999"  # capped, evenly, ends kept
    assert "dataZoom" in data["chart-time-steps"]
    assert "200 of 1000 steps shown, evenly sampled." in html
    assert data["chart-time-ranks"]["yAxis"]["data"] == ["rank 0", "rank 1", "rank 3"]
    assert len(data["chart-time-ranks"]["series"]) == 7
    assert 'data-source="unknown">unknown device: set the project\'s device<' in html
    assert 'id="workload"><b>Training</b>' in html and 'id="vendor"><b>NVIDIA</b>' in html

    _set_report_profile(p, steps=[one], rank_breakdowns=[], sku_source="default")
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    data = _json_scripts(html)
    assert data["chart-time-steps"]["yAxis"]["data"] == [f"step {one['step_id']}"]
    assert "dataZoom" not in data["chart-time-steps"] and "chart-time-ranks" not in data
    assert 'id="time-steps-sampled"' not in html
    assert "assumed (default)" in html


def test_bucket_labels_in_chinese(client, ready) -> None:
    owner, p = ready
    client.force_login(owner)
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    table = _table(html)
    assert [table[b][3] for b in BUCKETS] == ["计算", "未被掩盖的通信", "内存拷贝", "同步等待", "数据加载",
                                             "下发瓶颈 (Host 下发)", "其他空闲"]
    assert "时间跨度 · 整个采集" in html
    hint = re.search(r'id="time-wall-hint">([^<]+)<', html)
    assert hint and "各迭代的窗口" in hint.group(1) and "整个采集" in hint.group(1)
    assert [s["name"] for s in _json_scripts(html)["chart-time-steps"]["series"]][0] == "计算"
    assert "时间都去哪儿了" in html


def test_the_wait_headline_names_a_pipeline_bubble_and_a_lower_bound(client, ready) -> None:
    """The page's wait headline as the engine's reports word it: most of the wait in point-to-point
    send/receive reads as the pipeline bubble (not a late rank), and a wait whose collectives record no
    transfer says it counts only the notify Wait (at least), in both languages."""
    owner, p = ready
    client.force_login(owner)
    parts = {"elapse": 420174.26, "transit": 0.0, "wait": 164143.54, "idle": 256030.72,
             "transit_from_links": 0.0}
    _set_report_profile(p, peer_wait={"wait_us": 164143.54, "share_of_run": 0.2, "waiting_share": 0.390656,
                                      "communication_not_overlapped_us": 420174.26, "transit_recorded": False,
                                      "lower_bound": True, "p2p_share": 0.97, "ranks_in_profile": 1,
                                      "collectives": parts})
    html = client.get(f"/profiles/{p.pk}/").content.decode()
    head = re.search(r'id="peer-wait-headline".*?</div>', html, re.S).group(0)
    assert "the 39% of the collectives' time in notify Wait (164.1 ms of their 420.2 ms)" in head
    assert "(the pipeline bubble)" in head and "The late rank sets this wait" not in head
    assert "so their Idle (256.0 ms) may be data moving or waiting" in head
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    head = re.search(r'id="peer-wait-headline".*?</div>', client.get(f"/profiles/{p.pk}/").content.decode(),
                     re.S).group(0)
    assert "流水线气泡" in head and "只计入了等待（notify Wait），实际等待至少为此值" in head
