"""The saving model every "chain of small kernels -> one fused kernel" rule shares.

A chain's slot is the device time of its kernels plus the idle gap before each (the host launching it).
After fusion one kernel remains, of an estimated time, launched with the short gap of a launch the host
issued ahead of time (``fused_launch_gap_us``: with fewer launches the host runs ahead of the device).
"""

from __future__ import annotations

import numpy as np

from pypto_core.graph import OperatorCallGraph
from pypto_core.rules.registry import Threshold

# ``fused_launch_gap_us`` of every fusion rule (each rule declares it, so a project can set it per rule).
FUSED_LAUNCH_GAP = Threshold(1.5, "launch gap of the one fused kernel: once the host issues far fewer "
                                  "launches it runs ahead of the device, so the gap is a queued one "
                                  "[INFERRED]")


def chain_savings(graph: OperatorCallGraph, idx: np.ndarray, chain_of_idx: np.ndarray,
                  fused_ns: np.ndarray | float, fused_gap_ns: float) -> tuple[np.ndarray, int]:
    """Per-kernel savings for the chain members ``idx`` (chain id per member in ``chain_of_idx``).

    ``fused_ns``: the fused kernel's time, one value or one per chain (in ``np.unique`` order of ids).
    Returns (saving per member, number of chains). Each chain's saving is spread over its members in
    proportion to their slots, so combining findings never counts a kernel twice.
    """
    if not len(idx):
        return np.zeros(0), 0
    _, inv = np.unique(chain_of_idx, return_inverse=True)
    chains = int(inv.max()) + 1
    slot = graph.slot_ns(idx)
    chain_slot = np.bincount(inv, weights=slot, minlength=chains)
    chain_saving = np.maximum(chain_slot - np.asarray(fused_ns, np.float64) - fused_gap_ns, 0.0)
    return chain_saving[inv] * slot / np.maximum(chain_slot[inv], 1.0), chains
