"""Verify fixes on a capture agent: run the workload again with the findings' remedies, print the verdicts."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pypto_core.capture.client import ApiClient
from pypto_core.capture.verify import verify_findings
from pypto_core.errors import PyptoError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", type=int, help="the profile the findings were found in")
    parser.add_argument("--findings", required=True,
                        help="finding ids, comma-separated (each finding's \"id\" in "
                             "/api/profiles/ID/findings/)")
    parser.add_argument("--server", required=True, help="dashboard URL, e.g. https://pypto.example")
    parser.add_argument("--token", default=os.environ.get("PYPTO_TOKEN"),
                        help="API token (default: $PYPTO_TOKEN)")
    parser.add_argument("--agent", type=int, help="agent id (default: the agent the profile was captured on)")
    parser.add_argument("--workload", help="workload name (default: the one the profile was captured with)")
    parser.add_argument("--no-wait", action="store_true", help="print the queued job and return")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="how long to wait for the verdicts")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    if not args.token:
        raise PyptoError("an API token is needed: --token or $PYPTO_TOKEN (POST /api/auth/token/ gives one)")
    try:
        ids = [int(part) for part in args.findings.split(",") if part.strip()]
    except ValueError as exc:
        raise PyptoError(f"--findings: comma-separated finding ids, not {args.findings!r}") from exc
    if not ids:
        raise PyptoError("--findings: name at least one finding id")
    last: dict[str, str] = {}

    def progress(job: dict[str, Any]) -> None:
        if not args.quiet and job.get("status") != last.get("status"):
            last["status"] = job["status"]
            print(f"capture job {job['id']}: {job['status']}", file=sys.stderr, flush=True)

    answer = verify_findings(ApiClient(args.server, args.token), args.profile, ids, agent=args.agent,
                             workload=args.workload, wait=not args.no_wait, limit_s=args.timeout_s,
                             progress=progress)
    job = answer["job"]
    out = {"job": job["id"], "status": job["status"], "remedies": [
        {k: r.get(k) for k in ("kind", "name", "rule", "sha256")} for r in job.get("remedies") or []],
        "left_out": job.get("remedies_left_out") or [], "verification": answer.get("verification")}
    print(json.dumps(out, indent=2, default=str))
    return 0
