"""Walk every dashboard page on real samples in headless Chromium, in English and Chinese, with screenshots.

A newcomer's walk, not a test: it logs in to a running dashboard (server + Celery worker), creates a project,
uploads real samples through the upload page, waits for the worker, then visits the project, profile,
timeline, cluster, comparison, download and API pages in both languages and saves full-page screenshots.
It prints what a reader would trip on that a script can see: HTTP errors, page errors, slow pages, English
words left on Chinese pages, tables wider than their card, charts that stay empty.

    python scripts/walk_pages.py --base http://127.0.0.1:8000 --user demo --password ... \
        --out test-artifacts/walk
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeout

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO.parent / "shared" / "samples"
CHROMIUM = "/usr/bin/chromium"
WAIT_MS = 300_000


def zip_folder(src: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(src.rglob("*")):
            if path.is_file():
                zf.write(path, f"{src.name}/{path.relative_to(src).as_posix()}")
    return dest


def uploads(tmp: Path) -> list[tuple[str, Path]]:
    """(name, file) of each real sample a newcomer would upload."""
    cnn = SAMPLES / "ascend_pt" / "cnn_8npu_text_level2"
    kineto = SAMPLES / "kineto"
    return [
        ("cnn rank0", zip_folder(cnn / "rank0_ascend_pt", tmp / "cnn_rank0.zip")),
        ("cnn whole folder", zip_folder(cnn, tmp / "cnn_whole.zip")),
        ("qwen3 4npu", zip_folder(SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2", tmp / "qwen3.zip")),
        ("a100 nccl", kineto / "a100_nccl_2rank" / "nccl_data.json.gz"),
        ("diff control", kineto / "trace_diff_pair" / "control.json.gz"),
        ("diff test", kineto / "trace_diff_pair" / "test.json.gz"),
        ("msprof db", zip_folder(SAMPLES / "msprof" / "db_8npu_2023", tmp / "msprof_db.zip")),
    ]


class Walk:
    def __init__(self, page: Any, base: str, out: Path) -> None:
        self.page, self.base, self.out = page, base, out
        self.notes: list[str] = []
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        page.on("console", lambda m: self.errors.append(f"{page.url}: console {m.type}: {m.text}")
                if m.type == "error" else None)

    def note(self, text: str) -> None:
        print("NOTE", text, flush=True)
        self.notes.append(text)

    def visit(self, path: str, shot: str, ready: str | None = None) -> float:
        t0 = time.monotonic()
        resp = self.page.goto(self.base + path)
        if resp is not None and resp.status >= 400:
            self.note(f"{path}: HTTP {resp.status}")
        if ready:
            try:
                self.page.wait_for_selector(ready, timeout=60_000)
            except PlaywrightTimeout:
                self.note(f"{path}: {ready} never appeared")
        self.charts_ready()
        took = time.monotonic() - t0
        if took > 3:
            self.note(f"{path}: {took:.1f} s to ready")
        self.check_layout(path)
        self.page.screenshot(path=str(self.out / f"{shot}.png"), full_page=True)
        return took

    def charts_ready(self) -> None:
        try:
            self.page.wait_for_function(
                "() => [...document.querySelectorAll('[data-chart]')].every(e => e.dataset.ready === '1')",
                timeout=30_000)
        except PlaywrightTimeout:
            self.note(f"{self.page.url}: a chart never became ready")

    def check_layout(self, path: str) -> None:
        wide = self.page.evaluate("""() => [...document.querySelectorAll('table')].filter(t =>
            t.parentElement && t.scrollWidth > t.parentElement.clientWidth + 2
            && getComputedStyle(t.parentElement).overflowX !== 'auto').map(t =>
            (t.id || t.className || 'table') + ' ' + t.scrollWidth + '>' + t.parentElement.clientWidth)""")
        for w in wide:
            self.note(f"{path}: table overflows its box: {w}")
        if self.page.evaluate("() => document.documentElement.scrollWidth > window.innerWidth + 2"):
            self.note(f"{path}: the page scrolls sideways")
        if self.page.evaluate("() => (document.documentElement.lang || '').startsWith('zh')"):
            text = self.page.evaluate("() => document.querySelector('main') ? "
                                      "document.querySelector('main').innerText : document.body.innerText")
            words = sorted({w for w in re.findall(r"\b[A-Za-z][a-z]{3,}(?: [a-z]{3,}){1,}\b", text)})
            if words:
                self.note(f"{path}: English phrases on the Chinese page: {words[:25]}")

    def set_language(self, code: str) -> None:
        self.page.goto(self.base + "/")
        if self.page.input_value("select[name=language]") != code:
            with self.page.expect_navigation():  # the select submits its form on change
                self.page.select_option("select[name=language]", code)


def run(args: argparse.Namespace) -> int:
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = out / "state.json"
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmpdir:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        walk = Walk(page, args.base, out)
        page.goto(args.base + "/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login/" not in url)
        walk.set_language("en")

        if state.exists() and not args.fresh:
            ids = json.loads(state.read_text())
        else:
            page.goto(args.base + "/")
            page.fill("#new-project input[name=name]", f"walk {time.strftime('%H%M%S')}")
            page.click("#new-project button[type=submit]")
            page.wait_for_url(re.compile(r".*/projects/\d+/$"))
            ids = {"project": int(re.search(r"/projects/(\d+)/", page.url).group(1)), "profiles": {}}
            for name, path in uploads(Path(tmpdir)):
                page.goto(f"{args.base}/projects/{ids['project']}/upload/")
                page.set_input_files("#file", str(path))
                page.fill("#name", name)
                t0 = time.monotonic()
                page.click("#send")
                try:
                    page.wait_for_url(re.compile(r".*/profiles/\d+/$"), timeout=WAIT_MS)
                except PlaywrightTimeout:
                    walk.note(f"upload {name}: no profile page; status: {page.inner_text('#upload-status')}")
                    shot = out / f"upload-failed-{name.replace(' ', '_')}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    continue
                pid = int(re.search(r"/profiles/(\d+)/", page.url).group(1))
                page.wait_for_selector("#analysis, #error:not([hidden])", timeout=WAIT_MS)
                walk.note(f"upload {name}: profile {pid} finished in {time.monotonic() - t0:.0f} s"
                          + ("" if page.locator("#analysis").count()
                             else " WITH ERROR: " + page.inner_text("#error")))
                ids["profiles"][name] = pid
            state.write_text(json.dumps(ids))

        project, profiles = ids["project"], ids["profiles"]
        comparisons: dict[str, int] = ids.setdefault("comparisons", {})
        for label, (base_name, cand_name) in {"diff": ("diff control", "diff test"),
                                              "npu-gpu": ("cnn rank0", "a100 nccl")}.items():
            if label in comparisons or base_name not in profiles or cand_name not in profiles:
                continue
            page.goto(f"{args.base}/projects/{project}/compare/")
            page.select_option("#id_base", str(profiles[base_name]))
            page.select_option("#id_candidate", str(profiles[cand_name]))
            page.click("#compare-form button[type=submit]")
            page.wait_for_url(re.compile(r".*/comparisons/\d+/$"))
            comparisons[label] = int(re.search(r"/comparisons/(\d+)/", page.url).group(1))
        state.write_text(json.dumps(ids))

        for lang in ("en", "zh-hans"):
            walk.set_language(lang)
            walk.visit("/", f"{lang}-01-projects")
            walk.visit(f"/projects/{project}/", f"{lang}-02-project")
            walk.visit(f"/projects/{project}/upload/", f"{lang}-03-upload")
            for name, pid in profiles.items():
                slug = name.replace(" ", "_")
                walk.visit(f"/profiles/{pid}/", f"{lang}-10-profile-{slug}",
                           "#analysis, #error:not([hidden])")
                walk.visit(f"/profiles/{pid}/timeline/", f"{lang}-11-timeline-{slug}",
                           "#timeline[data-ready='1']")
                walk.visit(f"/profiles/{pid}/cluster/", f"{lang}-12-cluster-{slug}")
            walk.visit(f"/projects/{project}/compare/", f"{lang}-20-compare-new")
            for label, cid in comparisons.items():
                walk.visit(f"/comparisons/{cid}/", f"{lang}-21-comparison-{label}", "#metrics-table")
            walk.visit("/api/docs/", f"{lang}-30-api")
        walk.set_language("en")
        browser.close()
    (out / "notes.txt").write_text("\n".join(walk.notes + ["", "page errors:"] + walk.errors) + "\n")
    print(f"{len(walk.notes)} notes, {len(walk.errors)} page errors -> {out / 'notes.txt'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--out", default=str(REPO / "test-artifacts" / "walk"))
    parser.add_argument("--fresh", action="store_true", help="upload again even if state.json exists")
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
