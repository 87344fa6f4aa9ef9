"""The profile page's "Where the time goes" card (pypto_core/attribution.py): the run's seven buckets in a
table whose ms figures are the report's numbers (the findings API is the source of truth), stacked bars per
step and per rank, sampling past 200 steps, and the workload / vendor / SKU-source words in the numbers
row."""

from __future__ import annotations

import copy
import html as htmllib
import re
from typing import Any

import pytest

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


def _table(html: str) -> dict[str, tuple[float, float, str]]:
    """bucket -> (ms, %, label) as the page's table shows them."""
    body = re.search(r'<table class="grid small" id="time-table">(.*?)</table>', html, re.S)
    assert body, "the time table is on the page"
    rows = re.findall(r'<tr data-bucket="([a-z_]+)"><td><span class="swatch"[^>]*></span>'
                      r'<span class="bucket">([^<]*)</span></td>'
                      r'<td class="num ms">([^<]+)</td><td class="num pct">([^<]+)%</td></tr>', body.group(1))
    return {key: (float(ms), float(pct), htmllib.unescape(label)) for key, label, ms, pct in rows}


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
        ms, pct, label = table[b]
        assert abs(ms - tb[b] / 1e6) <= 0.0005 + 1e-12, (b, ms, tb[b])  # the report's ns, in ms (3 decimals)
        assert abs(pct - 100 * tb[b] / tb["wall_ns"]) <= 0.05 + 1e-9, (b, pct)
    assert [table[b][2] for b in BUCKETS] == EN_LABELS
    wall = re.search(r'id="time-wall-ms">([^<]+)<', html)
    assert wall and abs(float(wall.group(1)) - tb["wall_ns"] / 1e6) <= 0.0005 + 1e-12
    over = re.search(r'id="time-overlapped">[^<]*?([0-9.]+) ms', html)
    assert over and abs(float(over.group(1)) - tb["communication_overlapped"] / 1e6) <= 0.0005 + 1e-12

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
    assert [table[b][2] for b in BUCKETS] == ["计算", "未被掩盖的通信", "内存拷贝", "同步等待", "数据加载",
                                             "下发瓶颈 (Host 下发)", "其他空闲"]
    assert [s["name"] for s in _json_scripts(html)["chart-time-steps"]["series"]][0] == "计算"
    assert "时间都去哪儿了" in html
