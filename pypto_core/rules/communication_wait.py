"""``communication_wait``: collectives that mostly wait for peers (communication.json Wait/Synchronization
time, the advisor's and MindStudio's slow-rank signal). A wait on rank r is time another rank is late."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from pypto_core import collective_wait
from pypto_core.i18n import Message, msg
from pypto_core.rules._util import min_time_share, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("The wait ends only when the other ranks arrive together: it is reported as the wait for "
                   "other ranks (the collectives' time not overlapped with compute x the share of their time "
                   "that moves no data, the same figure for every finding), which a fix on the late ranks "
                   "removes; this profile's own saving is none.")


def _cause(p2p_share: float) -> Message:
    """Where the wait comes from: a pipeline's stages waiting on each other in their sends and receives (the
    bubble, fixed in the schedule), else ranks late to a collective (fixed on those ranks); the run's
    headline tells them apart by the same share (``PeerWait``)."""
    if p2p_share >= collective_wait.P2P_WAIT_SHARE:
        return msg("Most of the collective communication time is waiting, and most of that in point-to-point "
                   "sends and receives: the pipeline stages wait on each other (the pipeline bubble), not a "
                   "late rank. It shrinks with the schedule: more micro-batches per step, an interleaved "
                   "schedule, balanced stages.")
    return msg("Most of the collective communication time is waiting: this rank reached the collective "
               "before its peers. The cause is on the other ranks (uneven work, a slow card or host, data "
               "skew): compare ranks (slow_rank) and balance the work; overlapping communication with "
               "compute hides what remains.")


@rule("communication_wait", title=msg("Collectives waiting for other ranks"), saving_model=SAVING_MODEL,
      thresholds={
          "wait_share_above": Threshold(0.20, "[INFERRED] a fifth of collective time spent waiting for "
                                              "peers"),
          "min_time_share": min_time_share(0.02),
      },
      blocks=(), remedies=(), needs=("communication.*",), explains="communication_not_overlapped")
def match(ctx: RuleContext) -> None:
    comm = ctx.profile.communication
    if not comm.num_rows:
        return
    cfg = ctx.thresholds
    figures = collective_wait.collective_figures(comm)
    elapse, wait, sync = figures["elapse"], figures["wait"], figures["synchronization"]
    # Synchronization time is the part of the wait before the first transfer (elapse = transit + wait),
    # so it is not added again.
    waiting = max(wait, sync)
    if elapse <= 0 or waiting / elapse < cfg["wait_share_above"]:
        return
    span = ctx.total_ns
    if not span:
        st = pc.fill_null(comm["start_ns"], 0)
        span = int(pc.max(pc.add(st, pc.fill_null(comm["elapse_ns"], 0))).as_py() - pc.min(st).as_py())
    if share(elapse, max(span, 1)) < cfg["min_time_share"]:
        return
    names = pc.value_counts(pc.fill_null(comm["name"], "?")).to_pylist()
    ctx.emit(
        # notify Wait alone, named as such: the run's wait for other ranks (the headline) also counts the
        # collectives' Idle time, so "waiting" without its name read as a second figure for one wait
        title=msg("Collectives spend {pct:.0f}% of their time in notify Wait for other ranks",
                  pct=100 * waiting / elapse),
        description=_cause(collective_wait.p2p_share(figures)),
        ops=[n["values"] for n in names[:10]],
        evidence={"collectives": comm.num_rows, "communication_time_us": us(elapse), "wait_time_us": us(wait),
                  "synchronization_time_us": us(sync), "wait_share": share(waiting, elapse),
                  "threshold": cfg["wait_share_above"]},
        kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=elapse, saving_model=SAVING_MODEL,
        waits_for_peers=True,
    )
