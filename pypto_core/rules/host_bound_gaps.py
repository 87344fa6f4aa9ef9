"""``host_bound_gaps``: the device idles between kernels while the host is busy issuing them.

Only the idle time the attribution calls ``host_launch_bound`` counts: time with no device task while the
host runs framework ops or runtime calls, and is neither synchronising nor loading data (those are
``sync_stall`` and ``data_loading``). The advisor's overall analysis flags free time over 10% (docs/formats.md
§4.3); HTA calls it "host wait" idle time. Advice is the vendor's and the workload's
(``_advice``): graph capture and the launch queue on Ascend (vLLM-Ascend's ACL graph for LLM inference only,
TorchAir graph mode and fused ops for training), CUDA/HIP graphs on GPUs. A run that already launches most
of its kernels from captured graphs (LLM serving's decode usually does: ``pypto_core.launches``) is told what
is left between two replays instead, never to capture the step again.
"""

from __future__ import annotations

import numpy as np

from pypto_core.attribution import TimeAttribution
from pypto_core.grouping import int32_if_fits
from pypto_core.i18n import Message, msg
from pypto_core.intervals import overlap_ns, window_index
from pypto_core.replay import Change
from pypto_core.rules._util import share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import DECODE_WORKLOADS, LLM_WORKLOADS

SAVING_MODEL_CAPTURED = msg("The kernels already run from captured graphs: overlapping or cutting the host's "
                            "work between two replays shrinks the host-launch-bound part of every gap over "
                            "`min_gap_us` to `residual_gap_us`; saving = sum(host-bound gap - residual).")
SAVING_MODEL = msg("Launching the step as a captured graph runs kernels back to back: the host-launch-bound "
                   "part of every gap over `min_gap_us` shrinks to `residual_gap_us`; saving = "
                   "sum(host-bound gap - residual).")

_GPU_ADVICE = {
    "nvidia": msg("Capture the step with CUDA Graphs (torch.compile(mode=\"reduce-overhead\") or "
                  "torch.cuda.CUDAGraph), let torch.compile fuse small ops, and keep Python work out of the "
                  "step."),
    "amd": msg("Capture the step with HIP graphs (torch.compile(mode=\"reduce-overhead\") on ROCm), let "
               "torch.compile fuse small ops, and keep Python work out of the step."),
}
_GENERIC = msg("Launch fewer, larger kernels (fuse small ops, compile the step) and keep Python work out of "
               "the step.")


# From this share of the kernels launched from captured graphs on, the run is in graph mode already.
CAPTURED_SHARE = 0.5


def _captured_advice(workload: str) -> Message:
    """The remedy for a run whose kernels already run from captured graphs: the gaps are the host's work
    between two replays, which capturing again does not remove."""
    if workload in LLM_WORKLOADS:
        return msg("Capturing the step again does not remove these gaps: they are the host's work between "
                   "two graph replays (scheduling, preparing the next inputs, sampling, Python). Overlap it "
                   "with the device (vLLM's async scheduling; prepare the next step's inputs while the graph "
                   "runs), cut the Python work per step, and bring the ops still run eagerly into the graph.")
    return msg("Capturing the step again does not remove these gaps: they are the host's work between two "
               "graph replays (Python, data loading, the optimizer's host work). Overlap it with the device, "
               "cut the Python work per step, and bring the ops still run eagerly into the graph.")


# Above this share of the host-bound time, the part before each step's first kernel is named in the text.
PREPARING_SHARE = 0.2


def _advice(vendor: str, workload: str) -> Message:
    """The remedy for this vendor and workload, the one place it is chosen: vLLM-Ascend's ACL graph serves LLM
    inference only, so a training step on torch_npu is told TorchAir graph mode and fused ops instead."""
    if vendor != "ascend" and workload == "training" and vendor in _GPU_ADVICE:
        # a training step launches forward, backward and optimizer kernels: more work per launch first (HTA's
        # advice for host-bound training), then fewer launches
        return msg("Give each launch more work: raise the per-device batch size where memory allows, use the "
                   "fused optimizer (torch.optim.AdamW(fused=True) or foreach), and compile the step "
                   "(torch.compile fuses small ops; mode=\"reduce-overhead\" also captures {graphs}); cut "
                   "the host work per step (Python logic, logging, per-step .item() calls).",
                   graphs="CUDA graphs" if vendor == "nvidia" else "HIP graphs")
    if vendor != "ascend":
        return _GPU_ADVICE.get(vendor, _GENERIC)
    if workload in LLM_WORKLOADS:
        return msg("Capture the step as a graph (TorchAir torch.compile with the npu backend, or "
                   "vLLM-Ascend ACL graph), set TASK_QUEUE_ENABLE=2 and CPU_AFFINITY_CONF=2, and fuse small "
                   "ops to launch fewer kernels.")
    if workload == "training":
        return msg("Run the training step in graph mode (TorchAir: torch.compile with the npu backend) or "
                   "with larger fused ops (torch_npu npu_* fused operators, a foreach optimizer), set "
                   "TASK_QUEUE_ENABLE=2 and CPU_AFFINITY_CONF=2, and cut the host work per step (Python "
                   "logic, logging, per-step .item() calls).")
    return msg("Capture the step as a graph (TorchAir torch.compile with the npu backend), set "
               "TASK_QUEUE_ENABLE=2 and CPU_AFFINITY_CONF=2, fuse small ops to launch fewer kernels, and cut "
               "the host work per step.")


@rule("host_bound_gaps", title=msg("Device idle waiting for the host"), saving_model=SAVING_MODEL,
      thresholds={
          "free_share_above": Threshold(0.10, "advisor over_all: free time > 10% (docs/formats.md §4.3)"),
          # norm_launch_overhead reads this one too: its waiting fused norms shrink to the same residual gap
          "residual_gap_us": Threshold(1.0, "a graph-mode launch leaves ~1 us between kernels [INFERRED: ACL "
                                            "graph replays tasks back to back]"),
          "min_gap_us": Threshold(5.0, "[INFERRED] no source: only host-bound gaps longer than this are "
                                       "counted and shortened"),
          "min_kernels": Threshold(50, "[INFERRED] a trimmed excerpt of a few kernels says nothing about "
                                       "free time"),
      },
      blocks=(), remedies=(), needs=(), explains="host_launch_bound", saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    a = g.attribution
    cfg = ctx.thresholds
    total = ctx.total_ns
    bound = float(ctx.bucket_ns("host_launch_bound"))
    if a is None or share(bound, total) < cfg["free_share_above"]:
        return
    if g.n < cfg["min_kernels"]:
        ctx.could_not_judge(msg("the profile holds {kernels} kernels, fewer than the {least} it takes to "
                                "tell the host's launch gaps from a pause (profile more steps)", kernels=g.n,
                                least=int(cfg["min_kernels"])))
        return
    hs, he = a.intervals("host_launch_bound")
    # per kernel, the host-bound part of the gap before it (ns, whole numbers: their sums are exact)
    host_part = overlap_ns(hs, he, g.start - g.gap_before_ns, g.start)
    del hs, he
    idx = int32_if_fits(np.flatnonzero(host_part > cfg["min_gap_us"] * 1e3))
    saving = np.maximum(host_part[idx] - cfg["residual_gap_us"] * 1e3, 0.0)
    # time before the step's first task (or after its last) is host-bound too, but no kernel slot holds it
    edge = max(bound - float(host_part.sum()), 0.0)
    longest = us(host_part.max()) if len(host_part) else 0.0
    del host_part  # over every kernel: gone before the finding is built
    graph_share = g.launches.share(g.window)
    captured = graph_share >= CAPTURED_SHARE
    decode = msg(" This dominates eager-mode decode, where kernels are short.") if ctx.workload in (
        DECODE_WORKLOADS) and not captured else ""
    # host work before a step's first task (step_trace_time's Preparing) is counted too: say how much, as it
    # is not a gap between kernels, and graph mode shortens it only if that host work moves into the graph
    preparing = _before_first_task(g.start, a)
    outside = msg(" {ms:.1f} ms of it is host work before each step's first kernel (Preparing in "
                  "step_trace_time), not a gap between kernels: a captured graph shortens that part only if "
                  "the host work moves into the graph.", ms=preparing / 1e6
                  ) if preparing >= PREPARING_SHARE * bound else ""
    launched = _launched(graph_share, g.launches.graph_calls)
    advice = _captured_advice(ctx.workload) if captured else _advice(ctx.vendor, ctx.workload)
    model = SAVING_MODEL_CAPTURED if captured else SAVING_MODEL
    ends = g.start[idx]
    closed = (ends - saving.astype(np.int64), ends)  # the part of each gap graph mode closes
    del saving
    ctx.emit(
        title=msg("The device is idle {pct:.0f}% of the run while the host issues "
                  "work", pct=100 * bound / total),
        description=msg("Between kernels the device sits idle while the host (Python, the framework, the "
                        "launch path) prepares the next one.{decode}{outside}{launched} {advice}",
                        decode=decode, outside=outside, launched=launched, advice=advice),
        ops=[],
        evidence={"host_launch_bound_us": us(bound), "host_launch_bound_share": share(bound, total),
                  "threshold_share": cfg["free_share_above"], "gaps_over_min": int(len(idx)),
                  "longest_gap_us": longest,
                  "outside_kernel_gaps_us": us(edge), "before_first_kernel_us": us(preparing),
                  "graph_launched_share": round(graph_share, 4), "graph_launches": g.launches.graph_calls,
                  "vendor": ctx.vendor},
        # the closed pieces are wall time, not kernel time: they go in the combined union as intervals
        kernels=idx, saving_ns=np.zeros(len(idx)), covered_ns=bound, saving_model=model,
        intervals=closed,
        # graph mode: every task is issued by the graph, so the host's issuing time (framework ops and the
        # Python between them, host_launch_bound and idle_other) goes and every such gap shrinks to the
        # residual
        change=_graph_mode(idx, int(cfg["residual_gap_us"] * 1e3)),
        details={"env": {"TASK_QUEUE_ENABLE": "2", "CPU_AFFINITY_CONF": "2"}, "graph_mode": not captured}
        if ctx.vendor == "ascend" and not captured else {"graph_mode": not captured},
    )


def _launched(graph_share: float, calls: int) -> Message | str:
    """What the run already launches from captured graphs, when it launches any."""
    if not calls:
        return ""
    if graph_share > 0:
        return msg(" {pct:.0f}% of the kernels already run from captured graphs ({calls} graph launches).",
                   pct=100 * graph_share, calls=calls)
    # named graph launches whose tasks the profile does not link to them (no flow, no shared correlation id)
    return msg(" The run already launches captured graphs ({calls} times), but the profile links none of its "
               "kernels to them: see which part of the step they hold before capturing more.", calls=calls)


def _before_first_task(start: np.ndarray, a: TimeAttribution) -> float:
    """Host-bound time between each step's start and its first device task (step_trace_time's Preparing)."""
    if not a.steps or not len(start):
        return 0.0
    w = a.windows()
    step = window_index(w[:, 0], w[:, 1], start)
    ok = step >= 0
    first = w[:, 1].copy()
    np.minimum.at(first, step[ok], start[ok])
    hs, he = a.intervals("host_launch_bound")
    return float(overlap_ns(hs, he, w[:, 0], first).sum())


def _graph_mode(long_gaps: np.ndarray, residual_ns: int) -> Change:
    """Graph mode's change: every kernel issued by the graph, the host's launching time (the attribution's
    ``host_launch_bound`` pieces, as the saving model counts it: not its idle time) removed, and the gaps
    over the rule's minimum (``long_gaps``, the kernels the finding names) cut to the residual."""
    return Change(all_from_graph=True, gap_cut_kernels=int32_if_fits(long_gaps),
                  host_removed_buckets=("host_launch_bound",), residual_gap_ns=residual_ns)
