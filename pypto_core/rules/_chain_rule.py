"""Shared body of the unfused-chain rules (RoPE, SwiGLU): one chain -> one fused kernel."""

from __future__ import annotations

import numpy as np

from pypto_core.i18n import Message
from pypto_core.rules._fusion import chain_savings
from pypto_core.rules._util import op_type_time, share, us
from pypto_core.rules.context import RuleContext


def report_chain(ctx: RuleContext, chain: str, saving_model: Message, *, title: Message, description: Message,
                 fused_api: str) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    ids = g.chain_id(chain)
    members = ids >= 0
    if not members.any():
        return
    idx = np.nonzero(members)[0]
    uniq = np.unique(ids[idx])
    slot = g.slot_ns(idx)
    saving, _ = chain_savings(g, idx, ids[idx], cfg["fused_us"] * 1e3, cfg["fused_launch_gap_us"] * 1e3)
    if share(slot.sum(), ctx.total_ns) < cfg["min_time_share"]:
        return
    ops = op_type_time(g, members)
    ctx.emit(
        title=title.bind(n=len(uniq) / ctx.tokens), description=description, ops=list(ops),
        evidence={"chains": len(uniq), "chains_per_token": round(len(uniq) / ctx.tokens, 2),
                  "chain_time_us": us(g.dur[idx].sum()),
                  "chain_launch_gap_us": us(g.gap_before_ns[idx].sum()),
                  "kernels_per_chain": round(len(idx) / len(uniq), 2), "fused_us_assumed": cfg["fused_us"]},
        kernels=idx, saving_ns=saving, covered_ns=float(slot.sum()), saving_model=saving_model,
        details={"op_types": list(ops), "op_time": ops, "fused_api": fused_api},
    )
