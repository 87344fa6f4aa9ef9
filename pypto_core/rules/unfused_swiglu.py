"""``unfused_swiglu``: the FFN gate computed as Swish/Silu then Mul (the advisor's ``(slice|chunk)-silu-mul``
-> ``torch_npu.npu_swiglu``, docs/domain.md §3.4)."""

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


@rule("unfused_swiglu", title=msg("Unfused SwiGLU activation"), saving_model=SAVING_MODEL,
      thresholds={"min_time_share": min_time_share(0.005),
                  "fused_us": Threshold(8.5, "SwiGlu 8.5 us (docs/domain.md §3.1)"),
                  "fused_launch_gap_us": FUSED_LAUNCH_GAP},
      blocks=("ffn_activation",), remedies=(), needs=(), vendors=("ascend",), workloads=LLM_WORKLOADS)
def match(ctx: RuleContext) -> None:
    report_chain(ctx, "swiglu", SAVING_MODEL, title=msg("Unfused SwiGLU: {n:.0f} Silu-Mul chains per token"),
                 description=msg("The FFN activation runs as a Swish/Silu kernel followed by an elementwise "
                                 "multiply, writing the intermediate to memory in between. "
                                 "torch_npu.npu_swiglu fuses them."),
                 fused_api="torch_npu.npu_swiglu")
