"""``aicore_frequency``: the AI Core clock dropped during the run (advisor ``freq_analysis``:
sum(max - f) / (max x n) >= 0.05, docs/formats.md §4.3). Thermal or power capping slows every kernel."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.i18n import msg
from pypto_core.rules._util import share
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Kernel time scales with 1/frequency: at the rated clock the busy time shrinks by the "
                   "mean drop ratio; saving = device busy time x drop ratio.")


@rule("aicore_frequency", title=msg("AI Core frequency drops"), saving_model=SAVING_MODEL,
      thresholds={"drop_ratio_above": Threshold(0.05, "advisor freq_analysis: sum(max-f)/(max*n) >= 0.05")},
      blocks=(), remedies=(), needs=("counters.*",), vendors=("ascend",), saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    counters = ctx.profile.counters
    if not counters.num_rows:
        return
    is_freq = pc.match_substring_regex(pc.fill_null(pc.cast(counters["track"], pa.string()), ""),
                                     r"(?i)(ai ?core|aic).*freq|freq.*ai ?core")
    values = pc.filter(counters["value"], is_freq).to_numpy(zero_copy_only=False)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) < 2:
        return
    rated = max(float(values.max()), float(ctx.graph.sku.clock_mhz.value))
    drop = float(np.sum(rated - values) / (rated * len(values)))
    if drop < ctx.threshold("drop_ratio_above"):
        return
    g = ctx.graph
    busy = g.compute_mask
    idx = np.nonzero(busy)[0]
    ctx.emit(
        title=msg("AI Core clock averaged {pct:.0f}% of "
                  "{rated_mhz:.0f} MHz", pct=100 * (1 - drop), rated_mhz=rated),
        description=msg("The AI Core frequency fell below its rated clock during the run (power or thermal "
                        "capping, or a power-saving mode), which slows every kernel. Check the card's power "
                        "mode and cooling (npu-smi info) before tuning kernels; compare runs only at the "
                        "same clock."),
        ops=[],
        evidence={"rated_mhz": rated, "min_mhz": float(values.min()),
                  "mean_mhz": round(float(values.mean()), 1),
                  "drop_ratio": round(drop, 4), "threshold": ctx.threshold("drop_ratio_above"),
                  "samples": int(len(values)), "busy_share": share(g.dur[idx].sum(), ctx.total_ns)},
        kernels=idx, saving_ns=g.dur[idx] * drop, saving_model=SAVING_MODEL,
    )
