"""The whole platform in a real browser (headless Chromium): log in, create a project, invite a viewer,
upload a real sample archive by the page's chunked uploader, and watch the status reach the pipeline's end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.web.helpers import SMALL_RANK, zip_folder

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Playwright's sync API keeps an event loop on this thread; the ORM calls here are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh --browser installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def test_login_project_invite_upload_and_watch(page, live_server, worker, make_user, tmp_path) -> None:
    from profiles.models import Invitation, Profile

    make_user("alice", password="alice-pass-1234")
    make_user("bob", password="bob-pass-1234")
    archive = zip_folder(SMALL_RANK, tmp_path / "rank0_ascend_pt.zip")
    ARTIFACTS.mkdir(exist_ok=True)
    page.set_default_timeout(60_000)

    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice-pass-1234")
    page.click("button[type=submit].primary")
    page.wait_for_url(f"{live_server.url}/")

    page.fill("#new-project input[name=name]", "Llama decode tuning")
    page.click("#new-project button[type=submit]")
    page.wait_for_url("**/projects/*/")
    project_url = page.url

    page.fill("#invite input[name=username]", "bob")
    page.select_option("#invite select[name=role]", "viewer")
    page.click("#invite button[type=submit]")
    page.wait_for_selector("#pending")
    assert Invitation.objects.get(user__username="bob").role == "viewer"

    page.click("#upload-link")
    page.wait_for_selector("#drop")
    page.set_input_files("#file", str(archive))
    page.fill("#tags", "baseline")
    page.click("#send")
    page.wait_for_url("**/profiles/*/", timeout=120_000)
    # The page polls the API and reloads once the pipeline ends.
    page.wait_for_selector("#status.s-ready, #status.s-failed", timeout=180_000)
    page.screenshot(path=str(ARTIFACTS / "platform_profile_status.png"), full_page=True)

    profile = Profile.objects.get()
    assert profile.status == "ready", profile.error
    assert page.inner_text("#status") == "Ready"  # the status label (zh: 就绪), not the raw value
    assert profile.tags == ["baseline"] and profile.original_filename == archive.name
    assert profile.name == "rank0_ascend_pt"  # no name given: the file's, without its suffix
    assert profile.size == archive.stat().st_size

    page.goto(project_url)
    assert "rank0_ascend_pt" in page.inner_text("#profiles")
    page.screenshot(path=str(ARTIFACTS / "platform_project.png"), full_page=True)
