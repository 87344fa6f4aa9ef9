"""What the dashboard's profile page draws, computed once per profile (at the end of diagnosis).

``profile_page_data(profile, sku)`` returns a JSON-ready dict:

* ``op_types``: device time per op type (the breakdown chart), largest first;
* ``top_ops``: kernels aggregated by (op type, name, input shapes, model block), largest first, capped at
  ``TOP_OPS`` rows (the sortable, filterable table);
* ``roofline``: the same groups with FLOPs and ideal bytes: arithmetic intensity vs achieved FLOP/s, and the
  SKU's roofs (peak FLOP/s, HBM bytes/s, ridge point);
* ``decode``: per-token latency per decode step, ms (the latency chart);
* ``metrics``: ``OperatorCallGraph.metrics()``.

Every string here comes from the uploaded profile and is untrusted: the web layer escapes it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow.compute as pc

from pypto_core.compare import kernel_blocks
from pypto_core.graph import OperatorCallGraph
from pypto_core.kernel_names import readable
from pypto_core.profile import Profile

PAGE_DATA_VERSION = 2  # 2: kernels without an op type grouped by their readable name
TOP_OPS = 500  # rows of the top-ops table: the table filters client-side, 500 rows stay < 200 KB of JSON
TOP_OP_TYPES = 30  # bars of the breakdown chart; the rest are summed into "(other)"
ROOFLINE_POINTS = 300  # points of the roofline scatter (the largest groups by time that have FLOPs)
MAX_TOKEN_POINTS = 4000  # decode steps drawn; longer runs are sampled evenly
# What ``profile_page_data`` reads: the kernels and what its call graph joins (steps, flows, host_ops).
PAGE_DATA_TABLES: tuple[str, ...] = ("kernels", "steps", "flows", "host_ops")
_SHAPE_BATCH = 65_536  # kernels whose shapes are converted to Python at once


def _strings(column: Any, fill: str) -> np.ndarray:
    return np.asarray(pc.fill_null(column, fill).to_numpy(zero_copy_only=False), dtype=object)


def _op_types(op_type: np.ndarray, name: np.ndarray) -> np.ndarray:
    """A kernel's op type, else its readable name: a CUDA trace records no op type, and one "?" bar for all
    of its kernels says nothing (the comparison groups by the same fallback)."""
    missing = np.flatnonzero(op_type == "")
    if len(missing):
        names, inverse = np.unique(name[missing].astype(str), return_inverse=True)
        op_type = op_type.copy()
        op_type[missing] = np.asarray([readable(n) or "?" for n in names], dtype=object)[inverse]
    return op_type


def _shape_strings(column: Any) -> np.ndarray:
    """``[[1,4096],[4096,4096]]`` -> ``"1x4096;4096x4096"``; each distinct value formatted once."""
    cache: dict[Any, str] = {}
    out = np.empty(len(column), dtype=object)
    # A batch at a time: the whole column as nested Python lists is a large transient at millions of kernels.
    for at in range(0, len(column), _SHAPE_BATCH):
        for i, v in enumerate(column.slice(at, _SHAPE_BATCH).to_pylist(), at):
            key = None if v is None else tuple(tuple(s) if s is not None else () for s in v)
            text = cache.get(key)
            if text is None:
                text = "" if not key else ";".join("x".join(str(d) for d in s) for s in key)
                cache[key] = text
            out[i] = text
    return out


def _factorize(keys: Iterator[str]) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` without a fixed-width unicode copy of every key (4 bytes a
    character times the longest key, per kernel: gigabytes at millions of kernels); same order and codes."""
    codes: dict[str, int] = {}
    first = np.fromiter((codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64)
    uniq = sorted(codes)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[[codes[k] for k in uniq]] = np.arange(len(uniq))
    return np.array(uniq, dtype=object), rank[first]


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def profile_page_data(profile: Profile, sku: str | None = None) -> dict[str, Any]:
    g = OperatorCallGraph(profile, sku)
    k = profile.kernels
    out: dict[str, Any] = {"version": PAGE_DATA_VERSION, "sku": g.sku.name, "sku_source": g.sku_source,
                           "kernel_count": g.n, "op_types": [], "top_ops": [], "roofline": {}, "decode": {},
                           "metrics": {}}
    roof = {"peak_flops_per_s": g.sku.peak_flops_per_s(), "hbm_bytes_per_s": g.sku.hbm_bytes_per_s,
            "ridge_flop_per_byte": g.sku.ridge_flop_per_byte, "points": []}
    out["roofline"] = roof
    if g.n == 0:
        return out
    name = _strings(k["name"], "?")
    op_type = _op_types(_strings(k["op_type"], ""), name)
    shapes = _shape_strings(k["input_shapes"])
    blocks = kernel_blocks(g)
    dur = g.dur.astype(np.float64)
    total = float(dur.sum()) or 1.0

    # op-type breakdown
    types, inv = np.unique(op_type.astype(str), return_inverse=True)
    t_sum = np.bincount(inv, weights=dur, minlength=len(types))
    t_cnt = np.bincount(inv, minlength=len(types))
    order = np.argsort(-t_sum, kind="stable")
    rows = [{"op_type": str(types[i]), "time_us": float(t_sum[i] / 1e3), "count": int(t_cnt[i]),
             "share": float(t_sum[i] / total)} for i in order[:TOP_OP_TYPES]]
    if len(order) > TOP_OP_TYPES:
        rest = order[TOP_OP_TYPES:]
        rows.append({"op_type": "(other)", "time_us": float(t_sum[rest].sum() / 1e3),
                     "count": int(t_cnt[rest].sum()), "share": float(t_sum[rest].sum() / total),
                     "other": True})
    out["op_types"] = rows

    # groups by (op type, name, shapes, block)
    # Names as Python strings, not ``astype(str)`` (a fixed-width copy); rstrip as numpy's str dtype does.
    uniq, ginv = _factorize("\x1f".join(t) for t in zip(op_type.astype(str), (n.rstrip("\x00") for n in name),
                                                         shapes, blocks.astype(str)))
    n_groups = len(uniq)
    g_sum = np.bincount(ginv, weights=dur, minlength=n_groups)
    g_cnt = np.bincount(ginv, minlength=n_groups)
    g_max = np.zeros(n_groups)
    np.maximum.at(g_max, ginv, dur)
    flops = g.flops.astype(np.float64)
    bytes_moved = np.asarray(g.bytes_moved, dtype=np.float64)
    bound = np.asarray(g.bound_ns, dtype=np.float64)
    g_flops = np.bincount(ginv, weights=flops, minlength=n_groups)
    g_bytes = np.bincount(ginv, weights=bytes_moved, minlength=n_groups)
    g_bound = np.bincount(ginv, weights=bound, minlength=n_groups)
    g_order = np.argsort(-g_sum, kind="stable")
    top: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    for i in g_order:
        t, nm, sh, bl = str(uniq[i]).split("\x1f")
        secs = g_sum[i] / 1e9
        intensity = g_flops[i] / g_bytes[i] if g_bytes[i] > 0 else None
        achieved = g_flops[i] / secs if secs > 0 else None
        efficiency = g_bound[i] / g_sum[i] if g_sum[i] > 0 and g_bound[i] > 0 else None
        if len(top) < TOP_OPS:
            top.append({"op_type": t, "name": nm, "shape": sh, "block": bl, "count": int(g_cnt[i]),
                        "total_us": float(g_sum[i] / 1e3), "avg_us": float(g_sum[i] / g_cnt[i] / 1e3),
                        "max_us": float(g_max[i] / 1e3), "share": float(g_sum[i] / total),
                        "flops": float(g_flops[i]), "bytes": float(g_bytes[i]),
                        "roofline_efficiency": _num(min(efficiency, 1.0)) if efficiency is not None
                        else None})
        if len(points) < ROOFLINE_POINTS and g_flops[i] > 0 and intensity and achieved:
            points.append({"op_type": t, "shape": sh, "block": bl, "count": int(g_cnt[i]),
                           "intensity": _num(intensity), "flops_per_s": _num(achieved),
                           "total_us": float(g_sum[i] / 1e3)})
    out["top_ops"] = top
    roof["points"] = points

    # decode tokens
    tok = g.tokens
    lat = tok.latency_ns / 1e6
    steps = np.nonzero(tok.decode_step)[0]
    if len(lat) > MAX_TOKEN_POINTS:
        pick = np.linspace(0, len(lat) - 1, MAX_TOKEN_POINTS).astype(np.int64)
        lat, steps = lat[pick], steps[pick]
    out["decode"] = {"steps": [int(s) for s in steps], "latency_ms": [float(x) for x in lat],
                     "batch": tok.batch, "source": tok.source, "prefill_ms": tok.prefill_ns / 1e6}
    out["metrics"] = {key: _num(v) if isinstance(v, float) else v for key, v in g.metrics().items()}
    return out
