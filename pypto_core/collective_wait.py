"""How much of a rank's collective time waits for other ranks, from its communication table
(communication.json / COMMUNICATION_OP: Elapse = Transit + Wait + Idle per collective, docs/formats.md).

A collective that waits is waiting for a late peer: what that rank does decides when it ends, not this one.
The rules report that wait apart from this rank's own saving, and the what-if replay keeps each collective
waiting for its peers as recorded (``pypto_core.replay``).
"""

from __future__ import annotations

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
    figures. Where no Transit is recorded it reads 1.0, as the rules say in their text."""
    elapse, transit = figures.get("elapse", 0.0), figures.get("transit", 0.0)
    if elapse <= 0 or transit < 0:
        return None
    return max(elapse - transit, 0.0) / elapse
