"""``matmul_tiling``: MatMuls far below the roofline bound for their shape, with alignment evidence.

Achieved efficiency = roofline bound time / measured time (the bound is compute or memory, whichever is
slower for that shape, docs/domain.md §8 #1: comparing with peak TFLOPS alone would condemn every
decode GEMV).
Alignment evidence (docs/domain.md §2.3, §3.3): inner axis % 256 elements (advisor), inner axis bytes % 512
(CANN fusion-pass docs), K/N % 16 (cube fractal), and a ``MIX_AIC`` task type on a plain MatMul.
"""

from __future__ import annotations

import numpy as np

from pypto_core.grouping import group_rows
from pypto_core.i18n import msg
from pypto_core.rules._util import column_strings, min_time_share, shape_strings, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Each flagged MatMul is retuned to the roofline efficiency the same profile's aligned "
                   "MatMuls of the same regime (compute- or memory-bound) reach (or the configured target "
                   "when there are none): saving = measured time - bound time / target efficiency, summed "
                   "over flagged kernels.")


@rule("matmul_tiling", title=msg("MatMul tiling far below the roofline"), saving_model=SAVING_MODEL,
      thresholds={
          "efficiency_below": Threshold(0.60, "the seed article's target \"< 60% of theoretical peak\"; "
                                              "Huawei's advisor uses mac_ratio 0.8 (docs/domain.md §3.3)"),
          "target_efficiency": Threshold(0.82, "what a tuned MatMul reaches when the profile has no aligned "
                                               "peer to learn from: pypto's measured 6144^3 GEMM went 62% -> "
                                               "82% of peak with L2-aware blocking (docs/domain.md §1)"),
          "min_time_share": min_time_share(0.01),
          "inner_axis_elements": Threshold(256, "advisor cube affinity (docs/domain.md §3.3)"),
          "inner_axis_bytes": Threshold(512, "MatMulTransposeWeightFusionPass (docs/domain.md §2.3)"),
          "fractal": Threshold(16, "cube 16x16x16 (docs/domain.md §2.3)"),
      },
      blocks=("matmul",), remedies=("aoe_tune_ops.json", "aoe_tune.sh"),
      needs=("kernels.core_type", "kernels.op_type", "kernels.input_shapes"), vendors=("ascend",))
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    mm = g.is_role("matmul") & (g.dur > 0) & ~g.attention_mask
    mm[mm] = g.figure("flops", mm) > 0
    if not mm.any():
        return
    # the figures of the MatMuls only (``rows``), never arrays over every kernel: on a 5 GB simulated folder
    # five of those (80 MB) were alive while the finding listed its kernels, the rules' peak
    rows = np.flatnonzero(mm)
    del mm
    batch, m, k, n = (g.figure(dim, rows) for dim in ("batch", "m", "k", "n"))  # per row of ``rows``
    dur, bound = g.dur[rows], g.figure("bound_ns", rows)
    eff = bound / dur  # every MatMul here ran for some time
    cfg = ctx.thresholds
    inner = int(cfg["inner_axis_elements"])
    element_bytes = g.figure("element_bytes", rows)
    k_not_256 = (k % inner) != 0
    n_not_256 = (n % inner) != 0
    k_not_512b = (k * element_bytes) % int(cfg["inner_axis_bytes"]) != 0
    not_fractal = ((k % int(cfg["fractal"])) != 0) | ((n % int(cfg["fractal"])) != 0)
    mix = g.core_is("MIX_AIC")[rows]
    misaligned = k_not_256 | n_not_256 | k_not_512b | not_fractal | mix
    flagged = misaligned & (eff < cfg["efficiency_below"])
    if not flagged.any():
        return
    moved = g.figure("bytes_moved", rows)
    flops_per_byte = np.divide(g.figure("flops", rows), moved, out=np.zeros(len(rows)), where=moved > 0)
    compute_bound = flops_per_byte >= g.sku.ridge_flop_per_byte
    del moved, flops_per_byte
    # The target: what aligned, healthy MatMuls of the same regime achieve in this very profile.
    targets = {}
    for regime in (True, False):
        peers = ~misaligned & (compute_bound == regime) & (eff >= cfg["efficiency_below"])
        targets[regime] = (float(np.average(eff[peers], weights=dur[peers])) if peers.any()
                           else cfg["target_efficiency"])
    target = np.where(compute_bound, targets[True], targets[False])
    saving = np.maximum(dur - bound / np.maximum(target, 1e-6), 0.0)
    del eff, target, dur, bound
    sel = np.flatnonzero(flagged)  # the flagged MatMuls among ``rows``
    idx = rows[sel]
    flagged_time = float(g.dur[idx].sum())
    if share(flagged_time, ctx.total_ns) < cfg["min_time_share"]:
        return
    saving = saving[sel]
    op_codes, vocab = g.op_codes
    first, inverse = group_rows(op_codes[idx], batch[sel], m[sel], k[sel], n[sel], mix[sel])
    group_time = np.bincount(inverse, weights=g.dur[idx].astype(np.float64))
    group_count = np.bincount(inverse)
    group_bound = np.bincount(inverse, weights=g.figure("bound_ns", idx))
    group_saving = np.bincount(inverse, weights=saving)
    shapes = []
    raw = shape_strings(g, idx[first])
    for gi in np.argsort(-group_time)[:20]:
        at = sel[first[gi]]  # its place among ``rows``
        row = rows[at]
        kk, nn = int(k[at]), int(n[at])
        reasons = []
        if k_not_256[at] or n_not_256[at]:
            reasons.append(f"inner axis not a multiple of {inner} elements")
        if k_not_512b[at]:
            reasons.append("K row not 512-byte aligned")
        if not_fractal[at]:
            reasons.append("K or N not a multiple of 16")
        if mix[at]:
            reasons.append("runs as MIX_AIC (the op_summary signature of an unaligned inner axis)")
        shapes.append({
            "op_type": str(g.kernels["op_type"][int(row)].as_py() or vocab[op_codes[row]]),
            "input_shapes": raw[gi],
            "batch": int(batch[at]), "m": int(m[at]), "k": kk, "n": nn, "dtype_bytes": int(element_bytes[at]),
            "count": int(group_count[gi]), "total_us": us(group_time[gi]),
            "roofline_efficiency_pct": round(100 * group_bound[gi] / max(group_time[gi], 1), 2),
            "regime": "compute-bound" if compute_bound[at] else "memory-bound",
            "task_type": str(g.kernels["core_type"][int(row)].as_py() or ""), "misalignment": reasons,
            "padded_k": int(-(-kk // inner) * inner), "padded_n": int(-(-nn // inner) * inner),
            "estimated_saving_us": us(group_saving[gi]),
        })
    dur_s = g.dur[idx].sum() / 1e9
    achieved_tflops = g.figure("flops", idx).sum() / dur_s / 1e12 if dur_s else 0.0
    achieved_gbps = g.figure("bytes_moved", idx).sum() / dur_s / 1e9 if dur_s else 0.0
    mean_eff = float(g.figure("bound_ns", idx).sum() / max(flagged_time, 1))
    top = shapes[0]
    ctx.emit(
        title=msg("{shapes} MatMul shape(s) run at {pct:.0f}% of their roofline bound", shapes=len(shapes),
                  pct=100 * mean_eff),
        description=msg(
            "Matrix multiplications whose shapes do not fit the cube unit's tiles (inner axis not a multiple "
            "of {inner} elements / 512 bytes, or K/N not a multiple of 16) are split into inefficient tiles "
            "and padded on the fly, so they take much longer than the hardware limit for their size. The "
            "hottest is {op} M={m} K={k} N={n} at {pct:.0f}% of its bound. Tune their tiling with AOE "
            "(operator tuning, job_type=2) or pad the weights to aligned "
            "sizes once at load time.", inner=inner, op=top["op_type"],
            m=top["m"], k=top["k"], n=top["n"], pct=top["roofline_efficiency_pct"]),
        ops=sorted({s["op_type"] for s in shapes}),
        evidence={
            "flagged_kernels": int(len(idx)), "flagged_time_us": us(flagged_time),
            "roofline_efficiency_pct": round(100 * mean_eff, 2),
            "threshold_efficiency_pct": round(100 * cfg["efficiency_below"], 1),
            "achieved_tflops": round(float(achieved_tflops), 3),
            "peak_tflops": g.sku.fp16_tflops.value, "achieved_bandwidth_gbps": round(float(achieved_gbps), 1),
            "peak_bandwidth_gbps": g.sku.hbm_gbps.value,
            "target_efficiency_compute_pct": round(100 * targets[True], 1),
            "target_efficiency_memory_pct": round(100 * targets[False], 1),
            "mix_aic_kernels": int(mix[sel].sum()),
        },
        kernels=idx, saving_ns=saving, saving_model=SAVING_MODEL,
        details={"op_names": column_strings(g, "name", idx),
                 "op_types": sorted({s["op_type"] for s in shapes}),
                 "shapes": shapes, "sku": g.sku.name, "model": g.structure().get("model_hint")},
    )
