"""``host_bound_gaps``: the device idles between kernels waiting for the host (free time).

The advisor's overall analysis flags free time over 10% (FORMATS.md §4.3); HTA calls it "host wait" idle
time. Gaps here are device-wide: time when no kernel of the device runs, before each kernel.
"""

from __future__ import annotations

import numpy as np

from pypto_core.rules._util import share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import rule

SAVING_MODEL = ("Graph mode (TorchAir / ACL graph) or TASK_QUEUE_ENABLE=2 launch kernels back to back: every "
                "gap over `min_gap_us` shrinks to `residual_gap_us`; saving = sum(gap - residual).")


@rule("host_bound_gaps", title="Device idle waiting for the host", saving_model=SAVING_MODEL)
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.config.section("host_bound_gaps")
    gaps = g.gap_before_ns.astype(np.float64)
    total = ctx.total_ns
    free = float(gaps.sum())
    if g.n < cfg["min_kernels"] or share(free, total) < cfg["free_share_above"]:
        return
    sel = gaps > cfg["min_gap_us"] * 1e3
    idx = np.nonzero(sel)[0]
    saving = np.maximum(gaps[idx] - cfg["residual_gap_us"] * 1e3, 0.0)
    per_kernel_gap = free / max(g.n, 1)
    ctx.emit(
        title=f"The device is idle {100 * free / total:.0f}% of the run, waiting for kernel launches",
        description=("Between kernels the NPU sits idle while the host (Python, the framework, the launch queue) "
                     "prepares the next one. This dominates eager-mode decode, where kernels are short. Capture the "
                     "decode step as a graph (TorchAir torch.compile with the npu backend, or vLLM-Ascend ACL graph), "
                     "set TASK_QUEUE_ENABLE=2 and CPU_AFFINITY_CONF=2, and fuse small ops to launch fewer kernels."),
        ops=[],
        evidence={"free_time_us": us(free), "free_share": share(free, total),
                  "threshold_share": cfg["free_share_above"], "gaps_over_min": int(len(idx)),
                  "mean_gap_per_kernel_us": us(per_kernel_gap),
                  "longest_gap_us": us(gaps.max()) if len(gaps) else 0.0},
        kernels=idx, saving_ns=saving, covered_ns=free, saving_model=SAVING_MODEL,
        details={"env": {"TASK_QUEUE_ENABLE": "2", "CPU_AFFINITY_CONF": "2"}, "graph_mode": True},
    )
