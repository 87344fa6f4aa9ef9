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
from typing import Any

import numpy as np

from pypto_core.compare import kernel_block_codes
from pypto_core.graph import OperatorCallGraph
from pypto_core.grouping import DENSE_SPAN, text_codes, unique_codes
from pypto_core.kernel_names import readable
from pypto_core.profile import Profile
from pypto_core.shapes import distinct_values, is_coded

PAGE_DATA_VERSION = 5  # 2: kernels without an op type grouped by their readable name; 3: roofline points say
# whether they run above the HBM roof, and the roof carries the L2 size; 4: decode tokens numbered by their
# profiler step, the prefill time per prefill step; 5: a lookup's bytes are its rows, not its whole table
TOP_OPS = 500  # rows of the top-ops table: the table filters client-side, 500 rows stay < 200 KB of JSON
TOP_OP_TYPES = 30  # bars of the breakdown chart; the rest are summed into "(other)"
ROOFLINE_POINTS = 300  # points of the roofline scatter (the largest groups by time that have FLOPs)
MAX_TOKEN_POINTS = 4000  # decode steps drawn; longer runs are sampled evenly
# What ``profile_page_data`` reads: the kernels and what its call graph joins (steps, flows, host_ops).
PAGE_DATA_TABLES: tuple[str, ...] = ("kernels", "steps", "flows", "host_ops")
_SHAPE_BATCH = 65_536  # kernels whose shapes are converted to Python at once


def _text_codes(column: Any, fill: str) -> tuple[np.ndarray, list[str]]:
    """Per kernel a code into the distinct texts of a text column (nulls as ``fill``; trailing NULs dropped,
    as numpy's str dtype drops them), the texts in code order: each distinct text is one Python string."""
    codes, values = text_codes(column)  # no row's text is built: a coded column keeps its codes
    codes = np.where(codes >= 0, codes, len(values)).astype(np.int32)
    return _merged_labels(codes, [v.rstrip("\x00") for v in values] + [fill])


def _op_type_codes(op_type: tuple[np.ndarray, list[str]],
                   name: tuple[np.ndarray, list[str]]) -> tuple[np.ndarray, list[str]]:
    """A kernel's op type, else its readable name: a CUDA trace records no op type, and one "?" bar for all
    of its kernels says nothing (the comparison groups by the same fallback). Each name is read once."""
    codes, labels = op_type
    if "" not in labels:
        return op_type
    missing = codes == labels.index("")
    name_codes, name_labels = name
    used = np.unique(name_codes[missing])
    to_label = np.zeros(len(name_labels), np.int32)
    to_label[used] = len(labels) + np.arange(len(used))
    codes = codes.copy()
    codes[missing] = to_label[name_codes[missing]]
    return _merged_labels(codes, labels + [readable(name_labels[i]) or "?" for i in used.tolist()])


def _merged_labels(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes whose labels are equal made one (two cells with one text, e.g. after the NULs are dropped);
    int32, as every per-kernel code here (4 bytes a kernel)."""
    first: dict[str, int] = {}
    remap = np.array([first.setdefault(v, len(first)) for v in labels], np.int32)
    return (remap[codes] if len(remap) else codes), list(first)


def _shape_text(value: Any) -> str:
    """``[[1,4096],[4096,4096]]`` -> ``"1x4096;4096x4096"`` (an absent or empty list: "")."""
    key = None if value is None else tuple(tuple(s) if s is not None else () for s in value)
    return "" if not key else ";".join("x".join(str(d) for d in s) for s in key)


def _shape_codes(column: Any) -> tuple[np.ndarray, list[str]]:
    """Per kernel a code into the distinct shape texts. A coded column (``Profile.load(columns=...)``) is
    formatted once per distinct list; a plain one a batch at a time, each distinct value formatted once."""
    if is_coded(column):
        values, codes = distinct_values(column)
        return _merged_labels(codes, [_shape_text(v) for v in values.to_pylist()])
    cache: dict[Any, int] = {}
    labels: list[str] = []
    out = np.empty(len(column), dtype=np.int32)
    # A batch at a time: the whole column as nested Python lists is a large transient at millions of kernels.
    for at in range(0, len(column), _SHAPE_BATCH):
        for i, v in enumerate(column.slice(at, _SHAPE_BATCH).to_pylist(), at):
            key = None if v is None else tuple(tuple(s) if s is not None else () for s in v)
            code = cache.get(key)
            if code is None:
                code = cache[key] = len(labels)
                labels.append(_shape_text(v))
            out[i] = code
    return _merged_labels(out, labels)


def _sorted_codes(codes: np.ndarray, labels: list[str]) -> tuple[list[str], np.ndarray]:
    """(the labels sorted, per row the index of its label among them): ``np.unique(texts,
    return_inverse=True)`` of the rows' texts, without one Python string per row."""
    present = (np.flatnonzero(np.bincount(codes, minlength=len(labels))) if len(codes)
               else np.zeros(0, np.int64))
    order = sorted(present.tolist(), key=labels.__getitem__)
    rank = np.zeros(len(labels), np.int32)
    rank[order] = np.arange(len(order))
    return [labels[i] for i in order], rank[codes]


def _group_codes(*columns: tuple[np.ndarray, list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Kernels grouped by several coded texts: (the groups' keys, their texts joined by ``\\x1f``, sorted;
    per kernel its group's index), as ``np.unique`` of the joined texts gives them. Only the distinct
    combinations are joined as text."""
    widths = [max(len(labels), 1) for _, labels in columns]
    if math.prod(widths) < 2**62:  # one int64 per kernel: the combination of its codes
        key = np.zeros(len(columns[0][0]), np.int64)
        for (codes, _), width in zip(columns, widths):
            key *= width
            key += codes
        span = math.prod(widths)
        # few possible combinations: marked in a table instead of sorted (a sort holds four arrays of 8
        # bytes a kernel: 500 MB on 15.7 M kernels)
        if span <= DENSE_SPAN:
            combos, inverse = unique_codes(key, span)
        else:
            combos, inverse = np.unique(key, return_inverse=True)
        del key
        parts = []
        for width in reversed(widths):
            combos, part = np.divmod(combos, width)
            parts.append(part)
        parts.reverse()
    else:
        rows, inverse = np.unique(np.stack([c for c, _ in columns], axis=1), axis=0, return_inverse=True)
        parts = [rows[:, j] for j in range(len(columns))]
    texts = ["\x1f".join(labels[int(c)] for (_, labels), c in zip(columns, combo))
             for combo in zip(*(p.tolist() for p in parts))]
    merged, labels = _merged_labels(np.arange(len(texts), dtype=np.int64), texts)
    uniq, rank = _sorted_codes(merged, labels)
    return np.array(uniq, dtype=object), rank[inverse.reshape(-1)] if len(rank) else inverse.reshape(-1)


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def profile_page_data(profile: Profile, sku: str | None = None, *,
                      graph: OperatorCallGraph | None = None) -> dict[str, Any]:
    """The profile page's figures; ``graph``: the profile's call graph when diagnosis already built it (for
    ``sku``), so that the page reads the attribution and masks the findings stand on."""
    g = graph if graph is not None else OperatorCallGraph(profile, sku)
    k = profile.kernels
    out: dict[str, Any] = {"version": PAGE_DATA_VERSION, "sku": g.sku.name, "sku_source": g.sku_source,
                           "kernel_count": g.n, "op_types": [], "top_ops": [], "roofline": {}, "decode": {},
                           "metrics": {}}
    roof = {"peak_flops_per_s": g.sku.peak_flops_per_s(), "hbm_bytes_per_s": g.sku.hbm_bytes_per_s,
            "ridge_flop_per_byte": g.sku.ridge_flop_per_byte, "points": [],
            "l2_bytes": float(g.sku.l2_mib.value) * 2**20 if g.sku.l2_mib.value else None,
            "hbm_tag": g.sku.hbm_gbps.tag}
    out["roofline"] = roof
    if g.n == 0:
        return out
    name = _text_codes(k["name"], "?")
    op_type = _op_type_codes(_text_codes(k["op_type"], ""), name)
    shapes = _shape_codes(k["input_shapes"])
    blocks = _merged_labels(*kernel_block_codes(g))
    dur = g.dur.astype(np.float64)
    total = float(dur.sum()) or 1.0

    # op-type breakdown
    types, inv = _sorted_codes(*op_type)
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

    # groups by (op type, name, shapes, block): on codes; text only for the distinct combinations
    uniq, ginv = _group_codes(op_type, name, shapes, blocks)
    del name, op_type, shapes, blocks, inv  # four codes a kernel: not held beside the sums below
    n_groups = len(uniq)
    g_sum = np.bincount(ginv, weights=dur, minlength=n_groups)
    g_cnt = np.bincount(ginv, minlength=n_groups)
    g_max = np.zeros(n_groups)
    np.maximum.at(g_max, ginv, dur)
    # each figure over every kernel one at a time (``OperatorCallGraph.figure``)
    g_flops = np.bincount(ginv, weights=g.figure("flops"), minlength=n_groups)
    g_bytes = np.bincount(ginv, weights=g.figure("bytes_moved"), minlength=n_groups)
    g_bound = np.bincount(ginv, weights=g.figure("bound_ns"), minlength=n_groups)
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
            # Above the HBM roof: the kernels' tensors stayed in the L2 cache (as big as a weight
            # gradient on 910B), which is faster than HBM, so HBM bandwidth does not bound them
            hbm_roof = min(roof["peak_flops_per_s"], intensity * roof["hbm_bytes_per_s"])
            points.append({"op_type": t, "shape": sh, "block": bl, "count": int(g_cnt[i]),
                           "intensity": _num(intensity), "flops_per_s": _num(achieved),
                           "total_us": float(g_sum[i] / 1e3),
                           "bytes_per_kernel": float(g_bytes[i] / g_cnt[i]),
                           "above_hbm_roof": bool(hbm_roof > 0 and achieved > 1.001 * hbm_roof)})
    out["top_ops"] = top
    roof["points"] = points

    # decode tokens
    tok = g.tokens
    lat = tok.latency_ns / 1e6
    steps = np.nonzero(tok.decode_step)[0]
    if len(lat) > MAX_TOKEN_POINTS:
        pick = np.linspace(0, len(lat) - 1, MAX_TOKEN_POINTS).astype(np.int64)
        lat, steps = lat[pick], steps[pick]
    # numbered as the profiler numbered them (ProfilerStep#4..7), as the timeline and the breakdown do
    ids = tok.step_ids
    named = []
    for index in steps.tolist():
        step_id = ids[index] if index < len(ids) else None
        named.append(int(step_id) if step_id is not None else index)
    out["decode"] = {"steps": named, "latency_ms": [float(x) for x in lat],
                     "batch": tok.batch, "source": tok.source, "prefill_ms": tok.prefill_ns / 1e6}
    out["metrics"] = {key: _num(v) if isinstance(v, float) else v for key, v in g.metrics().items()}
    return out
