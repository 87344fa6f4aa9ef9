"""Regression tracking (issue 8) with the real worker: a project pins a baseline, every new ready profile is
compared with it automatically, a regression beyond the threshold shows on the comparison, the profile's API
JSON, the project's regression list and the dashboard; comparison exports are attachments."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.web.helpers import project_with, wait_finished, zip_folder

PLANTED_RULES = ("matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead")


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The simulated all-fixed and all-planted profiles (3 decode tokens), zipped as a user would."""
    from pypto_core.synth import synthesize

    root = tmp_path_factory.mktemp("regr")
    out = {}
    for name, fixed in (("fixed", PLANTED_RULES), ("planted", ())):
        folder = synthesize(root / name, tokens=3, fixed=fixed)
        out[name] = zip_folder(folder, root / f"{name}.zip")
    return out


def _upload(client: Any, project_id: int, path: Path, name: str) -> int:
    with open(path, "rb") as fh:
        res = client.post(f"/api/projects/{project_id}/profiles/", {"file": fh, "name": name},
                          format="multipart")
    assert res.status_code == 201, res.content
    return res.json()["id"]


def _ready(profile_id: int, worker: Any) -> Any:
    profile = wait_finished(profile_id, worker)
    assert profile.status == "ready", profile.error
    return profile


def _auto_result(client: Any, profile_id: int, worker: Any) -> dict[str, Any]:
    """Poll the profile's API JSON until its automatic comparison with the baseline has finished."""
    def finished() -> Any:
        reg = client.get(f"/api/profiles/{profile_id}/").json()["regression"]
        return reg if reg and reg["status"] in ("done", "failed") else None

    return wait_until(finished, f"the automatic comparison of profile {profile_id}", worker)


def _metric(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in result["metrics"] if m["name"] == name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_pinned_baseline_flags_a_regression_and_not_an_improvement(worker, make_user, api_for, client,
                                                                   archives) -> None:
    from analysis.models import Comparison
    from analysis.regressions import comparison_auto_create

    owner, viewer, stranger = make_user("owner"), make_user("viewer"), make_user("stranger")
    project = project_with(owner, viewer=viewer)
    api = api_for(owner)
    pid = project.pk

    fixed = _ready(_upload(api, pid, archives["fixed"], "all fixed"), worker)
    assert api.get(f"/api/profiles/{fixed.pk}/").json()["regression"] is None  # nothing pinned yet

    # Only maintainers and owners pin; non-members do not learn the project exists.
    assert api_for(viewer).post(f"/api/projects/{pid}/baseline/", {"profile": fixed.pk},
                                format="json").status_code == 403
    assert api_for(stranger).post(f"/api/projects/{pid}/baseline/", {"profile": fixed.pk},
                                  format="json").status_code == 404
    assert api_for(stranger).get(f"/api/projects/{pid}/regressions/").status_code == 404
    res = api.post(f"/api/projects/{pid}/baseline/", {"profile": fixed.pk, "threshold_pct": 5.0},
                   format="json")
    assert res.status_code == 200, res.content
    shown = api.get(f"/api/projects/{pid}/").json()
    assert shown["baseline"] == fixed.pk and shown["regression_threshold_pct"] == 5.0

    # A slower build: the automatic comparison flags it.
    planted = _ready(_upload(api, pid, archives["planted"], "all planted"), worker)
    reg = _auto_result(api, planted.pk, worker)
    assert reg["status"] == "done" and reg["baseline"] == fixed.pk and reg["is_regression"] is True
    assert any(line.startswith("per_token_latency_ms:") and "limit 5%" in line for line in reg["lines"]), reg
    cid = reg["comparison"]
    comparison = api.get(f"/api/comparisons/{cid}/").json()
    assert comparison["auto"] is True and comparison["is_regression"] is True
    in_zh = api.get(f"/api/comparisons/{cid}/?lang=zh-Hans").json()
    assert in_zh["regression"] == comparison["regression"] == comparison["regression_localized"]
    assert any(line.startswith("per_token_latency_ms：") for line in in_zh["regression_localized"]), in_zh
    assert comparison["base"] == fixed.pk and comparison["candidate"] == planted.pk
    ptl = _metric(comparison["result"], "per_token_latency_ms")
    assert ptl["better"] is False and ptl["significant"] is True and ptl["delta_pct"] > 5.0
    # Exact: the comparison's per-token latency is each profile's own number from its diagnosis.
    fixed.refresh_from_db()
    planted.refresh_from_db()
    assert ptl["base"] == fixed.summary["report"]["profile"]["decode"]["per_token_ms_p50"]
    assert ptl["new"] == planted.summary["report"]["profile"]["decode"]["per_token_ms_p50"]
    # The findings' status comes from the stored findings: the four planted rules are new in the candidate.
    status = {f["rule"]: f["status"] for f in comparison["result"]["findings"]}
    stored = set(planted.findings.values_list("rule", flat=True))
    assert set(PLANTED_RULES) <= stored
    assert all(status.get(rule) == "new" for rule in PLANTED_RULES), status

    listed = api_for(viewer).get(f"/api/projects/{pid}/regressions/").json()
    assert [(r["comparison"], r["candidate"], r["base"]) for r in listed] == [(cid, planted.pk, fixed.pk)]
    assert listed[0]["lines"] == reg["lines"]
    in_list = {p["id"]: p["regression"] for p in api.get(f"/api/projects/{pid}/profiles/").json()}
    assert in_list[fixed.pk] is None and in_list[planted.pk] == reg  # the list shows the same summary
    client.force_login(viewer)
    page = client.get(f"/projects/{pid}/").content.decode()
    assert 'id="regressions"' in page and 'class="badge-regression"' in page
    assert f'href="/comparisons/{cid}/"' in page and f'data-profile="{planted.pk}"' in page
    shown = client.get(f"/comparisons/{cid}/").content.decode()
    assert 'id="cmp-regression"' in shown and "per_token_latency_ms:" in shown
    # each reader sees the lines in their language (the API keeps its English lines)
    zh = client.get(f"/comparisons/{cid}/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    assert "per_token_latency_ms：" in zh and "阈值 5%" in zh and "limit 5%" not in zh
    zh_dashboard = client.get(f"/projects/{pid}/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    assert "阈值 5%）" in zh_dashboard.split('id="regressions"')[1][:3000]

    # Idempotent: running the automatic step again makes no
    # second comparison; the baseline is never a candidate.
    assert comparison_auto_create(profile_id=planted.pk).pk == cid
    assert comparison_auto_create(profile_id=fixed.pk) is None
    assert Comparison.objects.filter(project=project, auto=True).count() == 1

    # Exports of the comparison: the Markdown table and the CSV, as attachments.
    md = api.get(f"/api/comparisons/{cid}/export/?format=md")
    assert md.status_code == 200
    assert md["Content-Disposition"] == f'attachment; filename="comparison-{cid}.md"'
    assert md["Content-Type"].startswith("text/markdown")
    text = md.content.decode()
    assert text.startswith("| Metric | Unit | Before | After | Δ | Better |")
    assert "| per_token_latency_ms | ms |" in text and "❌" in text
    got = api.get(f"/api/comparisons/{cid}/export/?format=csv")
    assert got.status_code == 200
    assert got["Content-Disposition"] == f'attachment; filename="comparison-{cid}.csv"'
    rows = list(csv.DictReader(io.StringIO(got.content.decode())))
    row = next(r for r in rows if r["section"] == "metric" and r["name"] == "per_token_latency_ms")
    assert float(row["base"]) == ptl["base"] and float(row["new"]) == ptl["new"] and row["better"] == "False"
    assert {r["name"] for r in rows if r["section"] == "finding"} >= set(PLANTED_RULES)
    assert api.get(f"/api/comparisons/{cid}/export/?format=xlsx").status_code == 404
    assert api_for(stranger).get(f"/api/comparisons/{cid}/export/?format=md").status_code == 404

    # The team accepts the slow build as the baseline; a faster build then is no regression.
    res = api.post(f"/api/projects/{pid}/baseline/", {"profile": planted.pk}, format="json")
    assert res.status_code == 200 and res.json()["baseline"] == planted.pk
    faster = _ready(_upload(api, pid, archives["fixed"], "fixed again"), worker)
    reg2 = _auto_result(api, faster.pk, worker)
    assert reg2["status"] == "done" and reg2["baseline"] == planted.pk
    assert reg2["is_regression"] is False and reg2["lines"] == []
    better = _metric(api.get(f"/api/comparisons/{reg2['comparison']}/").json()["result"],
                     "per_token_latency_ms")
    assert better["better"] is True and better["delta_pct"] < -5.0
    assert 'id="cmp-regression"' not in client.get(f"/comparisons/{reg2['comparison']}/").content.decode()
    assert api.get(f"/api/projects/{pid}/regressions/").json() == []  # against the current baseline
    page = client.get(f"/projects/{pid}/").content.decode()
    assert 'id="no-regressions"' in page
    assert "badge-regression" not in page.split('id="regressions"')[1][:2000]


@pytest.mark.django_db
def test_baseline_refusals_and_unpin(make_user, api_for) -> None:
    """Pinning validates its input without a worker: ready profiles of this project only, a sane threshold."""
    from django.core.files.base import ContentFile

    from profiles.models import Profile

    owner = make_user("owner")
    project, other = project_with(owner), project_with(make_user("other"))
    api = api_for(owner)

    def profile(p: Any, status: str) -> Profile:
        row = Profile(project=p, name=f"{status} profile", original_filename="a.csv", upload_kind="csv",
                      size=4, created_by=owner, status=status)
        row.archive.save("a.csv", ContentFile(b"a,b\n"), save=False)
        row.save()
        return row

    ready, parsing, foreign = profile(project, "ready"), profile(project, "parsing"), profile(other, "ready")
    url = f"/api/projects/{project.pk}/baseline/"
    res = api.post(url, {"profile": foreign.pk}, format="json")
    assert res.status_code == 400 and f"No profile {foreign.pk} in this project" in res.json()["profile"][0]
    missing = api.post(url, {"profile": 10**9}, format="json")
    # same answer: no oracle
    assert missing.status_code == 400 and "No profile" in missing.json()["profile"][0]
    res = api.post(url, {"profile": parsing.pk}, format="json")
    assert res.status_code == 400 and "parsing" in res.json()["profile"][0]
    for bad in (0, -1, 1001):
        assert api.post(url, {"threshold_pct": bad}, format="json").status_code == 400
    project.refresh_from_db()
    assert project.baseline_id is None and project.regression_threshold_pct == 5.0

    res = api.post(url, {"profile": ready.pk, "threshold_pct": 2.5}, format="json")
    assert res.status_code == 200 and res.json()["baseline"] == ready.pk
    assert res.json()["regression_threshold_pct"] == 2.5
    res = api.post(url, {"threshold_pct": 10}, format="json")  # the threshold alone keeps the baseline
    assert res.json()["baseline"] == ready.pk and res.json()["regression_threshold_pct"] == 10.0
    res = api.post(url, {"profile": None}, format="json")
    assert res.status_code == 200 and res.json()["baseline"] is None
    assert api.get(f"/api/projects/{project.pk}/regressions/").json() == []
