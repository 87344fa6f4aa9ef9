"""``kv_cache_layout``: a KV-cache layout the fused kernel does not consume, seen as per-step copies.

No profiler exposes memory addresses, so "non-coalesced KV access" is measured by its honest proxy
(docs/domain.md §6 #4): the time of ``Transpose`` / ``TensorMove`` / ``ConcatD`` / ``StridedSlice`` kernels on
cache-shaped tensors (4-D, last dim = head dim, more than one position) outside RoPE, every step. HF eager
keeps a BNSD cache, transposes q/k/v and concatenates the cache each token; the torchair recipe keeps a
BSND cache updated in place with ``scatter_update_`` and feeds the fused kernel ``input_layout="BSND"``.
"""

from __future__ import annotations

import numpy as np

from pypto_core.i18n import msg
from pypto_core.rules._util import min_time_share, op_type_time, shape_strings, share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import DECODE_WORKLOADS

# What the noncontiguous share measures (no profiler counts uncoalesced accesses); stored in English.
PROXY = msg("time of copies of cache-shaped tensors (docs/domain.md §6 #4)")
SAVING_MODEL = msg("Every per-step copy of a cache-shaped tensor disappears with a pre-allocated BSND cache, "
                   "saving its device time and the launch gap before it; if the profile has no in-place "
                   "cache update kernel yet, two scatter updates per layer and token (configured cost each) "
                   "are added back.")


@rule("kv_cache_layout", title=msg("KV cache stored in a layout attention does not consume"),
      saving_model=SAVING_MODEL,
      thresholds={
          "min_copies_per_token": Threshold(1.0, "per-step copies, not a one-off reorder at load time"),
          "min_time_share": min_time_share(0.005),
          "scatter_cost_us": Threshold(3.0, "BSND cache update with scatter_update_ costs one write of the "
                                            "new K/V (docs/domain.md §5); ReshapeAndCacheNdKernel ~3 us "
                                            "(docs/domain.md §3.1)"),
      },
      blocks=("kv_layout", "kv_update"), remedies=("kv_cache_layout_patch.py",),
      needs=("kernels.input_shapes",), vendors=("ascend",), workloads=DECODE_WORKLOADS)
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    mask = g.kv_layout_mask
    if not mask.any():
        return
    idx = np.nonzero(mask)[0]
    per_token = len(idx) / ctx.tokens
    slot = g.slot_ns(idx)
    covered = float(slot.sum())
    if per_token < cfg["min_copies_per_token"] or share(covered, ctx.total_ns) < cfg["min_time_share"]:
        return
    st = g.structure()
    layers = st.get("layers") or 0
    added = 0.0
    if not g.is_role("kv_update").any() and layers:
        added = 2 * layers * ctx.tokens * cfg["scatter_cost_us"] * 1e3
    saving = np.maximum(slot - added * slot / max(covered, 1.0), 0.0)
    att_time = float(g.dur[g.attention_mask].sum())
    lay_time = float(g.dur[idx].sum())
    ops = op_type_time(g, mask)
    ctx.emit(
        title=msg("{per_token:.0f} KV-cache layout copies per token around attention", per_token=per_token),
        description=msg(
            "Every decode step copies cache-shaped tensors (Transpose / TensorMove / ConcatD) because the KV "
            "cache is kept in a layout the attention kernel does not read directly (typically BNSD grown "
            "with torch.cat, as Hugging Face eager code does). Keep a pre-allocated BSND cache (batch, "
            "max_seq, kv_heads, head_dim), write new keys and values in place with "
            "torch_npu.scatter_update_, and call the fused attention with input_layout=\"BSND\". The share "
            "reported is a proxy: the time of these copies, not a measured count of uncoalesced memory "
            "accesses, which no profiler exposes."),
        ops=list(ops),
        evidence={
            "layout_copies": int(len(idx)), "copies_per_token": round(per_token, 2),
            "copy_time_us": us(lay_time), "copy_launch_gap_us": us(g.gap_before_ns[idx].sum()),
            "layout_tax_vs_attention": round(lay_time / att_time, 4) if att_time else None,
            "kv_cache_noncontiguous_share": (round(lay_time / (lay_time + att_time), 4)
                                             if lay_time + att_time else 0.0),
            "proxy": PROXY.template,
            "in_place_cache_update_kernels": int(g.is_role("kv_update").sum()),
        },
        kernels=idx, saving_ns=saving, covered_ns=covered, saving_model=SAVING_MODEL,
        details={"op_types": list(ops), "op_time": ops, "layers": layers, "head_dim": st.get("head_dim"),
                 "model": st.get("model_hint"), "current_layout_guess": "BNSD", "target_layout": "BSND",
                 "cache_shapes": shape_strings(g, idx[:4])},
    )
