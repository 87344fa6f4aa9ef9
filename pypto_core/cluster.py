"""Every rank of a multi-rank job on one page: ranks on one time axis aligned on their step markers, each
rank's time breakdown, the communication matrix, and the slowest link.

Inputs are what the analysis already computed, so every figure is the one shown elsewhere: the per-rank
breakdowns are the report's ``rank_breakdowns`` (``pypto_core.attribution`` via ``rules.diagnose``), the
matrix is msprof's ``communication_matrix.json`` as each rank's reader kept it (``meta.extra``).
"""

from __future__ import annotations

import statistics
from typing import Any

CLUSTER_VERSION = 1
# msprof-analyze's matrix lists every operator and, per collective, a "-total@group" line summing them:
# where totals exist only those are read, so no transfer is counted twice.
_TOTAL_MARK = "-total@"


def _common_step(ranks: list[dict[str, Any]]) -> int | None:
    ids = [{s.get("step_id") for s in r.get("steps") or [] if s.get("step_id") is not None} for r in ranks]
    common = set.intersection(*ids) if ids and all(ids) else set()
    return min(common) if common else None


def _timed(step: dict[str, Any]) -> bool:
    return int(step.get("end_ns") or 0) > int(step.get("start_ns") or 0)


def align_ranks(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows of step bars on one axis. Each rank's clock is shifted so that the first step every rank
    recorded starts at the same instant as on the lowest rank (the offset is stated per rank); without a
    common step the clocks are taken as they are (offset 0, said so). A rank whose export kept step
    durations but no timestamps (step_trace_time without times, as rank 1 of the Qwen3 sample) has no
    offset (None): its steps are drawn from the lowest rank's start of the same step, ``timed`` false."""
    ranks = sorted(ranks, key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    step = _common_step(ranks)
    offsets: list[int | None] = [0] * len(ranks)
    ref_starts: dict[Any, int] = {}
    if step is not None:
        ref_rank = next((r for r in ranks if any(s.get("step_id") == step and _timed(s) for s in r["steps"])),
                        None)
        if ref_rank is not None:
            ref = next(int(s["start_ns"]) for s in ref_rank["steps"] if s.get("step_id") == step
                       and _timed(s))
            for i, r in enumerate(ranks):
                own = next((s for s in r["steps"] if s.get("step_id") == step), None)
                offsets[i] = int(own["start_ns"]) - ref if own is not None and _timed(own) else None
            ref_starts = {s.get("step_id"): int(s["start_ns"]) for s in ref_rank["steps"] if _timed(s)}
    starts = [int(s["start_ns"]) - (off or 0) for r, off in zip(ranks, offsets) if off is not None
              for s in r.get("steps") or [] if _timed(s)]
    base = min(starts) if starts else min(ref_starts.values(), default=0)
    rows: list[dict[str, Any]] = []
    for r, off in zip(ranks, offsets):
        steps: list[dict[str, Any]] = []
        cursor = 0
        for s in r.get("steps") or []:
            if off is not None and _timed(s):
                a, b = int(s["start_ns"]) - off - base, int(s["end_ns"]) - off - base
                abs_a: str | None = str(int(s["start_ns"]))
                abs_b: str | None = str(int(s["end_ns"]))
            else:  # no timestamps: at the lowest rank's start of the same step, as long as its breakdown says
                a = ref_starts.get(s.get("step_id"), cursor + base) - base
                b = a + int((s.get("time_breakdown") or {}).get("wall_ns") or 0)
                abs_a = abs_b = None
            cursor = b
            steps.append({"step_id": s.get("step_id"), "start_ns": a, "end_ns": b, "timed": abs_a is not None,
                          "abs_start_ns": abs_a, "abs_end_ns": abs_b,
                          "time_breakdown": s.get("time_breakdown")})
        rows.append({"rank": r.get("rank"), "offset_ns": off, "time_breakdown": r.get("time_breakdown"),
                     "dominant_bucket": r.get("dominant_bucket"), "source": r.get("source"), "steps": steps})
    span = max((s["end_ns"] for row in rows for s in row["steps"]), default=0)
    return {"base_ns": str(base), "span_ns": span, "aligned_on_step": step,
            "alignment": ("first common step" if step is not None else "none (no step common to every rank)"),
            "ranks": rows}


def communication_links(matrices: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Links (source rank -> destination rank) summed over steps and collectives: transport, MB, ms, GB/s."""
    sums: dict[tuple[int, int], dict[str, Any]] = {}
    for matrix in matrices.values():
        for step in (matrix or {}).values():
            for kind in (step or {}).values():
                ops = kind or {}
                keys = [k for k in ops if _TOTAL_MARK in str(k)] or list(ops)
                for key in keys:
                    for link, v in (ops.get(key) or {}).items():
                        parts = str(link).split("-")
                        if (len(parts) != 2 or not all(p.strip().isdigit() for p in parts)
                                or not isinstance(v, dict)):
                            continue
                        src, dst = int(parts[0]), int(parts[1])
                        acc = sums.setdefault((src, dst), {"src": src, "dst": dst,
                                                           "transport": v.get("Transport Type"),
                                                           "size_mb": 0.0, "time_ms": 0.0})
                        acc["size_mb"] += float(v.get("Transit Size(MB)") or 0.0)
                        acc["time_ms"] += float(v.get("Transit Time(ms)") or 0.0)
    links = []
    for acc in sums.values():
        # GB/s as msprof-analyze computes it: MB / ms (MB/ms = GB/s with its decimal units)
        acc["bandwidth_gbps"] = round(acc["size_mb"] / acc["time_ms"], 4) if acc["time_ms"] > 0 else None
        acc["size_mb"], acc["time_ms"] = round(acc["size_mb"], 4), round(acc["time_ms"], 4)
        links.append(acc)
    return sorted(links, key=lambda x: (x["src"], x["dst"]))


# A link that moved less than this is timed by its latency, not its bandwidth (the Qwen3 ranks' 100-byte
# handshakes to ranks 2 and 3 read 0.06 GB/s beside 19 GB/s over the same HCCS) [INFERRED]
MIN_LINK_MB = 1.0


def _rated(link: dict[str, Any]) -> bool:
    """A link between two ranks (a rank's LOCAL copy is none) that moved enough to be timed by its
    bandwidth (``MIN_LINK_MB``): the links ``slowest_link`` and ``link_ratings`` read against each other."""
    return bool(link["src"] != link["dst"] and link.get("bandwidth_gbps")
                and (link.get("size_mb") or 0.0) >= MIN_LINK_MB)


# A link this far below the median of its transport's links is slow; nearer, the slowest of even links (the
# CNN rank's slowest HCCS link moved at 98% of the median: naming it slow sent a reader after nothing)
# [INFERRED]
SLOW_LINK_RATIO = 0.8


def slowest_link(links: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The link with the lowest bandwidth among links between two ranks (a rank's LOCAL copy is no link)
    that moved at least ``MIN_LINK_MB``, with the median of those links of its transport as the evidence to
    read it against, and whether that makes it slow (``slow``: below ``SLOW_LINK_RATIO`` of the median)."""
    remote = [x for x in links if _rated(x)]
    if len(remote) < 2:
        return None
    worst = min(remote, key=lambda x: x["bandwidth_gbps"])
    same = [x["bandwidth_gbps"] for x in remote if x.get("transport") == worst.get("transport")]
    median = statistics.median(same)
    ratio = worst["bandwidth_gbps"] / median if median else None
    return {**worst, "median_bandwidth_gbps": round(median, 4), "links_compared": len(same),
            "ratio_to_median": round(ratio, 4) if ratio is not None else None,
            "slow": ratio is not None and ratio < SLOW_LINK_RATIO}


def link_ratings(links: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """How fast each link is for its kind, keyed (src, dst): ``rating`` "local" (a rank's copy to itself,
    no link), "small" (moved less than ``MIN_LINK_MB``: timed by its latency, so its GB/s says nothing of the
    link) or "rated", with ``reference_gbps`` the median of the rated links of its transport (as
    ``slowest_link`` reads the slowest) and ``ratio`` its bandwidth over that median. A transport's links are
    read against each other because HCCS, PCIe and RDMA differ by an order of magnitude by design."""
    by_transport: dict[Any, list[float]] = {}
    for x in filter(_rated, links):
        by_transport.setdefault(x.get("transport"), []).append(float(x["bandwidth_gbps"]))
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for x in links:
        key = (x["src"], x["dst"])
        if x["src"] == x["dst"]:
            out[key] = {"rating": "local", "reference_gbps": None, "ratio": None, "peers": 0}
        elif _rated(x):
            same = by_transport[x.get("transport")]
            median = statistics.median(same)
            out[key] = {"rating": "rated", "reference_gbps": round(median, 4), "peers": len(same),
                        "ratio": round(float(x["bandwidth_gbps"]) / median, 4) if median else None}
        else:
            out[key] = {"rating": "small", "reference_gbps": None, "ratio": None, "peers": 0}
    return out


def cluster_view(rank_breakdowns: list[dict[str, Any]], matrices: dict[int, dict[str, Any]],
                 slow_rank: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cluster page's data: aligned ranks, links, the slowest link, and the slow-rank finding's evidence
    (the ``slow_rank`` rule's, passed through as it is)."""
    links = communication_links(matrices)
    peers = sorted({x["src"] for x in links} | {x["dst"] for x in links})
    return {"version": CLUSTER_VERSION, **align_ranks(rank_breakdowns), "links": links, "link_ranks": peers,
            "matrix_source": "communication_matrix.json" if links else None,
            "slowest_link": slowest_link(links), "slow_rank": slow_rank}
