"""``sync_stall``: the device idles while the host is blocked in a synchronisation.

The attribution's ``sync_wait`` bucket: no device task runs and the host sits in a stream/device sync, a
synchronous copy or an op that reads a device value on the host (``.item()``, ``.tolist()``, ``nonzero``).
Each such call drains the launch queue, so the device idles until the host issues again.
"""

from __future__ import annotations

import numpy as np

from pypto_core.attribution import SYNC_CALL, matching_calls
from pypto_core.i18n import msg
from pypto_core.intervals import outermost, overlap_ns
from pypto_core.replay import Change
from pypto_core.rules._bucket_rule import HOST_CALL_NEEDS, bucket_share, emit_bucket, host_calls
from pypto_core.rules._util import us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Removing the host syncs from the step (values kept on the device, syncs moved out of the "
                   "loop) lets the queue run ahead: saving = the device idle time spent inside the syncs (an "
                   "upper bound).")

_ADVICE = {
    "ascend": msg("Avoid torch.npu.synchronize(), .item(), .cpu() and .tolist() inside the step; keep "
                  "ASCEND_LAUNCH_BLOCKING unset."),
    "nvidia": msg("Avoid torch.cuda.synchronize(), .item(), .cpu() and .tolist() inside the step "
                  "(torch.cuda.set_sync_debug_mode('warn') finds them); keep CUDA_LAUNCH_BLOCKING unset."),
    "amd": msg("Avoid torch.cuda.synchronize(), .item(), .cpu() and .tolist() inside the step; keep "
               "HIP_LAUNCH_BLOCKING unset."),
}


def sync_calls(ctx: RuleContext) -> dict[str, dict[str, float]]:
    """{call name: {count, stall_us}} of the outermost sync calls that overlap the device's sync_wait time.

    A sync nests: ``.item()`` is aten::item, which calls aten::_local_scalar_dense, which calls
    cudaStreamSynchronize (or aclrtMemcpy). Listed each, one stall read three times (569 + 557 + 545 µs of
    597 on the H200 graph run): only the outermost call, the one the code wrote, is listed."""
    a = ctx.graph.attribution
    s, e = a.intervals("sync_wait") if a is not None else (np.zeros(0), np.zeros(0))
    out: dict[str, dict[str, float]] = {}
    start, end, names = matching_calls(ctx.profile, SYNC_CALL)
    outer = outermost(start, end)
    start, end, names = start[outer], end[outer], [names[i] for i in np.flatnonzero(outer)]
    for name, ns in zip(names, overlap_ns(s, e, start, end).tolist()):
        if ns <= 0:
            continue  # a sync while the device still had work queued stalled nothing
        row = out.setdefault(name, {"count": 0, "stall_us": 0.0})
        row["count"] += 1
        row["stall_us"] = round(row["stall_us"] + ns / 1e3, 3)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["stall_us"])[:10])


@rule("sync_stall", title=msg("Device idle while the host synchronises"), saving_model=SAVING_MODEL,
      thresholds={"share_above": Threshold(0.05, "[INFERRED] host syncs idling the device a twentieth of the "
                                                 "step")},
      blocks=(), remedies=(), needs=HOST_CALL_NEEDS, explains="sync_wait", saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    found = bucket_share(ctx, "sync_wait")
    if found is None:
        return
    calls = sync_calls(ctx)
    stall = ctx.bucket_ns("sync_wait")
    names = ", ".join(list(calls)[:3]) or msg("synchronising calls")
    emit_bucket(ctx, "sync_wait",
                title=msg("The device idles {pct:.0f}% of the step while the host "
                          "synchronises", pct=100 * found),
                description=msg("The host blocks in {names} while the device has nothing queued: each sync "
                                "drains the launch queue, so the device waits for the host to issue again. "
                                "{advice}",
                                names=names, advice=_ADVICE.get(ctx.vendor, msg("Keep host syncs out of the "
                                                                                "step."))),
                saving_ns=stall, saving_model=SAVING_MODEL, ops=list(calls),
                evidence={"sync_calls": calls, "stall_us_total": us(stall)},
                change=Change(host_removed=host_calls(ctx, SYNC_CALL, "sync_wait")))
