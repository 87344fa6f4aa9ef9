"""Server time of the main pages with 1,000 profiles in a project; prints JSON (target: p95 < 200 ms).

    DATABASE_URL=postgres://... .venv/bin/python -m tests.bench.bench_pages [--profiles 1000] [--repeat 20]

Runs on a throwaway test database (``test_<name>``, created and dropped here) and a temporary media folder.
One profile is the simulated demo "before" run taken through the real diagnose step (findings, artifacts,
page data, timeline index); the other rows are ready profiles with realistic summaries. Times are measured
in-process around Django's test client (request handling, queries, templates; no network).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pypto_web.settings")
    os.environ["MEDIA_ROOT"] = str(tmp / "media")
    os.environ["PYPTO_WORK_DIR"] = str(tmp / "work")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    settings.STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    settings.ALLOWED_HOSTS = ["*"]
    # No setup_test_environment(): its template instrumentation (context copies for the test client) would
    # be measured as page time.
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        result = _run(args, tmp)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(json.dumps(result, indent=2))
    return 0 if all(p["p95_ms"] < 200 for p in result["pages"].values()) else 1


def _run(args: argparse.Namespace, tmp: Path) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from analysis.models import Comparison, JobStatus
    from analysis.pipeline.diagnose import pipeline_diagnose
    from analysis.storage import store_folder
    from analysis.summary import ProfileSummary, summary_fields
    from profiles.models import Membership, Profile, ProfileStatus, Project
    from pypto_core.formats import open_profile
    from pypto_core.synth import demo_pair

    user = get_user_model().objects.create_user(username="bench", password="pw-for-bench-1")
    project = Project.objects.create(name="bench", created_by=user)
    Membership.objects.create(project=project, user=user, role="owner")

    t0 = time.perf_counter()
    before_dir, _after = demo_pair(tmp / "demo")
    opened = open_profile(before_dir)
    core = opened.primary() if hasattr(opened, "primary") else opened
    real = Profile.objects.create(project=project, name="demo before", original_filename="before.zip",
                                  upload_kind="zip", created_by=user, status=ProfileStatus.ANALYZING)
    core.save(tmp / "pq" / "rank_0")
    prefix = f"projects/{project.pk}/parquet/{real.pk}/bench"
    store_folder(tmp / "pq", prefix)
    summary = core.summary()
    summary.update({"ranks": 1, "rank_folders": ["rank_0"]})
    Profile.objects.filter(pk=real.pk).update(parquet_prefix=prefix, summary=summary)
    pipeline_diagnose(profile_id=real.pk)
    real.refresh_from_db()
    assert real.status == ProfileStatus.READY, real.error
    setup_real_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    now = timezone.now()
    rows = []
    for i in range(args.profiles - 1):
        s = dict(real.summary)
        s["report"] = {**s.get("report", {}), "profile": {**s.get("report", {}).get("profile", {}),
                       "decode": {"tokens": 64, "per_token_ms_p50": 40 + (i % 17),
                                  "tokens_per_s": 1000 / (40 + i % 17)}}}
        rows.append(Profile(project=project, name=f"run {i}", original_filename=f"run{i}.zip",
                            upload_kind="zip", status=ProfileStatus.READY, progress=100,
                            size=9_000_000, created_by=user,
                            archive=f"projects/{project.pk}/archives/run{i}.zip",
                            **summary_fields(ProfileSummary.from_dict(s))))  # as diagnose writes it
    Profile.objects.bulk_create(rows, batch_size=500)
    older = Profile.objects.filter(project=project).exclude(pk=real.pk)
    older.update(created_at=now - timezone.timedelta(days=1))
    others = list(older.values_list("pk", flat=True)[:20])
    comparison = None
    for pk in others:
        comparison = Comparison.objects.create(project=project, base_id=pk, candidate_id=real.pk,
                                               created_by=user, status=JobStatus.QUEUED)
    setup_rows_s = time.perf_counter() - t0

    # one real comparison result for the comparison page
    from analysis.comparisons import comparison_run

    real_cmp = Comparison.objects.create(project=project, base=real, candidate=real, created_by=user)
    comparison_run(comparison_id=real_cmp.pk)

    client = Client()
    client.force_login(user)
    pages = {
        "project_list": "/",
        "project_dashboard": f"/projects/{project.pk}/",
        "profile": f"/profiles/{real.pk}/",
        "timeline_page": f"/profiles/{real.pk}/timeline/",
        "timeline_api_full": f"/api/profiles/{real.pk}/timeline/?width_px=1200",
        "compare_form": f"/projects/{project.pk}/compare/",
        "comparison": f"/comparisons/{real_cmp.pk}/",
    }
    out = {}
    for name, url in pages.items():
        first = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            res = client.get(url)
        first_ms = (time.perf_counter() - first) * 1e3
        # counted now: the next request's request_started signal empties the connection's query log
        n_queries = len(queries.captured_queries)
        if os.environ.get("BENCH_PROFILE") == name:
            for q in queries.captured_queries[:40]:
                print(q["time"], q["sql"][:200], file=sys.stderr)
        assert res.status_code == 200, (url, res.status_code)
        times, cpu = [], []
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            res = client.get(url)
            times.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        times.sort()
        if os.environ.get("BENCH_PROFILE") == name:  # where the time goes, on stderr
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.runcall(client.get, url)
            stats = pstats.Stats(prof, stream=sys.stderr).sort_stats(os.environ.get("BENCH_SORT", "tottime"))
            stats.print_stats(int(os.environ.get("BENCH_LINES", "30")))
        out[name] = {"url": url, "queries": n_queries, "first_ms": round(first_ms, 1),
                     "median_ms": round(statistics.median(times), 1),
                     # this process's CPU time (no database, no waiting):
                     # steadier than wall time on a busy machine
                     "median_cpu_ms": round(statistics.median(cpu), 1),
                     "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1), "bytes": len(res.content)}
    return {"profiles": args.profiles, "repeat": args.repeat,
            "kernels_in_profile": real.summary.get("kernel_count"),
            "setup_real_profile_s": round(setup_real_s, 2), "setup_rows_s": round(setup_rows_s, 2),
            "database": settings_engine(), "pages": out, "target_p95_ms": 200,
            "comparisons": Comparison.objects.filter(project=project).count(),
            "last_comparison": comparison.pk if comparison else None}


def settings_engine() -> str:
    from django.conf import settings

    return settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]


if __name__ == "__main__":
    sys.exit(main())
