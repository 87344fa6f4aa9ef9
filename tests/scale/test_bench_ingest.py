"""Ingest throughput of one worker: the real pipeline (fetch from storage, unpack, read, Parquet to storage,
diagnose, page data) in a real worker process, on simulated profiles of a realistic size. Prints JSON; no
timed assertion. PYPTO_BENCH_PROFILES (default 2) uploads; PYPTO_BENCH_TOKENS (default 16: ~53 MB unpacked).

    PYPTO_BENCH_PROFILES=6 bash scripts/test.sh tests/scale/test_bench_ingest.py -s
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import Worker, spare_broker, worker_env
from tests.scale.conftest import sending_to
from tests.web.helpers import project_with, wait_finished, zip_folder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_ingest_throughput_of_one_worker(make_user, api_for, tmp_path, settings) -> None:
    from analysis.models import AnalysisRun
    from pypto_core.synth import synthesize

    settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER = 0
    count = int(os.environ.get("PYPTO_BENCH_PROFILES", "2"))
    folder = synthesize(tmp_path / "synth", tokens=int(os.environ.get("PYPTO_BENCH_TOKENS", "16")))
    unpacked = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    archive = zip_folder(folder, tmp_path / "synth.zip")
    owner = make_user("ben")
    project = project_with(owner)
    client = api_for(owner)
    broker = spare_broker(3)
    with sending_to(broker):
        worker = Worker(env=worker_env(CELERY_BROKER_URL=broker), log_path=tmp_path / "worker.log").start()
        try:
            ids = []
            for i in range(count):
                with open(archive, "rb") as fh:
                    res = client.post(f"/api/projects/{project.pk}/profiles/", {"file": fh, "name": f"b{i}"},
                                      format="multipart")
                assert res.status_code == 201, res.content
                ids.append(res.json()["id"])
            done = [wait_finished(pk, worker) for pk in ids]
        finally:
            worker.stop()
    assert all(p.status == "ready" for p in done), [p.error for p in done]
    runs = list(AnalysisRun.objects.filter(profile_id__in=ids))
    span = (max(r.finished_at for r in runs) - min(r.started_at for r in runs)).total_seconds()
    phases: dict[str, float] = {}
    for r in runs:
        for k, v in (r.timings or {}).items():
            if isinstance(v, (int, float)):
                phases[k] = phases.get(k, 0.0) + v / count
    out = {
        "profiles": count, "archive_mb": round(archive.stat().st_size / 1e6, 2),
        "unpacked_mb": round(unpacked / 1e6, 1), "kernels": done[0].summary.get("kernel_count"),
        "span_s": round(span, 1), "profiles_per_min_per_worker": round(60 * count / span, 2),
        "unpacked_mb_per_min_per_worker": round(60 * count * unpacked / 1e6 / span, 1),
        "mean_phase_s": {k: round(v, 2) for k, v in sorted(phases.items())},
    }
    print("\nBENCH_INGEST " + json.dumps(out))
