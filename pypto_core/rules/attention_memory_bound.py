"""``attention_memory_bound``: decode attention whose data movement dominates.

Two signatures (docs/domain.md §6, §8 #2): unfused attention (BatchMatMul -> SoftmaxV2 -> BatchMatMul, which
writes the score matrix to HBM and reads it back, the advisor's ``npu_fusion_attention`` regex of §3.4),
and fused decode attention kernels whose MTE2 cycle share is above 70% while their achieved bandwidth is
below what the profile's other fused kernels reach. "MTE2 share" is the honest label: MTE2 also counts L2
hits, so it is not "HBM time".
"""

from __future__ import annotations

import numpy as np

from pypto_core.grouping import value_flags
from pypto_core.i18n import msg
from pypto_core.rules._fusion import FUSED_LAUNCH_GAP, chain_savings
from pypto_core.rules._util import min_time_share, op_type_time, shape_strings, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import LLM_WORKLOADS

SAVING_MODEL = msg("Each unfused chain is replaced by one fused attention kernel that reads Q, K, V (the KV "
                   "heads before any repeat_kv broadcast) and writes the output once: fused time = fixed "
                   "overhead + max(bytes / (peak bandwidth x fused efficiency), FLOPs (half in causal "
                   "prefill) / (peak x cube efficiency)), launched with the short queued gap; saving = chain "
                   "time + gaps - (fused time + gap). MTE2-bound fused kernels save the time above the same "
                   "bandwidth model.")


@rule("attention_memory_bound", title=msg("Decode attention bound by data movement"),
      saving_model=SAVING_MODEL,
      thresholds={
          "mte2_share_above": Threshold(0.70, "docs/domain.md §6 #1: lines up with the advisor's 0.7 vector "
                                              "rule (FA rule: 0.8)"),
          "fused_bandwidth_efficiency": Threshold(
              0.55, "bandwidth a fused IFA/FIA reaches [INFERRED: below docs/domain.md §7's 60-75% for whole "
                    "decode steps, since attention reads short per-head runs]"),
          "fused_overhead_us": Threshold(6.0, "fixed cost of one fused attention launch: FIA ~21.6-24 us at "
                                              "small S (docs/domain.md §3.1, §7) [INFERRED split]"),
          "fused_cube_efficiency": Threshold(0.50, "[INFERRED] FIA prefill reaches about half the cube peak"),
          "fused_launch_gap_us": FUSED_LAUNCH_GAP,
          "min_time_share": min_time_share(0.01),
      },
      blocks=("attention",), remedies=("fused_attention_patch.py",), needs=("kernels.input_shapes",),
      vendors=("ascend",), workloads=LLM_WORKLOADS)
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    bw = g.sku.hbm_bytes_per_s
    overhead_ns = cfg["fused_overhead_us"] * 1e3
    saving = np.zeros(g.n)

    # 1) unfused chains, prefill and decode alike (npu_prompt_flash_attention / npu_incre_flash_attention)
    ids = g.chain_id("attention")
    members = ids >= 0
    chains = 0
    decode_chains = 0
    if members.any():
        idx = np.nonzero(members)[0]
        uniq, inv = np.unique(ids[idx], return_inverse=True)
        side = g.chain_side("attention")[idx]
        is_mm = g.is_role("matmul")[idx]
        codes, vocab = g.op_codes
        bcast = value_flags(vocab, lambda v: v.startswith(("broadcastto", "expand", "tile")))[codes[idx]]
        n_chains = len(uniq)
        q = np.bincount(inv, weights=np.where(is_mm & (side < 0), g.slot_bytes(0)[idx], 0.0),
                        minlength=n_chains)
        k = np.bincount(inv, weights=np.where(is_mm & (side < 0), g.slot_bytes(1)[idx], 0.0),
                        minlength=n_chains)
        v = np.bincount(inv, weights=np.where(is_mm & (side > 0), g.slot_bytes(1)[idx], 0.0),
                        minlength=n_chains)
        o = np.bincount(inv, weights=np.where(is_mm & (side > 0), g.slot_bytes(0, outputs=True)[idx], 0.0),
                        minlength=n_chains)
        kv_bcast = np.bincount(inv, weights=np.where(bcast, g.slot_bytes(0)[idx], 0.0), minlength=n_chains)
        kv = np.where(kv_bcast > 0, kv_bcast, k + v)
        flops = np.bincount(inv, weights=np.where(is_mm, g.figure("flops", idx), 0.0), minlength=n_chains)
        in_decode = np.bincount(inv, weights=g.decode_kernel_mask[idx].astype(float), minlength=n_chains) > 0
        flops = np.where(in_decode, flops, 0.5 * flops)  # FIA skips the masked half of causal prefill
        fused_ns = overhead_ns + np.maximum(
            (q + kv + o) / (bw * cfg["fused_bandwidth_efficiency"]),
            flops / (g.sku.peak_flops_per_s() * cfg["fused_cube_efficiency"])) * 1e9
        saving[idx], chains = chain_savings(g, idx, ids[idx], fused_ns, cfg["fused_launch_gap_us"] * 1e3)
        decode_chains = int(in_decode.sum())
    # 2) fused decode kernels, MTE2-bound and slower than the bandwidth model
    fused = g.is_role("attention") & g.decode_kernel_mask
    mf = g.move_fraction()
    mfv = mf if mf is not None else np.full(g.n, -1.0)
    model_ns = overhead_ns + g.figure("bytes_moved") / (bw * cfg["fused_bandwidth_efficiency"]) * 1e9
    slow_fused = fused & (mfv > cfg["mte2_share_above"]) & (g.dur > model_ns)
    saving[slow_fused] = g.dur[slow_fused] - model_ns[slow_fused]
    flagged = members | slow_fused
    if not flagged.any():
        return
    idx = np.nonzero(flagged)[0]
    covered = float(g.slot_ns(idx).sum())
    if share(covered, ctx.total_ns) < cfg["min_time_share"]:
        return
    move = None
    if mf is not None:
        vals = mf[idx]
        vals = vals[vals >= 0]
        move = round(float(np.mean(vals)), 4) if len(vals) else None
    dur_s = g.dur[idx].sum() / 1e9
    st = g.structure()
    anchors = idx[g.is_role("softmax", "attention")[idx]]
    ops = op_type_time(g, flagged)
    ctx.emit(
        title=(msg("Unfused attention: {chains} BatchMatMul-Softmax-BatchMatMul chains ({decode} in decode)",
                   chains=chains, decode=decode_chains) if chains else
               msg("{kernels} fused decode attention kernels bound by data "
                   "movement", kernels=int(slow_fused.sum()))),
        description=(
            msg("In decode, attention reads the whole KV cache for one new token, so its speed is set by "
                "memory bandwidth. Computed as separate BatchMatMul, SoftmaxV2 and BatchMatMul kernels (plus "
                "repeat_kv broadcasts for grouped-query attention) it also writes the attention scores to "
                "memory and reads them back, and pays a host launch for every step. A fused kernel "
                "(torch_npu.npu_fused_infer_attention_score, npu_incre_flash_attention for decode, "
                "npu_prompt_flash_attention for prefill) streams K and V once.")
            if chains else
            msg("These fused decode attention kernels spend most of their cycles moving data (MTE2) and "
                "still take longer than the bandwidth model allows: check the KV layout they are fed and the "
                "paged block size.")),
        ops=list(ops),
        evidence={
            "unfused_chains": chains, "unfused_chains_in_decode": decode_chains,
            "chains_per_token": round(decode_chains / ctx.tokens, 2),
            "mte2_bound_fused_kernels": int(slow_fused.sum()),
            "mte2_share": move, "mte2_threshold": cfg["mte2_share_above"],
            "attention_time_us": us(g.dur[idx].sum()),
            "attention_launch_gap_us": us(g.gap_before_ns[idx].sum()),
            "achieved_bandwidth_gbps": (round(float(g.figure("bytes_moved", idx).sum() / dur_s / 1e9), 1)
                                        if dur_s else 0.0),
            "peak_bandwidth_gbps": g.sku.hbm_gbps.value,
            "fused_bandwidth_efficiency_pct": round(100 * cfg["fused_bandwidth_efficiency"], 1),
        },
        kernels=idx, saving_ns=saving[idx], covered_ns=covered, saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_time": ops, "layers": st.get("layers"),
                 "head_dim": st.get("head_dim"), "model": st.get("model_hint"), "unfused": bool(chains),
                 "phases": ["prefill", "decode"] if chains and chains > decode_chains else ["decode"],
                 "example_shapes": shape_strings(g, anchors[:3])},
    )
