"""The "being prepared" states in real Chromium with a real worker (issue 19): a profile whose page views are
missing renders what it has and says the views are being prepared, then reloads itself once the worker built
them; the timeline page does the same; the trace button opens a page that waits for the worker's export and
then starts the download. No inline script runs (the pages' CSP), no dialog, no page error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.test_journey import ARTIFACTS, WAIT_MS, browser_page, charts_ready, log_in  # noqa: F401
from tests.web.helpers import project_with
from tests.web.test_pages import ALL_RULES, analysed_profile, hostile_core

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_being_prepared_shows_then_resolves(worker, browser_page, make_user, tmp_path) -> None:  # noqa: F811
    from analysis.storage import delete_prefix as storage_delete_prefix

    page = browser_page
    owner = make_user("eve")
    profile = analysed_profile(project_with(owner), owner, hostile_core(ALL_RULES), tmp_path, "prepared")
    storage_delete_prefix(f"{profile.parquet_prefix}/views")  # analysed before the views existed
    log_in(page, "eve")

    first = page.goto(f"{page.base}/profiles/{profile.pk}/")
    assert 'id="views-preparing"' in first.text()  # the page as the server rendered it: being prepared
    assert page.locator("#findings .finding").count() >= 4  # and what it already has
    # the page reloads itself once the worker built them
    page.wait_for_selector("#op-types-chart", timeout=WAIT_MS)
    charts_ready(page)
    assert page.locator("#views-preparing").count() == 0
    page.screenshot(path=str(ARTIFACTS / "7-views-prepared.png"), full_page=True)

    with page.expect_download(timeout=WAIT_MS) as dl:
        page.click("#trace-link")  # the export page: being prepared, then the download starts by itself
    assert page.url.endswith(f"/profiles/{profile.pk}/trace/")
    assert json.loads(Path(dl.value.path()).read_text(encoding="utf-8"))["traceEvents"]
    assert dl.value.suggested_filename == f"profile-{profile.pk}.trace.json"
    page.wait_for_selector("#trace-download", state="visible")
    assert not page.locator("#trace-preparing .spinner").is_visible()

    storage_delete_prefix(f"{profile.parquet_prefix}/views")  # gone again: built again, once asked
    first = page.goto(f"{page.base}/profiles/{profile.pk}/timeline/")
    assert 'id="views-preparing"' in first.text() and "timeline.js" not in first.text()
    page.wait_for_selector("#timeline[data-ready='1']", timeout=WAIT_MS)
    assert page.dialogs == [] and page.errors == [], (page.dialogs, page.errors)
