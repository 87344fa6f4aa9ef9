"""``kv_cache_layout`` remedy: a preallocated BSND KV cache written in place, read by fused BSND attention.

Hugging Face keeps K/V as BNSD and grows it with ``torch.cat`` every step, and its attention transposes q/k/v,
which on an NPU shows up as Transpose/ConcatD/TensorMove around attention and blocks fused RoPE (BNSD with
B*N > 8*S is refused in decode). The Ascend torchair Llama recipe (docs/domain.md §5) instead preallocates
``(batch, max_len, kv_heads, head_dim)``, writes it with ``torch_npu.scatter_update_(cache, pos, new, 1)`` and
calls IFA/PFA with ``input_layout="BSND"``. This module generates that patch.
"""

from __future__ import annotations

from typing import Any

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.context import RemedyContext
from pypto_core.remedies.model_diff import patch_artifacts
from pypto_core.remedies.registry import register

MODULE_NAME = "kv_cache_layout_patch.py"
DIFF_NAME = "kv_cache_layout_patch.diff"
APPLY_FUNCTION = "apply_kv_cache_layout_optimization"
DEFAULT_MAX_CACHE_LEN = 4096  # tokens; raised to cover the longest sequence the profile saw
_CACHE_LEN_STEP = 1024

# The generated file's text, kept byte for byte (tests/core/remedies/golden): its own long lines stay.
TEMPLATE = '''\
"""BSND KV cache for Hugging Face Llama/Qwen2/Qwen3/Mistral attention on Ascend NPUs (torch_npu).

    import kv_cache_layout_patch
    kv_cache_layout_patch.apply_kv_cache_layout_optimization(model, max_cache_len=4096)
    model.generate(...)          # or model(...) with use_cache=True, as before

What changes, per attention layer:
* q/k/v are viewed as (batch, seq, heads, head_dim) (BSND) and never transposed;
* RoPE runs as torch_npu.npu_rotary_mul on BSND (cos/sin as BS1D);
* K/V go into a cache preallocated as (batch, max_cache_len, kv_heads, head_dim) with
  torch_npu.scatter_update_(cache, start_positions, new, 1): in place, no torch.cat, no copies of the past;
* attention is torch_npu.npu_prompt_flash_attention (prefill) / npu_incre_flash_attention (decode) with
  input_layout="BSND" and the true KV length in actual_seq_lengths(_kv).
The cache object Hugging Face passes around keeps working: each of its layers is replaced by a
PyptoBsndCacheLayer, so get_seq_length(), masks and generate() see the right lengths.
Needs transformers >= 5 (cache layers); greedy and sampling decoding; not beam search, not sliding windows.
"""
import torch
import torch_npu
from transformers import cache_utils

PYPTO_FLAGGED_OPS = __FLAGGED_OPS__  # the ops the profile flagged: type, input shapes, dtypes, formats, calls, us
PYPTO_DEFAULT_MAX_CACHE_LEN = __MAX_CACHE_LEN__
_PYPTO_NO_BAND = 2147483647


class PyptoBsndCacheLayer(cache_utils.CacheLayerMixin):
    """One layer's keys and values, preallocated BSND and written in place with scatter_update_."""

    is_sliding = False
    is_compileable = False
    is_croppable = True

    def __init__(self, max_cache_len):
        super().__init__()
        self.max_cache_len = max_cache_len
        self.length = 0

    def lazy_initialization(self, key_states, value_states):  # BSND
        batch, _, kv_heads, head_dim = key_states.shape
        self.keys = key_states.new_zeros(batch, self.max_cache_len, kv_heads, head_dim)
        self.values = value_states.new_zeros(batch, self.max_cache_len, kv_heads, head_dim)
        self.device = key_states.device
        self.is_initialized = True

    def write(self, key_states, value_states):
        """Append BSND key/value states in place; returns the cached length."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        batch, new = key_states.shape[:2]
        if self.length + new > self.max_cache_len:
            raise RuntimeError(f"KV cache full ({self.max_cache_len} tokens): raise max_cache_len")
        start = torch.full((batch,), self.length, dtype=torch.int64, device=key_states.device)
        torch_npu.scatter_update_(self.keys, start, key_states, 1)
        torch_npu.scatter_update_(self.values, start, value_states, 1)
        self.length += new
        return self.length

    def update(self, key_states, value_states, *args, **kwargs):
        """Hugging Face's BNSD interface, for code that was not patched."""
        self.write(key_states.transpose(1, 2), value_states.transpose(1, 2))
        return (self.keys[:, : self.length].transpose(1, 2), self.values[:, : self.length].transpose(1, 2))

    def get_mask_sizes(self, query_length, *args, **kwargs):
        return self.length + query_length, 0

    def get_seq_length(self, *args, **kwargs):
        return self.length

    def get_max_length(self):
        return -1  # grows like a dynamic layer until max_cache_len

    def get_max_cache_shape(self):
        return -1

    def reset(self):
        self.length = 0

    def crop(self, tokens_to_remove):
        self.length = max(0, self.length - abs(tokens_to_remove)) if tokens_to_remove < 0 else min(
            self.length, tokens_to_remove)

    def reorder_cache(self, beam_idx):
        raise NotImplementedError("kv_cache_layout_patch does not support beam search")


def _pypto_cache_layer(cache, layer_idx, max_cache_len):
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise RuntimeError("kv_cache_layout_patch needs a transformers >= 5 Cache (with .layers)")
    while len(layers) <= layer_idx:
        layers.append(PyptoBsndCacheLayer(max_cache_len))
    layer = layers[layer_idx]
    if isinstance(layer, PyptoBsndCacheLayer):
        return layer
    if type(layer) is not cache_utils.DynamicLayer or layer.get_seq_length() > 0:
        raise RuntimeError(f"kv_cache_layout_patch supports only a fresh DynamicCache, not {type(layer).__name__}")
    layers[layer_idx] = PyptoBsndCacheLayer(max_cache_len)
    return layers[layer_idx]


def _pypto_masked(attention_mask, q_len, kv_len, buffer_len, device):
    """Bool (B or 1, 1, q_len, buffer_len), True = hidden; keys past kv_len are hidden too."""
    if attention_mask is None:
        if q_len == 1:
            return None  # actual_seq_lengths already hides the unused cache tail
        rows = torch.arange(q_len, device=device)[:, None]
        cols = torch.arange(buffer_len, device=device)[None, :]
        return (cols > rows + (kv_len - q_len))[None, None]
    if attention_mask.dtype == torch.bool:  # sdpa convention: True = attend
        masked = ~attention_mask
    else:  # additive convention: 0 = attend, dtype minimum (or -inf) = hidden
        masked = attention_mask < torch.finfo(attention_mask.dtype).min / 2
    masked = masked[..., -q_len:, :kv_len]
    tail = masked.new_ones(*masked.shape[:-1], buffer_len - masked.shape[-1])
    return torch.cat([masked, tail], dim=-1).contiguous()


def _pypto_bsnd_attention_forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
    cache = next((kwargs[k] for k in ("cache", "past_key_values", "past_key_value") if kwargs.get(k) is not None),
                 None)
    if position_embeddings is None:
        raise RuntimeError("kv_cache_layout_patch needs position_embeddings from the model (transformers >= 5)")
    batch, q_len, _ = hidden_states.shape
    query = self.q_proj(hidden_states).view(batch, q_len, -1, self.head_dim)
    key = self.k_proj(hidden_states).view(batch, q_len, -1, self.head_dim)
    value = self.v_proj(hidden_states).view(batch, q_len, -1, self.head_dim)
    if getattr(self, "q_norm", None) is not None:  # Qwen3 normalises q/k per head before RoPE
        query, key = self.q_norm(query), self.k_norm(key)
    heads, kv_heads = query.shape[2], key.shape[2]
    cos, sin = position_embeddings
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # (B, S, 1, D): the BS1D form npu_rotary_mul takes for BSND
    query = torch_npu.npu_rotary_mul(query, cos, sin)
    key = torch_npu.npu_rotary_mul(key, cos, sin)
    if cache is None:
        keys, values, kv_len, kv_lengths = key, value, q_len, None
    else:
        layer = _pypto_cache_layer(cache, self.layer_idx, self._pypto_max_cache_len)
        kv_len = layer.write(key, value)
        keys, values, kv_lengths = layer.keys, layer.values, [kv_len] * batch
    masked = _pypto_masked(attention_mask, q_len, kv_len, keys.shape[1], hidden_states.device)
    if q_len == 1:
        out = torch_npu.npu_incre_flash_attention(
            query, keys, values, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BSND",
            scale_value=self.scaling, atten_mask=masked, actual_seq_lengths=kv_lengths)
    else:
        out = torch_npu.npu_prompt_flash_attention(
            query, keys, values, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BSND",
            scale_value=self.scaling, atten_mask=masked, actual_seq_lengths_kv=kv_lengths,
            pre_tokens=_PYPTO_NO_BAND, next_tokens=_PYPTO_NO_BAND, sparse_mode=0)
    return self.o_proj(out.reshape(batch, q_len, -1)), None


def _pypto_is_llama_style_attention(module):
    return (type(module).__name__.endswith("Attention") and hasattr(module, "layer_idx")
            and all(hasattr(module, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling")))


def apply_kv_cache_layout_optimization(model, max_cache_len=PYPTO_DEFAULT_MAX_CACHE_LEN):
    """Patch every Llama-style attention module of ``model`` in place; returns how many were patched."""
    patched = 0
    for module in model.modules():
        if not _pypto_is_llama_style_attention(module) or hasattr(module, "_pypto_original_forward"):
            continue
        if getattr(module, "sliding_window", None):
            raise NotImplementedError("kv_cache_layout_patch does not handle sliding-window attention layers")
        module._pypto_max_cache_len = int(max_cache_len)
        module._pypto_original_forward = module.forward
        module.forward = _pypto_bsnd_attention_forward.__get__(module)
        patched += 1
    if not patched:
        raise RuntimeError("kv_cache_layout_patch: no Llama-style attention module (q/k/v/o_proj) found")
    return patched
'''  # noqa: E501


def max_cache_len(details: dict[str, Any]) -> int:
    """Room for the longest sequence the profile saw (rounded up), never less than the default."""
    seen = 0
    for key in ("max_seq_len", "max_kv_len", "kv_len", "seq_len"):
        value = details.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            seen = max(seen, value)
    needed = -(-seen * 2 // _CACHE_LEN_STEP) * _CACHE_LEN_STEP
    return max(DEFAULT_MAX_CACHE_LEN, needed)


@register
class KVCacheLayoutOptimizer:
    rule = "kv_cache_layout"

    def generate(self, ctx: RemedyContext) -> list[Artifact]:
        return patch_artifacts(ctx, TEMPLATE, purpose="BSND KV-cache layout patch (scatter_update_ + IFA/PFA "
                                                      "BSND)",
                               module_name=MODULE_NAME, diff_name=DIFF_NAME, apply_function=APPLY_FUNCTION,
                               fills={"MAX_CACHE_LEN": max_cache_len(ctx.finding.details)})
