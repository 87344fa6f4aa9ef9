"""The timeline widget in real Chromium, against a loopback server that answers from a TimelineIndex.

No Django here: a static harness page plus a tiny http.server answering the three endpoints the web app
wires to the same TimelineIndex methods. Screenshots go to test-artifacts/timeline/.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import orjson
import pytest

from pypto_core.timeline import TimelineIndex, build_timeline_index
from tests.core.timeline.sample import sample_profile
from tests.paths import REPO

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
STATIC = REPO / "frontend" / "static" / "frontend"
ARTIFACTS = REPO / "test-artifacts" / "timeline"
HARNESS = """<!doctype html><html><head><meta charset="utf-8"><title>timeline harness</title>
<link rel="stylesheet" href="/static/timeline.css"></head>
<body style="margin:16px;width:1200px"><div id="tl" data-timeline-url="/api/timeline/"></div>
<script src="/static/timeline.js"></script></body></html>"""


def serve(index: TimelineIndex) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/harness.html":
                    return self.send(200, HARNESS.encode(), "text/html; charset=utf-8")
                if url.path in ("/static/timeline.js", "/static/timeline.css"):
                    kind = "text/javascript" if url.path.endswith(".js") else "text/css"
                    return self.send(200, (STATIC / Path(url.path).name).read_bytes(), kind)
                if url.path == "/api/timeline/":
                    lanes = [int(x) for x in q["lanes"].split(",")] if q.get("lanes") else None
                    answer = index.window(int(q["start_ns"]) if "start_ns" in q else None,
                                          int(q["end_ns"]) if "end_ns" in q else None,
                                          int(q.get("width_px", 1000)), lanes=lanes)
                elif url.path == "/api/timeline/event/":
                    answer = index.event(int(q["lane"]), int(q["idx"]))
                elif url.path == "/api/timeline/search/":
                    answer = index.search(q.get("q", ""), int(q.get("limit", 100)))
                elif url.path == "/api/timeline/run/":
                    answer = index.run(int(q["lane"]), int(q["depth"]), int(q["start_ns"]), int(q["end_ns"]))
                else:
                    return self.send(404, b"{}", "application/json")
            except (KeyError, ValueError):
                return self.send(404, b"{}", "application/json")
            self.send(200, orjson.dumps(answer), "application/json")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed")
    index = TimelineIndex.open(build_timeline_index(sample_profile(), tmp_path_factory.mktemp("tl") / "idx"))
    server = serve(index)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"])
        pg = browser.new_page(viewport={"width": 1240, "height": 900})
        pg.dialogs = []
        pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
        pg.goto(f"http://127.0.0.1:{server.server_address[1]}/harness.html")
        pg.wait_for_selector("#tl[data-ready='1']")
        yield pg
        browser.close()
    server.shutdown()


def bar_point(page, name: str) -> dict:
    """Page coordinates of the middle of the visible part of the first bar called ``name``."""
    return page.evaluate("""(name) => {
        const tl = document.getElementById('tl').pyptoTimeline, d = tl.data;
        const id = d.names.indexOf(name);
        for (const t of d.tracks) {
            if (t.kind !== 'slices') continue;
            const i = t.name.indexOf(id);
            if (i < 0) continue;
            const lane = tl.laneById[t.lane];
            const x0 = Math.max(tl.x(t.start[i]), 190), x1 = Math.min(tl.x(t.start[i] + t.dur[i]), tl.cssW);
            const r = tl.canvas.getBoundingClientRect();
            return {x: r.left + (x0 + x1) / 2, y: r.top + lane.y + t.depth[i] * 18 + 9};
        }
        return null;
    }""", name)


def wait_idle(page) -> None:
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")
    page.wait_for_timeout(150)  # the widget waits 60 ms before asking for a new window
    page.wait_for_function("() => document.querySelector('.tl-spinner').hidden")


def test_loads_with_lanes_and_crafted_names_as_text(page) -> None:
    page.screenshot(path=str(ARTIFACTS / "1-loaded.png"))
    names = page.evaluate("document.getElementById('tl').pyptoTimeline.lanes.map(l => l.info.name)")
    assert {"Thread 7", "Thread 8", "Stream 2", "AI Core freq (MHz)"} <= set(names)
    assert page.dialogs == []  # the op named <script>alert(1)</script> was drawn, not run
    assert page.locator("#tl script").count() == 0
    crafted = "<script>alert(1)</script>"
    # drawn as a bar labelled with the name (the widget's data), and its details show the name as text
    assert crafted in page.evaluate("document.getElementById('tl').pyptoTimeline.data.names")
    point = bar_point(page, crafted)
    assert point is not None, "the crafted op is drawn"
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function("() => document.querySelector('.tl-ev-name') && "
                           "document.querySelector('.tl-ev-name').textContent === "
                           "'<script>alert(1)</script>'")
    assert "&lt;script&gt;" in page.inner_html(".tl-ev-name")  # escaped in the markup, shown as typed
    assert page.dialogs == [] and page.locator("#tl script").count() == 0


def test_zoom_with_w_then_click_a_kernel_shows_details_and_its_host_op(page) -> None:
    before = int(page.get_attribute("#tl", "data-ns-per-px"))
    start = bar_point(page, "MatMulV2")
    page.mouse.move(start["x"], start["y"])
    page.locator(".tl-canvas").focus()
    page.keyboard.press("w")
    page.keyboard.press("w")
    wait_idle(page)
    assert int(page.get_attribute("#tl", "data-ns-per-px")) < before
    point = bar_point(page, "MatMulV2")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function("() => document.querySelector('.tl-ev-name') && "
                           "document.querySelector('.tl-ev-name').textContent === 'MatMulV2'")
    details = page.inner_text(".tl-details")
    assert "block_dim" in details and "24" in details
    assert page.inner_text(".tl-links") .startswith("aten::matmul")
    page.screenshot(path=str(ARTIFACTS / "2-kernel-selected.png"))
    page.click(".tl-link")
    page.wait_for_function("() => document.querySelector('.tl-ev-name').textContent === 'aten::matmul'")
    assert "MatMulV2" in page.inner_text(".tl-links")
    page.screenshot(path=str(ARTIFACTS / "3-host-op-selected.png"))


def test_search_highlights_and_steps_through_matches(page) -> None:
    page.fill(".tl-search", "add")
    page.press(".tl-search", "Enter")
    page.wait_for_function("() => document.querySelector('.tl-matches').textContent === '1000 matches'")
    page.click(".tl-next")
    page.wait_for_function("() => document.querySelector('.tl-ev-name').textContent === 'Add'")
    assert page.inner_text(".tl-matches") == "1 / 1000"
    wait_idle(page)
    page.screenshot(path=str(ARTIFACTS / "4-search.png"))


def test_keyboard_pan_and_zoom_out(page) -> None:
    view = page.evaluate("({...document.getElementById('tl').pyptoTimeline.view})")
    page.locator(".tl-canvas").focus()
    page.keyboard.press("d")
    after = page.evaluate("({...document.getElementById('tl').pyptoTimeline.view})")
    assert after["start"] > view["start"]
    page.keyboard.press("s")
    wider = page.evaluate("({...document.getElementById('tl').pyptoTimeline.view})")
    assert wider["end"] - wider["start"] > after["end"] - after["start"]


def test_step_markers_are_named_in_the_pages_words(page) -> None:
    """The index names a step marker "Step 4" (the Perfetto export shares it); the widget shows it with the
    page's word for a step, and every other name as the profile wrote it."""
    shown = page.evaluate("""() => {
        const tl = document.getElementById('tl').pyptoTimeline, t = tl.t;
        const before = [t.stepName, t.step];
        t.stepName = '迭代 {n}'; t.step = '迭代';
        const out = [tl.shownName('Step 4', 'steps'), tl.shownName('Step', 'steps'),
                     tl.shownName('Step 4', 'kernels'), tl.shownName('Step 4 of 9', 'steps')];
        [t.stepName, t.step] = before;
        return out;
    }""")
    assert shown == ["迭代 4", "迭代", "Step 4", "Step 4 of 9"]
