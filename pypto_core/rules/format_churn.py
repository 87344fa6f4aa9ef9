"""``format_churn``: TransData / Cast kernels that convert the same tensors again and again.

ND weights fed to kernels that want FRACTAL_NZ are converted on the fly every call (docs/domain.md §4.4);
dtype ping-pong adds Cast kernels. Casts inside an unfused RMSNorm chain belong to ``norm_launch_overhead``.
"""

from __future__ import annotations

import numpy as np

from pypto_core.i18n import msg
from pypto_core.rules._util import min_time_share, op_type_time, shape_strings, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Converting weights once at load time (npu_format_cast(w, 29)) and keeping one dtype "
                   "removes these kernels: saving = their device time plus the launch gap before each.")


@rule("format_churn", title=msg("Repeated TransData / Cast format conversions"), saving_model=SAVING_MODEL,
      thresholds={
          "min_time_share": min_time_share(0.02),
          "min_count_per_token": Threshold(1.0, "[INFERRED] at least one conversion per decoded token: "
                                                "converted again every step, not once at load time"),
      },
      blocks=(), remedies=(), needs=("kernels.input_shapes",), vendors=("ascend",))
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    mask = g.is_role("transdata", "cast") & ~g.chain_mask("rms_norm")
    if not mask.any():
        return
    idx = np.nonzero(mask)[0]
    slot = g.slot_ns(idx)
    if (len(idx) / ctx.tokens < cfg["min_count_per_token"]
            or share(g.dur[idx].sum(), ctx.total_ns) < cfg["min_time_share"]):
        return
    ops = op_type_time(g, mask)
    ctx.emit(
        title=msg("{conversions} TransData/Cast conversions take {pct:.1f}% of the run", conversions=len(idx),
                  pct=100 * g.dur[idx].sum() / ctx.total_ns),
        description=msg("The same tensors are converted between memory formats (ND <-> FRACTAL_NZ) or dtypes "
                        "every step. Convert weights once after loading with "
                        "torch_npu.npu_format_cast(weight, 29) (FRACTAL_NZ) and keep activations in one "
                        "dtype, so the conversions leave the hot loop."),
        ops=list(ops),
        evidence={"conversions": len(idx), "per_token": round(len(idx) / ctx.tokens, 2),
                  "conversion_time_us": us(g.dur[idx].sum()),
                  "time_share": share(g.dur[idx].sum(), ctx.total_ns)},
        kernels=idx, saving_ns=slot, covered_ns=float(slot.sum()), saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_time": ops, "example_shapes": shape_strings(g, idx[:4])},
    )
