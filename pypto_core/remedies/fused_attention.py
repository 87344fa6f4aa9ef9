"""``attention_memory_bound`` remedy: route Hugging Face attention through torch_npu's fused attention
kernels.

Unfused attention is BatchMatMul + SoftmaxV2 + BatchMatMul with the score matrix going through HBM; the fused
kernels keep it on chip (docs/domain.md §8.2): ``npu_incre_flash_attention`` /
``npu_fused_infer_attention_score``
for decode (query length 1), ``npu_prompt_flash_attention`` / ``npu_fusion_attention`` for prefill. The patch
registers one attention function with transformers' ``AttentionInterface``, so the model code is untouched.
"""

from __future__ import annotations

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.context import RemedyContext
from pypto_core.remedies.model_diff import patch_artifacts
from pypto_core.remedies.registry import register

MODULE_NAME = "fused_attention_patch.py"
DIFF_NAME = "fused_attention_patch.diff"
APPLY_FUNCTION = "apply_fused_attention"

# The generated file's text, kept byte for byte (tests/core/remedies/golden): its own long lines stay.
TEMPLATE = '''\
"""Fused attention for Hugging Face decoder models on Ascend NPUs (torch_npu).

    import fused_attention_patch
    fused_attention_patch.apply_fused_attention(model)                 # IFA for decode, PFA for prefill
    fused_attention_patch.apply_fused_attention(model, decode="fused_infer", prefill="fusion")

Decode (query length 1): npu_incre_flash_attention, or npu_fused_infer_attention_score (torch_npu >= 2.5 names
its scale argument ``scale``; older releases call it ``scale_value``). Prefill: npu_prompt_flash_attention, or
npu_fusion_attention. Tensors stay in the BNSD layout Hugging Face's cache already uses, so no extra transposes;
masks are passed in the kernels' convention (bool, True = do not attend). Inference only: no dropout.
"""
import torch
import torch_npu
from transformers import AttentionInterface

try:  # transformers >= 4.53 builds masks per attention implementation
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
except ImportError:  # older releases build one mask for every implementation
    AttentionMaskInterface = sdpa_mask = None

PYPTO_FLAGGED_OPS = __FLAGGED_OPS__  # the ops the profile flagged: type, input shapes, dtypes, formats, calls, us
_PYPTO_NO_BAND = 2147483647  # pre/next tokens: let the mask alone decide what is visible
_PYPTO_DECODE = ("incre", "fused_infer")
_PYPTO_PREFILL = ("prompt", "fusion")


def _pypto_masked(attention_mask, q_len, kv_len, device):
    """Bool (B or 1, 1, q_len, kv_len), True where a query must not see a key; None when nothing is hidden."""
    if attention_mask is None:
        if q_len == 1:
            return None
        rows = torch.arange(q_len, device=device)[:, None]
        cols = torch.arange(kv_len, device=device)[None, :]
        return (cols > rows + (kv_len - q_len))[None, None]
    if attention_mask.dtype == torch.bool:  # sdpa convention: True = attend
        masked = ~attention_mask
    else:  # additive convention: 0 = attend, dtype minimum (or -inf) = hidden
        masked = attention_mask < torch.finfo(attention_mask.dtype).min / 2
    return masked[..., -q_len:, :kv_len].contiguous()


def _pypto_make_attention(decode, prefill):
    def pypto_npu_fused_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if module.training and dropout > 0.0:
            raise RuntimeError("fused_attention_patch is for inference; call model.eval()")
        batch, heads, q_len, head_dim = query.shape
        kv_heads, kv_len = key.shape[1], key.shape[2]
        scale = float(scaling if scaling is not None else head_dim ** -0.5)
        masked = _pypto_masked(attention_mask, q_len, kv_len, query.device)
        if q_len == 1 and decode == "incre":
            out = torch_npu.npu_incre_flash_attention(
                query, key, value, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BNSD",
                scale_value=scale, atten_mask=masked)
        elif q_len == 1:
            out = torch_npu.npu_fused_infer_attention_score(
                query, key, value, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BNSD",
                scale=scale, atten_mask=masked)[0]
        elif prefill == "prompt":
            out = torch_npu.npu_prompt_flash_attention(
                query, key, value, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BNSD",
                scale_value=scale, atten_mask=masked, pre_tokens=_PYPTO_NO_BAND, next_tokens=_PYPTO_NO_BAND,
                sparse_mode=0)
        else:
            out = torch_npu.npu_fusion_attention(
                query, key, value, heads, "BNSD", atten_mask=masked, scale=scale,
                pre_tockens=_PYPTO_NO_BAND, next_tockens=_PYPTO_NO_BAND, sparse_mode=0)[0]
        return out.transpose(1, 2).contiguous(), None  # Hugging Face expects (batch, seq, heads, head_dim)

    return pypto_npu_fused_attention


def apply_fused_attention(model, decode="incre", prefill="prompt"):
    """Register the fused attention and switch ``model`` to it; returns the implementation name."""
    if decode not in _PYPTO_DECODE or prefill not in _PYPTO_PREFILL:
        raise ValueError(f"decode must be one of {_PYPTO_DECODE}, prefill one of {_PYPTO_PREFILL}")
    name = f"pypto_npu_{decode}_{prefill}"
    AttentionInterface.register(name, _pypto_make_attention(decode, prefill))
    if AttentionMaskInterface is not None:
        AttentionMaskInterface.register(name, sdpa_mask)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name
    return name
'''  # noqa: E501


@register
class FusedAttentionOptimizer:
    rule = "attention_memory_bound"

    def generate(self, ctx: RemedyContext) -> list[Artifact]:
        return patch_artifacts(ctx, TEMPLATE, purpose="fused attention patch (IFA/FIA decode, PFA/FA "
                                                      "prefill)",
                               module_name=MODULE_NAME, diff_name=DIFF_NAME, apply_function=APPLY_FUNCTION)
