"""``norm_launch_overhead``: norms whose launches and fixed costs outweigh their compute.

Two signatures (docs/domain.md §8 #4): the unfused RMSNorm chain (Cast, Pow, ReduceMean, Add, Rsqrt, Mul, Mul,
Cast: the advisor's ``(pow)-(mean)-(add)-rsqrt-mul-(type_as)`` regex, §3.4), each a tiny vector kernel
with a host launch gap before it; and fused norm kernels that still wait on the host far longer than
they run (gaps over ``gap_over_compute`` x their time).
"""

from __future__ import annotations

import numpy as np

from pypto_core.grouping import int32_if_fits
from pypto_core.i18n import msg
from pypto_core.rules._fusion import FUSED_LAUNCH_GAP, chain_savings
from pypto_core.rules._util import min_time_share, op_type_time, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import LLM_WORKLOADS

SAVING_MODEL = msg("Each unfused chain becomes one npu_rms_norm / npu_add_rms_norm kernel of the configured "
                   "fused time, launched with the short queued gap: saving = chain time + gaps - (fused time "
                   "+ that gap). Fused norms waiting on the host save the gap above the residual graph-mode "
                   "gap.")


@rule("norm_launch_overhead", title=msg("Norm launch overhead outweighs its compute"),
      saving_model=SAVING_MODEL,
      thresholds={
          "fused_norm_us": Threshold(3.3, "AddRmsNorm 3.3 us (docs/domain.md §0 #10, §7: fused 2-5 us)"),
          "fused_launch_gap_us": FUSED_LAUNCH_GAP,
          "min_chains_per_token": Threshold(1.0, "[INFERRED] at least one unfused chain per decoded token: a "
                                                 "pattern of every step, not a one-off"),
          "min_time_share": min_time_share(0.005),
          "gap_over_compute": Threshold(2.0, "fused norm kernels: flagged when their launch gaps outweigh "
                                             "their own time by this factor [INFERRED]"),
          "fused_gap_min_share": Threshold(0.05, "[INFERRED] no source: the waiting fused norms' gaps count "
                                                 "only above this share of the run"),
      },
      # the fused norms' gaps shrink to host_bound_gaps' residual_gap_us (the same graph-mode launch)
      blocks=("norm",), remedies=("norm_fusion_patch.py",), needs=(), vendors=("ascend",),
      workloads=LLM_WORKLOADS)
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    # savings are kept for the kernels they name (chain members, then waiting fused norms), never as an
    # array over every kernel
    chain_ids = g.chain_id("rms_norm")
    members = chain_ids >= 0
    chains = 0
    member_idx, member_saving = np.zeros(0, np.int64), np.zeros(0)
    if members.any():
        member_idx = int32_if_fits(np.flatnonzero(members))
        member_saving, chains = chain_savings(g, member_idx, chain_ids[member_idx],
                                              cfg["fused_norm_us"] * 1e3, cfg["fused_launch_gap_us"] * 1e3)
    del chain_ids
    if chains / ctx.tokens < cfg["min_chains_per_token"]:
        chains, members, member_idx, member_saving = 0, np.zeros(g.n, bool), member_idx[:0], member_saving[:0]
    fused = g.is_role("norm")
    residual = ctx.config.get("host_bound_gaps", "residual_gap_us") * 1e3
    waiting = fused & (g.gap_before_ns > cfg["gap_over_compute"] * g.dur)
    if share(g.gap_before_ns[waiting].sum(), ctx.total_ns) < cfg["fused_gap_min_share"]:
        waiting = np.zeros(g.n, bool)
    flagged = members | waiting
    if not flagged.any():
        return
    idx = int32_if_fits(np.flatnonzero(flagged))
    saving = np.zeros(len(idx))
    saving[np.searchsorted(idx, member_idx)] = member_saving
    waiting_idx = np.nonzero(waiting)[0]  # a waiting norm's saving holds where it is a chain member too
    saving[np.searchsorted(idx, waiting_idx)] = np.maximum(g.gap_before_ns[waiting_idx] - residual, 0.0)
    covered = float(g.slot_ns(idx).sum())
    if share(covered, ctx.total_ns) < cfg["min_time_share"]:
        return
    st = g.structure()
    ops = op_type_time(g, flagged)
    dur = g.dur[idx].astype(np.float64)
    ctx.emit(
        title=(msg("Unfused RMSNorm: {per_step:.0f} chains of tiny kernels per step",
                   per_step=chains / max(len(g.tokens.decode_step), 1)) if chains
               else msg("{kernels} norm kernels wait on the host longer than "
                        "they run", kernels=int(waiting.sum()))),
        description=(
            msg("RMSNorm computed as separate Cast, Pow, ReduceMean, Add, Rsqrt and Mul kernels launches six "
                "to eight tiny vector kernels per norm, and in eager mode the device idles between them "
                "while the host launches the next one. torch_npu.npu_rms_norm (or npu_add_rms_norm, which "
                "also fuses the residual add) does the same work in one kernel; TASK_QUEUE_ENABLE=2 and "
                "graph mode shorten the remaining gaps.")
            if chains else
            msg("The norm kernels themselves are fused, but the device waits for the host before each one "
                "much longer than the kernel runs: the run is host-bound here. Use TASK_QUEUE_ENABLE=2, "
                "CPU_AFFINITY_CONF=2 or graph mode.")),
        ops=list(ops),
        evidence={
            "unfused_chains": chains, "chains_per_token": round(chains / ctx.tokens, 2),
            "kernels_per_chain": round(float(members.sum()) / chains, 2) if chains else None,
            "norm_kernel_time_us": us(dur.sum()), "norm_launch_gap_us": us(g.gap_before_ns[idx].sum()),
            "median_norm_kernel_us": us(np.median(dur)) if len(dur) else 0.0,
            "gap_over_compute": round(float(g.gap_before_ns[idx].sum() / max(dur.sum(), 1)), 3),
            "host_waiting_fused_norms": int(waiting.sum()),
            "fused_norm_us_assumed": cfg["fused_norm_us"],
        },
        kernels=idx, saving_ns=saving, covered_ns=covered, saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_time": ops, "norm_type": "rms_norm", "layers": st.get("layers"),
                 "model": st.get("model_hint"), "hidden": st.get("hidden"),
                 "fused_api": "torch_npu.npu_rms_norm / torch_npu.npu_add_rms_norm",
                 "env": {"TASK_QUEUE_ENABLE": "2", "CPU_AFFINITY_CONF": "2"}},
    )
