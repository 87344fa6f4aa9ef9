"""``data_loading``: the device idles while the host waits for the next batch from the data loader
(the attribution's ``data_loading`` bucket, typically at the start of each training step)."""

from __future__ import annotations

from pypto_core.attribution import DATA_LOADER
from pypto_core.i18n import msg
from pypto_core.replay import Change
from pypto_core.rules._bucket_rule import HOST_CALL_NEEDS, bucket_share, emit_bucket, host_calls
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("A loader that keeps batches ready (more workers, prefetching, pinned memory) hides the "
                   "wait: saving = the device idle time spent in the data loader.")


@rule("data_loading", title=msg("Device idle waiting for the data loader"), saving_model=SAVING_MODEL,
      thresholds={"share_above": Threshold(0.05, "[INFERRED] the advisor's dataloader check flags slow "
                                                 "loaders")},
      blocks=(), remedies=(), needs=HOST_CALL_NEEDS, workloads=("training", "inference_other", "unknown"),
      explains="data_loading", saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    found = bucket_share(ctx, "data_loading")
    a = ctx.graph.attribution
    if found is None or a is None:
        return
    pin = "pin_memory=True" if ctx.vendor in ("ascend", "nvidia", "amd") else "prefetching"
    emit_bucket(ctx, "data_loading",
                title=msg("The device idles {pct:.0f}% of the step waiting for the data "
                          "loader", pct=100 * found),
                description=msg("Each step starts by waiting for the next batch: the device has nothing to "
                                "run while the DataLoader produces it. Raise num_workers, set "
                                "persistent_workers=True, prefetch_factor and {pin}, and move decoding or "
                                "augmentation off the critical path.", pin=pin),
                saving_ns=ctx.bucket_ns("data_loading"), saving_model=SAVING_MODEL,
                evidence={"steps": len(a.steps)},
                change=Change(host_removed=host_calls(ctx, DATA_LOADER, "data_loading")))
