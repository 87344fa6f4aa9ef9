"""``attention_memory_bound``: decode attention whose data movement dominates.

Two signatures (DOMAIN.md §6, §8 #2): unfused attention (BatchMatMul -> SoftmaxV2 -> BatchMatMul, which
writes the score matrix to HBM and reads it back, the advisor's ``npu_fusion_attention`` regex of §3.4),
and fused attention kernels whose MTE2 cycle share is above 70% while their achieved bandwidth is far
from the peak. "MTE2 share" is the honest label: MTE2 also counts L2 hits, so it is not "HBM time".
"""

from __future__ import annotations

import numpy as np

from pypto_core.rules._util import op_type_time, share, shape_strings, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import rule

SAVING_MODEL = ("Each unfused chain (and each MTE2-bound fused kernel) is replaced by one fused kernel that moves "
                "only Q, K, V and the output once, at the bandwidth efficiency fused attention kernels reach in "
                "this profile (or the configured one): saving = chain device time + its launch gaps - (ideal "
                "bytes / (peak bandwidth x efficiency) + one launch gap).")


@rule("attention_memory_bound", title="Decode attention bound by data movement", saving_model=SAVING_MODEL,
      remedies=("fused_attention_patch.py",))
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.config.section("attention_memory_bound")
    window = g.decode_kernel_mask if g.decode_kernel_mask.any() else np.ones(g.n, bool)
    bw = g.sku.hbm_bytes_per_s
    slot = (g.dur + g.gap_before_ns).astype(np.float64)

    fused = g.is_role("attention") & window
    mf = g.move_fraction
    fused_bw_eff = np.divide(g.bytes_moved, g.dur / 1e9 * bw, out=np.zeros(g.n), where=g.dur > 0)
    mfv = mf if mf is not None else np.full(g.n, -1.0)
    mte2_high = fused & (mfv > cfg["mte2_share_above"])
    healthy = fused & ~mte2_high
    eff = (float(np.median(fused_bw_eff[healthy])) if healthy.any() else cfg["fused_bandwidth_efficiency"])
    eff = min(max(eff, 0.05), 1.0)

    saving = np.zeros(g.n)
    # 1) unfused chains: ideal bytes = sum of the chain's MatMul traffic minus the scores written and re-read
    chain_ids = g.chain_id("attention")
    unfused = (chain_ids >= 0) & window
    chains = 0
    if unfused.any():
        ids, inv = np.unique(chain_ids[unfused], return_inverse=True)
        chains = len(ids)
        idx = np.nonzero(unfused)[0]
        is_mm = g.is_role("matmul")[idx]
        is_sm = g.is_role("softmax")[idx]
        mm_bytes = np.bincount(inv, weights=np.where(is_mm, g.bytes_moved[idx], 0.0), minlength=chains)
        sm_bytes = np.bincount(inv, weights=np.where(is_sm, g.bytes_moved[idx], 0.0), minlength=chains)
        ideal = np.maximum(mm_bytes - sm_bytes, 0.0)
        chain_slot = np.bincount(inv, weights=slot[idx], minlength=chains)
        # the fused kernel still needs one launch: keep the smallest gap of the chain
        min_gap = np.full(chains, np.inf)
        np.minimum.at(min_gap, inv, g.gap_before_ns[idx].astype(np.float64))
        chain_saving = np.maximum(chain_slot - ideal / (bw * eff) * 1e9 - min_gap, 0.0)
        saving[idx] = chain_saving[inv] * slot[idx] / np.maximum(chain_slot[inv], 1.0)
    # 2) fused but MTE2-bound kernels reaching less than the healthy ones
    slow_fused = mte2_high & (fused_bw_eff < eff)
    saving[slow_fused] = np.maximum(g.dur[slow_fused] - g.bytes_moved[slow_fused] / (bw * eff) * 1e9, 0.0)
    flagged = unfused | slow_fused
    if not flagged.any():
        return
    idx = np.nonzero(flagged)[0]
    covered = float(slot[idx].sum())
    if share(covered, ctx.total_ns) < cfg["min_time_share"]:
        return
    move = None
    if mf is not None:
        vals = mf[idx]
        vals = vals[vals >= 0]
        move = round(float(np.average(vals)), 4) if len(vals) else None
    dur_s = g.dur[idx].sum() / 1e9
    st = g.structure()
    att_anchor = idx[g.is_role("softmax", "attention")[idx]]
    ctx.emit(
        title=(f"Unfused decode attention: {chains} BatchMatMul-Softmax-BatchMatMul chains" if chains
               else f"{int(slow_fused.sum())} fused attention kernels bound by data movement"),
        description=(
            "In decode, attention reads the whole KV cache for one new token, so its speed is set by memory "
            "bandwidth. Computed as separate BatchMatMul, SoftmaxV2 and BatchMatMul kernels it also writes the "
            "attention scores to HBM and reads them back, and pays a launch for every step. A fused kernel "
            "(torch_npu.npu_incre_flash_attention / npu_fused_infer_attention_score) streams K and V once."
            if chains else
            "These fused attention kernels spend most of their cycles moving data (MTE2) yet reach only a "
            "fraction of peak bandwidth: check the KV layout they are fed and the paged block size."),
        ops=list(op_type_time(g, flagged)),
        evidence={
            "unfused_chains": chains, "chains_per_token": round(chains / ctx.tokens, 2),
            "mte2_bound_fused_kernels": int(slow_fused.sum()),
            "mte2_share": move, "mte2_threshold": cfg["mte2_share_above"],
            "attention_time_us": us(g.dur[idx].sum()), "attention_launch_gap_us": us(g.gap_before_ns[idx].sum()),
            "achieved_bandwidth_gbps": round(float(g.bytes_moved[idx].sum() / dur_s / 1e9), 1) if dur_s else 0.0,
            "peak_bandwidth_gbps": g.sku.hbm_gbps.value,
            "assumed_fused_bandwidth_efficiency_pct": round(100 * eff, 1),
        },
        kernels=idx, saving_ns=saving[idx], covered_ns=covered, saving_model=SAVING_MODEL,
        remedies=["fused_attention_patch.py"],
        details={"op_types": list(op_type_time(g, flagged)), "layers": st.get("layers"), "head_dim": st.get("head_dim"),
                 "model": st.get("model_hint"), "unfused": bool(chains), "phase": "decode",
                 "example_shapes": shape_strings(g, att_anchor[:3]),
                 "op_time": op_type_time(g, flagged)},
    )
