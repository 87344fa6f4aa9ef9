"""Small columnar helpers the rule modules share (not a rule: the leading underscore keeps it out of
discovery)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pypto_core.graph import OperatorCallGraph
from pypto_core.grouping import op_type_codes_of, row_codes
from pypto_core.rules.registry import Threshold


def min_time_share(value: float) -> Threshold:
    """The reporting floor most rules share: a finding covering less of the run than this is left out."""
    return Threshold(value, "[INFERRED] no source: below this share of the run a fix is not worth its "
                            "effort, and the finding would be noise beside the others")


def column_strings(graph: OperatorCallGraph, column: str, kernels: np.ndarray, limit: int = 50) -> list[str]:
    """Distinct values of a string column over some kernels (a mask over every kernel, or their row indices
    in order), most time first, at most ``limit``."""
    idx = np.flatnonzero(kernels) if kernels.dtype == bool else kernels
    if not len(idx) or column not in graph.kernels.column_names:
        return []
    # the codes of these rows in their order (a dictionary column's own would list every value of the
    # profile), with no text built per row
    codes, names = row_codes(graph.kernels[column], idx)
    time = np.bincount(codes, weights=graph.dur[idx].astype(np.float64), minlength=len(names))
    return [names[i] for i in np.argsort(-time)[:limit] if names[i]]


def op_type_time(graph: OperatorCallGraph, mask: np.ndarray, limit: int = 20) -> dict[str, dict[str, float]]:
    """{op_type: {count, total_us}} over the masked kernels, most time first."""
    if not mask.any():
        return {}
    idx = np.nonzero(mask)[0]
    codes, names = op_type_codes_of(graph.kernels, idx, null="?")  # these rows' values only
    t = np.bincount(codes, weights=graph.dur[idx].astype(np.float64), minlength=len(names))
    c = np.bincount(codes, minlength=len(names))
    return {names[i]: {"count": int(c[i]), "total_us": round(float(t[i]) / 1e3, 3)}
            for i in np.argsort(-t)[:limit]}


def shape_strings(graph: OperatorCallGraph, idx: np.ndarray, column: str = "input_shapes") -> list[str]:
    """``"16,4096;4096,11008"``-style strings (the kernel_details spelling) for a few kernels."""
    out = []
    for shapes in graph.kernels[column].take(pa.array(np.asarray(idx, np.int64))).to_pylist():
        out.append(";".join(",".join(str(d) for d in s) for s in (shapes or []) if s is not None))
    return out


def us(ns: Any) -> float:
    return round(float(ns) / 1e3, 3)


def share(part: float, whole: float) -> float:
    return round(float(part) / float(whole), 6) if whole else 0.0
