"""A newcomer's walk through the pages of real samples, in English and in Chinese, in real Chromium: the
Qwen3 4-NPU training ranks (cluster page), the CNN 8-NPU training rank and the A100 NCCL training trace
(profile, timeline) and their comparison. What the walk found, each asserted where it shows:

1. the communication matrix colours a link by its speed for its transport, not raw GB/s (the pipeline's
   100-byte send/recv handshakes were red like slow links), and says what a colour means;
2. top-operator names wrap at their separators, never inside a word piece;
3. a legend of a few series shows them all (the time buckets paged 1/2);
4. the timeline opens with the device lanes in view;
5. the comparison's op chart reads in the unit of the tables beside it (ms), labelled;
6. the top bar's tagline fits the profile's device and workload.

Screenshots go to test-artifacts/newcomer/ (looked at when the test was written).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_journey import browser_page, log_in  # noqa: F401  (fixture and helper)
from tests.paths import REPO, SAMPLES
from tests.web.helpers import project_with
from tests.web.test_cluster import analysed_sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = REPO / "test-artifacts" / "newcomer"
QWEN = SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2"
CNN = SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt"
A100 = SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz"

TAGLINES = {"en": {"ascend": "Tuning training on Ascend NPUs", "nvidia": "Tuning training on NVIDIA GPUs",
                   "both": "Tuning training on Ascend NPUs and NVIDIA GPUs",
                   "none": "Performance tuning for Ascend NPUs and GPUs"},
            "zh-hans": {"ascend": "昇腾 NPU 训练调优", "nvidia": "NVIDIA GPU 训练调优",
                        "both": "昇腾 NPU 与 NVIDIA GPU 训练调优", "none": "昇腾 NPU 与 GPU 性能调优"}}

# Per matrix cell (from rank, to rank): its colour-dimension value, the colour ECharts gave it, and the
# tooltip ECharts shows on it.
MATRIX_CELLS = """() => {
    const el = document.getElementById('cluster-matrix-chart'), chart = echarts.getInstanceByDom(el);
    const o = chart.getOption(), labels = o.yAxis[0].data;
    return o.series[0].data.map((d, i) => {
        chart.dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i});
        const tip = [...el.querySelectorAll('div')].filter(e => e.style.position === 'absolute'
            && e.style.display !== 'none' && e.innerText.includes('→')).map(e => e.innerText)[0] || '';
        return {from: labels[d.value[1]], to: labels[d.value[0]], share: d.value[3], tip: tip,
                colour: chart.getVisual({seriesIndex: 0, dataIndex: i}, 'color')};
    });
}"""

# Each piece of a long name (the text between two <wbr>) of the top-ops table on one line, unless that piece
# alone is wider than its column or longer than topops.js's NO_WRAP_MAX (24 characters: a mangled C++ symbol
# may break anywhere): a name broken inside a word piece is listed.
BROKEN_NAMES = """() => {
    const out = [];
    document.querySelectorAll('#top-ops tbody .clamp').forEach(c => {
        const width = c.getBoundingClientRect().width;
        const walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            for (const m of n.textContent.matchAll(/\\S+/g)) {  // a piece's words: a space may wrap
                const r = document.createRange();
                r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
                const lines = new Set([...r.getClientRects()].map(q => Math.round(q.top)));
                if (lines.size > 1 && m[0].length <= 24 && r.getBoundingClientRect().width < width)
                    out.push(m[0]);
            }
        }
        if (c.title !== c.textContent) out.push('title: ' + c.title);
    });
    return out;
}"""

LEGEND = """id => {
    const el = document.getElementById(id), o = echarts.getInstanceByDom(el).getOption();
    return {type: o.legend[0].type, entries: o.legend[0].data.length, lines: +el.dataset.legendLines,
            top: o.grid[0].top};
}"""

# The first device lane (a stream of the kernels table): where its label is, against the window and the
# lanes' scroll box, right after the timeline opens.
FIRST_DEVICE_LANE = """() => {
    const tl = document.getElementById('timeline').pyptoTimeline;
    const lane = tl.lanes.find(l => l.info.table === 'kernels');
    const row = document.querySelector(`.tl-lane[data-lane="${lane.lane}"]`).getBoundingClientRect();
    const box = document.querySelector('.tl-scroller').getBoundingClientRect();
    return {group: lane.info.group, top: row.top, bottom: row.bottom, box_bottom: box.bottom, h: innerHeight,
            groups: tl.groups.map(g => g.name)};
}"""


def charts_ready(page: Any) -> None:
    page.wait_for_function("() => [...document.querySelectorAll('[data-chart]')].every(e => e.dataset.ready "
                           "=== '1')")


def open_timeline(page: Any, profile_id: int) -> None:
    page.goto(f"{page.base}/profiles/{profile_id}/timeline/")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")


def test_a_newcomer_walks_the_real_samples_in_english_and_chinese(browser_page, make_user, settings,  # noqa: F811
                                                                  tmp_path) -> None:
    from analysis.comparisons import comparison_create, comparison_run
    from frontend import services

    if not QWEN.exists():
        pytest.skip("the real samples (../shared/samples) are not here")
    page = browser_page
    SHOTS.mkdir(parents=True, exist_ok=True)
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("lin")
    project = project_with(owner)
    log_in(page, "lin")
    qwen = analysed_sample(project, owner, QWEN, tmp_path / "qwen")
    cnn = analysed_sample(project, owner, CNN, tmp_path / "cnn")
    a100 = analysed_sample(project, owner, A100, tmp_path / "a100")
    comparison = comparison_create(user=owner, base=cnn, candidate=a100)
    comparison_run(comparison_id=comparison.pk)

    for lang in ("en", "zh-hans"):
        services.user_language_set(user=owner, language=lang)
        tag = TAGLINES[lang]

        def shot(name: str, selector: str | None = None, lang: str = lang) -> None:
            if selector:
                page.locator(selector).first.screenshot(path=str(SHOTS / f"{lang}-{name}.png"))
            else:
                page.screenshot(path=str(SHOTS / f"{lang}-{name}.png"), full_page=True)

        page.goto(f"{page.base}/projects/{project.pk}/")
        assert page.inner_text("#tagline") == tag["none"]  # no one profile: the product, neutral

        # 1, 3, 6: the Qwen3 ranks' cluster page
        page.goto(f"{page.base}/profiles/{qwen.pk}/cluster/")
        charts_ready(page)
        assert page.inner_text("#tagline") == tag["ascend"]
        cells = {(c["from"].split()[-1], c["to"].split()[-1]): c for c in page.evaluate(MATRIX_CELLS)}
        handshake, hccs, local = cells[("0", "2")], cells[("0", "1")], cells[("0", "0")]
        assert handshake["share"] == -1 and handshake["colour"] == "#cbd5e1", handshake  # grey, not red
        assert local["share"] == -2 and local["colour"] == "#bfdbfe", local
        assert hccs["colour"] == cells[("1", "0")]["colour"] == "#15803d", hccs  # as fast as each other
        if lang == "en":
            assert "not rated" in handshake["tip"] and "latency" in handshake["tip"], handshake
            assert "median of the 2 HCCS links" in hccs["tip"], hccs
        else:
            assert "不评级" in handshake["tip"] and "中位数" in hccs["tip"], (handshake, hccs)
        assert page.locator("#matrix-colour-hint").is_visible()
        ranks = page.evaluate(LEGEND, "cluster-ranks-chart")
        assert ranks["type"] == "plain" and ranks["entries"] == 7, ranks  # every bucket, none paged away
        assert ranks["top"] == 36 + (ranks["lines"] - 1) * 24, ranks  # the plot moved down for each line
        shot("cluster")
        shot("cluster-matrix", "#cluster-matrix-chart")

        # 2, 3, 6: the profile pages, at the narrowest page width too
        for name, profile, vendor in (("qwen", qwen, "ascend"), ("cnn", cnn, "ascend"),
                                      ("a100", a100, "nvidia")):
            page.goto(f"{page.base}/profiles/{profile.pk}/")
            charts_ready(page)
            assert page.inner_text("#tagline") == tag[vendor]
            steps = page.evaluate(LEGEND, "time-steps-chart")
            assert steps["type"] == "plain" and steps["entries"] == 7, steps
            for width in (1280, 1100):
                page.set_viewport_size({"width": width, "height": 900})
                assert page.evaluate(BROKEN_NAMES) == [], (name, width)
                shot(f"{name}-top-ops-{width}", ".scroll:has(#top-ops)")
            page.set_viewport_size({"width": 1280, "height": 900})
            shot(f"{name}-time", "#time-breakdown")

        # 4, 6: each timeline opens with its device lanes on the first screen
        for name, profile, vendor, device in (("cnn", cnn, "ascend", "NPU"), ("a100", a100, "nvidia", "GPU")):
            open_timeline(page, profile.pk)
            assert page.inner_text("#tagline") == tag[vendor]
            lane = page.evaluate(FIRST_DEVICE_LANE)
            assert lane["group"].startswith(device), lane
            assert 0 < lane["top"] and lane["bottom"] <= min(lane["h"], lane["box_bottom"]), lane
            assert lane["groups"].index(lane["group"]) == 1, lane  # right under the step markers
            page.screenshot(path=str(SHOTS / f"{lang}-timeline-{name}.png"))  # the first screen, as opened

        # 5, 6: the comparison's chart in the tables' unit
        page.goto(f"{page.base}/comparisons/{comparison.pk}/")
        charts_ready(page)
        assert page.inner_text("#tagline") == tag["both"]
        axis = page.evaluate("() => echarts.getInstanceByDom(document.getElementById('ops-chart'))"
                             ".getOption().xAxis[0].name")
        assert axis == ("ms per step" if lang == "en" else "每个迭代的 ms"), axis
        first = page.locator("#ops-table tbody tr").first.locator("td.num").first.inner_text()
        assert first.endswith("\u00a0ms"), first  # the table beside it prints the largest time in ms
        tip = page.evaluate("""() => {
            const el = document.getElementById('ops-chart'), chart = echarts.getInstanceByDom(el);
            const n = chart.getOption().yAxis[0].data.length;
            chart.dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: n - 1});
            const texts = [...el.querySelectorAll('div')].map(e => e.innerText);
            return texts.filter(t => t.includes('—')).pop() || '';
        }""")
        assert " ms" in tip and "µs" not in tip, tip
        shot("comparison-ops", "#ops-chart")
    assert page.errors == [] and page.dialogs == []
