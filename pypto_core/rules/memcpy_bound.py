"""``memcpy_bound``: the step spends its time copying (H2D, D2H, D2D) with no compute beside the copies
(the attribution's ``memcpy`` bucket), with the pageable share where the trace names it."""

from __future__ import annotations

import numpy as np

from pypto_core.attribution import D2D_CODE, is_copy_code
from pypto_core.i18n import msg
from pypto_core.launches import copies_before_replays
from pypto_core.replay import kernel_change
from pypto_core.rules._bucket_rule import bucket_share, emit_bucket
from pypto_core.rules._util import us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule

SAVING_MODEL = msg("Host copies from pinned memory run asynchronously and overlap compute "
                   "(non_blocking=True); device-to-device copies go once tensors stay in the layout and at "
                   "the address their readers use: saving = the exposed copy time (an upper bound).")

GRAPH_INPUT_COPY_SHARE = 0.5  # of the D2D copy time, launched right before replays, to name graph inputs
PAGEABLE_MENTION_SHARE = 0.05  # of the copy time, from pageable memory, to be worth a sentence


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
    codes = g.task_codes[0]
    copies = np.nonzero(is_copy_code(codes))[0]
    split = {k: us(v) for k, v in b.memcpy_split.items() if v}
    main = max(b.memcpy_split, key=lambda k: b.memcpy_split[k])
    pageable = b.memcpy_pageable_ns
    # device-to-device copies launched right before each replay of a captured graph: its inputs copied into
    # the graph's own buffers (torch.compile's CUDA graphs copy every input that is not a parameter, a
    # buffer or a static address: whole weights, seen on an H200 trace). Copies elsewhere in such a run
    # are not (the real CUDA-graph training trace: 92.7 ms of copies, none right before a replay)
    d2d = codes == D2D_CODE
    graph_inputs_ns = int(g.dur[copies_before_replays(g.profile, g.launches, d2d & ~g.launches.from_graph)]
                          .sum())
    hint = {"h2d": msg("Copy inputs from pinned memory (DataLoader pin_memory=True, tensor.pin_memory()) "
                       "with non_blocking=True so they overlap compute."),
            "d2h": msg("Keep results on the device; copy them back once per step, asynchronously, from "
                       "pinned buffers."),
            "d2d": msg("Device-to-device copies are usually .contiguous()/.clone()/layout changes: keep "
                       "tensors in the layout their consumers read."),
            "memset": msg("Avoid zero-filling buffers every step (torch.empty instead of torch.zeros where "
                          "safe).")}
    if main == "d2d" and graph_inputs_ns >= GRAPH_INPUT_COPY_SHARE * int(g.dur[d2d].sum()):
        hint["d2d"] = msg("The run replays captured graphs and copies tensors into them before each replay "
                          "({ms:.2f} ms of device-to-device copies launched right before the replays): a "
                          "graph reads its inputs from the addresses it was captured with, so "
                          "torch.compile(mode=\"reduce-overhead\") copies every input that is not a "
                          "parameter, a buffer or a static address. Keep weights and caches as parameters "
                          "or buffers of an nn.Module, or mark them with "
                          "torch._dynamo.mark_static_address; a hand-captured graph should write only the "
                          "new token ids and positions into its input tensors.",
                          ms=us(graph_inputs_ns) / 1e3)
    # a few microseconds of pageable copies next to milliseconds of others say nothing worth reading
    page = (msg(" {ms:.2f} ms of it is from pageable host memory, which cannot overlap compute.",
                ms=us(pageable) / 1e3) if pageable >= PAGEABLE_MENTION_SHARE * b.buckets["memcpy"] else "")
    emit_bucket(ctx, "memcpy",
                title=msg("Copies with nothing beside them take {pct:.0f}% of the step (mostly {kind})",
                          pct=100 * found, kind=main.upper()),
                description=msg("The device spends this time only copying.{page} {hint}", page=page,
                                hint=hint.get(main, "")),
                saving_ns=ctx.bucket_ns("memcpy"), saving_model=SAVING_MODEL,
                evidence={"memcpy_split_us": split, "pageable_us": us(pageable),
                          **({"graph_input_copies_us": us(graph_inputs_ns)} if graph_inputs_ns else {})},
                change=kernel_change(copies, g.dur[copies], g.dur))  # copies off the critical path
