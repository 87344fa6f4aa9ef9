"""``unfused_rope``: rotary embedding computed as Slice, Neg, ConcatD, Mul, Add kernels (the advisor's
``(chunk|slice)-neg-cat-(mul){0,2}-add`` -> ``torch_npu.npu_rotary_mul``, docs/domain.md §3.4)."""

from __future__ import annotations

from pypto_core.i18n import msg
from pypto_core.rules._chain_rule import report_chain
from pypto_core.rules._fusion import FUSED_LAUNCH_GAP
from pypto_core.rules._util import min_time_share
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import LLM_WORKLOADS

SAVING_MODEL = msg("Each chain becomes one fused kernel of the configured time, launched with the short "
                   "queued gap: saving = chain time + gaps - (fused time + that gap).")


@rule("unfused_rope", title=msg("Unfused rotary position embedding"), saving_model=SAVING_MODEL,
      thresholds={"min_time_share": min_time_share(0.005),
                  "fused_us": Threshold(3.5, "_triton_rope / RotaryMul ~3.5 us (docs/domain.md §3.1)"),
                  "fused_launch_gap_us": FUSED_LAUNCH_GAP},
      blocks=("rope",), remedies=(), needs=(), vendors=("ascend",), workloads=LLM_WORKLOADS)
def match(ctx: RuleContext) -> None:
    report_chain(ctx, "rope", SAVING_MODEL,
                 title=msg("Unfused RoPE: {n:.0f} Slice-Neg-Concat-Mul-Add chains per token"),
                 description=msg("Rotary position embedding is computed with separate slice, negate, "
                                 "concatenate, multiply and add kernels. torch_npu.npu_rotary_mul or "
                                 "npu_apply_rotary_pos_emb does it in one kernel (use a BSND layout: "
                                 "npu_rotary_mul refuses BNSD when B*N > 8*S, which is always true in "
                                 "decode)."),
                 fused_api="torch_npu.npu_apply_rotary_pos_emb")
