"""How much of a rank's collective time waits for other ranks, from its communication table
(communication.json / COMMUNICATION_OP: Elapse = Transit + Wait + Idle per collective, docs/formats.md).

A collective that waits is waiting for a late peer: what that rank does decides when it ends, not this one.
The run's wait is computed once here (``peer_wait``); the rules report it apart from this rank's own saving,
the report leads with it (``profile.peer_wait``), and the what-if replay keeps each collective waiting for its
peers as recorded (``pypto_core.replay``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

FIGURES = ("elapse", "transit", "wait", "synchronization", "idle")


def collective_figures(communication: pa.Table) -> dict[str, float]:
    """Totals over the rank's collectives (ns, bytes, count); {} without a communication table."""
    if not communication.num_rows:
        return {}

    def total(col: str) -> float:
        if col not in communication.column_names:
            return 0.0
        return float(pc.sum(pc.fill_null(communication[col], 0)).as_py() or 0)

    out = {name: total(f"{name}_ns") for name in FIGURES}
    out["size_bytes"] = total("size_bytes")
    out["collectives"] = float(communication.num_rows)
    return out


def waiting_share(figures: dict[str, float]) -> float | None:
    """The share of the collectives' time that moves no data (Elapse - Transit) / Elapse; None without
    figures, or where the profile records no split of their time at all. Where the profile splits it into
    Wait and Idle but records no Transit (some HCCL exports), it reads 1.0, as the rules say in their text."""
    elapse, transit = figures.get("elapse", 0.0), figures.get("transit", 0.0)
    if elapse <= 0 or transit < 0:
        return None
    if transit + figures.get("wait", 0.0) + figures.get("idle", 0.0) <= 0:
        # nothing splits the collectives' time (NCCL kernels in a Kineto trace: one duration each): how much
        # of it waits for peers is not known, and is not guessed
        return None
    return max(elapse - transit, 0.0) / elapse


@dataclass(frozen=True)
class PeerWait:
    """The run's wait for other ranks, computed once (``peer_wait``): the findings that report a wait for
    other ranks (``Finding.peer_wait_us``) and the report's headline (``profile.peer_wait``) read this one
    figure, so two findings about the same collectives never count their wait twice."""

    wait_ns: float  # exposed_ns x waiting_share
    exposed_ns: float  # the collectives' time not overlapped with compute (their whole time without one)
    waiting_share: float  # (Elapse - Transit) / Elapse of the collectives
    transit_recorded: bool  # False: no transfer time recorded, so all the exposed time counts as waiting
    # the collectives' own split, ns (communication.json: Elapse = Transit + Wait + Idle), which the
    # headline shows beside the figure so that its three numbers read as one
    figures: dict[str, float] = field(default_factory=dict)

    def to_dict(self, total_ns: int, ranks: int) -> dict[str, Any]:
        """``profile.peer_wait`` of the report (docs/contract.md)."""
        return {"wait_us": round(self.wait_ns / 1e3, 3),
                "share_of_run": round(self.wait_ns / total_ns, 6) if total_ns > 0 else None,
                "communication_not_overlapped_us": round(self.exposed_ns / 1e3, 3),
                "waiting_share": round(self.waiting_share, 6), "transit_recorded": self.transit_recorded,
                "ranks_in_profile": ranks,
                "collectives": {name: round(self.figures.get(name, 0.0) / 1e3, 3)
                                for name in ("elapse", "transit", "wait", "idle")}}


def peer_wait(communication: pa.Table, exposed_ns: float | None, total_ns: int) -> PeerWait | None:
    """How long this rank waits in collectives for other ranks: the time its collectives lengthen the run
    (``exposed_ns``, the attribution's communication not overlapped; None without an attribution: their
    whole time) times the share of their time that moves no data. A collective ends when the last rank
    arrives, so the part that is not transfer is this rank waiting for a late peer. None without
    per-collective figures."""
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
