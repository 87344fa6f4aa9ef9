"""Every real sample and the demo in the real app and real Chromium: the timeline fills the screen with its
ruler visible, groups fold and unfold, a hidden lane stays hidden after a reload (kept server-side), the
CNN 8-NPU sample opens with at most 40 lanes; the cluster page of the Qwen3 ranks. Screenshots of each state
go to test-artifacts/timeline-samples/ (looked at when the test was written)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_journey import browser_page, log_in  # noqa: F401  (fixture and helper)
from tests.paths import REPO, SAMPLES
from tests.web.helpers import project_with
from tests.web.test_cluster import analysed_sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = REPO / "test-artifacts" / "timeline-samples"
CNN = SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt"


def sample_folders() -> list[Path]:
    from pypto_core.errors import InputError
    from pypto_core.formats.detect import detect

    out = []
    for kind in ("ascend_pt", "msprof", "kineto"):
        for p in sorted(q for q in (SAMPLES / kind).iterdir() if q.is_dir()):
            try:
                detect(p)
            except InputError:
                continue
            out.append(p)
    return out


def open_timeline(page: Any, profile_id: int) -> None:
    page.goto(f"{page.base}/profiles/{profile_id}/timeline/")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")
    page.wait_for_timeout(200)  # the widget asks for the fitted window 60 ms after the first answer
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")


def fits_the_screen(page: Any) -> None:
    box = page.evaluate("""() => {
        const r = document.getElementById('timeline').getBoundingClientRect();
        const q = document.querySelector('.tl-ruler').getBoundingClientRect();
        return {bottom: r.bottom, width: r.width, ruler_top: q.top, ruler_bottom: q.bottom, h: innerHeight,
                w: innerWidth};
    }""")
    assert box["bottom"] <= box["h"] and box["width"] >= box["w"] - 80, box  # the whole window
    assert 0 <= box["ruler_top"] and box["ruler_bottom"] <= box["h"], box
    page.locator(".tl-scroller").evaluate("s => s.scrollTop = s.scrollHeight")  # the ruler stays put
    again = page.evaluate("document.querySelector('.tl-ruler').getBoundingClientRect().top")
    assert again == box["ruler_top"]
    page.locator(".tl-scroller").evaluate("s => s.scrollTop = 0")


@pytest.fixture
def owner_page(browser_page, make_user, settings, tmp_path):  # noqa: F811
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("lin")
    project = project_with(owner)
    log_in(browser_page, "lin")
    return browser_page, owner, project


def test_every_real_sample_and_the_demo_fit_the_screen(owner_page, tmp_path) -> None:
    from pypto_core.synth import demo_pair

    page, owner, project = owner_page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    before, _after = demo_pair(tmp_path / "demo")
    from pypto_core.errors import InputError

    opened, unreadable = [], []
    for folder in sample_folders() + [Path(before)]:
        try:
            profile = analysed_sample(project, owner, folder, tmp_path / folder.name)
        except InputError:  # msprof/file_naming_placeholders: zero-byte files, unreadable by design
            unreadable.append(folder.name)
            continue
        open_timeline(page, profile.pk)
        fits_the_screen(page)
        lanes = int(page.get_attribute("#timeline", "data-visible-lanes"))
        assert lanes >= 1
        name = "demo" if folder == Path(before) else f"{folder.parent.name}-{folder.name}"
        page.screenshot(path=str(ARTIFACTS / f"sample-{name}.png"))
        opened.append(name)
    assert unreadable == ["file_naming_placeholders"]
    assert len(opened) >= 15 and page.errors == [] and page.dialogs == []


def saved_since(page: Any, before: str | None) -> str:
    """Wait until the timeline saved its layout after ``before`` (its data-saved then; None: never saved),
    and return the new mark. Reading the mark right after a change raced the save's answer under load."""
    page.wait_for_function(
        f"() => (document.getElementById('timeline').dataset.saved || '') !== {(before or '')!r}")
    return page.get_attribute("#timeline", "data-saved")


def test_cnn_groups_fold_and_hidden_lanes_stay_hidden_after_reload(owner_page, tmp_path) -> None:
    page, owner, project = owner_page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = analysed_sample(project, owner, CNN, tmp_path)
    open_timeline(page, profile.pk)
    fits_the_screen(page)
    first = int(page.get_attribute("#timeline", "data-visible-lanes"))
    assert first <= 40, first  # 118 lanes in the trace; 83 counters that never change start hidden
    assert "(83)" in page.inner_text(".tl-hidden-menu summary")
    assert "?" not in page.inner_text(".tl-labels")
    page.screenshot(path=str(ARTIFACTS / "cnn-1-first-view.png"))
    # keys work from page focus, without clicking the canvas
    page.mouse.move(5, 5)
    ns_before = int(page.get_attribute("#timeline", "data-ns-per-px"))
    page.keyboard.press("w")
    page.wait_for_function(f"() => +document.getElementById('timeline').dataset.nsPerPx < {ns_before}")
    page.keyboard.press("f")  # nothing selected: fits every event again
    # fold the host process group, then unfold it; each change is saved (a PUT that may answer late)
    never_saved = page.get_attribute("#timeline", "data-saved")
    head = page.locator(".tl-group", has_text="Host process")
    head.click()
    page.wait_for_function(f"() => +document.getElementById('timeline').dataset.visibleLanes < {first}")
    assert page.locator(".tl-group", has_text="Host process").get_attribute("aria-expanded") == "false"
    page.screenshot(path=str(ARTIFACTS / "cnn-2-host-folded.png"))
    folded = saved_since(page, never_saved)
    page.locator(".tl-group", has_text="Host process").click()
    page.wait_for_function(f"() => +document.getElementById('timeline').dataset.visibleLanes == {first}")
    saved_since(page, folded)
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")  # no redraw pending
    # hide the communication lane; the layout is saved server-side and survives a reload. The button shows
    # on hover or focus (CSS); the lanes are redrawn on every fetch, so the click is sent to the button itself
    saved = page.get_attribute("#timeline", "data-saved")
    page.locator(".tl-lane", has_text="allReduce").locator(".tl-hide").dispatch_event("click")
    saved_since(page, saved)
    assert page.locator(".tl-lane", has_text="allReduce").count() == 0
    page.reload()
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.locator(".tl-lane", has_text="allReduce").count() == 0
    assert int(page.get_attribute("#timeline", "data-visible-lanes")) == first - 1
    page.click(".tl-hidden-menu summary")
    page.screenshot(path=str(ARTIFACTS / "cnn-3-hidden-after-reload.png"))
    # measure a range on the ruler: its duration shows, and F zooms to it
    ruler = page.locator(".tl-ruler").bounding_box()
    page.mouse.move(ruler["x"] + 400, ruler["y"] + 10)
    page.mouse.down()
    page.mouse.move(ruler["x"] + 700, ruler["y"] + 10, steps=5)
    page.mouse.up()
    assert int(page.get_attribute("#timeline", "data-selection-ns")) > 0
    page.screenshot(path=str(ARTIFACTS / "cnn-4-measured.png"))
    assert page.errors == [] and page.dialogs == []


def test_cluster_page_of_the_qwen3_ranks_opens_a_rank_timeline_at_its_step(owner_page, tmp_path) -> None:
    page, owner, project = owner_page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = analysed_sample(project, owner, SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2",
                              tmp_path)
    page.goto(f"{page.base}/profiles/{profile.pk}/cluster/")
    page.wait_for_selector("#cluster-strip[data-ready='1']")
    page.wait_for_function("() => [...document.querySelectorAll('[data-chart]')].every(e => e.dataset.ready "
                           "=== '1')")
    assert page.locator(".cs-row").count() == 2
    # every rank label whole in its column (rank 1's "no timestamps" note ran under the track), the why
    # told once under the strip, and the page as wide as the other pages, not the whole window
    layout = page.evaluate("""() => ({
        labels: [...document.querySelectorAll('.cs-label')].map(l => [l.scrollWidth, l.clientWidth,
                                                                       l.textContent]),
        main: document.querySelector('main').getBoundingClientRect().width, window: innerWidth})""")
    assert all(sw <= cw for sw, cw, _text in layout["labels"]), layout
    assert "no timestamps" in layout["labels"][1][2] and page.locator("#cluster-untimed").is_visible()
    assert layout["main"] <= 1100 < layout["window"], layout  # .page's max-width (app.css)
    page.screenshot(path=str(ARTIFACTS / "cluster-qwen3.png"), full_page=True)
    step = page.locator(".cs-row[data-rank='0'] a.cs-step").first
    assert step.count() == 1
    step.click()
    page.wait_for_url(re.compile(r".*/timeline/#abs=\d+,\d+$"))
    page.wait_for_selector("#timeline[data-ready='1']")
    view = page.evaluate("({...document.getElementById('timeline').pyptoTimeline.view})")
    assert view["end"] > view["start"]
    page.screenshot(path=str(ARTIFACTS / "cluster-qwen3-rank0-timeline.png"))
    assert page.errors == [] and page.dialogs == []


CRITICAL_PIXEL = """() => {
    // the colour drawn at the middle of the first critical task segment in view (device pixels)
    const tl = document.getElementById('timeline').pyptoTimeline, g = tl.critical.segments;
    for (let i = 0; i < g.start.length; i++) {
        const lane = tl.laneById[g.lane[i]];
        if (!lane || tl.critical.kinds[g.kind[i]] !== 'task') continue;
        const x = tl.x(g.start[i] + g.dur[i] / 2);
        if (x < 200 || x > tl.cssW - 5 || tl.x(g.start[i] + g.dur[i]) - tl.x(g.start[i]) < 6) continue;
        const y = lane.y + Math.min(g.depth[i], lane.info.rows - 1) * 18 + 9;
        const dpr = window.devicePixelRatio || 1;
        return Array.from(tl.ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data);
    }
    return null;
}"""


SCROLL_TO_LANE = """name => {
    const lane = [...document.querySelectorAll('.tl-lane')].find(e => e.textContent.includes(name));
    if (lane) lane.scrollIntoView({block: 'center'});
}"""


def test_critical_path_toggle_highlights_the_path_and_counter_labels_clear_the_area(owner_page,
                                                                                    tmp_path) -> None:
    page, owner, project = owner_page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = analysed_sample(project, owner, CNN, tmp_path)
    open_timeline(page, profile.pk)
    button = page.locator(".tl-critical")
    assert button.get_attribute("aria-pressed") == "false"
    page.screenshot(path=str(ARTIFACTS / "critical-0-off.png"))
    button.click()
    page.wait_for_function("() => +(document.getElementById('timeline').dataset.criticalDrawn || 0) > 0")
    assert button.get_attribute("aria-pressed") == "true"
    assert "Critical path of step 50" in page.inner_text(".tl-critical-info")  # ProfilerStep#50
    r, g, b, _a = page.evaluate(CRITICAL_PIXEL)
    assert r > 150 and g < 90 and b < 90, (r, g, b)  # a path task is drawn in red over the dimmed lanes
    page.screenshot(path=str(ARTIFACTS / "critical-1-on.png"))
    page.evaluate(SCROLL_TO_LANE, "Stream 2")  # in one step: the lanes are redrawn on every fetch
    page.screenshot(path=str(ARTIFACTS / "critical-1b-on-device.png"))
    page.locator(".tl-scroller").evaluate("s => s.scrollTop = 0")
    # zoomed in, the path is asked for again with the window
    before = page.get_attribute("#timeline", "data-critical")
    page.keyboard.press("w")
    page.keyboard.press("w")
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")
    assert int(page.get_attribute("#timeline", "data-critical")) >= 1 and before
    button.click()
    assert page.get_attribute("#timeline", "data-critical") is None
    assert page.inner_text(".tl-critical-info") == ""
    # a counter lane: its max-value label sits in a band above the area, never on the line
    boxes = page.evaluate("""() => {
        const tl = document.getElementById('timeline').pyptoTimeline;
        return tl.lanes.filter(l => l.info.kind === 'counter').map(l => tl.counterBox(l));
    }""")
    assert boxes and all(b["labelBottom"] < b["areaTop"] < b["base"] for b in boxes)
    page.evaluate(SCROLL_TO_LANE, "(MB)")
    page.screenshot(path=str(ARTIFACTS / "critical-2-counters.png"))
    assert page.errors == [] and page.dialogs == []
