"""How much of a rank's collective time waits for other ranks, from its communication table
(communication.json / COMMUNICATION_OP: Elapse = Transit + Wait + Idle per collective, docs/formats.md).

A collective that waits is waiting for a late peer: what that rank does decides when it ends, not this one.
The run's wait is computed once here (``peer_wait``); the rules report it apart from this rank's own saving,
the report leads with it (``profile.peer_wait``), and the what-if replay keeps each collective waiting for its
peers as recorded (``pypto_core.replay``).

What Idle is. msprof's communication analysis (``msparser/cluster/communication_parser.py``,
``op_time_parser``, in the CANN versions that wrote the samples) reads Transit (SDMA/RDMA transfer tasks),
Wait (``Notify_Wait`` tasks) and Synchronization (the Wait before the first transfer) from the tasks of the
collective's *main* stream only, and writes Idle = Elapse - Transit - Wait; the Bandwidth Info reads every
stream. msprof-analyze sums these figures as they are, and its Wait Time Ratio is Wait / (Wait + Transit).
A multi-stream collective (HCCL's mesh AllReduce on 910B: one stream per peer) keeps its main stream
between its own tasks while the other streams wait on their peers' notifies or move data, so their waiting
lands in the main stream's Idle, never in Wait. On the CNN 8-NPU rank 0 the trace's own tasks show it: of
the collectives' 93.2 ms of Idle (Wait 2.7 ms), the other streams' Notify_Wait tasks cover 92.9 ms (one of
86.1 ms towards rank 5 inside the first AllReduce), while the main stream records 2.5 ms of Wait
(``tests/core/test_collective_wait.py`` reads every sample whose trace holds the HCCL tasks). Idle is
therefore counted as waiting for peers, and kept apart from the notify Wait (``PeerWait.to_dict``:
``notify_wait_us``, ``idle_us``): it is known only as time in which the main stream neither moves data nor
waits on a notify, which also holds the gaps between its tasks. Newer msprof (2025) takes the union of the
wait and transfer tasks over every main-stream plane, so its Idle shrinks to those gaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

FIGURES = ("elapse", "transit", "wait", "synchronization", "idle")
P2P_PATTERN = r"send|recv|receive"  # hcom_send, hcom_receive, hcom_batchSendRecv, NCCL SendRecv
# Above this share of the wait in point-to-point ops, the wait is read as the pipeline's bubble.
P2P_WAIT_SHARE = 0.5


def collective_figures(communication: pa.Table) -> dict[str, float]:
    """Totals over the rank's collectives (ns, bytes, count); {} without a communication table."""
    if not communication.num_rows:
        return {}
    # each column read once (nulls as 0); the totals are their sums, transit and idle corrected below
    column = {name: _values(communication, name)
              for name in (*(f"{f}_ns" for f in FIGURES), "size_bytes", "bandwidth_gbps")}
    out = {name: float(column[f"{name}_ns"].sum()) for name in FIGURES}
    out["size_bytes"] = float(column["size_bytes"].sum())
    # Some HCCL exports (CANN 8.3 on the Qwen3 ranks) write Transit Time 0 in a collective's Communication
    # Time Info while its Communication Bandwidth Info records the links' transit (a 622 MB AllReduce: 32.7 of
    # its 34.6 ms, all counted as Idle): the transfer is then the links' (size / bandwidth), and it was inside
    # Idle, as Elapse = Transit + Wait + Idle.
    bw = column["bandwidth_gbps"]
    links = np.divide(column["size_bytes"], bw, out=np.zeros(len(bw)), where=bw > 0)  # GB/s = bytes per ns
    split = (column["wait_ns"] > 0) | (column["idle_ns"] > 0)  # a time split to correct (not a bare kernel)
    derived = (column["transit_ns"] <= 0) & (links > 0) & split
    transit = np.where(derived, np.minimum(links, column["elapse_ns"]), column["transit_ns"])
    out["transit_from_links"] = float(transit[derived].sum())
    out["transit"] = float(transit.sum())
    out["idle"] = float(np.maximum(column["idle_ns"] - np.where(derived, transit, 0), 0).sum())
    # each collective's waiting: what moves no data, or without any transfer figure its notify Wait
    waiting = (np.maximum(column["elapse_ns"] - transit, 0) if out["transit"] > 0 else column["wait_ns"])
    # point-to-point send/receive (pipeline stages; torch.distributed send/recv): a stage waiting in them
    # waits for the previous or next stage, the pipeline's bubble, not for a late data-parallel peer
    names = (pc.fill_null(pc.cast(communication["name"], pa.string()), "")
             if "name" in communication.column_names else pa.array([""] * communication.num_rows))
    p2p = pc.match_substring_regex(names, P2P_PATTERN, ignore_case=True).to_numpy(zero_copy_only=False)
    out["p2p_waiting"] = float(waiting[p2p].sum())
    out["collectives"] = float(communication.num_rows)
    return out


def _values(table: pa.Table, column: str) -> np.ndarray:
    if column not in table.column_names:
        return np.zeros(table.num_rows)
    values: np.ndarray = pc.fill_null(table[column], 0).to_numpy(zero_copy_only=False).astype(np.float64)
    return values


def p2p_share(figures: dict[str, float]) -> float:
    """The share of the collectives' waiting in point-to-point send/receive (``collective_figures``)."""
    waiting = (figures.get("elapse", 0.0) - figures.get("transit", 0.0) if figures.get("transit", 0.0) > 0
               else figures.get("wait", 0.0))
    return min(figures.get("p2p_waiting", 0.0) / waiting, 1.0) if waiting > 0 else 0.0


def waiting_share(figures: dict[str, float]) -> float | None:
    """The share of the collectives' time that waits for peers: (Elapse - Transit) / Elapse, the time moving
    no data; None without figures, or where the profile records no split of their time at all.

    Transit comes from the links where the time split omits it (``collective_figures``). Where the profile
    records no transfer at all but splits the time into Wait and Idle, Idle may hold the transfer: only the
    notify Wait is then known to be waiting, Wait / Elapse, and the figure is a lower bound."""
    elapse, transit = figures.get("elapse", 0.0), figures.get("transit", 0.0)
    if elapse <= 0 or transit < 0:
        return None
    if transit + figures.get("wait", 0.0) + figures.get("idle", 0.0) <= 0:
        # nothing splits the collectives' time (NCCL kernels in a Kineto trace: one duration each): how much
        # of it waits for peers is not known, and is not guessed
        return None
    if transit <= 0:
        return min(figures.get("wait", 0.0) / elapse, 1.0)
    return max(elapse - transit, 0.0) / elapse


@dataclass(frozen=True)
class PeerWait:
    """The run's wait for other ranks, computed once (``peer_wait``): the findings that report a wait for
    other ranks (``Finding.peer_wait_us``) and the report's headline (``profile.peer_wait``) read this one
    figure, so two findings about the same collectives never count their wait twice."""

    wait_ns: float  # exposed_ns x waiting_share
    exposed_ns: float  # the collectives' time not overlapped with compute (their whole time without one)
    waiting_share: float  # (Elapse - Transit) / Elapse of the collectives; Wait / Elapse without Transit
    transit_recorded: bool  # False: no transfer time recorded, so only the notify Wait counts (a lower bound)
    # the collectives' own split, ns (communication.json: Elapse = Transit + Wait + Idle), which the
    # headline shows beside the figure so that its three numbers read as one
    figures: dict[str, float] = field(default_factory=dict)

    def parts_ns(self) -> tuple[float, float]:
        """(the wait's notify-Wait part, its Idle part), ns: ``wait_ns`` split as the collectives' own Wait
        and Idle split their time that moves no data. The notify Wait is measured waiting on the collective's
        main stream; Idle is time in which that stream neither moves data nor waits on a notify (module
        docstring): the other streams' waits for peers, and the gaps between its tasks. Without transfer
        figures only the notify Wait is counted, so the whole wait is its part."""
        wait, idle = self.figures.get("wait", 0.0), self.figures.get("idle", 0.0)
        if not self.transit_recorded or wait + idle <= 0:
            return self.wait_ns, 0.0
        notify = self.wait_ns * wait / (wait + idle)
        return notify, self.wait_ns - notify

    def to_dict(self, total_ns: int, ranks: int) -> dict[str, Any]:
        """``profile.peer_wait`` of the report (docs/contract.md)."""
        notify, idle = self.parts_ns()
        p2p = p2p_share(self.figures)
        return {"wait_us": round(self.wait_ns / 1e3, 3),
                "notify_wait_us": round(notify / 1e3, 3), "idle_us": round(idle / 1e3, 3),
                "share_of_run": round(self.wait_ns / total_ns, 6) if total_ns > 0 else None,
                "communication_not_overlapped_us": round(self.exposed_ns / 1e3, 3),
                "waiting_share": round(self.waiting_share, 6), "transit_recorded": self.transit_recorded,
                "lower_bound": not self.transit_recorded,
                "p2p_share": round(p2p, 6),
                # where the wait is removed, since no fix on this rank does: the pipeline's schedule when most
                # of it is in point-to-point send/receive between stages, else the late (slow) rank
                "fix_on": "pipeline_schedule" if p2p >= P2P_WAIT_SHARE else "late_rank",
                "ranks_in_profile": ranks,
                "collectives": {name: round(self.figures.get(name, 0.0) / 1e3, 3)
                                for name in ("elapse", "transit", "wait", "idle", "transit_from_links")}}


def peer_wait(communication: pa.Table, exposed_ns: float | None, total_ns: int) -> PeerWait | None:
    """How long this rank waits in collectives for other ranks: the time its collectives lengthen the run
    (``exposed_ns``, the attribution's communication not overlapped; None without an attribution: their
    whole time) times the share of their time that moves no data. A collective ends when the last rank
    arrives, so the part that is not transfer is this rank waiting for a late peer; without transfer figures
    only the notify Wait is counted (``waiting_share``). None without per-collective figures."""
    figures = collective_figures(communication)
    share = waiting_share(figures) if figures else None
    if share is None:
        return None
    exposed = figures["elapse"] if exposed_ns is None else max(float(exposed_ns), 0.0)
    wait = exposed * share
    if total_ns > 0:
        wait = min(wait, float(total_ns))
    return PeerWait(wait_ns=wait, exposed_ns=exposed, waiting_share=share,
                    transit_recorded=figures.get("transit", 0.0) > 0, figures=figures)
