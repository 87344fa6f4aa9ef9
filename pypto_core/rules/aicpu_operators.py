"""``aicpu_operators``: operators that fell back to the AI CPU (advisor ``aicpu_analysis``,
docs/formats.md §4.3).

An op runs on the AI CPU when no AI Core kernel supports its dtype or shape (double, int64 indices,
dynamic output sizes such as NonZero); it is typically an order of magnitude slower and stalls the stream.
"""

from __future__ import annotations

import numpy as np

from pypto_core.i18n import msg
from pypto_core.rules._util import column_strings, op_type_time, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Each AI_CPU task longer than `min_dur_us` is assumed to run faster on the AI Core by the "
                   "factor `aicore_speedup` (an assumption, not a measurement): saving = time x (1 - "
                   "1/factor).")


@rule("aicpu_operators", title=msg("Operators falling back to the AI CPU"), saving_model=SAVING_MODEL,
      thresholds={
          "min_dur_us": Threshold(20.0, "advisor aicpu_analysis: AI_CPU tasks > 20 us (docs/formats.md "
                                        "§4.3)"),
          "aicore_speedup": Threshold(10.0, "[INFERRED] an AI Core kernel of the same op; the saving model "
                                            "says so"),
      },
      blocks=(), remedies=(), needs=("kernels.name", "kernels.op_type"), vendors=("ascend",))
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    mask = g.is_role("aicpu") & (g.dur > cfg["min_dur_us"] * 1e3)
    if not mask.any():
        return
    idx = np.nonzero(mask)[0]
    saving = g.dur[idx] * (1.0 - 1.0 / cfg["aicore_speedup"])
    ops = op_type_time(g, mask)
    ctx.emit(
        title=msg("{tasks} AI_CPU tasks longer than {min_us:.0f} "
                  "µs", tasks=len(idx), min_us=cfg["min_dur_us"]),
        description=msg("These operators ran on the AI CPU instead of the AI Cores, usually because of a "
                        "data type (float64, int64) or a data-dependent output shape the AI Core kernels do "
                        "not support. Cast inputs to a supported dtype (float64 -> float32), or replace the "
                        "op (e.g. avoid nonzero / masked_select in the decode loop)."),
        ops=list(ops),
        evidence={"aicpu_tasks": len(idx), "aicpu_time_us": us(g.dur[idx].sum()),
                  "threshold_us": cfg["min_dur_us"], "assumed_aicore_speedup": cfg["aicore_speedup"]},
        kernels=idx, saving_ns=saving, saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_names": column_strings(g, "name", mask), "op_time": ops},
    )
