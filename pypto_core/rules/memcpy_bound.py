"""``memcpy_bound``: the step spends its time copying (H2D, D2H, D2D) with no compute beside the copies
(the attribution's ``memcpy`` bucket), with the pageable share where the trace names it."""

from __future__ import annotations

import numpy as np

from pypto_core.attribution import is_copy_code
from pypto_core.i18n import msg
from pypto_core.replay import kernel_change
from pypto_core.rules._bucket_rule import bucket_share, emit_bucket
from pypto_core.rules._util import us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Host copies from pinned memory run asynchronously and overlap compute "
                   "(non_blocking=True); device-to-device copies removed by keeping tensors contiguous: "
                   "saving = the exposed copy time (an upper bound).")


@rule("memcpy_bound", title=msg("Copies on the critical path"), saving_model=SAVING_MODEL,
      thresholds={"share_above": Threshold(0.10, "HTA's temporal breakdown: non-compute time [INFERRED "
                                                 "threshold]")},
      blocks=(), remedies=(), needs=(), explains="memcpy", saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    found = bucket_share(ctx, "memcpy")
    if found is None or g.attribution is None:
        return
    b = g.attribution.run
    copies = np.nonzero(is_copy_code(g.task_codes[0]))[0]
    split = {k: us(v) for k, v in b.memcpy_split.items() if v}
    main = max(b.memcpy_split, key=lambda k: b.memcpy_split[k])
    pageable = b.memcpy_pageable_ns
    hint = {"h2d": msg("Copy inputs from pinned memory (DataLoader pin_memory=True, tensor.pin_memory()) "
                       "with non_blocking=True so they overlap compute."),
            "d2h": msg("Keep results on the device; copy them back once per step, asynchronously, from "
                       "pinned buffers."),
            "d2d": msg("Device-to-device copies are usually .contiguous()/.clone()/layout changes: keep "
                       "tensors in the layout their consumers read."),
            "memset": msg("Avoid zero-filling buffers every step (torch.empty instead of torch.zeros where "
                          "safe).")}
    page = (msg(" {ms:.2f} ms of it is from pageable host memory, which cannot overlap compute.",
                ms=us(pageable) / 1e3) if pageable else "")
    emit_bucket(ctx, "memcpy",
                title=msg("Copies with nothing beside them take {pct:.0f}% of the step (mostly {kind})",
                          pct=100 * found, kind=main.upper()),
                description=msg("The device spends this time only copying.{page} {hint}", page=page,
                                hint=hint.get(main, "")),
                saving_ns=ctx.bucket_ns("memcpy"), saving_model=SAVING_MODEL,
                evidence={"memcpy_split_us": split, "pageable_us": us(pageable)},
                change=kernel_change(copies, g.dur[copies], g.dur))  # copies off the critical path
