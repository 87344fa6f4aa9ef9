"""Unfused op chains in a kernel stream, matched columnar around a rare anchor op.

msprof-analyze's advisor matches regexes such as
``(pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}`` over host op names (docs/domain.md §3.4).
Device op types are what every profile has, so we match the same chains on them: an anchor (``Rsqrt``)
extended backwards and forwards over adjacent kernels of the same stream whose op types belong to the chain,
up to a maximum length. Each extension step is one vectorised pass over all anchors, so the cost is O(anchors
x chain length), never a Python loop per kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from pypto_core.grouping import value_flags


@dataclass(frozen=True)
class ChainPattern:
    name: str
    anchor: str  # regex on the lower-cased op type
    before: str  # regex of op types allowed before the anchor
    after: str  # regex of op types allowed after the anchor
    max_before: int
    max_after: int
    require_before: str | None = None  # at least one member before the anchor must match
    require_after: str | None = None
    fused_api: str = ""  # what replaces the chain (advisor's timeline_fusion_ops.yaml)


# The advisor's fusion regexes (docs/domain.md §3.4), restated on device op types (docs/domain.md §3.1, §7: an
# unfused
# RMSNorm is Cast, Pow, ReduceMean, Add, Rsqrt, Mul, Mul, Cast).
RMS_NORM = ChainPattern("rms_norm", r"^rsqrt$",
                        r"^(cast|pows?|square|reducemean|reducemeand|reducesum|add|adds)$",
                        r"^(mul|muls|cast)$", 5, 3, require_before=r"^(reducemean|reducemeand|reducesum)$",
                        fused_api="torch_npu.npu_rms_norm / npu_add_rms_norm")
ROPE = ChainPattern("rope", r"^neg$", r"^(slice|stridedslice\w*|split\w*|mul)$",
                    r"^(concatd?|concatv2|mul|add|cast)$", 3, 4, require_after=r"^(concatd?|concatv2)$",
                    fused_api="torch_npu.npu_rotary_mul / npu_apply_rotary_pos_emb")
SWIGLU = ChainPattern("swiglu", r"^(swish|silu|sigmoid)$", r"^(slice|stridedslice\w*|split\w*)$",
                      r"^(mul|muls)$", 1, 2, require_after=r"^(mul|muls)$", fused_api="torch_npu.npu_swiglu")
ATTENTION = ChainPattern("attention", r"^softmax(v2)?$",
                         r"^(batchmatmul\w*|matmul\w*|mul|muls|add|adds|realdiv|div|cast|maskedfill|select|"
                         r"broadcastto\w*|expand\w*|tile\w*)$",
                         r"^(cast|dropout\w*|batchmatmul\w*|matmul\w*)$", 7, 2,
                         require_before=r"^(batchmatmul\w*|matmul\w*)$",
                         require_after=r"^(batchmatmul\w*|matmul\w*)$",
                         fused_api="torch_npu.npu_incre_flash_attention / npu_fused_infer_attention_score")
PATTERNS: tuple[ChainPattern, ...] = (RMS_NORM, ROPE, SWIGLU, ATTENTION)


@dataclass
class ChainMatch:
    """Members of every match, as positions into the stream-ordered kernel sequence. Only the members are
    kept (sorted), not an array over every kernel: four patterns' dense masks and anchor ids held 650 MB
    on 15.7 M kernels."""

    positions: np.ndarray  # int64, sorted: ordered positions of the chains' members
    anchor_of: np.ndarray  # int64 per member: the ordered position of its chain's anchor
    anchors: np.ndarray  # ordered positions of the matched anchors
    # per member: its kernel row (its position mapped back through the stream order), which whoever knows
    # that order fills in (``OperatorCallGraph.chains``)
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    @property
    def count(self) -> int:
        return int(len(self.anchors))


def _lut(regex: str, vocab: list[str]) -> np.ndarray:
    pat = re.compile(regex)
    return value_flags(vocab, lambda v: pat.search(v or ""))


def match_chains(codes: np.ndarray, vocab: list[str], same_run: np.ndarray,
                 pattern: ChainPattern) -> ChainMatch:
    """Match ``pattern`` over op-type ``codes`` in stream order.

    ``same_run[i]`` is True when position i continues the stream of position i-1 (same device and stream),
    so that a chain never spans two streams.
    """
    n = len(codes)
    empty = ChainMatch(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if n == 0 or not vocab:
        return empty
    anchor_lut, before_lut, after_lut = (_lut(r, vocab) for r in (pattern.anchor, pattern.before,
                                                                  pattern.after))
    anchors = np.nonzero(anchor_lut[codes])[0]
    if not len(anchors):
        return empty
    req_b = _lut(pattern.require_before, vocab) if pattern.require_before else None
    req_a = _lut(pattern.require_after, vocab) if pattern.require_after else None

    def extend(direction: int, limit: int, allowed: np.ndarray,
               required: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        length = np.zeros(len(anchors), np.int64)
        alive = np.ones(len(anchors), bool)
        seen_required = np.zeros(len(anchors), bool) if required is not None else np.ones(len(anchors), bool)
        for k in range(1, limit + 1):
            pos = anchors + direction * k
            inside = (pos >= 0) & (pos < n)
            p = np.clip(pos, 0, n - 1)
            # the link between pos and its neighbour towards the anchor must stay on one stream
            link = np.where(direction < 0, same_run[np.clip(p + 1, 0, n - 1)], same_run[p])
            ok = alive & inside & link & allowed[codes[p]]
            if required is not None:
                seen_required |= ok & required[codes[p]]
            length += ok
            alive = ok
        return length, seen_required

    before_len, ok_b = extend(-1, pattern.max_before, before_lut, req_b)
    after_len, ok_a = extend(+1, pattern.max_after, after_lut, req_a)
    keep = ok_b & ok_a
    anchors, before_len, after_len = anchors[keep], before_len[keep], after_len[keep]
    # members in the order they are claimed (anchors, then k = 1, 2, ... before and after); where two chains
    # claim one position (one's tail is the next one's head), the last claim holds
    pos, owner = [anchors], [anchors]
    for k in range(1, max(pattern.max_before, pattern.max_after) + 1):
        for sel, step in ((before_len >= k, -k), (after_len >= k, k)):
            pos.append(anchors[sel] + step)
            owner.append(anchors[sel])
    claimed, by = np.concatenate(pos)[::-1], np.concatenate(owner)[::-1]
    positions, last = np.unique(claimed, return_index=True)
    return ChainMatch(positions, by[last], anchors)
