"""The dashboard in real Chromium against the live Django server and a real Celery worker.

Journey: log in, upload the simulated before/after pair (synth demo_pair, zipped), wait for ready, open the
profile, zoom the timeline and click a kernel, download a patch, compare the pair and export it.
Hostile names: a profile whose op names are markup shows them as text in pages, tables and chart tooltips,
and no dialog ever fires. Screenshots of each page go to test-artifacts/pages/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WAIT_LIMIT_S
from tests.paths import REPO
from tests.web.helpers import project_with, zip_folder

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts" / "pages"
PASSWORD = "pw-for-tests-1"
WAIT_MS = int(WAIT_LIMIT_S * 1000)  # a ceiling for a busy 2-core machine, not an expectation


@pytest.fixture
def browser_page(live_server, monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls stay synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed")
    # ECharts is the app's own asset (setup.sh installs it before every test run): missing is a failure
    assert (REPO / "frontend" / "static" / "vendor" / "echarts" / "echarts.min.js").exists(), \
        "ECharts is not installed: run scripts/setup.sh"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"])
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.dialogs = []
        page.errors = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        # A script or style the pages' Content-Security-Policy refuses is an error too (issue 17).
        page.on("console",
                lambda m: page.errors.append(m.text) if "Content Security Policy" in m.text else None)
        page.base = live_server.url
        yield page
        browser.close()


def log_in(page: Any, username: str) -> None:
    page.goto(page.base + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def upload(page: Any, project_id: int, archive: Path, name: str) -> int:
    page.goto(f"{page.base}/projects/{project_id}/upload/")
    page.set_input_files("#file", str(archive))
    page.fill("#name", name)
    page.click("#send")
    page.wait_for_url(re.compile(r".*/profiles/\d+/$"), timeout=WAIT_MS)
    return int(re.search(r"/profiles/(\d+)/", page.url).group(1))


def wait_ready(page: Any, worker: Any) -> None:
    """The status page polls and reloads itself when the pipeline ends; the analysis section appears."""
    try:
        page.wait_for_selector("#analysis, #error:not([hidden])", timeout=WAIT_MS)
    except Exception as exc:
        raise AssertionError("profile did not become ready\nworker log:\n" + worker.tail()) from exc
    assert page.locator("#analysis").count() == 1, page.inner_text("#error") + "\n" + worker.tail()


def charts_ready(page: Any) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-chart]')].every(e => e.dataset.ready === '1')")


def widest_kernel(page: Any, single: bool = True) -> dict | None:
    """Page coordinates of the widest visible single kernel (a lane of the kernels table) on the timeline."""
    return page.evaluate("""(single) => {
        const tl = document.getElementById('timeline').pyptoTimeline, d = tl.data;
        let best = null;
        for (const t of d.tracks) {
            if (t.kind !== 'slices') continue;
            const lane = tl.laneById[t.lane];
            if (!lane || lane.info.table !== 'kernels') continue;
            for (let i = 0; i < t.start.length; i++) {
                if (single && t.count[i] > 1) continue;
                const x0 = Math.max(tl.x(t.start[i]), 190);
                const x1 = Math.min(tl.x(t.start[i] + t.dur[i]), tl.cssW);
                if (x1 - x0 > 1 && (!best || x1 - x0 > best.w)) {
                    const r = tl.canvas.getBoundingClientRect();
                    best = {x: r.left + (x0 + x1) / 2, y: r.top + lane.y + t.depth[i] * 18 + 9, w: x1 - x0,
                            name: d.names[t.name[i]]};
                }
            }
        }
        return best;
    }""", single)


def test_upload_takes_a_file_chosen_before_its_script_ran(browser_page, make_user, tmp_path) -> None:
    """A file set before upload.js attached its listener (a slow load; the browser restoring the form on
    back or reload) fired its change event to no one: the script takes it up when it starts. CI once saw the
    Upload button stay disabled this way."""
    page = browser_page
    owner = make_user("kai")
    project = project_with(owner)
    log_in(page, "kai")
    page.route("**/upload*.js", lambda route: route.abort())  # the page loads without its script
    page.goto(f"{page.base}/projects/{project.pk}/upload/")
    archive = tmp_path / "run.pt.trace.json"
    archive.write_text("{}")
    page.set_input_files("#file", str(archive))
    assert page.locator("#send").is_disabled()
    page.unroute("**/upload*.js")
    page.add_script_tag(url=page.get_attribute("script[src*=upload]", "src"))  # now the script runs
    page.wait_for_function("() => !document.getElementById('send').disabled", timeout=10_000)
    assert "run.pt.trace.json" in page.inner_text("#drop-text")
    # the name is left to the server, which drops the suffix (``default_profile_name``)
    assert page.input_value("#name") == "" and "without its extension" in page.get_attribute("#name",
                                                                                             "placeholder")


@pytest.fixture(scope="module")
def demo_archives(tmp_path_factory) -> tuple[Path, Path]:
    from pypto_core.synth import demo_pair

    root = tmp_path_factory.mktemp("demo")
    before, after = demo_pair(root / "pair")
    return zip_folder(before, root / "before.zip"), zip_folder(after, root / "after.zip")


def test_journey_upload_profile_timeline_patch_compare(worker, browser_page, make_user,
                                                       demo_archives) -> None:
    page = browser_page
    owner = make_user("mei")
    project = project_with(owner)
    log_in(page, "mei")

    before_id = upload(page, project.pk, demo_archives[0], "llama before")
    wait_ready(page, worker)
    charts_ready(page)
    assert page.locator("#simulated").is_visible()  # the simulated mark is shown clearly
    assert "910B3" in page.inner_text("#numbers")
    assert page.locator("#findings .finding").count() >= 4
    assert int(page.inner_text("#top-ops-count")) > 10
    page.select_option("#f-type", "MatMulV2")
    page.wait_for_function("() => document.querySelectorAll('#top-ops tbody tr').length > 0")
    first_cells = page.locator("#top-ops tbody tr td:first-child").all_inner_texts()
    assert {t.strip() for t in first_cells} == {"MatMulV2"}
    page.select_option("#f-type", "")
    # tick two findings and replay them fixed together: the app's what-if API answers in the page
    boxes = page.locator(".whatif-pick input")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.click("#whatif-run")
    page.wait_for_function(
        "() => document.getElementById('whatif-result').textContent.startsWith('Replayed:')")
    assert "faster" in page.inner_text("#whatif-result")
    page.screenshot(path=str(ARTIFACTS / "1-profile.png"), full_page=True)
    # the time table fits its column (its English header used to push it 16px out of the card), and each
    # finding's replay pick and rule id sit on one line beside the title (a global label style broke them)
    table, box = page.evaluate("() => { const t = document.getElementById('time-table');"
                               " return [t.scrollWidth, t.parentElement.clientWidth]; }")
    assert table <= box, f"time table {table}px wide in a {box}px column"
    picks = page.evaluate("() => [...document.querySelectorAll('.finding > .row > .hint')].map(e =>"
                          " e.getClientRects().length === 1 && e.getBoundingClientRect().height < 30)")
    assert picks and all(picks), picks
    # at the narrowest page width the top-ops table fits its card: long names and shapes wrap
    page.set_viewport_size({"width": 1100, "height": 900})
    table, box = page.evaluate("() => { const t = document.getElementById('top-ops');"
                               " return [t.scrollWidth, t.parentElement.clientWidth]; }")
    assert table <= box, f"top-ops table {table}px wide in a {box}px card"
    page.locator("#top-ops").screenshot(path=str(ARTIFACTS / "1b-top-ops-1100.png"))
    page.set_viewport_size({"width": 1280, "height": 900})

    with page.expect_download() as dl:
        page.locator("#findings a.artifact").first.click()
    patch = dl.value
    assert patch.suggested_filename and Path(patch.path()).stat().st_size > 0

    page.click("#timeline-link")
    page.wait_for_selector("#timeline[data-ready='1']", timeout=WAIT_MS)
    before_scale = int(page.get_attribute("#timeline", "data-ns-per-px"))
    bar = widest_kernel(page, single=False)  # zoom in around the busiest stretch of kernels
    assert bar is not None
    page.mouse.move(bar["x"], bar["y"])
    page.locator(".tl-canvas").focus()
    page.keyboard.press("w")
    page.keyboard.press("w")
    page.wait_for_function(f"() => +document.getElementById('timeline').dataset.nsPerPx < {before_scale}")
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")
    page.wait_for_timeout(200)
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")
    bar = widest_kernel(page)
    assert bar is not None, "no single kernel wide enough to click after zooming in"
    page.mouse.click(bar["x"], bar["y"])
    page.wait_for_function(
        "() => document.querySelector('.tl-ev-name') && document.querySelector('.tl-ev-name').textContent")
    assert page.inner_text(".tl-ev-name") == bar["name"]
    page.screenshot(path=str(ARTIFACTS / "2-timeline.png"), full_page=True)
    with page.expect_download(timeout=WAIT_MS) as dl:
        page.click("#perfetto")  # the export page: a worker exports the trace, then the download starts
    assert dl.value.suggested_filename.endswith(".json")

    after_id = upload(page, project.pk, demo_archives[1], "llama after")
    wait_ready(page, worker)

    page.goto(f"{page.base}/projects/{project.pk}/compare/")
    page.fill("#search_base", "BEFORE")  # the name search refills the select from the server
    page.wait_for_function("() => document.getElementById('id_base').dataset.searching === '0'")
    assert page.locator("#id_base option[value]:not([value=''])").count() == 1
    page.select_option("#id_base", str(before_id))
    page.select_option("#id_candidate", str(after_id))
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/comparisons/\d+/$"))
    page.wait_for_selector("#metrics-table", timeout=WAIT_MS)
    charts_ready(page)
    rules = page.locator("#finding-status tbody td:nth-child(1)").all_inner_texts()
    statuses = dict(zip(rules, page.locator("#finding-status tbody td:nth-child(3)").all_inner_texts()))
    for rule in ("matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead"):
        assert statuses.get(rule) == "fixed", statuses  # the four planted anti-patterns are fixed in "after"
    page.screenshot(path=str(ARTIFACTS / "3-comparison.png"), full_page=True)
    with page.expect_download() as dl:
        page.click("#export-md")
    md = Path(dl.value.path()).read_text(encoding="utf-8")
    assert "per_token_latency_ms" in md and "| matmul_tiling | fixed |" in md
    with page.expect_download() as dl:
        page.click("#export-csv")
    assert Path(dl.value.path()).read_text(encoding="utf-8").startswith("section,name")

    page.goto(f"{page.base}/projects/{project.pk}/")
    charts_ready(page)
    assert page.locator("#recent-comparisons li").count() == 1
    # the project's title comes first, then the dashboard, then the profiles
    tops = [page.locator(sel).bounding_box()["y"] for sel in ("#project-header h1", "#dashboard",
                                                              "#profiles")]
    assert tops == sorted(tops), tops
    page.screenshot(path=str(ARTIFACTS / "4-dashboard.png"), full_page=True)

    with page.expect_navigation():
        page.select_option("select[name=language]", "zh-hans")  # the switch submits itself
    page.goto(f"{page.base}/profiles/{before_id}/")
    charts_ready(page)
    assert "发现的问题" in page.inner_text("#findings h2")
    page.screenshot(path=str(ARTIFACTS / "5-profile-zh.png"), full_page=True)
    assert page.dialogs == [] and page.errors == []
    # the choice is the user's: another browser (a new session) shows Chinese after logging in
    other = page.context.browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    fresh = other.new_page()
    fresh.base = page.base
    log_in(fresh, "mei")
    assert "项目" in fresh.inner_text("body")
    fresh.goto(f"{page.base}/projects/{project.pk}/")
    charts_ready(fresh)
    fresh.screenshot(path=str(ARTIFACTS / "4b-dashboard-zh-new-session.png"), full_page=True)
    other.close()


def test_hostile_names_are_text_in_pages_and_tooltips(browser_page, make_user, tmp_path, settings) -> None:
    from tests.web.test_pages import ALL_RULES, HOSTILE, analysed_profile, hostile_core

    page = browser_page
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("ada")
    project = project_with(owner)
    profile = analysed_profile(project, owner, hostile_core(ALL_RULES), tmp_path, HOSTILE[0])
    log_in(page, "ada")
    page.goto(f"{page.base}/profiles/{profile.pk}/")
    charts_ready(page)
    assert page.locator("h1").first.inner_text() == HOSTILE[0]
    assert HOSTILE[1] in page.locator("#top-ops tbody").inner_text()
    # show every tooltip of the op-type chart; the hostile op type must appear as text
    shown = page.evaluate("""() => {
        const el = document.getElementById('op-types-chart'), chart = echarts.getInstanceByDom(el);
        const cats = chart.getOption().yAxis[0].data, out = [];
        for (let i = 0; i < cats.length; i++) {
            chart.dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i});
            const tip = [...el.querySelectorAll('div')].find(d => d.style && d.style.zIndex && d.textContent);
            out.push(tip ? tip.textContent : '');
        }
        return out;
    }""")
    assert any(HOSTILE[1] in text for text in shown), shown
    page.evaluate("""() => {
        const el = document.getElementById('roofline-chart'), chart = echarts.getInstanceByDom(el);
        chart.dispatchAction({type: 'showTip', seriesIndex: 1, dataIndex: 0});
    }""")
    page.screenshot(path=str(ARTIFACTS / "6-hostile.png"), full_page=True)
    page.goto(f"{page.base}/profiles/{profile.pk}/timeline/")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.fill(".tl-search", "onerror")
    page.press(".tl-search", "Enter")
    page.wait_for_function("() => /match/.test(document.querySelector('.tl-matches').textContent)")
    page.goto(f"{page.base}/projects/{project.pk}/")
    assert page.locator("img[src=x]").count() == 0
    assert page.locator("#op-types-chart img, #top-ops img").count() == 0
    assert page.dialogs == [], page.dialogs
    assert page.errors == [], page.errors


def test_top_ops_long_names_and_shapes_are_clamped(browser_page, make_user, tmp_path, settings) -> None:
    """One op with 20 input shapes (a ForeachAddList) and one with a long cuDNN-like name: each cell shows two
    lines with the whole text in its title, the 560 px box still shows most rows, and the table fits the card
    (its last column, "Roofline eff.", was cut at the card's edge)."""
    import pyarrow as pa

    from tests.core.rules.builders import decoder_profile
    from tests.web.test_pages import analysed_profile

    page = browser_page
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    core = decoder_profile(planted=frozenset(), tokens=4, layers=2)
    k = core.kernels
    names, types, shapes = k["name"].to_pylist(), k["op_type"].to_pylist(), k["input_shapes"].to_pylist()
    long_name = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute" * 3
    first = {}
    for i, t in enumerate(types):
        first.setdefault(t, i)
    wide = first["RmsNorm"]
    shapes[wide] = [[4096, 4096 + j] for j in range(20)]
    names[first["MatMulV2"]] = long_name
    k = k.set_column(k.schema.get_field_index("name"), "name", pa.array(names))
    k = k.set_column(k.schema.get_field_index("input_shapes"), "input_shapes",
                     pa.array(shapes, type=k.schema.field("input_shapes").type))
    core.kernels = k
    owner = make_user("ada")
    profile = analysed_profile(project_with(owner), owner, core, tmp_path, "long rows")
    log_in(page, "ada")
    page.goto(f"{page.base}/profiles/{profile.pk}/")
    page.wait_for_selector("#top-ops tbody tr td .clamp")
    got = page.evaluate("""() => {
        const t = document.getElementById('top-ops'), box = t.parentElement;
        const clamps = [...t.querySelectorAll('tbody .clamp')];
        const rows = [...t.querySelectorAll('tbody tr')];
        const boxBottom = box.getBoundingClientRect().top + box.clientHeight;
        return {
            rows: rows.length,
            visible: rows.filter(r => r.getBoundingClientRect().bottom <= boxBottom).length,
            tallest: Math.max(...clamps.map(c => c.getBoundingClientRect().height)),
            lineHeight: parseFloat(getComputedStyle(clamps[0]).lineHeight),
            titles: clamps.map(c => c.title),
            inline: t.querySelectorAll('[style]').length,
            tableWidth: t.scrollWidth, boxWidth: box.clientWidth,
            lastHead: t.querySelector('thead th:last-child').getBoundingClientRect().right,
            boxRight: box.getBoundingClientRect().right,
        };
    }""")
    assert long_name in got["titles"], "the whole name in the title"
    assert any(t.count(";") == 19 for t in got["titles"]), "the whole shape in the title"
    assert got["tallest"] <= 2 * got["lineHeight"] + 2, got  # two lines at most
    assert got["visible"] >= min(8, got["rows"]), got
    assert got["inline"] == 0  # CSS classes only: the pages' CSP forbids inline style
    assert got["tableWidth"] <= got["boxWidth"] and got["lastHead"] <= got["boxRight"] + 0.5, got
    page.locator("#top-ops").screenshot(path=str(ARTIFACTS / "top-ops-long-rows.png"))
    assert page.errors == [], page.errors
