"""Verify fixes from the SDK and the CLI (issue 21): ask the dashboard to run the workload again with the
findings' remedies on an agent, wait for the job and the automatic comparison, return the verdicts.

``POST /api/profiles/{id}/verify/`` answers 202 with the capture job, or a named refusal (``code``);
the verdicts (``pypto_core.fix_verdict``) arrive in the job's ``verification`` once its profile was compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pypto_core.capture.client import ApiClient, ApiError
from pypto_core.errors import PyptoError

FINAL = ("done", "failed", "cancelled")


class VerificationFailed(PyptoError):
    """The dashboard refused the verification, or its job or comparison did not finish."""


def verify_findings(client: ApiClient, profile_id: int, finding_ids: list[int], *, agent: int | None = None,
                    workload: str | None = None, params: dict[str, Any] | None = None, wait: bool = True,
                    poll_s: float = 2.0, limit_s: float = 3600.0,
                    progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """``{"job": <capture job>, "verification": {"comparison", "verdicts", ...}}``; without ``wait`` the job
    as queued. ``agent``/``workload``/``params`` default to the capture the profile came from."""
    body: dict[str, Any] = {"findings": [int(i) for i in finding_ids]}
    if agent is not None:
        body["agent"] = int(agent)
    if workload:
        body["workload"] = workload
    if params is not None:
        body["params"] = params
    try:
        job = client.post(f"/api/profiles/{int(profile_id)}/verify/", body, ok=(202,))
    except ApiError as exc:
        answer = exc.body if isinstance(exc.body, dict) else {}
        reasons = "; ".join(f"{x.get('name')}: {x.get('reason')}" for x in answer.get("left_out") or [])
        raise VerificationFailed(f"verification refused ({answer.get('code', exc.status)}): "
                                 f"{answer.get('detail') or exc}"
                                 + (f" [{reasons}]" if reasons else "")) from exc
    if not wait:
        return {"job": job, "verification": job.get("verification")}
    deadline = time.monotonic() + limit_s
    while True:
        job = client.get(f"/api/captures/{job['id']}/")
        if progress:
            progress(job)
        verification = job.get("verification") or {}
        if job["status"] in ("failed", "cancelled"):
            raise VerificationFailed(f"capture job {job['id']} {job['status']}: {job.get('message') or '-'}")
        if verification.get("comparison_status") == "failed":
            raise VerificationFailed(f"comparison {verification.get('comparison')} failed")
        if job["status"] == "done" and verification.get("verdicts"):
            return {"job": job, "verification": verification}
        if time.monotonic() > deadline:
            raise VerificationFailed(f"capture job {job['id']}: no verdict within {limit_s:.0f} s "
                                     f"(status {job['status']})")
        time.sleep(poll_s)
