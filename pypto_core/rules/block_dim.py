"""``block_dim``: long kernels launched on fewer blocks than the device has cores (advisor
``block_dim_analysis``: Block Dim not a multiple of the AI Core / AIV count, docs/formats.md §4.3)."""

from __future__ import annotations

import numpy as np

from pypto_core.grouping import column_values, group_rows, int32_if_fits
from pypto_core.i18n import msg
from pypto_core.rules._util import min_time_share, op_type_time, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Work spreads evenly over blocks: a kernel with b blocks on C cores uses ceil(b/C) waves "
                   "at b / (waves x C) occupancy; retiling to fill every core saves time x (1 - occupancy).")


@rule("block_dim", title=msg("Kernels that leave AI Cores idle (Block Dim)"), saving_model=SAVING_MODEL,
      thresholds={
          "min_dur_us": Threshold(20.0, "advisor operator checks look at ops > 20 us"),
          "min_time_share": min_time_share(0.02),
          "max_fill": Threshold(0.8, "pypto matmul guide: at least 0.8 x coreNum tasks (docs/domain.md §1)"),
      },
      blocks=(), remedies=(), needs=("kernels.block_dim", "kernels.core_type"), vendors=("ascend",))
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    if "block_dim" not in g.kernels.column_names:
        return
    # worked out on the long kernels of the cores it counts only, once per distinct (blocks, core kind):
    # over every kernel its five arrays held 600 MB on a 15.7 M-kernel table
    rows = int32_if_fits(np.flatnonzero((g.dur > cfg["min_dur_us"] * 1e3)
                                        & g.core_is("AI_VECTOR_CORE", "MIX_AIV", "AI_CORE", "MIX_AIC")))
    block = column_values(g.kernels["block_dim"])[rows]
    vector = g.core_is("AI_VECTOR_CORE", "MIX_AIV")[rows]
    first, group = group_rows(block, vector)
    block, vector = block[first].astype(np.int64), vector[first]
    cores = np.where(vector, g.sku.cores_for("AI_VECTOR_CORE"), g.sku.cores_for("AI_CORE"))
    waves = -(-block // np.maximum(cores, 1))
    occupancy = np.divide(block, waves * cores, out=np.ones(len(block)), where=(block > 0) & (cores > 0))
    low = ((block > 0) & (occupancy < cfg["max_fill"]))[group]
    if not low.any():
        return
    idx, occupancy = rows[low], occupancy[group[low]]
    if share(g.dur[idx].sum(), ctx.total_ns) < cfg["min_time_share"]:
        return
    mask = np.zeros(g.n, bool)
    mask[idx] = True
    saving = g.dur[idx] * (1.0 - occupancy)
    ops = op_type_time(g, mask)
    ctx.emit(
        title=msg("{kernels} long kernels fill only {pct:.0f}% of the cores", kernels=len(idx),
                  pct=100 * np.average(occupancy, weights=g.dur[idx])),
        description=msg("These kernels run with fewer blocks than the {sku}'s {ai_cores} AI Cores "
                        "({vector_cores} vector cores), so part of the chip idles while they run. Larger "
                        "batches, a different split of the work (AOE tuning for cube ops) or fusing them "
                        "into a bigger kernel fills the "
                        "cores.", sku=g.sku.name, ai_cores=int(g.sku.ai_cores.value),
                        vector_cores=int(g.sku.vector_cores.value)),
        ops=list(ops),
        evidence={"kernels": len(idx), "time_us": us(g.dur[idx].sum()),
                  "mean_occupancy_pct": round(100 * float(np.average(occupancy, weights=g.dur[idx])), 1),
                  "ai_cores": int(g.sku.ai_cores.value), "vector_cores": int(g.sku.vector_cores.value),
                  "min_dur_us": cfg["min_dur_us"]},
        kernels=idx, saving_ns=saving, saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_time": ops},
    )
