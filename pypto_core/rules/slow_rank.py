"""``slow_rank``: in a multi-rank profile, one rank computes (or idles) much longer than the others
(advisor ``slow_rank``: max vs mean gap > 5% for compute, communication or free time, docs/formats.md
§4.3)."""

from __future__ import annotations

import numpy as np

from pypto_core.attribution import attribute
from pypto_core.i18n import msg
from pypto_core.intervals import clip_to_length
from pypto_core.profile import Profile
from pypto_core.replay import kernel_change
from pypto_core.rules._util import us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Every rank waits for the slowest at each collective: balancing brings the slowest rank's "
                "compute to the mean; saving = max - mean compute time.")


RANK_TIME_KINDS = {"computing": msg("computing"), "communication": msg("communication"), "free": msg("free")}


def _rank_totals(profile: Profile) -> dict[str, float]:
    """Compute, communication not overlapped and idle time of one rank, from its time attribution (the
    same numbers the rank's breakdown shows)."""
    a = attribute(profile)
    if a is None:
        return {"computing": 0.0, "communication": 0.0, "free": 0.0}
    b = a.run.buckets
    return {"computing": float(b["compute"]), "communication": float(b["communication_not_overlapped"]),
            "free": float(a.run.idle_ns)}


@rule("slow_rank", title=msg("Slow rank"), saving_model=SAVING_MODEL,
      thresholds={"gap_above": Threshold(0.05, "advisor slow_rank: max vs mean > 5% (docs/formats.md §4.3)")},
      blocks=(), remedies=(), needs=(), scope="group", explains="communication_not_overlapped")
def match(ctx: RuleContext) -> None:
    group = ctx.group
    if group is None or group.ranks < 2:
        return
    ranks = [p.meta.rank if p.meta.rank is not None else i for i, p in enumerate(group.profiles)]
    totals = [_rank_totals(p) for p in group.profiles]
    # Order of evidence: extra compute is the direct cause; extra free time (host stalls) next; a rank with
    # the *least* communication is the one the others wait for (its peers' collectives absorb its delay).
    gaps: dict[str, float] = {}
    worst = None
    for kind in ("computing", "free", "communication"):
        vals = np.array([t[kind] for t in totals])
        if vals.mean() <= 0:
            continue
        gaps[kind] = float((vals.max() - vals.mean()) / vals.mean())
        if worst is None and gaps[kind] > ctx.threshold("gap_above"):
            worst = (kind, gaps[kind], vals)
    if worst is None:
        return
    kind, gap, vals = worst
    slow = int(np.argmin(vals)) if kind == "communication" else int(np.argmax(vals))
    saving = float(vals.max() - vals.mean()) if kind == "computing" else 0.0
    ctx.emit(
        title=msg("Rank {rank} is the slow rank: {kind} time spread {pct:.0f}% above the mean",
                  rank=ranks[slow], kind=RANK_TIME_KINDS[kind], pct=100 * gap),
        description=msg("One rank takes noticeably longer than the others, and every collective waits for "
                        "it. Look at that rank's own findings, its host (CPU binding, other processes) and "
                        "its share of the data."),
        ops=[],
        evidence={"kind": kind, **{f"{k}_gap_vs_mean": round(v, 4) for k, v in gaps.items()},
                  "gap_vs_mean": round(float(gap), 4), "threshold": ctx.threshold("gap_above"),
                  "slow_rank": ranks[slow], **{f"rank_{r}_{kind}_us": us(v) for r, v in zip(ranks, vals)}},
        kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=float(vals.max()),
        intervals=_waiting_for_peers(ctx, saving), saving_model=SAVING_MODEL,
        change=kernel_change(np.nonzero(ctx.graph.is_role("communication"))[0], saving, ctx.graph.dur),
        details={"ranks": ranks, "slow_rank": ranks[slow]},
    )


def _waiting_for_peers(ctx: RuleContext, saving: float) -> tuple[np.ndarray, np.ndarray]:
    """Balancing the ranks shortens this rank's step only where it waits in collectives not overlapped."""
    a = ctx.graph.attribution
    if a is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return clip_to_length(*a.intervals("communication_not_overlapped"), saving)
