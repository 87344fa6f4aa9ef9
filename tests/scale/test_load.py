"""The bounded load test (tests/scale/loadtest.py) against a live server on loopback with a real worker:
20 browsing and 5 uploading users at once. No request fails, no upload is lost (every accepted upload has
its row and its archive byte for byte, and the worker takes each to the end). It runs short in the suite
(PYPTO_LOAD_SECONDS, default 12); run it longer for the numbers:

    PYPTO_LOAD_SECONDS=120 bash scripts/test.sh tests/scale/test_load.py -s

Prints the load figures and the ingest throughput of the one worker as JSON (no timed assertion).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.scale.loadtest import run
from tests.web.helpers import SMALL_RANK, project_with, wait_finished, zip_folder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_twenty_browsing_five_uploading(worker, live_server, make_user, tmp_path, settings) -> None:
    from rest_framework.authtoken.models import Token

    from analysis.models import AnalysisRun
    from profiles.models import Profile

    settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER = 0  # the load test measures the server, not the limits
    settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_PROJECT = 0
    owner = make_user("lee")
    project = project_with(owner)
    token = Token.objects.create(user=owner).key
    archive = zip_folder(SMALL_RANK, tmp_path / "rank0.zip")
    seconds = float(os.environ.get("PYPTO_LOAD_SECONDS", "12"))

    result = run(live_server.url, token, project.pk, archive, browsers=20, uploaders=5, seconds=seconds,
                 max_uploads_each=int(os.environ.get("PYPTO_LOAD_MAX_UPLOADS_EACH", "2")))

    assert result["failures"] == 0, result["failure_samples"]
    assert result["uploads_accepted"] >= 5 and result["page_ms"]["count"] > 20
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    rows = {p.pk: p for p in Profile.objects.filter(pk__in=result["upload_ids"])}
    assert sorted(rows) == result["upload_ids"]  # no upload lost
    for p in rows.values():
        assert p.sha256 == digest
        with p.archive.open("rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == digest
    finished = [wait_finished(pk, worker) for pk in result["upload_ids"]]
    assert all(p.status == "ready" for p in finished), [(p.pk, p.error) for p in finished if p.status
                                                        != "ready"]

    runs = AnalysisRun.objects.filter(profile_id__in=result["upload_ids"])
    first = min(r.started_at for r in runs)
    last = max(r.finished_at for r in runs)
    span = (last - first).total_seconds()
    ingest = [r.finished_at - r.started_at for r in runs.filter(kind="ingest")]
    result["worker"] = {
        "profiles": len(finished), "pipeline_span_s": round(span, 1),
        "profiles_per_min_one_worker": round(60 * len(finished) / span, 1) if span else None,
        "mb_per_min_one_worker": round(60 * len(finished) * result["archive_bytes"] / 1e6 / span,
                                       2) if span else None,
        "ingest_s_mean": round(sum(d.total_seconds() for d in ingest) / len(ingest), 2),
    }
    result.pop("upload_ids")
    print("\nLOADTEST " + json.dumps(result))
