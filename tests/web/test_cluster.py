"""The cluster page and ``GET /api/profiles/{id}/cluster/`` on real samples taken through the real diagnose
step: Qwen3 (the two ranks the sample keeps of its 4 NPUs), CNN 8-NPU (one rank with its matrix to all 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile

from tests.paths import SAMPLES
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db


def analysed_sample(project: Any, owner: Any, folder: Path, tmp: Path) -> Any:
    """Every rank of a real sample saved as the pipeline saves them, then diagnosed in this process."""
    from analysis.pipeline.diagnose import pipeline_diagnose
    from analysis.storage import store_folder
    from profiles.models import Profile, ProfileStatus
    from pypto_core.formats import open_profiles

    group = open_profiles(folder)
    profile = Profile.objects.create(project=project, name=folder.name, original_filename="p.zip",
                                     upload_kind="zip", created_by=owner, status=ProfileStatus.ANALYZING,
                                     progress=60)
    profile.archive.save("p.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18), save=True)
    local = tmp / f"pq-{profile.pk}"
    folders = []
    for i, core in enumerate(group.profiles):
        folders.append(f"rank_{i}")
        core.save(local / folders[-1])
    prefix = f"projects/{project.pk}/parquet/{profile.pk}/t"
    store_folder(local, prefix)
    summary = group.primary().summary()
    summary.update({"ranks": len(folders), "rank_folders": folders})
    Profile.objects.filter(pk=profile.pk).update(parquet_prefix=prefix, summary=summary)
    pipeline_diagnose(profile_id=profile.pk)
    profile.refresh_from_db()
    assert profile.status == ProfileStatus.READY, profile.error
    return profile


@pytest.fixture
def people(make_user, settings, tmp_path):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner, stranger = make_user("owner"), make_user("stranger")
    return {"owner": owner, "stranger": stranger, "project": project_with(owner)}


def test_qwen3_ranks_share_one_axis_with_the_report_breakdowns(client, people, tmp_path) -> None:
    p = analysed_sample(people["project"], people["owner"],
                        SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2", tmp_path)
    client.force_login(people["owner"])
    data = client.get(f"/api/profiles/{p.pk}/cluster/").json()
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert data["aligned_on_step"] == 13
    assert {r["steps"][0]["start_ns"] for r in data["ranks"]} == {0}  # aligned on step 13
    # one number per concept: the rows carry the report's own per-rank breakdowns
    report = p.summary["report"]["profile"]["rank_breakdowns"]
    assert [r["time_breakdown"] for r in data["ranks"]] == [r["time_breakdown"] for r in report]
    assert data["links"] and data["matrix_source"] == "communication_matrix.json"
    assert {x["src"] for x in data["links"]} >= {0, 1}
    html = client.get(f"/profiles/{p.pk}/cluster/").content.decode()
    assert 'id="cluster-strip"' in html and "chart-cluster-matrix" in html and "chart-cluster-ranks" in html
    assert "step 13" in html or "Clocks aligned on the start of step 13" in html
    timeline = client.get(f"/profiles/{p.pk}/timeline/").content.decode()
    assert f'href="/profiles/{p.pk}/cluster/"' in timeline
    # the two ranks' free time differs by 21.7 ms in an 810 ms step (2.7%, under the advisor's 5% of the
    # step): no slow rank, said in the page's language
    assert data["slow_rank"] is None
    assert "No slow rank: no kind of time" in html.split('id="slow-rank"')[1].split("</li>")[0]
    zh = client.get(f"/profiles/{p.pk}/cluster/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    slow = zh.split('id="slow-rank"')[1].split("</li>")[0]
    assert "无慢卡" in slow and "No slow rank" not in slow
    # the profile page leads with the wait for other ranks; with every rank in the upload it points to this
    # page instead of asking for an upload (and in Chinese, from the Django catalog)
    wait = p.summary["report"]["profile"]["peer_wait"]
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    head = page.split('id="peer-wait-headline"')[1].split("</div>")[0]
    assert f"This rank waits {wait['wait_us'] / 1e3:.1f} ms" in head
    assert f'<a id="peer-wait-cluster" href="/profiles/{p.pk}/cluster/">This upload holds 2 ranks' in head
    assert "Upload every rank" not in head
    zh_page = client.get(f"/profiles/{p.pk}/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    zh_head = zh_page.split('id="peer-wait-headline"')[1].split("</div>")[0]
    assert f"本 Rank 在集合通信中等待其他 Rank {wait['wait_us'] / 1e3:.1f} ms" in zh_head
    assert "本次上传含 2 个 Rank" in zh_head and "This rank" not in zh_head
    client.force_login(people["stranger"])
    assert client.get(f"/api/profiles/{p.pk}/cluster/").status_code == 404
    assert client.get(f"/profiles/{p.pk}/cluster/").status_code == 404


def test_cnn_8npu_one_rank_with_its_links_to_all_eight(client, people, tmp_path) -> None:
    p = analysed_sample(people["project"], people["owner"],
                        SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt", tmp_path)
    client.force_login(people["owner"])
    data = client.get(f"/api/profiles/{p.pk}/cluster/").json()
    assert len(data["ranks"]) == 1 and data["ranks"][0]["timeline_profile"] == p.pk
    assert data["link_ranks"] == list(range(8))
    assert (data["slowest_link"]["src"], data["slowest_link"]["dst"]) == (0, 7)
    html = client.get(f"/profiles/{p.pk}/cluster/").content.decode()
    # its slowest HCCS link moves at 98% of the median: the slowest of even links, not a slow one
    link = html.split('id="slow-link"')[1].split("</li>")[0]
    assert 'data-slow="0"' in link and "No slow link: the slowest, rank 0 → rank 7 at 14.8 GB/s" in link
    # one rank: the page says why it names no slow rank, not that the rule found none
    slow = html.split('id="slow-rank"')[1].split("</li>")[0]
    assert "this upload holds one rank" in slow and "threshold" not in slow


def test_the_matrix_colours_each_link_by_its_speed_for_its_transport() -> None:
    """The colour is a link's bandwidth against the median of its transport's links, never raw GB/s: the raw
    scale painted the Qwen3 pipeline stages' 100-byte send/recv handshakes (0.06 GB/s, timed by latency) red
    like slow links, and ECharts' default (a cell's last column, the time in ms) painted the CNN's links all
    red. Handshakes under 1 MB and a rank's copy to itself are not rated; each band says what it means."""
    from frontend.charts import MATRIX_LOCAL, MATRIX_SMALL, communication_matrix_chart

    def link(src: int, dst: int, gbps: float, mb: float, transport: str) -> dict[str, object]:
        return {"src": src, "dst": dst, "bandwidth_gbps": gbps, "size_mb": mb, "time_ms": mb / gbps,
                "transport": transport}

    links = [link(0, 0, 420.0, 3566.0, "LOCAL"), link(0, 1, 15.2, 2405.0, "HCCS"),
             link(0, 2, 14.8, 1127.0, "HCCS"), link(0, 3, 6.0, 900.0, "HCCS"),
             link(1, 2, 0.0774, 0.0001, "HCCS"), link(1, 3, 2.0, 500.0, "RDMA")]
    chart = communication_matrix_chart(links, [0, 1, 2, 3])
    series, scale = chart["series"][0], chart["visualMap"]
    colour_by = scale["dimension"]
    assert series["encode"]["value"] == 2 and colour_by == 3  # the cell prints GB/s, its colour the share
    cells = {(d["value"][1], d["value"][0]): d for d in series["data"]}  # (from, to)
    share = {k: d["value"][colour_by] for k, d in cells.items()}

    def band(value: float) -> str:
        for piece in scale["pieces"]:
            if piece.get("value") == value or ("value" not in piece and piece.get("gte", -1e9) <= value
                                               < piece.get("lt", 1e9)):
                return piece["color"]
        raise AssertionError(value)

    # links 3% apart read alike (as fast as their peers), a link at 40% of its transport's median is red
    assert band(share[(0, 1)]) == band(share[(0, 2)]) == "#15803d"
    assert share[(0, 3)] == 40.5 and band(share[(0, 3)]) == "#b91c1c"
    # a handshake and the local copy are not rated, whatever their GB/s; RDMA is read against RDMA only
    assert share[(1, 2)] == MATRIX_SMALL and share[(0, 0)] == MATRIX_LOCAL
    assert band(MATRIX_SMALL) != band(0) and share[(1, 3)] == 100
    # what each colour means is in the legend and in the cell's tooltip
    assert any("latency-bound" in p["label"] for p in scale["pieces"])
    assert "not rated" in cells[(1, 2)]["tip"] and "median of the 3 HCCS links" in cells[(0, 3)]["tip"]
    assert cells[(0, 0)]["value"][2] == 420.0 and communication_matrix_chart(
        [link(0, 1, 123.0255, 10.0, "HCCS")], [0, 1])["series"][0]["data"][0]["value"][2] == 123.0  # 3 digits


def test_the_worker_attributes_a_rank_once_for_its_findings_page_and_timeline(people, tmp_path,
                                                                              monkeypatch) -> None:
    # The findings, the page's breakdown and the timeline's critical path stand on one attribution: the
    # worker's diagnose step computes it once (it computed it three times, a second of CPU a GB).
    import pypto_core.attribution
    import pypto_core.graph

    calls: list[int] = []
    real = pypto_core.attribution.attribute

    def counted(profile: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(profile.kernels.num_rows)
        return real(profile, *args, **kwargs)

    monkeypatch.setattr(pypto_core.attribution, "attribute", counted)
    monkeypatch.setattr(pypto_core.graph, "attribute", counted)
    p = analysed_sample(people["project"], people["owner"], SAMPLES / "ascend_pt" / "cnn_8npu_text_level2",
                        tmp_path)
    assert len(calls) == 1, calls
    from analysis.pagedata import timeline_index

    critical = timeline_index(profile=p).critical()
    assert critical["available"] and critical["segments"]["start"]  # the path, built on that attribution
