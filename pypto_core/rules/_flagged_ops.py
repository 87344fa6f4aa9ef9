"""The operators a finding points at, grouped by what a remedy needs to target them: op type, input shapes,
dtypes and formats, with the kernel names, counts and time of each group (``Finding.details["ops"]``).

The artifacts' headers, the bundle's MANIFEST and the AOE ops file read these rows, so a remedy names the
same shapes the finding shows. Grouping runs on Arrow's hash tables (one text per distinct value, not one
Python object per kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.graph import OperatorCallGraph
from pypto_core.grouping import group_rows, op_type_codes_of, row_codes, text_codes
from pypto_core.shapes import decoded

MAX_GROUPS = 20  # the header lists at most this many; the rest are counted
MAX_NAMES_PER_GROUP = 200  # kernel names kept per group (what AOE's tune_ops_name is given)
# What ``flagged_ops`` reads (a ``profile.ColumnSet``): what a remedy targets of each flagged kernel.
FLAGGED_OPS_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "kernels": ("name", "op_type", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
                "output_dtypes", "output_formats"),
}


def _shapes_text(arr: pa.Array) -> pa.Array:
    """list<list<int>> -> ``"16,4096;4096,11008"`` (the kernel_details spelling)."""
    s = arr.cast(pa.list_(pa.list_(pa.string())))
    inner = pc.binary_join(s.flatten(), ",")
    return pc.binary_join(pa.ListArray.from_arrays(s.offsets, inner, mask=s.is_null()), ";")


def _joined(arr: pa.Array) -> pa.Array:
    return pc.binary_join(arr.cast(pa.list_(pa.string())), ";")


def _parse_shapes(text: str) -> list[list[int]]:
    if not text:
        return []
    return [[int(d) for d in part.split(",") if d.strip().lstrip("-").isdigit()] for part in text.split(";")]


def _split(joined: Any) -> list[str]:
    return str(joined).split(";") if joined else []


def _names_outside(graph: OperatorCallGraph, idx: np.ndarray) -> set[str]:
    """Kernel names that also appear on kernels outside ``idx``."""
    if "name" not in graph.kernels.column_names:
        return set()
    # a dictionary column's own codes: no text per row
    codes, names = text_codes(graph.kernels["name"], narrow=True)
    outside = np.ones(len(codes), bool)
    outside[idx] = False
    outside &= codes >= 0
    present = np.flatnonzero(np.bincount(codes[outside], minlength=len(names)))
    return {names[c] for c in present.tolist() if names[c]}


def flagged_ops(graph: OperatorCallGraph, kernels: np.ndarray, limit: int = MAX_GROUPS) -> dict[str, Any]:
    """{"groups": [...], "group_count", "kernel_count"} for the kernel rows ``kernels``, most time first.

    Each group: ``op_type``, ``input_shapes`` (list of lists), ``input_dtypes``, ``input_formats``,
    ``output_shapes``, ``output_dtypes``, ``output_formats``, ``names`` (most time first), ``name_count``,
    ``shared_names`` (names that unflagged kernels carry too: tuning by them would touch other shapes),
    ``count``, ``total_us``, ``avg_us``.
    """
    idx = np.asarray(kernels)  # as given (emit's are int32 where they fit): no copy
    out: dict[str, Any] = {"groups": [], "group_count": 0, "kernel_count": int(len(idx))}
    if not len(idx):
        return out
    k = graph.kernels

    def column(name: str, convert: Any) -> tuple[np.ndarray, list[Any]]:
        if name not in k.column_names:
            return np.zeros(len(idx), np.int32), [""]
        return row_codes(k[name], idx, convert)

    def cells(name: str, convert: Any, rows: np.ndarray) -> list[str]:
        """The text of a column that no grouping reads, for the listed rows only (a null reads "")."""
        if name not in k.column_names:
            return [""] * len(rows)
        return [t or "" for t in convert(decoded(k[name].take(pa.array(rows)).combine_chunks())).to_pylist()]

    # codes of these rows in the order they first show (the profile's dictionary order would differ); a
    # kernel without an op type is grouped by its name
    op_c, op_v = op_type_codes_of(k, idx)
    sh_c, sh_v = column("input_shapes", _shapes_text)
    dt_c, dt_v = column("input_dtypes", _joined)
    fm_c, fm_v = column("input_formats", _joined)
    nm_c, nm_v = row_codes(k["name"], idx)
    shared = _names_outside(graph, idx)
    first, inv = group_rows(op_c, sh_c, dt_c, fm_c)
    groups = len(first)
    dur = graph.dur[idx].astype(np.float64)
    time = np.bincount(inv, weights=dur, minlength=groups)
    count = np.bincount(inv, minlength=groups)
    out["group_count"] = int(groups)
    order = np.argsort(-time, kind="stable")[:limit]
    # the outputs do not group: each listed group shows its first kernel's, read for those kernels only
    shown = idx[first[order]]
    out_shapes, out_dtypes, out_formats = (cells(name, convert, shown) for name, convert in (
        ("output_shapes", _shapes_text), ("output_dtypes", _joined), ("output_formats", _joined)))
    # names per group, most time first: one pass over (group, name) pairs
    pair_first, pair = group_rows(inv, nm_c)
    ptime = np.bincount(pair, weights=dur, minlength=len(pair_first))
    del pair
    by_group: dict[int, list[tuple[float, str]]] = {}
    for g, n, t in zip(inv[pair_first].tolist(), nm_c[pair_first].tolist(), ptime.tolist()):
        if nm_v[n]:
            by_group.setdefault(g, []).append((-t, nm_v[n]))
    for i, g in enumerate(order.tolist()):
        names = [n for _t, n in sorted(by_group.get(g, []))]
        row = int(first[g])
        out["groups"].append({
            "op_type": str(op_v[op_c[row]]), "input_shapes": _parse_shapes(str(sh_v[sh_c[row]])),
            "input_dtypes": _split(dt_v[dt_c[row]]), "input_formats": _split(fm_v[fm_c[row]]),
            "output_shapes": _parse_shapes(out_shapes[i]),
            "output_dtypes": _split(out_dtypes[i]), "output_formats": _split(out_formats[i]),
            "names": names[:MAX_NAMES_PER_GROUP], "name_count": len(names),
            "shared_names": [n for n in names[:MAX_NAMES_PER_GROUP] if n in shared],
            "count": int(count[g]), "total_us": round(float(time[g]) / 1e3, 3),
            "avg_us": round(float(time[g]) / 1e3 / max(int(count[g]), 1), 3),
        })
    return out
