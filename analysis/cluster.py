"""The cluster view of a multi-rank profile (``pypto_core.cluster``), from what the analysis stored: the
report's per-rank breakdowns, each rank's communication matrix (its saved ``profile.json``), and the
``slow_rank`` finding. Views call ``cluster_data``; membership is checked by the caller."""

from __future__ import annotations

import logging
from typing import Any

from analysis.models import Finding
from analysis.storage import ProfileStore
from analysis.summary import summary_of
from profiles.models import Profile, ProfileStatus
from pypto_core.cluster import cluster_view
from pypto_core.i18n import DEFAULT_LANGUAGE
from pypto_core.rules.evidence_labels import evidence_rows
from pypto_core.rules.finding import localize_finding

log = logging.getLogger(__name__)


def _rank_breakdowns(profile: Profile) -> list[dict[str, Any]]:
    report = summary_of(profile).report_profile
    ranks = [r for r in report.get("rank_breakdowns") or [] if isinstance(r, dict)]
    if ranks:
        return ranks
    if report.get("time_breakdown") is None and not report.get("steps"):
        return []
    return [{"rank": profile.rank if profile.rank is not None else 0,
             "source": report.get("attribution_source"),
             "time_breakdown": report.get("time_breakdown"), "dominant_bucket": report.get("dominant_bucket"),
             "steps": report.get("steps") or []}]


def _matrices(profile: Profile) -> dict[int, dict[str, Any]]:
    """Each rank's communication matrix, from its saved metadata (no table is read)."""
    store = ProfileStore(profile)
    out: dict[int, dict[str, Any]] = {}
    for i, folder in enumerate(store.rank_folders()):
        meta = store.rank_meta(folder)
        if meta is None:
            log.warning("profile %s: no readable metadata for %s", profile.pk, folder)
            continue
        matrix = (meta.get("extra") or {}).get("communication_matrix")
        if matrix:
            rank = meta.get("rank")
            out[int(rank) if rank is not None else i] = matrix
    return out


def _slow_rank(profile: Profile, language: str) -> dict[str, Any] | None:
    row = Finding.objects.filter(profile=profile, rule="slow_rank").order_by("order", "id").first()
    if row is None:
        return None
    evidence = (row.data or {}).get("evidence") or {}
    title = localize_finding({"title": row.title, **(row.data or {})}, language)["title"]
    # the evidence ids stay (the API's keys); the page shows their words beside them
    return {"title": title, "evidence": evidence, "evidence_rows": evidence_rows(evidence, language),
            "finding_id": row.pk}


def _rank_profiles(profile: Profile) -> dict[int, int]:
    """Rank -> the profile whose timeline shows it (a fanned-out rank's own profile, else this one)."""
    out: dict[int, int] = {}
    for r in summary_of(profile).rank_profiles:
        if r.get("rank") is not None and r.get("status") == ProfileStatus.READY:
            out[int(r["rank"])] = int(r["id"])
    return out


def cluster_data(*, profile: Profile, language: str = DEFAULT_LANGUAGE) -> dict[str, Any] | None:
    """The cluster view, or None when the profile has neither several ranks nor a communication matrix."""
    ranks = _rank_breakdowns(profile)
    matrices = _matrices(profile)
    if len(ranks) < 2 and not matrices:
        return None
    data = cluster_view(ranks, matrices, _slow_rank(profile, language))
    timelines = _rank_profiles(profile)
    # this profile's own timeline shows its primary (lowest) rank
    own = profile.rank if profile.rank is not None else (data["ranks"][0]["rank"] if data["ranks"] else None)
    for row in data["ranks"]:
        pid = timelines.get(row["rank"]) if row["rank"] is not None else None
        if pid is None and row["rank"] == own:
            pid = profile.pk
        row["timeline_profile"] = pid
    return data
