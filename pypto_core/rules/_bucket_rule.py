"""The shape shared by the rules that explain one idle or copy bucket of the time attribution (memcpy,
sync stalls, data loading): fire above a share of the step, close that bucket's time, say what filled it."""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto_core.attribution import matching_calls
from pypto_core.i18n import Message
from pypto_core.intervals import clip_to_length, overlap_ns
from pypto_core.replay import Change
from pypto_core.rules._util import share, us
from pypto_core.rules.context import RuleContext


def bucket_share(ctx: RuleContext, bucket: str) -> float | None:
    """The bucket's share of the wall time when at or above the rule's ``share_above``, else None."""
    if ctx.graph.attribution is None or not ctx.total_ns:
        return None
    value = share(ctx.bucket_ns(bucket), ctx.total_ns)
    return value if value >= ctx.threshold("share_above") else None


def emit_bucket(ctx: RuleContext, bucket: str, *, title: Message, description: Message, saving_ns: float,
                saving_model: Message, evidence: dict[str, Any], ops: list[str] | None = None,
                details: dict[str, Any] | None = None, change: Change | None = None) -> None:
    a = ctx.graph.attribution
    assert a is not None
    s, e = a.intervals(bucket)
    covered = float(ctx.bucket_ns(bucket))
    ctx.emit(title=title, description=description, ops=ops or [],
             evidence={f"{bucket}_us": us(covered), f"{bucket}_share": share(covered, ctx.total_ns),
                       "threshold_share": ctx.threshold("share_above"), **evidence},
             kernels=np.zeros(0, np.int64), saving_ns=0.0, covered_ns=covered, saving_model=saving_model,
             intervals=clip_to_length(s, e, min(saving_ns, covered)), details=details or {}, change=change)


# What ``host_calls`` (``attribution.matching_calls``) reads, for a rule's ``needs``.
HOST_CALL_NEEDS: tuple[str, ...] = tuple(f"{t}.{c}" for t in ("api_calls", "host_ops")
                                         for c in ("name", "start_ns", "dur_ns"))


def host_calls(ctx: RuleContext, pattern: Any, bucket: str) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the host calls whose name matches ``pattern`` and that overlap the bucket's time:
    what the fix takes off the host's timeline."""
    a = ctx.graph.attribution
    bs, be = a.intervals(bucket) if a is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    s, e, _ = matching_calls(ctx.profile, pattern)
    sel = overlap_ns(bs, be, s, e) > 0
    return s[sel], e[sel]
