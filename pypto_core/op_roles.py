"""What each kernel does in an LLM decoder, from its real op type (docs/domain.md §3.1) and core type.

Classification runs once per distinct op type (a few hundred at most), then is spread to every kernel
through dictionary indices, so it costs nothing per kernel.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.grouping import (
    coalesced_codes,
    first_rows,
    int16_if_fits,
    looked_up,
    map_code_tuples,
    text_codes,
)

# Role codes: small ints so that a role column is one int8 array.
ROLES: tuple[str, ...] = (
    "other", "matmul", "attention", "softmax", "kv_update", "layout", "transdata", "norm", "norm_piece",
    "rope", "activation", "activation_piece", "cast", "elementwise", "communication", "aicpu",
    "embedding", "sampling",
)
ROLE = {name: code for code, name in enumerate(ROLES)}

# Op types and kernel names seen in Llama/Qwen profiles, docs/domain.md §3.1; GPU kernel names for Kineto
# traces.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(
        r"flashattention|promptflashattention|increflashattention|fusedinferattentionscore|pagedattention|"
        r"multilatentattention|unpadflashattention|flash_fwd|fmha|sdpa|scaled_dot_product|attention", re.I)),
    ("kv_update", re.compile(r"reshapeandcache|scatterndupdate|scatterupdate|kvrmsnormropecache|"
                             r"reshape_and_cache|kv_cache|inplaceindexcopy", re.I)),
    ("rope", re.compile(r"rotarymul|applyrotaryposemb|roperkernel|ropekernel|_triton_rope|rotary|\brope\b",
                        re.I)),
    ("norm", re.compile(r"rmsnorm|layernorm|groupnorm|batchnorm|instancenorm|layer_norm|rms_norm", re.I)),
    ("activation", re.compile(r"swiglu|geglu|dequantswigluquant|silu_and_mul|act_and_mul", re.I)),
    # cuBLASLt's split-K reduction sums a GEMM's partial results: no MatMul, though its launch carries the
    # GEMM's shapes (Kineto) and its name says cublas
    ("other", re.compile(r"splitKreduce", re.I)),
    # Inductor's GEMM templates: triton_tem_fused_mm_0, ..._addmm_..., ..._bmm_...
    ("matmul", re.compile(r"matmul|gemm|gemv|cutlass|xmma|nvjet|cublas|\bmm\b|\bbmm\b|linear|"
                          r"^triton_tem_fused_\w*mm", re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    ("transdata", re.compile(r"^transdata", re.I)),
    ("layout", re.compile(r"^(transpose|transposed|tensormove|concatd?|concat_v2|concatv2|stridedslice\w*|"
                          r"slice|sliced|contiguous|asstrided|viewcopy)$", re.I)),
    ("norm_piece", re.compile(r"^(pow|reducemean|reducemeand|rsqrt|sqrt|reducesum|square)$", re.I)),
    ("activation_piece", re.compile(r"^(swish|silu|sigmoid|gelu|fastgelu|relu)$", re.I)),
    ("cast", re.compile(r"^cast$", re.I)),
    ("elementwise", re.compile(r"^(add|addv2|mul|muls|sub|div|realdiv|neg|maximum|minimum|exp|adds|"
                               r"select|masked_fill|where|zeroslike|fill|onesike|equal|less)$", re.I)),
    # a lookup reads the rows its indices name: GatherV2 (torch_npu's embedding), torch's indexSelect kernels
    ("embedding", re.compile(r"embedding|^gather(v2|v3)?d?$|indexselect|\bvectorized_gather_kernel", re.I)),
    ("sampling", re.compile(r"argmax|topk|sort|multinomial", re.I)),
)
# "broadcast" as a word of its own (c10d's broadcast_, a NCCL Broadcast kernel): Ascend's BroadcastTo is a
# vector-core copy, which read as a collective and its time as communication
_COMM = re.compile(r"^hcom_|hccl|nccl|allreduce|allgather|reducescatter|alltoall|"
                   r"(?<![a-z])broadcast(?![a-z])", re.I)


# torch.compile (Inductor) names a fused pointwise or reduction kernel after the ops it fuses, which may be
# the ones it feeds: ``triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_0`` prepares
# attention's inputs, and read as attention it made an H200 decode step hold 64 attention kernels for 16
# layers. Such a kernel is never the attention or the MatMul itself (those are templates or library calls).
_INDUCTOR_FUSED = re.compile(r"^triton_(poi|red|per)_", re.I)
_NOT_INDUCTOR_FUSED = ("attention", "matmul")


def classify_op_type(op_type: str | None, core_type: str | None = None) -> str:
    """The role of one op type (``MatMulV2`` -> matmul, ``Rsqrt`` -> norm_piece)."""
    ct = (core_type or "").upper()
    text = op_type or ""
    if ct in ("COMMUNICATION", "HCCL") or _COMM.search(text):
        return "communication"
    if ct == "AI_CPU":
        return "aicpu"
    fused = bool(_INDUCTOR_FUSED.match(text))
    for role, pattern in _PATTERNS:
        if pattern.search(text) and not (fused and role in _NOT_INDUCTOR_FUSED):
            return role
    return "other"


def role_codes(kernels: pa.Table) -> np.ndarray:
    """int8 role code per kernel, from op_type (falling back to the kernel name) and core_type; worked out
    once per distinct (core type, op type, name) of codes, never from each row's text."""
    if kernels.num_rows == 0:
        return np.zeros(0, np.int8)
    core, core_v = text_codes(kernels["core_type"], narrow=True)
    op, op_v = text_codes(kernels["op_type"], narrow=True)
    name, name_v = text_codes(kernels["name"], narrow=True)
    # the op type, or the name where there is none: one code over both lists of values
    text = coalesced_codes(op, len(op_v), name, -1)
    del op, name
    texts = op_v + name_v

    def role(c: int, t: int) -> int:
        return ROLE[classify_op_type(texts[t] if t >= 0 else "", core_v[c] if c >= 0 else "")]

    return map_code_tuples(role, core, text, dtype=np.int8)


def op_type_codes(kernels: pa.Table) -> tuple[np.ndarray, list[str]]:
    """Codes of op types (lower-cased; the kernel name where the op type is null) and their values in the
    order rows first use them, for sequence matching and grouping. Worked out on the columns' codes: the
    lower-cased text of every row took about 400 MB on 15.7 M kernels."""
    if kernels.num_rows == 0:
        return np.zeros(0, np.int32), []
    name_codes, names = text_codes(kernels["name"], narrow=True)
    if "op_type" in kernels.column_names:
        op_codes, ops = text_codes(kernels["op_type"], narrow=True)
    else:
        op_codes, ops = np.full(kernels.num_rows, -1, np.int8), []
    # one value list: op types, then names, then "" (neither given)
    lowered = pc.utf8_lower(pa.array(ops + names + [""], pa.string())).to_pylist()
    distinct: dict[str, int] = {}
    value_id = int16_if_fits(np.array([distinct.setdefault(v, len(distinct)) for v in lowered], np.int32))
    # each row's value id, worked out a slice at a time straight into the type it is held in through the
    # rules: 2 bytes a kernel where the op types are fewer than 32767 (every profile seen). An int32 array
    # over every row, and a lookup that widened it to 8 bytes, took 250 MB of a 15.7 M-kernel table.
    ids = coalesced_codes(op_codes, len(ops), name_codes, len(lowered) - 1, to=value_id)
    del op_codes, name_codes
    # numbered in the order rows first use them (as ``dictionary_encode`` of the text numbers them)
    first = first_rows(ids, len(distinct))  # a slice at a time: no index array over every row
    used = np.nonzero(first < len(ids))[0]
    used = used[np.argsort(first[used])]
    renumber = np.full(len(distinct), -1, value_id.dtype)
    renumber[used] = np.arange(len(used))
    values = list(distinct)
    return looked_up(renumber, ids, out=ids), [values[u] for u in used]
