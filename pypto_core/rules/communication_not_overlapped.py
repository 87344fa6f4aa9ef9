"""``communication_not_overlapped``: collectives that the step waits for, with no compute beside them.

The attribution's ``communication_not_overlapped`` bucket (msprof-analyze's Communication(Not Overlapped))
is the time to explain. Where the profile has per-collective figures (communication.json: Transit, Wait,
Idle; NCCL/HCCL sizes), the finding says whether that time moves data (then overlap it, or bundle it) or
waits (then the other ranks are late: the slow rank is the one to fix), with the achieved bandwidth.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from pypto_core import collective_wait
from pypto_core.attribution import COMM_CODE
from pypto_core.i18n import Message, msg
from pypto_core.intervals import clip_to_length
from pypto_core.replay import kernel_change
from pypto_core.rules._bucket_rule import bucket_share
from pypto_core.rules._util import column_strings, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Overlapping the collectives with compute hides their transfer up to the compute that "
                   "is not yet overlapped: saving = min(not-overlapped transfer, compute - overlapped), an "
                   "upper bound. The part of the not-overlapped time that moves no data (not-overlapped "
                   "time x the collectives' waiting share) is reported apart as the wait for other ranks: "
                   "only a fix on the late ranks removes it, so it is not counted in this profile's "
                   "saving.")

_LIB = {"ascend": "HCCL", "nvidia": "NCCL", "amd": "RCCL"}
_OVERLAP_ADVICE = {
    "ascend": msg("Overlap gradient communication with the backward pass (DDP buckets: bucket_cap_mb; "
                  "MindSpeed --overlap-grad-reduce), and check HCCL_BUFFSIZE and the link each collective "
                  "uses."),
    "nvidia": msg("Overlap gradient communication with the backward pass (DDP bucket_cap_mb, FSDP prefetch), "
                  "and check NCCL's algorithm and protocol (NCCL_ALGO, NCCL_PROTO) and the link (NVLink vs "
                  "PCIe)."),
    "amd": msg("Overlap gradient communication with the backward pass (DDP bucket_cap_mb) and check RCCL's "
            "settings and the link (Infinity Fabric vs PCIe)."),
}


@rule("communication_not_overlapped", title=msg("Communication not overlapped with compute"),
      saving_model=SAVING_MODEL,
      thresholds={
          "share_above": Threshold(0.10, "msprof-analyze's cluster analysis ranks steps by Communication(Not "
                                         "Overlapped); a tenth of the step is where it stops being noise "
                                         "[INFERRED]"),
          "waiting_share_above": Threshold(0.50, "communication.json splits a collective into Transit + Wait "
                                                 "+ Idle; above this share of not-transit time the "
                                                 "collective is mostly waiting for its peers, not moving "
                                                 "data [INFERRED]"),
          "slow_rank_wait_ratio": Threshold(0.20, "MindStudio's Communication Analysis guidance: a rank "
                                                  "whose Wait Time Ratio (wait / (wait + transit)) is above "
                                                  "0.2 is waiting for a slow peer"),
      },
      blocks=(), remedies=(), needs=("kernels.name", "communication.*", "steps.*"),
      explains="communication_not_overlapped", saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    a = g.attribution
    if a is None or bucket_share(ctx, "communication_not_overlapped") is None:
        return
    cfg = ctx.thresholds
    total = ctx.total_ns
    exposed = float(ctx.bucket_ns("communication_not_overlapped"))
    b = a.run
    figures = collective_wait.collective_figures(ctx.profile.communication)
    elapse = figures.get("elapse", 0.0)
    transit = figures.get("transit", 0.0)
    # per communication.json, Elapse = Transit + Wait + Idle: what is not transit is not moving data
    waiting_share = collective_wait.waiting_share(figures)
    lib = _LIB.get(ctx.vendor, msg("the collective library"))
    evidence = {"communication_not_overlapped_us": us(exposed), "share_of_step": share(exposed, total),
                "communication_overlapped_us": us(b.communication_overlapped_ns),
                "compute_us": us(b.buckets["compute"]), "threshold_share": cfg["share_above"],
                "ranks_in_profile": ctx.group.ranks if ctx.group else 1}
    if figures:
        evidence.update({"collectives": int(figures["collectives"]), "collective_time_us": us(elapse),
                         "transit_us": us(transit), "wait_us": us(figures["wait"]),
                         "idle_us": us(figures["idle"]),
                         "size_mb": round(figures["size_bytes"] / 1e6, 3)})
        if figures.get("transit_from_links"):  # the time split wrote Transit 0 (collective_wait)
            evidence["transit_from_links_us"] = us(figures["transit_from_links"])
        if transit > 0 and figures["size_bytes"] > 0:
            evidence["achieved_bandwidth_gbps"] = round(figures["size_bytes"] / transit, 3)  # bytes/ns = GB/s
    # The run's wait for other ranks (one figure: the report's headline reads it too), whatever the share:
    # only the late ranks remove it, so this rank's overlap can hide at most the rest.
    peer_wait = ctx.peer_wait.wait_ns if ctx.peer_wait is not None else 0.0
    saving = min(exposed - peer_wait, max(b.buckets["compute"] - b.communication_overlapped_ns, 0))
    if ctx.peer_wait is not None:
        evidence["wait_for_other_ranks_us"] = us(peer_wait)
    # the share of their time the collectives wait, when it is above the threshold
    waiting = (waiting_share if waiting_share is not None and waiting_share >= cfg["waiting_share_above"]
               else None)
    if waiting is not None:
        wait = figures["wait"]
        # MindStudio's Wait Time Ratio: notify wait over wait + transit; above its threshold a peer is late
        # without Transit figures (not recorded) the ratio would read 1.0 for nothing: the Wait share of the
        # collectives' time stands in for it
        wait_ratio = wait / (wait + transit) if transit > 0 else (wait / elapse if elapse > 0 else None)
        evidence["waiting_share"] = round(waiting, 6)
        if wait_ratio is not None:
            evidence["wait_time_ratio"] = round(wait_ratio, 6)
        moved = (msg("the collectives move data {pct:.1f}% of their time", pct=100 * transit / elapse)
                 if transit > 0 else
                 msg("the profile records no transfer time (Transit) for the collectives"))
        title = msg("Communication not overlapped is {pct:.0f}% of the step, and {moved}",
                    pct=100 * exposed / total, moved=moved)
        # msprof reads Wait on the collective's main stream only: the other streams' waits for peers are in
        # Idle (collective_wait), which the text says rather than calling all of it a notify wait
        parts = msg("of their {elapse_ms:.1f} ms, Transit is {transit_ms:.1f} ms, notify Wait {wait_ms:.1f} "
                    "ms and Idle {idle_ms:.1f} ms (communication.json; msprof reads Wait on the collective's "
                    "main stream only, so Idle, where that stream neither moves data nor waits on a notify, "
                    "holds the other streams' waits for peers and the gaps between its tasks)",
                    elapse_ms=us(elapse) / 1e3, transit_ms=us(transit) / 1e3, wait_ms=us(wait) / 1e3,
                    idle_ms=us(figures["idle"]) / 1e3)
        p2p = collective_wait.p2p_share(figures)
        if p2p >= collective_wait.P2P_WAIT_SHARE:
            evidence["p2p_wait_share"] = round(p2p, 6)
            # a pipeline stage waiting for its neighbour, which no "slow rank" fix removes
            cause = msg("{pct:.0f}% of that waiting is in point-to-point send/receive between pipeline "
                        "stages: this stage waits for the previous or next one (the pipeline bubble), not "
                        "for a late data-parallel peer. More micro-batches per step, an interleaved (virtual "
                        "pipeline) schedule, or layers balanced between the stages shrink it; overlap what "
                        "remains with compute.", pct=100 * p2p)
        elif wait_ratio is not None and wait_ratio >= cfg["slow_rank_wait_ratio"]:
            cause = msg(
                "Their Wait is {pct:.0f}% of Wait + Transit, above the {limit:.1f} at which MindStudio flags "
                "a slow rank: this rank reaches each collective before its peers. The slow rank is the one "
                "to fix: compare the ranks (their step time split, data loading, host stalls), balance the "
                "work, then overlap what remains with compute." if transit > 0 else
                "Their Wait is {pct:.0f}% of the collectives' time (no Transit recorded), above the "
                "{limit:.1f} at which MindStudio flags a slow rank: this rank reaches each collective before "
                "its peers. The slow rank is the one to fix: compare the ranks (their step time split, data "
                "loading, host stalls), balance the work, then overlap what remains with compute.",
                pct=100 * wait_ratio, limit=cfg["slow_rank_wait_ratio"])
        else:
            cause = msg("Their notify Wait is small, so the time goes before or between the collectives' "
                        "tasks: check what the communication stream waits for (events from compute, the "
                        "host's launch), then overlap the collectives with compute.")
        description = (msg("The step waits {ms:.1f} ms in {lib} collectives with no compute beside them, and "
                           "they are not moving data: {parts}. "
                           "{cause}", ms=us(exposed) / 1e3, lib=lib, parts=parts,
                           cause=cause) if transit > 0 else
                       msg("The step waits {ms:.1f} ms in {lib} collectives with no compute beside them, "
                           "most of it waiting for their peers: {parts}. {cause}", ms=us(exposed) / 1e3,
                           lib=lib, parts=parts, cause=cause))
    else:
        known: Message | str = ""
        if waiting_share is None and ctx.vendor == "ascend":
            # torch_npu writes communication.json (each collective's Transit, Wait and Idle) only from
            # profiler_level Level1 up, and only for a multi-card run (docs/formats.md)
            known = msg(" The profile has no per-collective wait figures (communication.json, which "
                        "torch_npu writes for a multi-card run from profiler_level Level1 up), so transfer "
                        "and waiting cannot be told apart here: profile a few steps at Level1 to split them.")
        elif waiting_share is None:
            known = msg(" The profile has no per-collective wait figures, so transfer and waiting cannot be "
                        "told apart here.")
        if waiting_share is not None and transit <= 0:
            # Idle then holds the transfer as well as any waiting (collective_wait.waiting_share)
            known = msg(" The profile records no transfer time (Transit) for them: of their {elapse_ms:.1f} "
                        "ms, notify Wait (waiting for peers) is {wait_ms:.1f} ms and Idle {idle_ms:.1f} ms, "
                        "which may be data moving or waiting.", elapse_ms=us(elapse) / 1e3,
                        wait_ms=us(figures["wait"]) / 1e3, idle_ms=us(figures["idle"]) / 1e3)
        title = msg("Communication not overlapped is {pct:.0f}% of the step", pct=100 * exposed / total)
        description = msg("The step waits {ms:.1f} ms in {lib} collectives with no compute beside "
                          "them.{known} {advice}", ms=us(exposed) / 1e3, lib=lib, known=known,
                          advice=_OVERLAP_ADVICE.get(ctx.vendor, msg("Overlap communication with compute.")))
    is_comm = g.task_codes[0] == COMM_CODE
    comm_kernels = np.nonzero(is_comm)[0]
    s, e = a.intervals("communication_not_overlapped")
    ctx.emit(
        title=title, description=description,
        ops=column_strings(g, "name", is_comm, limit=10) or
        [str(v) for v in pc.unique(pc.fill_null(ctx.profile.communication["name"], "")).to_pylist()[:10]
         if v],
        evidence=evidence, kernels=comm_kernels, saving_ns=np.zeros(len(comm_kernels)), covered_ns=exposed,
        saving_model=SAVING_MODEL, intervals=clip_to_length(s, e, saving), waits_for_peers=True,
        # the collectives lose the part compute can hide: this rank's tasks shortened
        change=kernel_change(comm_kernels, saving, g.dur),
        details={"vendor": ctx.vendor, "library": str(lib)},
    )
