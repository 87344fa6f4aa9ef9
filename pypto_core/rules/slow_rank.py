"""``slow_rank``: in a multi-rank profile, one rank computes (or idles) much longer than the others
(advisor ``slow_rank``: max vs mean gap > 5% for compute, communication or free time, FORMATS.md §4.3)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from pypto_core.rules._util import us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import rule

SAVING_MODEL = ("Every rank waits for the slowest at each collective: balancing brings the slowest rank's "
                "compute to the mean; saving = max - mean compute time.")


def _rank_totals(profile) -> dict[str, float]:
    steps = profile.steps
    if steps.num_rows and steps["computing_ns"].null_count < steps.num_rows:
        return {k: float(pc.sum(pc.fill_null(steps[f"{k}_ns"], 0)).as_py() or 0)
                for k in ("computing", "communication", "free")}
    k = profile.kernels
    if not k.num_rows:
        return {"computing": 0.0, "communication": 0.0, "free": 0.0}
    core = pc.fill_null(k["core_type"], "")
    is_comm = pc.is_in(core, pa_strings(["COMMUNICATION", "HCCL"]))
    dur = pc.fill_null(k["dur_ns"], 0)
    comm = float(pc.sum(pc.filter(dur, is_comm)).as_py() or 0)
    comp = float(pc.sum(pc.filter(dur, pc.invert(is_comm))).as_py() or 0)
    return {"computing": comp, "communication": comm, "free": 0.0}


def pa_strings(values: list[str]):
    import pyarrow as pa

    return pa.array(values, pa.string())


@rule("slow_rank", title="Slow rank", saving_model=SAVING_MODEL, scope="group", needs=("steps", "kernels"))
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
        title=(f"Rank {ranks[slow]} is the slow rank: {kind} time spread {100 * gap:.0f}% above the mean"),
        description=("One rank takes noticeably longer than the others, and every collective waits for it. Look at "
                     "that rank's own findings, its host (CPU binding, other processes) and its share of the data."),
        ops=[],
        evidence={"kind": kind, **{f"{k}_gap_vs_mean": round(v, 4) for k, v in gaps.items()}, "gap_vs_mean": round(float(gap), 4), "threshold": ctx.threshold("gap_above"),
                  "slow_rank": ranks[slow], **{f"rank_{r}_{kind}_us": us(v) for r, v in zip(ranks, vals)}},
        kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=float(vals.max()),
        extra_saving_ns=min(saving, 0.5 * max(ctx.total_ns, 1)), saving_model=SAVING_MODEL,
        details={"ranks": ranks, "slow_rank": ranks[slow]},
    )
