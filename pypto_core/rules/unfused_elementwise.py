"""``unfused_elementwise``: eager PyTorch on a GPU runs every elementwise op as its own ATen kernel, each
reading and writing the whole tensor. Back to back on a stream they are a chain a compiler fuses into one
kernel: RMSNorm's casts, pow, mean, add, rsqrt and multiplies; a rotary embedding's neg, cat, multiplies and
add; a residual add before the next norm. torch.compile (Inductor) emits one Triton kernel per chain.

The Ascend chains have their own rules (norm_launch_overhead, unfused_rope, unfused_swiglu), which read
CANN's op types. A Kineto trace's kernels carry none, and a CUDA graph's replayed kernels no launching op, so
this rule reads ATen's own kernel names (``at::native::…elementwise_kernel``, ``reduce_kernel``,
``CatArrayBatchedCopy``): compiled (``triton_…``), cuBLAS and attention kernels never match.

Checked on the H200 decode traces (tests/data/h200_decode): the eager decode's chains bound the saving at
0.56 ms of device time a token; compiling the same step (static weights) measured 0.49 ms less device time
a token, all of it in these kernels (tests/core/rules/test_unfused_elementwise.py).
"""

from __future__ import annotations

import re

import numpy as np

from pypto_core.graph import OperatorCallGraph
from pypto_core.grouping import int32_if_fits, text_codes, value_flags
from pypto_core.i18n import Message, msg
from pypto_core.rules._util import share, us
from pypto_core.rules.context import RuleContext
from pypto_core.rules.host_bound_gaps import CAPTURED_SHARE
from pypto_core.rules.registry import Threshold, rule
from pypto_core.workload import LLM_WORKLOADS

# ATen's CUDA/HIP kernels for pointwise ops, reductions and concatenation (the names hipify keeps on ROCm)
ATEN_ELEMENTWISE = re.compile(r"\bat::native::(?:\(anonymous namespace\)::)?(?:vectorized_elementwise_kernel|"
                              r"unrolled_elementwise_kernel|elementwise_kernel|reduce_kernel|"
                              r"CatArrayBatchedCopy|cunn_SoftMaxForward|cunn_SoftMaxBackward)\b")
# What each kernel computes, for the chains' patterns: the first of these its name names (functor, lambda)
_OP_LABELS = tuple((re.compile(p, re.I), label) for p, label in (
    (r"CatArrayBatchedCopy", "cat"), (r"SoftMax", "softmax"), (r"MeanOps", "mean"), (r"SumOps", "sum"),
    (r"ArgMaxOps", "argmax"), (r"MaxOps|MaxNan|max_kernel", "max"), (r"sum_functor", "sum"),
    (r"Bitwise|bitwise_", "bitwise"), (r"\bcos_", "cos"), (r"\bsin_", "sin"),
    (r"MulFunctor|mul_kernel", "mul"),
    (r"_add\b|AddFunctor|add_kernel", "add"), (r"_sub\b|SubFunctor|sub_kernel", "sub"),
    (r"DivFunctor|div_\w*kernel", "div"), (r"pow_", "pow"), (r"rsqrt", "rsqrt"), (r"sqrt", "sqrt"),
    (r"neg_", "neg"), (r"silu", "silu"), (r"gelu", "gelu"), (r"sigmoid", "sigmoid"), (r"tanh", "tanh"),
    (r"exp_", "exp"), (r"where", "where"), (r"fill", "fill"), (r"compare", "compare"),
    (r"copy_kernel", "copy"),
))
MAX_PATTERNS = 5  # the chains' most costly patterns the finding lists
MAX_PATTERN_KERNELS = 12  # a longer chain's pattern names its first kernels and counts the rest

SAVING_MODEL = msg("Each chain of back-to-back ATen elementwise kernels on a stream runs as one fused kernel "
                   "no longer than its longest member: saving = the chain's time less its longest kernel, "
                   "and the other kernels' launches go. An upper bound: a fused kernel moves at least what "
                   "its longest member moved.")


@rule("unfused_elementwise", title=msg("Unfused elementwise kernels (eager PyTorch)"),
      saving_model=SAVING_MODEL, thresholds={
          "min_chain_kernels": Threshold(2, "[INFERRED] two kernels back to back are the smallest chain a "
                                            "compiler fuses"),
          "min_saving_share": Threshold(0.02, "[INFERRED] no source: below this share of the run a fix is "
                                              "not worth its effort, and the finding would be noise"),
      },
      # LLM inference: a training step's chains are mostly its optimizer's and gradients' (a fused or foreach
      # optimizer, not a compiled model, is their fix), which this rule cannot tell apart
      blocks=(), remedies=(), needs=("kernels.name",), vendors=("nvidia", "amd"), workloads=LLM_WORKLOADS,
      saving_bound="upper_bound")
def match(ctx: RuleContext) -> None:
    g = ctx.graph
    cfg = ctx.thresholds
    if not g.n or "name" not in g.kernels.column_names:
        return
    codes, names = text_codes(g.kernels["name"], narrow=True)
    fusible = value_flags(names, ATEN_ELEMENTWISE.search)[codes]
    rows, chain = _chains(g, fusible, int(cfg["min_chain_kernels"]))
    if not len(rows):
        return
    dur = g.dur[rows].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, chain[1:] != chain[:-1]])
    longest = np.maximum.reduceat(dur, starts)
    # each chain keeps its first longest kernel (as the fused one); the others are fused away
    at_max = np.flatnonzero(dur == np.repeat(longest, np.diff(np.r_[starts, len(rows)])))
    _, first = np.unique(chain[at_max], return_index=True)
    saving = dur.copy()
    saving[at_max[first]] = 0.0
    total = float(saving.sum())
    if share(total, ctx.total_ns) < cfg["min_saving_share"]:
        return
    chains = len(starts)
    recorded = g.attribution.profiler_steps() if g.attribution is not None else None
    steps = max(len(recorded or ()), 1)  # the report's steps (the run as one where it records none)
    patterns = _patterns(codes[rows], starts, dur, names)
    captured = g.launches.share(g.window) >= CAPTURED_SHARE
    ctx.emit(
        title=msg("Unfused elementwise ops: {chains:.0f} chains of ATen kernels per step",
                  chains=chains / steps),
        description=msg(
            "Eager PyTorch runs every elementwise op as its own kernel that reads and writes the whole "
            "tensor. Here {kernels} such kernels run back to back in {chains} chains, {ms:.1f} ms "
            "({pct:.1f}% of the run); the most costly pattern is {pattern}. RMSNorm (casts, pow, mean, add, "
            "rsqrt, multiplies), rotary embeddings (neg, cat, multiplies, add) and residual adds are such "
            "chains. torch.compile (Inductor) fuses each chain into one Triton kernel; hand-fused kernels "
            "(a fused RMSNorm, rotary embedding or SiLU-and-mul, as vLLM, FlashInfer and Liger ship them) do "
            "the same."
            "{captured}",
            kernels=len(rows), chains=chains, ms=float(dur.sum()) / 1e6,
            pct=100 * share(float(dur.sum()), ctx.total_ns), pattern=next(iter(patterns)),
            captured=_captured_note() if captured else ""),
        ops=[],
        evidence={"chains": chains, "chains_per_step": round(chains / steps, 2),
                  "chain_kernels": int(len(rows)), "chain_time_us": us(dur.sum()),
                  "fused_time_bound_us": us(longest.sum()), "chain_patterns": patterns, "vendor": ctx.vendor},
        kernels=int32_if_fits(rows), saving_ns=saving, saving_model=SAVING_MODEL,
    )


def _chains(g: OperatorCallGraph, fusible: np.ndarray, min_kernels: int) -> tuple[np.ndarray, np.ndarray]:
    """(kernel rows, chain number of each) of the chains of at least ``min_kernels`` fusible kernels back to
    back on one stream, in stream order (a chain's rows are contiguous)."""
    order = g.stream_order
    on = fusible[order]
    lane = np.zeros(len(order), bool)  # the same device and stream as the task before
    lane[1:] = (g.device[order][1:] == g.device[order][:-1]) & (g.stream[order][1:] == g.stream[order][:-1])
    goes_on = np.zeros(len(order), bool)
    goes_on[1:] = on[1:] & on[:-1] & lane[1:]
    chain = np.cumsum(on & ~goes_on) - 1
    at = np.flatnonzero(on)
    chain = chain[at]
    size = np.bincount(chain)
    kept = size[chain] >= min_kernels
    at, chain = at[kept], chain[kept]
    return order[at].astype(np.int64), np.unique(chain, return_inverse=True)[1].reshape(-1)


def _label(name: str) -> str:
    for pattern, label in _OP_LABELS:
        if pattern.search(name):
            return label
    return "elementwise"


def _patterns(codes: np.ndarray, starts: np.ndarray, dur: np.ndarray, names: list[str]
              ) -> dict[str, dict[str, float]]:
    """The chains grouped by their kernels in order, most time first: {pattern (its kernels' labels):
    {"count": chains, "time_us"}}. Grouped on the name codes' bytes: text is built for the listed ones."""
    time: dict[bytes, float] = {}
    count: dict[bytes, int] = {}
    first: dict[bytes, tuple[int, int]] = {}
    bounds = np.r_[starts, len(codes)]
    chain_time = np.add.reduceat(dur, starts)
    for i, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        key = codes[lo:hi].tobytes()
        time[key] = time.get(key, 0.0) + float(chain_time[i])
        count[key] = count.get(key, 0) + 1
        first.setdefault(key, (lo, hi))
    out: dict[str, dict[str, float]] = {}
    for k in sorted(time, key=lambda k: -time[k])[:MAX_PATTERNS]:
        pattern = _pattern([_label(names[c]) for c in codes[slice(*first[k])].tolist()])
        row = out.setdefault(pattern, {"count": 0, "time_us": 0.0})  # two codes may share their labels
        row["count"] += count[k]
        row["time_us"] = round(row["time_us"] + us(time[k]), 3)
    return out


def _pattern(labels: list[str]) -> str:
    shown = " → ".join(labels[:MAX_PATTERN_KERNELS])
    return shown if len(labels) <= MAX_PATTERN_KERNELS else f"{shown} → … ({len(labels)} kernels)"


def _captured_note() -> Message:
    return msg(" The run already replays CUDA graphs, which remove the launches but not the kernels: "
               "compiling the captured step (torch.compile with mode=\"reduce-overhead\") does both.")
