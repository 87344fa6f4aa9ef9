"""The comparison page of the NPU-vs-GPU pair in real Chromium, in English and in Chinese (issue 22).

Both shared samples (Ascend 910B CNN training, A100 CNN training) are analysed in-process through the real
diagnose step and compared by the real comparison service; the page must show the noise test per metric,
the summary side by side with each device, and the aligned table whose filters narrow it. Screenshots go to
test-artifacts/pages/comparison_{en,zh-hans}.png.
"""

from __future__ import annotations

import pytest

from pypto_core.formats import open_profile
from tests.browser.test_journey import ARTIFACTS, browser_page, log_in  # noqa: F401 (the fixture)
from tests.web.helpers import project_with
from tests.web.test_pages import analysed_profile

NPU_GPU = ("ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt", "kineto/a100_nccl_2rank/nccl_data.json.gz")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Nothing of the aligned table is cut off at the card's edge: it fits its scroll box (whose scrollbar a
# reader may not see), no cell's content runs past its column, the last column ends inside the box.
ALIGNED_FITS = """() => {
    const box = document.querySelector('#aligned .scroll'), t = document.getElementById('aligned-table');
    const spill = [...t.querySelectorAll('th, td')].filter(c => c.scrollWidth > c.clientWidth + 1)
        .map(c => c.textContent.trim().slice(0, 40));
    const last = t.querySelector('thead th:last-child').getBoundingClientRect();
    return {table: t.scrollWidth, box: box.clientWidth, spill: spill, last_right: last.right,
            box_right: box.getBoundingClientRect().right};
}"""


def assert_aligned_fits(page) -> None:
    fit = page.evaluate(ALIGNED_FITS)
    assert fit["table"] <= fit["box"] and not fit["spill"], fit
    assert fit["last_right"] <= fit["box_right"] + 1, fit


def test_npu_against_gpu_comparison_page_in_english_and_chinese(browser_page, make_user, tmp_path,  # noqa: F811
                                                                  settings) -> None:
    from analysis.comparisons import comparison_create, comparison_run
    from frontend import services as frontend_services
    from tests.paths import SAMPLES

    if not (SAMPLES / NPU_GPU[0]).exists():
        pytest.skip("the real samples (../shared/samples) are not here")
    page = browser_page
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("ada")
    project = project_with(owner)
    npu = analysed_profile(project, owner, open_profile(SAMPLES / NPU_GPU[0]), tmp_path, "910B cnn")
    gpu = analysed_profile(project, owner, open_profile(SAMPLES / NPU_GPU[1]), tmp_path, "A100 cnn")
    comparison = comparison_create(user=owner, base=npu, candidate=gpu)
    comparison_run(comparison_id=comparison.pk)
    log_in(page, "ada")
    url = f"{page.base}/comparisons/{comparison.pk}/"

    page.goto(url)
    assert page.locator("#noise-col").inner_text() == "Noise test"
    noise = page.locator("#metrics-table tbody td.noise").all_inner_texts()
    assert noise and any("single value" in t for t in noise)
    verdicts = page.locator("#metrics-table tbody tr td:last-child").all_inner_texts()
    # a metric one side cannot have (AI Core utilisation on an A100) is not "unchanged"
    assert "—" in verdicts
    summary = page.locator("#summary-table").inner_text()
    assert "910B3" in summary and "A100" in summary and "TFLOPS" in summary
    rows = page.locator("#aligned-table tbody tr")
    total = rows.count()
    assert total > 10 and page.locator("#aligned-table td.by-framework_op").count() == total
    # filters: an operator, then the slower side, then "at least 5x slower"
    page.fill("#f-op", "conv")
    visible = page.locator("#aligned-table tbody tr:visible")
    assert visible.count() >= 2 and all("conv" in k.lower() for k in visible.evaluate_all(
        "rows => rows.map(r => r.dataset.key)"))
    page.fill("#f-op", "")
    page.select_option("#f-slower", "base")
    slower = page.locator("#aligned-table tbody tr:visible").evaluate_all("rows => rows.map(r => "
                                                                          "r.dataset.slower)")
    assert slower and set(slower) == {"base"}
    page.select_option("#f-slower", "")
    page.fill("#f-times", "5")
    times = page.locator("#aligned-table tbody tr:visible").evaluate_all(
        "rows => rows.map(r => r.dataset.times === 'inf' ? Infinity : parseFloat(r.dataset.times))")
    assert times and min(times) >= 5 and len(times) < total
    page.fill("#f-times", "1")
    assert_aligned_fits(page)
    # times with their unit by size, as on every page (the table printed bare µs under a "µs per step" title)
    times = page.locator("#aligned-table tbody tr:first-child td.num").all_inner_texts()
    units = ("\u00a0ms", "\u00a0µs", "\u00a0s")
    assert len(times) == 3 and all(t == "0" or t.endswith(units) for t in times), times
    # a full CUDA name is one click away
    detail = page.locator("#aligned-table tbody tr td.kernels:nth-child(8) details").first
    assert not detail.locator("code.full-name").is_visible()
    detail.locator("summary").click()
    full = detail.locator("code.full-name").inner_text()
    assert full.startswith("ncclKernel_AllReduce") and "(" in full
    assert_aligned_fits(page)  # an opened full name stays inside its column too
    page.screenshot(path=str(ARTIFACTS / "comparison_en.png"), full_page=True)

    frontend_services.user_language_set(user=owner, language="zh-hans")
    page.goto(url)
    assert page.locator("#noise-col").inner_text() == "噪声检验"
    assert "按模型执行的算子对齐" in page.locator("#aligned h2").inner_text()
    assert page.locator("#aligned-table td.by-framework_op").first.inner_text() == "框架侧算子"
    assert any("单值" in t for t in page.locator("#metrics-table tbody td.noise").all_inner_texts())
    assert "设备空闲占比" in page.locator('#metrics-table td[data-metric="device_idle_share"]').inner_text()
    assert_aligned_fits(page)
    page.screenshot(path=str(ARTIFACTS / "comparison_zh-hans.png"), full_page=True)
    assert not page.errors and not page.dialogs
