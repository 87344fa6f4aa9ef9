"""``slow_rank``: in a multi-rank profile, one rank computes (or idles) much longer than the others, by
enough to matter for the step.

msprof-analyze's advisor (``SlowRankAnalyzer.produce_bottleneck``, 26.2.0) flags a kind of time (Computing,
Communication, Free of cluster_step_trace_time) when its spread over the ranks, max - min, is above 5% of the
ranks' mean step time (Computing + Communication + Free). The same figure here: a 21 ms spread of free time
in an 810 ms step (2.7%) is noise between ranks, not a slow rank, though it is 7% of the mean free time
(docs/formats.md §4.3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto_core.attribution import attribute
from pypto_core.i18n import Message, join_texts, msg
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
    """Compute, communication not overlapped and idle time of one rank, and its wall time (the steps it
    spans), from its time attribution (the same numbers the rank's breakdown shows)."""
    a = attribute(profile)
    if a is None:
        return {"computing": 0.0, "communication": 0.0, "free": 0.0, "step": 0.0}
    b = a.run.buckets
    return {"computing": float(b["compute"]), "communication": float(b["communication_not_overlapped"]),
            "free": float(a.run.idle_ns), "step": float(a.run.wall_ns)}


def job_shape(profiles: list[Profile]) -> tuple[int | None, dict[int, int]]:
    """(the job's world size, each rank's pipeline stage) as the profiles' own metadata say: torch_npu's
    profiler_metadata.json (``distributed_args.world_size``; the stage is the rank's place in its ``pp``
    group of ``parallel_group_info``), Kineto's ``distributedInfo.world_size``; None / absent where they do
    not."""
    world: int | None = None
    stages: dict[int, int] = {}
    for p in profiles:
        md = _mapping(p.meta.extra.get("metadata"))
        dist, kineto = _mapping(md.get("distributed_args")), _mapping(p.meta.extra.get("distributed"))
        size = dist.get("world_size", kineto.get("world_size"))
        if isinstance(size, int) and size > 0:
            world = max(world or 0, size)
        groups = md.get("parallel_group_info")
        if p.meta.rank is not None and isinstance(groups, dict):
            for g in groups.values():
                stage = g.get("group_rank") if isinstance(g, dict) and g.get("group_name") == "pp" else None
                if isinstance(stage, int):
                    stages[p.meta.rank] = stage
    return world, stages


def _mapping(value: Any) -> dict[str, Any]:
    """A metadata object as a dict (file contents: anything else reads as empty)."""
    return value if isinstance(value, dict) else {}


def _worst(totals: list[dict[str, float]], threshold: float
           ) -> tuple[str, float, np.ndarray, dict[str, float], float] | None:
    """The first kind of time (computing, free, communication) whose spread over the ranks (max - min) is
    above ``threshold`` of their mean step time: (kind, spread / step, values per rank, every kind's
    spread / step, the mean step time); None when the ranks are even, or the spread is too small to matter
    for the step (the advisor's measure)."""
    # Order of evidence: extra compute is the direct cause; extra free time (host stalls) next; a rank with
    # the *least* communication is the one the others wait for (its peers' collectives absorb its delay).
    step = float(np.mean([t["step"] for t in totals]))
    if step <= 0:  # no wall time: the three kinds together stand for the step, as in the advisor
        step = float(np.mean([t["computing"] + t["communication"] + t["free"] for t in totals]))
    if step <= 0:
        return None
    spreads: dict[str, float] = {}
    worst = None
    for kind in ("computing", "free", "communication"):
        vals = np.array([t[kind] for t in totals])
        if vals.max() <= 0:
            continue
        spreads[kind] = float((vals.max() - vals.min()) / step)
        if worst is None and spreads[kind] > threshold:
            worst = (kind, spreads[kind], vals)
    return None if worst is None else (*worst, spreads, step)


@rule("slow_rank", title=msg("Slow rank"), saving_model=SAVING_MODEL,
      thresholds={"gap_above": Threshold(0.05, "msprof-analyze advisor slow_rank (RATIO_THRESHOLD): a kind "
                                               "of time's spread over the ranks (max - min) above 5% of "
                                               "their mean step time (docs/formats.md §4.3)")},
      blocks=(), remedies=(), needs=(), scope="group", explains="communication_not_overlapped")
def match(ctx: RuleContext) -> None:
    group = ctx.group
    if group is None or group.ranks < 2:
        return
    profiles = list(group.profiles)
    ranks = [p.meta.rank if p.meta.rank is not None else i for i, p in enumerate(profiles)]
    world, stages = job_shape(profiles)
    # Ranks of different pipeline stages run different layers by design: only ranks of one stage are
    # compared, where the metadata says which stage each rank runs.
    subsets = [list(range(len(profiles)))]
    if len(stages) == len(profiles) and len(set(stages.values())) > 1:
        by_stage: dict[int, list[int]] = {}
        for i, r in enumerate(ranks):
            by_stage.setdefault(stages[r], []).append(i)
        subsets = [idx for idx in by_stage.values() if len(idx) > 1]
    totals = [_rank_totals(p) for p in profiles]
    found = []
    for idx in subsets:
        worst = _worst([totals[i] for i in idx], ctx.threshold("gap_above"))
        if worst is not None:
            found.append((worst, idx))
    if not found:
        return
    (kind, gap, vals, spreads, step), idx = max(found, key=lambda f: f[0][1])
    compared = [ranks[i] for i in idx]
    slow = int(np.argmin(vals)) if kind == "communication" else int(np.argmax(vals))
    saving = float(vals.max() - vals.mean()) if kind == "computing" else 0.0
    caveats: list[Message] = []
    if len(compared) < len(ranks):
        caveats.append(msg(" Ranks of different pipeline stages run different layers, so only the ranks of "
                           "one stage are compared: {ranks}.", ranks=", ".join(map(str, compared))))
    if world is not None and world > len(ranks):
        caveats.append(msg(" Only {n} of the job's {world} ranks are in this upload: a rank not uploaded may "
                           "be slower still; upload every rank to name the slowest.", n=len(ranks),
                           world=world))
    ctx.emit(
        title=msg("Rank {rank} is the slow rank: its {kind} time differs from the other ranks' by {ms:.1f} "
                  "ms, {pct:.0f}% of the step", rank=compared[slow], kind=RANK_TIME_KINDS[kind],
                  ms=float(vals.max() - vals.min()) / 1e6, pct=100 * gap),
        description=msg("One rank takes noticeably longer than the others, and every collective waits for "
                        "it. Look at that rank's own findings, its host (CPU binding, other processes) and "
                        "its share of the data.{caveats}", caveats=join_texts(caveats, "")),
        ops=[],
        # the figure compared with the threshold (spread_vs_step = spread_us / step_time_us), and each kind's
        evidence={"kind": kind, "spread_us": us(float(vals.max() - vals.min())), "step_time_us": us(step),
                  "spread_vs_step": round(float(gap), 4), "threshold": ctx.threshold("gap_above"),
                  **{f"{k}_spread_vs_step": round(v, 4) for k, v in spreads.items()},
                  "slow_rank": compared[slow], "ranks_compared": len(compared),
                  **({"world_size": world} if world is not None else {}),
                  **{f"rank_{r}_{kind}_us": us(v) for r, v in zip(compared, vals)}},
        kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=float(vals.max()),
        intervals=_waiting_for_peers(ctx, saving), saving_model=SAVING_MODEL,
        change=kernel_change(np.nonzero(ctx.graph.is_role("communication"))[0], saving, ctx.graph.dur),
        details={"ranks": ranks, "ranks_compared": compared, "slow_rank": compared[slow]},
    )


def _waiting_for_peers(ctx: RuleContext, saving: float) -> tuple[np.ndarray, np.ndarray]:
    """Balancing the ranks shortens this rank's step only where it waits in collectives not overlapped."""
    a = ctx.graph.attribution
    if a is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return clip_to_length(*a.intervals("communication_not_overlapped"), saving)
