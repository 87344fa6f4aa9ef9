"""The agent meets a server that sends a job with a malformed id (issue 17, item 11): it skips that job with
a log line and goes on polling, instead of exiting. The server is a real HTTP server in this process that
answers as a broken or hostile PyPTO would."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pypto_core.capture.agent import Agent
from pypto_core.capture.agent_config import load_config
from tests.conftest import wait_until

JOBS = [{"id": "1/../../x", "workload": "matmul"}, {"id": -3, "workload": "matmul"}, {"id": True},
        {"workload": "matmul"}, {"id": 9, "workload": "not-in-config"}]


def _server(statuses: list[tuple[str, dict]]) -> ThreadingHTTPServer:
    jobs = list(JOBS)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/api/agent/jobs/next/":
                if not jobs:
                    self.send_response(204)
                    self.end_headers()
                    return
                answer = jobs.pop(0)
            else:
                if self.path.endswith("/status/"):
                    statuses.append((self.path, body))
                answer = {}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_malformed_job_ids_are_skipped_with_a_log_line_and_the_agent_goes_on(tmp_path: Path, caplog) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n\n[workloads.matmul]\nkind = "python"\n'
                   'command = ["true"]\ntimeout_s = 60\n')
    statuses: list[tuple[str, dict]] = []
    server = _server(statuses)
    agent = Agent(f"http://127.0.0.1:{server.server_address[1]}", "tok", load_config(cfg), poll_s=0,
                  retry_max_s=0.2, capabilities=lambda: {})
    caplog.set_level(logging.WARNING, logger="pypto.agent")
    loop = threading.Thread(target=agent.run_forever, daemon=True)
    try:
        loop.start()
        wait_until(lambda: statuses, "the agent to report the well-formed job after the malformed ones")
    finally:
        agent.stop_event.set()
        server.shutdown()
        server.server_close()  # refused at once: a request to a listening socket nobody serves waits 30 s
    loop.join(timeout=30)
    # stopped with its server gone, the agent ends instead of retrying forever
    assert not loop.is_alive()
    assert statuses[0][0] == "/api/agent/jobs/9/status/" and statuses[0][1]["status"] == "failed"
    assert "not in this agent's config" in statuses[0][1]["message"]
    skipped = [r.getMessage() for r in caplog.records if "malformed id" in r.getMessage()]
    assert len(skipped) == 4 and "'1/../../x'" in skipped[0]


def test_backoff_retried_for_hours_stays_within_its_cap() -> None:
    """A lost server retried forever: past ~1000 tries 2**attempt outgrew a float and killed the agent's loop
    with an OverflowError; the delay stays within its cap however long the server is away."""
    from pypto_core.capture.client import Backoff

    backoff = Backoff(attempts=0, base_s=0.5, max_s=30.0)
    assert all(0 <= backoff.delay(attempt) <= 30.0 for attempt in (0, 10, 1100, 10**6))
