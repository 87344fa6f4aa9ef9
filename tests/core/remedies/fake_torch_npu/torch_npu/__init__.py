"""CPU test double of ``torch_npu``: a stand-in for the NPU, which cannot exist on this machine.

Only the functions the generated patches call are here, each written from the documented semantics in the
torch-npu 2.13.0 wheel (``torch_npu/_op_plugin_docs.py`` and the op-plugin meta registrations, whose
signatures are copied). They compute in float32 on CPU and are deliberately strict: they reject layouts,
dtypes and arguments that the real kernels reject, or that this double does not model, so that a patch which
would fail on an NPU fails here too. ``calls`` counts every call, so tests can prove a patch really used the
fused API instead of silently falling back to eager PyTorch.

Never import this outside tests: it is put on ``sys.path`` by ``tests/core/remedies/conftest.py``.
"""

from __future__ import annotations

import collections
import math

import torch

from . import npu  # noqa: F401  (torch_npu.npu.set_aoe lives there)

IS_TEST_DOUBLE = True
calls: collections.Counter[str] = collections.Counter()

ACL_FORMAT_ND = 2
ACL_FORMAT_FRACTAL_NZ = 29
_KNOWN_FORMATS = {0, 2, 3, 4, 29}
_MASK_DTYPES = (torch.bool, torch.int8, torch.uint8)
_LAYOUTS = ("BSH", "BSND", "BNSD")
_formats: dict[int, int] = {}  # storage address -> acl format, for get_npu_format


def _count(name: str) -> None:
    calls[name] += 1


# ---- norms -------------------------------------------------------------------------------------------------


def _rstd(x: torch.Tensor, gamma: torch.Tensor, epsilon: float) -> torch.Tensor:
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    return torch.rsqrt(x.float().pow(2).mean(dim=dims, keepdim=True) + epsilon)


def npu_rms_norm(self: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6):
    """y = x * rsqrt(mean(x^2) + eps) * gamma over gamma's trailing dims; returns (y, rstd float32)."""
    _count("npu_rms_norm")
    if self.dtype not in (torch.float16, torch.bfloat16, torch.float32) or gamma.dtype != self.dtype:
        raise TypeError("npu_rms_norm: self must be fp16/bf16/fp32 and gamma the same dtype")
    if not 2 <= self.dim() <= 8 or tuple(self.shape[-gamma.dim():]) != tuple(gamma.shape):
        raise ValueError("npu_rms_norm: gamma must match the trailing dims of self (2-8 dims)")
    rstd = _rstd(self, gamma, epsilon)
    y = (self.float() * rstd * gamma.float()).to(self.dtype)
    return y, rstd


def npu_add_rms_norm(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6):
    """x = x1 + x2; y = rms_norm(x) * gamma; returns (y, rstd, x)."""
    _count("npu_add_rms_norm")
    if x1.shape != x2.shape or x1.dtype != x2.dtype:
        raise ValueError("npu_add_rms_norm: x1 and x2 must have the same shape and dtype")
    x = x1 + x2
    rstd = _rstd(x, gamma, epsilon)
    y = (x.float() * rstd * gamma.float()).to(x1.dtype)
    return y, rstd, x


def npu_add_layer_norm(x1, x2, gamma, beta, epsilon: float = 1e-5, additional_output: bool = False):
    """x = x1 + x2; y = layer_norm(x) * gamma + beta; returns (y, mean, rstd, x)."""
    _count("npu_add_layer_norm")
    if x1.shape != x2.shape:
        raise ValueError("npu_add_layer_norm: x1 and x2 must have the same shape")
    x = x1 + x2
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    xf = x.float()
    mean = xf.mean(dim=dims, keepdim=True)
    rstd = torch.rsqrt(xf.var(dim=dims, unbiased=False, keepdim=True) + epsilon)
    y = ((xf - mean) * rstd * gamma.float() + beta.float()).to(x1.dtype)
    return y, mean, rstd, (x if additional_output else torch.empty(0, dtype=x.dtype))


# ---- rotary embedding --------------------------------------------------------------------------------------


def npu_rotary_mul(input: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half",
                   rotate=None):
    """half mode: output = r1 * input + r2 * cat(-x2, x1);
    4-D input, r1/r2 broadcastable (e.g. BS1D for BSND)."""
    _count("npu_rotary_mul")
    if rotary_mode != "half" or rotate is not None:
        raise NotImplementedError("test double models rotary_mode='half' without rotate only")
    if input.dim() != 4 or r1.dim() != 4 or r2.dim() != 4 or input.shape[-1] % 2:
        raise ValueError("npu_rotary_mul: input, r1 and r2 must be 4-D with an even last dim")
    x1, x2 = torch.chunk(input, 2, -1)
    return r1 * input + r2 * torch.cat((-x2, x1), dim=-1)


# ---- KV cache writes ---------------------------------------------------------------------------------------


def _check_index(indices: torch.Tensor) -> None:
    if indices.dtype not in (torch.int32, torch.int64) or indices.numel() == 0:
        raise TypeError("indices must be a non-empty int32/int64 tensor")


def scatter_update_(data: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, axis: int):
    """In place: for each batch b, data[b, ..., indices[b] :
    indices[b] + updates.size(axis), ...] = updates[b]."""
    _count("scatter_update_")
    _check_index(indices)
    if data.dim() != updates.dim() or not 2 <= data.dim() <= 8:
        raise ValueError("scatter_update_: data and updates must have the same rank (2-8)")
    if indices.dim() != 1 or indices.shape[0] != data.shape[0] or updates.shape[0] != data.shape[0]:
        raise ValueError("scatter_update_: indices must be 1-D with one start index per batch")
    axis = axis % data.dim()
    if axis == 0:
        raise ValueError("scatter_update_: axis must not be the batch axis")
    span = updates.shape[axis]
    for b, start in enumerate(indices.tolist()):
        if start < 0 or start + span > data.shape[axis]:
            raise IndexError("scatter_update_: index out of range (the real kernel does not check this)")
        data[b].narrow(axis - 1, start, span).copy_(updates[b])
    return data


def npu_scatter_nd_update_(input: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor):
    """In place: input[tuple(indices[i])] = updates[i] for each row i of indices (last dim indexes input)."""
    _count("npu_scatter_nd_update_")
    _check_index(indices)
    depth = indices.shape[-1]
    if indices.dim() < 2 or depth > input.dim():
        raise ValueError("npu_scatter_nd_update_: indices must be >= 2-D with last dim <= input.dim()")
    expected = tuple(indices.shape[:-1]) + tuple(input.shape[depth:])
    if tuple(updates.shape) != expected or updates.dtype != input.dtype:
        raise ValueError(f"npu_scatter_nd_update_: updates must have shape {expected} and input's dtype")
    flat_idx = indices.reshape(-1, depth).long()
    flat_upd = updates.reshape((-1,) + tuple(input.shape[depth:]))
    for row, upd in zip(flat_idx.tolist(), flat_upd):
        input[tuple(row)] = upd
    return input


# ---- formats -----------------------------------------------------------------------------------------------


def npu_format_cast(self: torch.Tensor, acl_format: int) -> torch.Tensor:
    """Returns a copy in the given storage format. On CPU the values are unchanged; the format is recorded."""
    _count("npu_format_cast")
    if acl_format not in _KNOWN_FORMATS:
        raise ValueError(f"npu_format_cast: unknown acl_format {acl_format}")
    out = self.detach().clone()
    _formats[out.untyped_storage().data_ptr()] = acl_format
    return out


def get_npu_format(tensor: torch.Tensor) -> int:
    """The storage format a tensor was cast to (ND when never cast)."""
    return _formats.get(tensor.untyped_storage().data_ptr(), ACL_FORMAT_ND)


# ---- attention ---------------------------------------------------------------------------------------------


def _to_bnsd(x: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    if layout not in _LAYOUTS:
        raise ValueError(f"unsupported input_layout {layout!r}")
    if layout == "BSH":
        if x.dim() != 3 or x.shape[-1] % heads:
            raise ValueError("BSH input must be 3-D with H divisible by the head count")
        return x.view(x.shape[0], x.shape[1], heads, x.shape[-1] // heads).transpose(1, 2)
    if x.dim() != 4:
        raise ValueError(f"{layout} input must be 4-D")
    if layout == "BSND":
        if x.shape[2] != heads:
            raise ValueError("BSND input: dim 2 must be the head count")
        return x.transpose(1, 2)
    if x.shape[1] != heads:
        raise ValueError("BNSD input: dim 1 must be the head count")
    return x


def _from_bnsd(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "BSH":
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)
    if layout == "BSND":
        return x.transpose(1, 2)
    return x


def _mask_to_bool(mask: torch.Tensor | None, batch: int, s_q: int, s_kv: int) -> torch.Tensor | None:
    """Documented: True/1 means 'do not attend'. Shapes (S,KV), (B,KV), (B,1,KV), (B,1,S,KV), (B,N,S,KV)."""
    if mask is None:
        return None
    if mask.dtype not in _MASK_DTYPES:
        raise TypeError("atten_mask must be bool/int8/uint8 (1 = masked), not an additive float mask")
    m = mask.bool()
    if m.dim() == 2 and m.shape == (batch, s_kv) and s_q == 1:
        m = m[:, None, None, :]
    elif m.dim() == 2:
        m = m[None, None]
    elif m.dim() == 3:
        m = m[:, :, None, :]
    if m.dim() != 4 or m.shape[-1] < s_kv or m.shape[-2] not in (1, s_q):
        raise ValueError(f"atten_mask shape {tuple(mask.shape)} does not fit S={s_q}, KV_S={s_kv}")
    return m[..., :s_kv]


def _attention(q, k, v, *, num_heads, num_kv_heads, scale, layout, mask, q_lens, kv_lens, pre_tokens,
               next_tokens):
    """Reference math in float32 over BNSD: softmax(q k^T * scale + band + mask) v, GQA by head groups."""
    num_kv_heads = num_kv_heads or num_heads
    if num_heads % num_kv_heads:
        raise ValueError("num_heads must be a multiple of num_key_value_heads")
    qb, kb, vb = (_to_bnsd(q, layout, num_heads), _to_bnsd(k, layout, num_kv_heads),
                  _to_bnsd(v, layout, num_kv_heads))
    batch, _, s_q, _ = qb.shape
    s_kv = kb.shape[2]
    group = num_heads // num_kv_heads
    kf = kb.float().repeat_interleave(group, dim=1)
    vf = vb.float().repeat_interleave(group, dim=1)
    scores = torch.matmul(qb.float(), kf.transpose(2, 3)) * scale
    masked = torch.zeros(batch, 1, s_q, s_kv, dtype=torch.bool)
    i = torch.arange(s_q)[:, None]
    j = torch.arange(s_kv)[None, :]
    masked |= ((j - i) > next_tokens) | ((i - j) > pre_tokens)  # sparse_mode 0 band, top-left aligned
    bool_mask = _mask_to_bool(mask, batch, s_q, s_kv)
    if bool_mask is not None:
        masked = masked | bool_mask
    if kv_lens is not None:
        if len(kv_lens) not in (1, batch):
            raise ValueError("actual_seq_lengths(_kv) must have one entry per batch")
        for b in range(batch):
            masked[b, ..., int(kv_lens[b if len(kv_lens) > 1 else 0]):] = True
    scores = scores.masked_fill(masked, -math.inf)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked rows give 0, as the kernels do
    out = torch.matmul(probs, vf)
    if q_lens is not None:
        for b in range(batch):
            out[b, :, int(q_lens[b if len(q_lens) > 1 else 0]):] = 0.0
    return _from_bnsd(out.to(q.dtype), layout)


def npu_prompt_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=2147483647, next_tokens=0, input_layout="BSH",
                               num_key_value_heads=0, actual_seq_lengths_kv=None, sparse_mode=0):
    """Prefill attention (op PromptFlashAttention). Models sparse_mode=0 only."""
    _count("npu_prompt_flash_attention")
    if sparse_mode != 0 or pse_shift is not None or padding_mask is not None or deq_scale1 is not None:
        raise NotImplementedError("test double models sparse_mode=0 without pse/quantisation")
    return _attention(query, key, value, num_heads=num_heads, num_kv_heads=num_key_value_heads,
                      scale=scale_value, layout=input_layout, mask=atten_mask, q_lens=actual_seq_lengths,
                      kv_lens=actual_seq_lengths_kv, pre_tokens=pre_tokens, next_tokens=next_tokens)


def npu_incre_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                              actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None,
                              block_table=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None,
                              quant_scale2=None, quant_offset2=None, kv_padding_size=None, num_heads=1,
                              scale_value=1.0, input_layout="BSH", num_key_value_heads=0, block_size=0,
                              inner_precise=1):
    """Decode attention (op IncreFlashAttention): query S == 1; actual_seq_lengths are the KV lengths."""
    _count("npu_incre_flash_attention")
    if block_table is not None or pse_shift is not None or antiquant_scale is not None:
        raise NotImplementedError("test double models contiguous (non-paged), unquantised KV only")
    seq_axis = 2 if input_layout == "BNSD" else 1
    if query.shape[seq_axis] != 1:
        raise ValueError("npu_incre_flash_attention: query sequence length must be 1")
    return _attention(query, key, value, num_heads=num_heads, num_kv_heads=num_key_value_heads,
                      scale=scale_value, layout=input_layout, mask=atten_mask, q_lens=None,
                      kv_lens=actual_seq_lengths, pre_tokens=2147483647, next_tokens=2147483647)


def npu_fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None,
                                    actual_seq_lengths=None, actual_seq_lengths_kv=None, dequant_scale1=None,
                                    quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                                    quant_offset2=None, antiquant_scale=None, antiquant_offset=None,
                                    block_table=None, query_padding_size=None, kv_padding_size=None,
                                    key_antiquant_scale=None, key_antiquant_offset=None,
                                    value_antiquant_scale=None, value_antiquant_offset=None,
                                    key_shared_prefix=None, value_shared_prefix=None,
                                    actual_shared_prefix_len=None, query_rope=None, key_rope=None,
                                    key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
                                    pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                    antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=0,
                                    value_antiquant_mode=0):
    """Prefill or decode (op FusedInferAttentionScore); returns (attention_out, softmax_lse)."""
    _count("npu_fused_infer_attention_score")
    if sparse_mode != 0 or block_table is not None or pse_shift is not None or query_rope is not None:
        raise NotImplementedError("test double models sparse_mode=0, non-paged, without pse or rope split")
    out = _attention(query, key, value, num_heads=num_heads, num_kv_heads=num_key_value_heads, scale=scale,
                     layout=input_layout, mask=atten_mask, q_lens=actual_seq_lengths,
                     kv_lens=actual_seq_lengths_kv, pre_tokens=pre_tokens, next_tokens=next_tokens)
    return out, torch.empty(0)


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                         next_tockens=2147483647, inner_precise=0, prefix=None, actual_seq_qlen=None,
                         actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False,
                         softmax_layout="", sink=None, dropout_mask=None, seed=0, offset=0):
    """FlashAttentionScore; key/value heads are inferred
    from their shape (GQA). Returns a 7-tuple, [0] = out."""
    _count("npu_fusion_attention")
    if sparse_mode != 0 or keep_prob != 1.0 or pse is not None or input_layout not in _LAYOUTS:
        raise NotImplementedError("test double models sparse_mode=0, keep_prob=1, BSH/BSND/BNSD without pse")
    if input_layout == "BSND":
        kv_heads = key.shape[2]
    elif input_layout == "BNSD":
        kv_heads = key.shape[1]
    else:
        kv_heads = head_num * key.shape[-1] // query.shape[-1]
    out = _attention(query, key, value, num_heads=head_num, num_kv_heads=kv_heads, scale=scale,
                     layout=input_layout, mask=atten_mask, q_lens=None, kv_lens=None, pre_tokens=pre_tockens,
                     next_tokens=next_tockens)
    empty = torch.empty(0)
    return out, empty, empty, empty, 0, 0, 0
