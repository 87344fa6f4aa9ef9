"""``OperatorCallGraph``: one profile seen as an LLM decoder run.

It links host ops to their kernels, gives every kernel a role (matmul, attention, norm, ...) and a block
of the model, finds unfused chains, splits the run into prefill and decode tokens, and computes the
per-token and utilisation metrics that the rules and the before/after comparison share (``metrics()``).
All of it is columnar: numpy arrays aligned with the rows of ``profile.kernels``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.attribution import ATTRIBUTION_COLUMNS, TimeAttribution, attribute, kernel_codes
from pypto_core.framework_ops import FRAMEWORK_OPS_COLUMNS, FrameworkOps, framework_ops
from pypto_core.grouping import (
    column_values,
    fits,
    int16_if_fits,
    int32_if_fits,
    pair_order,
    text_codes,
    value_flags,
)
from pypto_core.hardware import SkuSpec, resolve_sku
from pypto_core.i18n import DEFAULT_LANGUAGE, Message, msg, render
from pypto_core.intervals import in_order, union_length, union_length_of, window_index
from pypto_core.launches import GRAPH_REPLAY_MIN_SHARE, LAUNCH_COLUMNS, Launches, launches
from pypto_core.op_roles import ROLE, op_type_codes, role_codes
from pypto_core.profile import Profile, merge_columns
from pypto_core.sequences import PATTERNS, ChainMatch, match_chains
from pypto_core.shape_figures import ShapeFigures, shape_figures
from pypto_core.shapes import Shapes, slot_bytes
from pypto_core.workload import WORKLOAD_COLUMNS, Workload, detect_workload, device_vendor

# Each metric: unit, and whether a higher value is better (the comparison's "better" column).
# Metrics that mean something only for some workloads or devices are None elsewhere (absent, not zero).
METRICS: dict[str, tuple[str, bool]] = {
    "per_token_latency_ms": ("ms", False),
    "per_token_latency_p90_ms": ("ms", False),
    "tokens_per_s": ("tokens/s", True),
    "prefill_ms": ("ms", False),
    "prefill_tokens_per_s": ("tokens/s", True),
    "step_time_ms": ("ms", False),
    "attention_hbm_time_share": ("share", False),
    "matmul_ai_core_utilization": ("share", True),
    "kv_cache_noncontiguous_share": ("share", False),
    "norm_launch_overhead_share": ("share", False),
    "hbm_bandwidth_utilization": ("share", True),
    "ai_core_utilization": ("share", True),
    "device_idle_share": ("share", False),
    "compute_share": ("share", True),
    "communication_not_overlapped_share": ("share", False),
    "critical_path_ms": ("ms", False),
    "critical_path_host_share": ("share", False),
    "mfu": ("share", True),
}

# Each metric in words (the ids stay in the JSON): what the profile page and the comparison show.
METRIC_LABELS: dict[str, Message] = {
    "per_token_latency_ms": msg("Per-token latency, p50 (ms)"),
    "per_token_latency_p90_ms": msg("Per-token latency, p90 (ms)"),
    "tokens_per_s": msg("Tokens per second"),
    "prefill_ms": msg("Prefill time, p50 of the prefill steps (ms)"),
    "prefill_tokens_per_s": msg("Prefill throughput: prompt tokens a second"),
    "step_time_ms": msg("Step time, p50 (ms)"),
    "attention_hbm_time_share": msg("Share of time in memory-bound attention"),
    # the MatMuls' roofline bound over their time: an Ascend AI Core's or a GPU's, the same figure
    "matmul_ai_core_utilization": msg("MatMul efficiency against the roofline"),
    "kv_cache_noncontiguous_share": msg("KV cache non-contiguous share (proxy)"),
    "norm_launch_overhead_share": msg("Share of time in unfused norm chains"),
    "hbm_bandwidth_utilization": msg("HBM bandwidth utilization"),
    "ai_core_utilization": msg("AI Core utilization"),
    "device_idle_share": msg("Device idle share"),
    "compute_share": msg("Compute share of the step"),
    "communication_not_overlapped_share": msg("Communication not overlapped, share of the step"),
    "critical_path_ms": msg("Critical path (ms)"),
    "critical_path_host_share": msg("Host share of the critical path"),
    "mfu": msg("MFU: the MatMuls' FLOP/s against the device's peak"),
}


def metric_label(name: str, language: str = DEFAULT_LANGUAGE) -> str:
    """``tokens_per_s`` -> "Tokens per second" (or its translation); an unknown id: itself."""
    label = METRIC_LABELS.get(name)
    return render(label, language) if label is not None else name

# What the call graph reads for a diagnosis, with the attribution and workload it builds (a
# ``profile.ColumnSet``): times, lanes, kinds and shapes of the tasks, the data-movement ratios, the steps,
# the links to the host.
DIAGNOSIS_GRAPH_COLUMNS = merge_columns(ATTRIBUTION_COLUMNS, WORKLOAD_COLUMNS, LAUNCH_COLUMNS, {
    "kernels": ("start_ns", "dur_ns", "device_id", "stream_id", "op_type", "name", "core_type",
                "correlation_id", "input_shapes", "output_shapes", "input_dtypes", "output_dtypes",
                "aic_mte2_ratio", "aiv_mte2_ratio"),
    "steps": None, "flows": ("host_index", "kernel_index", "kind"),
    "host_ops": ("correlation_id", "start_ns"),
})
# ... and with the framework ops (each kernel's aten::/npu:: op, which a comparison aligns kernels by and no
# rule reads): their host calls' thread ids, 34 MB of a 5 GB simulated folder, are read for these only.
GRAPH_COLUMNS = merge_columns(DIAGNOSIS_GRAPH_COLUMNS, FRAMEWORK_OPS_COLUMNS)

DECODE_MAX_ROWS = 512  # a step whose MatMuls see more token rows than this is never decode [INFERRED]
# A MatMul counts the step's token rows only when its inner dim is a model width: transformers' rotary
# embedding multiplies inv_freq [1, 32, 1] by the positions [1, 1, S] (K = 1, M = head_dim / 2), which
# is no token count (seen on an H200 trace of transformers' generate) [INFERRED]
TOKEN_ROWS_MIN_K = 64
SHAPED_TIME_MIN_SHARE = 0.5  # of the device time, in kernels with shapes, for a bandwidth figure [INFERRED]
VOCAB_MIN = 16000  # LM head output width: 32000 (Llama-2), 128256 (Llama-3), 151936/152064 (Qwen2.5)

_MODEL_HINTS: tuple[tuple[int, int, str], ...] = (
    # (vocab, layers, name): docs/domain.md §7 (Llama-2-7B: 32 layers, vocab 32000) and the public model
    # configs
    (32000, 32, "llama2-7b"), (128256, 32, "llama3-8b"), (152064, 28, "qwen2.5-7b"),
    (151936, 28, "qwen2.5-7b"),
)


@dataclass
class Tokens:
    """Decode tokens (one per step of the batch) found in the run."""

    latency_ns: np.ndarray  # per decode step
    busy_ns: np.ndarray  # device busy time per decode step
    batch: int  # sequences a decode step runs; 0: not recorded (graph-replayed steps record no shapes)
    prefill_ns: int  # the median prefill step's latency (a run of several prefills is not one slow one)
    # token rows of the median prefill step (its MatMuls' largest M: batch x sequence), 0 without prefill
    prefill_tokens: int
    step_of_kernel: np.ndarray  # step index per kernel (-1 outside any step)
    decode_step: np.ndarray  # bool per step index
    source: str  # steps | lm_head | span
    # per step index, the profiler's own step number (ProfilerStep#N) where the steps came from the profile
    step_ids: list[int | None] = field(default_factory=list)


def _has_number(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether a column holds a number (not null, not NaN) in any row, read a slice at a time (a ratio
    column over millions of kernels is seldom empty: the first slice answers)."""
    for at in range(0, len(column), _NUMBER_SLICE):
        try:
            part = pc.cast(column.slice(at, _NUMBER_SLICE), pa.float64(), safe=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        if not np.isnan(pc.fill_null(part, np.nan).to_numpy(zero_copy_only=False)).all():
            return True
    return False


_NUMBER_SLICE = 1 << 20
_END_SLICE = 1 << 20  # kernels whose ends are worked out at once (8 MB)


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    """A device or stream id column as numbers (0 for a null), in its loaded width where that is 4 bytes or
    less (a projected load keeps them in 1 where they fit: ``NARROW_COLUMNS``), else int32 where they fit
    (every profile seen)."""
    values = column_values(column)
    return values if values.dtype.itemsize <= 4 else int32_if_fits(values)


class OperatorCallGraph:
    """Host ops, kernels and the model structure of one profile (see the module docstring)."""

    def __init__(self, profile: Profile, sku: SkuSpec | str | None = None) -> None:
        self.profile = profile
        self.sku, self.sku_source = resolve_sku(profile, sku)
        k = profile.kernels
        self.kernels = k
        self.n = k.num_rows
        self.start = column_values(k["start_ns"]).astype(np.int64, copy=False)
        dur = column_values(k["dur_ns"])  # 4 bytes where a projected load kept them so (NARROW_COLUMNS)
        self.dur = dur if not len(dur) or int(dur.min()) >= 0 else np.maximum(dur, 0)
        del dur
        self.device = _ids(k["device_id"])
        self.stream = _ids(k["stream_id"])
        self.role = role_codes(k)

    # -- what ran, on what, and where its time went ------------------------------------------------
    @cached_property
    def vendor(self) -> str:
        return device_vendor(self.profile)

    @cached_property
    def workload(self) -> Workload:
        return detect_workload(self.profile, self)

    @cached_property
    def launches(self) -> Launches:
        """Which kernels a captured graph's launch issued (pypto_core.launches)."""
        return launches(self.profile)

    @cached_property
    def task_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per kernel: its attribution code (computing kind, collective or copy kind) and pageable flag."""
        return kernel_codes(self.kernels, self.role)

    @cached_property
    def attribution(self) -> TimeAttribution | None:
        """The time attribution every finding and page number stands on (pypto_core.attribution)."""
        return attribute(self.profile, self.task_codes)

    _SHAPE_CACHES = ("input_shapes", "output_shapes", "shape_figures")

    def drop_shapes(self) -> None:
        """Forget the per-kernel shape arrays (the largest caches); they are rebuilt if asked for again."""
        for name in self._SHAPE_CACHES:
            self.__dict__.pop(name, None)

    def drop_tokens(self) -> None:
        """Forget the tokens (each kernel's step index: 25 MB on 3.1 M kernels); the masks built from them
        stay, and the tokens are rebuilt if asked for again."""
        self.__dict__.pop("tokens", None)

    def keep_only_attribution(self) -> None:
        """Forget every cached figure but the attribution (rebuilt if asked for again): what the timeline
        index needs of a graph diagnosis and the page data are done with, whose peak would otherwise stack
        on the caches (75 MB on a 1 GB folder)."""
        for name in [n for n, v in vars(type(self)).items() if isinstance(v, cached_property)]:
            if name != "attribution":
                self.__dict__.pop(name, None)

    def drop_chains(self) -> None:
        """Forget the chain matches and the stream order they were found in (on a 3.1 M-kernel table 130 MB;
        the masks built from them stay); rebuilt if asked for again."""
        for name in ("chains", "stream_order"):
            self.__dict__.pop(name, None)

    def drop_rule_caches(self) -> None:
        """Once the rules are done: forget the shapes, the chains and the per-kernel figures only rules read
        (the gaps before kernels and the op-type codes: 25 MB on a 5 GB simulated folder), so that the
        replay's arrays do not stack on them; each is rebuilt if asked for again (cheaply: the tokens and the
        attribution, which are not, stay)."""
        self.drop_shapes()
        self.drop_chains()
        for name in ("gap_before_ns", "op_codes"):
            self.__dict__.pop(name, None)

    # -- ends, ordering and gaps ---------------------------------------------------------------------
    @property
    def end(self) -> np.ndarray:
        """Each kernel's end, ns: a new array on each call, which the caller may write (held, it took 125 MB
        of a 15.7 M-kernel table through every rule; those who read it are few)."""
        end: np.ndarray = self.start + self.dur
        return end

    def ends_of(self, kernels: np.ndarray) -> np.ndarray:
        """The listed kernels' ends (indices or a mask), worked out for those kernels only."""
        end: np.ndarray = self.start[kernels] + self.dur[kernels]
        return end

    @cached_property
    def last_end(self) -> int:
        """The latest kernel end, ns (0 without kernels)."""
        return self._last_end_of(None) if self.n else 0

    def _last_end_of(self, kernels: np.ndarray | None) -> int:
        """The latest end of the kernels of a mask (every kernel where None), a slice at a time."""
        last = np.iinfo(np.int64).min
        for at in range(0, self.n, _END_SLICE):
            part = slice(at, at + _END_SLICE)
            where = True if kernels is None else kernels[part]
            last = max(last, int(np.max(self.start[part] + self.dur[part], where=where, initial=last)))
        return last

    def busy_ns(self, kernels: np.ndarray | None = None) -> int:
        """Time the listed kernels (a mask; all where None) keep their device busy: the union of their
        [start, end), overlaps counted once (``intervals.union_length_of``)."""
        return union_length_of(self.start, self.dur, kernels)

    @cached_property
    def stream_order(self) -> np.ndarray:
        """Kernel indices sorted by device, stream, start: the order chains are matched in."""
        # int32 positions (a profile holds fewer than 2**31 kernels): 4 bytes a kernel, not 8. Kernels
        # stored in start order (a rank's file) are put in it by their device and stream alone, a slice at
        # a time: the same order as the lexsort, which took 235 MB beyond it on 15.7 M kernels
        order = pair_order(self.device, self.stream) if in_order(self.start) else None
        if order is None:
            order = np.lexsort((self.start, self.stream, self.device)).astype(np.int32)
        return order

    @cached_property
    def gap_before_ns(self) -> np.ndarray:
        """Idle device time just before each kernel (nothing else running on its device), ns.

        This is where the device waited for the host to launch the kernel, so removing a kernel (fusion)
        also removes its gap in a host-bound run.
        """
        if not self.n:
            return np.zeros(0, np.int64)
        # One device whose kernels are stored in start order (a rank's file): worked on in place, with no
        # sorted copies (on 3.1 M kernels, 120 MB less at this step's peak).
        one_device = bool((self.device == self.device[0]).all())
        if one_device and in_order(self.start):
            return self._gaps_in_order()
        order = np.lexsort((self.start, self.device))
        s = self.start[order]
        e = s + self.dur[order]  # worked into the running end in place
        if one_device:
            firsts = np.zeros(1, np.int64)
        else:
            d = self.device[order]
            firsts = np.concatenate([[0], np.flatnonzero(d[1:] != d[:-1]) + 1])
            del d
        run_end = e
        for lo, hi in zip(firsts, [*firsts[1:], len(e)]):  # devices are few: one running max each
            np.maximum.accumulate(e[lo:hi], out=run_end[lo:hi])
        del e
        gap = np.empty(self.n, np.int64)
        gap[0] = 0
        np.subtract(s[1:], run_end[:-1], out=gap[1:])  # the wait since every earlier kernel on it ended
        del run_end, s
        np.maximum(gap, 0, out=gap)
        gap[firsts] = 0  # a device's first kernel waits for nothing before it
        out = np.empty_like(gap)
        out[order] = gap  # back to the kernels' own order
        # in 4 bytes where every gap is under 2.1 s: kept through the rules (and by a comparison's side),
        # 60 MB less on a 15.7 M-kernel table; summed in 8 bytes
        return int32_if_fits(out)

    def _gaps_in_order(self) -> np.ndarray:
        """``gap_before_ns`` of one device's kernels stored in start order (a rank's file): a slice at a
        time, the running end carried from one slice to the next, in 4 bytes while every gap fits. No array
        over every kernel but the result (the whole-run running end and gaps took 250 MB of a 15.7 M-kernel
        table)."""
        gap = np.empty(self.n, np.int32)
        run_end: int | None = None
        for at in range(0, self.n, _END_SLICE):
            part = slice(at, at + _END_SLICE)
            s = self.start[part]
            e = s + self.dur[part]
            np.maximum.accumulate(e, out=e)
            piece = np.empty(len(s), np.int64)
            if run_end is None:
                piece[0] = 0  # the first kernel waits for nothing before it
            else:
                np.maximum(e, run_end, out=e)
                piece[0] = int(s[0]) - run_end
            np.subtract(s[1:], e[:-1], out=piece[1:])  # the wait since every earlier kernel ended
            np.maximum(piece, 0, out=piece)
            if gap.dtype == np.int32 and not fits(piece, np.int32):
                gap = gap.astype(np.int64)
            gap[part] = piece
            run_end = int(e[-1])
        return gap

    def slot_ns(self, kernels: np.ndarray) -> np.ndarray:
        """The listed kernels' slots (float ns): each one's run time plus the idle gap before it, what
        removing the kernel (a fusion) frees in a launch-bound run. Worked out for those kernels only."""
        # in floats before they are added: both may be 4 bytes, and exact as floats (whole ns below 2**53)
        slot: np.ndarray = self.dur[kernels].astype(np.float64)
        slot += self.gap_before_ns[kernels]
        return slot

    @cached_property
    def op_codes(self) -> tuple[np.ndarray, list[str]]:
        return op_type_codes(self.kernels)

    @cached_property
    def chains(self) -> dict[str, ChainMatch]:
        """Unfused chains (rms_norm, rope, swiglu, attention): their members' stream-ordered positions and
        kernel rows. The stream order they were matched in is let go once they are (rebuilt if asked for
        again): the members' rows are all that is read of it after, and it held 60 MB of a 15.7 M-kernel
        table through the rules."""
        codes, vocab = self.op_codes
        order = self.stream_order
        ordered_codes = codes[order] if self.n else codes
        same = np.zeros(self.n, bool)
        if self.n > 1:
            d, s = self.device[order], self.stream[order]
            same[1:] = (d[1:] == d[:-1]) & (s[1:] == s[:-1])
            del d, s
        matches = {p.name: match_chains(ordered_codes, vocab, same, p) for p in PATTERNS}
        self.__dict__.pop("stream_order", None)
        return {name: replace(m, rows=order[m.positions]) for name, m in matches.items()}

    def chain_mask(self, name: str) -> np.ndarray:
        """Bool per kernel row: member of an unfused chain ``name``."""
        mask = np.zeros(self.n, bool)
        mask[self.chains[name].rows] = True
        return mask

    def chain_id(self, name: str) -> np.ndarray:
        """Per kernel row: an id shared by the members of one chain, -1 outside chains (a stream-ordered
        position: 4 bytes a kernel)."""
        ids = np.full(self.n, -1, np.int32)
        chain = self.chains[name]
        ids[chain.rows] = chain.anchor_of
        return ids

    def chain_side(self, name: str) -> np.ndarray:
        """Per kernel row: -1 before its chain's anchor, 0 the anchor (or outside chains), +1 after it."""
        side = np.zeros(self.n, np.int64)
        chain = self.chains[name]
        side[chain.rows] = np.sign(chain.positions - chain.anchor_of)
        return side

    def is_role(self, *names: str) -> np.ndarray:
        return np.isin(self.role, [ROLE[n] for n in names])

    def core_is(self, *core_types: str) -> np.ndarray:
        """Per kernel: its core type is one of these (from the column's codes: no per-row text, which as a
        numpy str array took 56 bytes a kernel)."""
        if "core_type" not in self.kernels.column_names:
            return np.zeros(self.n, bool)
        codes, values = text_codes(self.kernels["core_type"], narrow=True)
        return np.asarray(value_flags(values, core_types.__contains__)[codes])

    # -- shapes, FLOPs, bytes, roofline -------------------------------------------------------------
    @cached_property
    def input_shapes(self) -> Shapes:
        return Shapes.from_column(self.kernels["input_shapes"])

    @cached_property
    def output_shapes(self) -> Shapes:
        return Shapes.from_column(self.kernels["output_shapes"])

    @cached_property
    def shape_figures(self) -> ShapeFigures:
        """MatMul dims, FLOPs, bytes moved, element size and roofline bound of the kernels, once per distinct
        (shapes, dtypes, role) where those are coded (``pypto_core.shape_figures``)."""
        return shape_figures(self.input_shapes, self.output_shapes, self.kernels["input_dtypes"],
                             self.kernels["output_dtypes"], self.role, self.sku)

    def figure(self, name: str, kernels: np.ndarray | None = None) -> np.ndarray:
        """A shape figure (``shape_figures.FIGURES``) of every kernel, or of ``kernels`` (indices or a mask)
        only: asking for the kernels a rule reads builds no array over every kernel."""
        figures = self.shape_figures
        return figures.per_kernel(name) if kernels is None else figures.at(name, kernels)

    def slot_bytes(self, slot: int, outputs: bool = False) -> np.ndarray:
        """Bytes of input (or output) tensor ``slot`` of every kernel; 0 where the kernel has no such slot."""
        shapes = self.output_shapes if outputs else self.input_shapes
        return slot_bytes(shapes, self.kernels["output_dtypes" if outputs else "input_dtypes"], slot)

    def pipe_ratio(self, column: str, kernels: np.ndarray | None = None) -> np.ndarray | None:
        """A PipeUtilization ratio column as float (NaN where missing), of every kernel or of ``kernels``
        (indices or a mask) only; None if the profile has none (no value in any row)."""
        if column not in self.kernels.column_names or not _has_number(self.kernels[column]):
            return None
        col = self.kernels[column]
        if kernels is not None:
            rows = np.flatnonzero(kernels) if kernels.dtype == bool else kernels
            col = col.take(pa.array(rows))
        arr = pc.cast(col, pa.float64(), safe=False)  # a coded column (``compact_read``) decoded
        out: np.ndarray = pc.fill_null(arr, np.nan).to_numpy(zero_copy_only=False)
        return out

    def move_fraction(self, kernels: np.ndarray | None = None) -> np.ndarray | None:
        """Data-movement (MTE2) share of each kernel's cycles: max(aic_mte2_ratio, aiv_mte2_ratio)
        (docs/domain.md §6 #1), of every kernel or of ``kernels`` only. Worked out on each call, not kept:
        one rule and the metrics read it, and kept it held 16 MB of a 5 GB simulated folder through every
        later rule."""
        aic, aiv = self.pipe_ratio("aic_mte2_ratio", kernels), self.pipe_ratio("aiv_mte2_ratio", kernels)
        if aic is None and aiv is None:
            return None
        if aic is None or aiv is None:
            fraction: np.ndarray = np.array(aic if aiv is None else aiv)  # writable (Arrow's may not be)
        else:
            fraction = np.fmax(aic, aiv)  # the larger where both are known: fmax skips a NaN
        fraction[np.isnan(fraction)] = -1.0  # neither known
        np.clip(fraction, -1.0, None, out=fraction)
        return fraction

    # -- model structure ----------------------------------------------------------------------------
    @cached_property
    def lm_head_mask(self) -> np.ndarray:
        """MatMuls whose output width is the vocabulary (the widest N above ``VOCAB_MIN``)."""
        n = self.figure("n")
        if not self.n or n.max(initial=0) < VOCAB_MIN:
            return np.zeros(self.n, bool)
        widest: np.ndarray = n == n.max()
        return widest

    @cached_property
    def attention_mask(self) -> np.ndarray:
        """Fused attention kernels plus the members of unfused BatchMatMul-Softmax-BatchMatMul chains."""
        mask: np.ndarray = self.is_role("attention") | self.chain_mask("attention")
        return mask

    @cached_property
    def tokens(self) -> Tokens:
        """Split the run into steps (profiler steps, else LM-head boundaries) and mark decode steps."""
        step = np.full(self.n, -1, np.int32)  # int32: fewer than 2**31 steps
        source = "span"
        step_ids: list[int | None] = []
        steps = self.profile.steps
        bounds: list[tuple[int, int]] = []
        if steps.num_rows >= 2:
            st = pc.fill_null(steps["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
            en = pc.fill_null(steps["end_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
            order = np.argsort(st)
            st, en = st[order], en[order]
            ids = steps["step_id"].to_pylist()
            step_ids = [ids[i] for i in order]
            if self.n:
                step = window_index(st, en, self.start)
            bounds = list(zip(st.tolist(), en.tolist()))
            source = "steps"
        lm = np.nonzero(self.lm_head_mask)[0]
        if not bounds and len(lm) >= 2:
            ends = np.sort(self.ends_of(lm))
            first = int(self.start.min())
            starts = np.concatenate([[first], ends[:-1]])
            idx = np.searchsorted(ends, self.start, side="left")
            step = np.where(idx < len(ends), idx, -1).astype(np.int32)
            bounds = list(zip(starts.tolist(), ends.tolist()))
            source = "lm_head"
        if not bounds and self.n:
            bounds = [(int(self.start.min()), self.last_end)]
            step = np.zeros(self.n, np.int32)
        nsteps = len(bounds)
        f = self.shape_figures
        m = f.spread(np.where(f.rows["k"] >= TOKEN_ROWS_MIN_K, f.rows["m"], 0))  # worked out per group
        rows = np.zeros(nsteps, np.int64)
        busy = np.zeros(nsteps, np.int64)
        has_kernels = np.zeros(nsteps, bool)
        if self.n and nsteps:
            ok = step >= 0
            in_steps, m_in = (step, m) if ok.all() else (step[ok], m[ok])
            del m
            np.maximum.at(rows, in_steps, m_in)
            has_kernels = np.bincount(in_steps, minlength=nsteps) > 0
            del in_steps, m_in
            with_kernels = np.flatnonzero(has_kernels)
            if len(with_kernels) == 1 and ok.all():  # one step holds every kernel (a kernel table alone)
                busy[with_kernels[0]] = self.busy_ns()
            else:
                # One union per step, over its kernels in their original order: group by a stable sort once
                # (a mask per step is steps x kernels: 850 x 400k on a 1 GB trace).
                order = np.argsort(step, kind="stable")
                # where each step's kernels begin, searched for at once in the steps' own type (a search
                # per step for [i, i + 1] copied the int32 steps to int64 each time: 1.2 s of 2.1 M kernels)
                edges = np.searchsorted(step[order], np.arange(nsteps + 1, dtype=step.dtype))
                for i in with_kernels:
                    sel = order[edges[i]:edges[i + 1]]
                    busy[i] = union_length(self.start[sel], self.ends_of(sel), ends_scratch=True)
        latency = np.array([b - a for a, b in bounds], np.int64) if bounds else np.zeros(0, np.int64)
        with_rows = rows[has_kernels & (rows > 0)]
        base = int(with_rows.min()) if len(with_rows) else 0
        decode = has_kernels & (rows > 0) & (rows <= max(2 * base, 1)) & (rows <= DECODE_MAX_ROWS)
        if source == "steps" and not decode.any() and self.n:
            decode = self._replayed_token_steps(step, st, en, has_kernels & (rows == 0))
        if nsteps == 1 and source == "span":
            decode[:] = False  # one undivided span: no per-token numbers
        prefill = has_kernels & ~decode & (rows > 0)
        # Decode matmuls see B rows per token: B is the batch (the smallest rows count in decode steps)
        batch = int(rows[decode].min()) if decode.any() else 0
        return Tokens(latency_ns=latency[decode], busy_ns=busy[decode], batch=batch,
                      prefill_ns=int(np.median(latency[prefill])) if prefill.any() else 0,
                      prefill_tokens=int(np.median(rows[prefill])) if prefill.any() else 0,
                      step_of_kernel=int16_if_fits(step), decode_step=decode, source=source,
                      step_ids=step_ids)

    def _replayed_token_steps(self, step: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                              unknown: np.ndarray) -> np.ndarray:
        """Per step, whether it is one decode token replayed from a captured graph: a replay records no
        shapes, so no token rows tell its decode apart (CUDA graphs, torch.compile's reduce-overhead, vLLM's
        decode, an ACL graph). A step of a transformer (attention or an LM head found) whose token rows are
        unknown, whose kernels came mostly from graph launches (``GRAPH_REPLAY_MIN_SHARE``) and which holds
        exactly one replay is one forward pass: one token for each sequence of its batch. A step of several
        replays is left unknown (its tokens cannot be told from other captured pieces)."""
        launched = self.launches
        if not (unknown.any() and len(launched.graph_call_starts)
                and (self.attention_mask.any() or self.lm_head_mask.any())):
            return np.zeros(len(starts), bool)
        ok = step >= 0
        kernels = np.bincount(step[ok], minlength=len(starts))
        replayed = np.bincount(step[ok], weights=launched.from_graph[ok], minlength=len(starts))
        calls = window_index(starts, ends, launched.graph_call_starts)
        replays = np.bincount(calls[calls >= 0], minlength=len(starts))
        graph_share = replayed / np.maximum(kernels, 1)
        replayed_tokens: np.ndarray = unknown & (graph_share >= GRAPH_REPLAY_MIN_SHARE) & (replays == 1)
        return replayed_tokens

    @cached_property
    def decode_kernel_mask(self) -> np.ndarray:
        t = self.tokens
        if not self.n or not t.decode_step.any():
            return np.zeros(self.n, bool)
        ok = t.step_of_kernel >= 0
        out = np.zeros(self.n, bool)
        out[ok] = t.decode_step[t.step_of_kernel[ok]]
        return out

    def structure(self) -> dict[str, Any]:
        """Model hints for reports and remedies: layers, hidden size, vocab, head dim, blocks."""
        return dict(self._structure)

    @cached_property
    def _structure(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layers": None, "hidden": None, "vocab": None, "head_dim": None,
                               "model_hint": None}
        mm = self.is_role("matmul") & ~self.lm_head_mask
        if mm.any():
            vals, counts = self.shape_figures.value_counts("k", mm)
            vals, counts = vals[vals > 0], counts[vals > 0]
            if len(vals):
                out["hidden"] = int(vals[np.argmax(counts)])
        if self.lm_head_mask.any():
            out["vocab"] = int(self.figure("n", self.lm_head_mask)[0])
        att = self.attention_mask & self.is_role("attention", "softmax")
        t = self.tokens
        if att.any():
            per_step = t.step_of_kernel[att & self.decode_kernel_mask]
            if len(per_step):
                _, c = np.unique(per_step, return_counts=True)
                # graph-replayed steps (no batch recorded) whose replays straddle the profiler's steps hold
                # parts of two forward passes: their count is a layer count only where every step agrees
                if t.batch or c.min() == c.max():
                    out["layers"] = int(np.median(c))
            elif self.lm_head_mask.sum() >= 1:
                out["layers"] = int(round(att.sum() / max(int(self.lm_head_mask.sum()), 1)))
        out["head_dim"] = self.structure_head_dim
        for vocab, layers, name in _MODEL_HINTS:
            # padded vocabularies (32001, 32256) still name their model; within 1%
            if out["vocab"] and abs(out["vocab"] - vocab) <= vocab // 100 and out["layers"] in (None, layers):
                out["model_hint"] = name
                break
        out["blocks"] = {
            "attention_kernels": int(self.attention_mask.sum()),
            "matmul_kernels": int(self.is_role("matmul").sum()),
            "norm_kernels": int((self.is_role("norm") | self.chain_mask("rms_norm")).sum()),
            "rope_kernels": int((self.is_role("rope") | self.chain_mask("rope")).sum()),
            "ffn_activation_kernels": int((self.is_role("activation") | self.chain_mask("swiglu")).sum()),
            "kv_update_kernels": int(self.is_role("kv_update").sum()),
            "lm_head_kernels": int(self.lm_head_mask.sum()),
        }
        out["decode_batch"] = t.batch
        out["token_source"] = t.source
        return out

    # -- host <-> device links ----------------------------------------------------------------------
    def links(self) -> pa.Table:
        """host_index -> kernel_index: flows where the profile has them, else correlation ids, else the
        last host op that started before the kernel (launch containment)."""
        flows = self.profile.flows
        if flows.num_rows:
            return flows.select(["host_index", "kernel_index", "kind"])
        host = self.profile.host_ops
        empty = pa.table({"host_index": pa.array([], pa.int64()), "kernel_index": pa.array([], pa.int64()),
                          "kind": pa.array([], pa.string())})
        if not host.num_rows or not self.n:
            return empty
        kcorr = self.kernels["correlation_id"]
        if kcorr.null_count < len(kcorr) and host["correlation_id"].null_count < host.num_rows:
            # both sides as int64: a projected load keeps each table's ids in 4 bytes only where they fit
            h = pa.table({"host_index": pa.array(np.arange(host.num_rows)),
                          "correlation_id": host["correlation_id"].cast(pa.int64())})
            kt = pa.table({"kernel_index": pa.array(np.arange(self.n)),
                           "correlation_id": kcorr.cast(pa.int64())})
            joined = kt.join(h, "correlation_id", join_type="inner")
            if joined.num_rows:
                return pa.table({"host_index": joined["host_index"], "kernel_index": joined["kernel_index"],
                                 "kind": pa.array(["correlation"] * joined.num_rows)})
        hs = pc.fill_null(host["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(hs, kind="stable")
        idx = np.searchsorted(hs[order], self.start, side="right") - 1
        ok = idx >= 0
        return pa.table({"host_index": pa.array(order[idx[ok]]), "kernel_index": pa.array(np.nonzero(ok)[0]),
                         "kind": pa.array(["containment"] * int(ok.sum()))})

    @cached_property
    def framework_ops(self) -> FrameworkOps:
        """Per kernel: the framework op (aten::*, npu::*, autograd node) it ran for (``framework_ops``)."""
        return framework_ops(self.profile, self.links(), self.is_role("communication"), self.start)

    # -- metrics ------------------------------------------------------------------------------------
    @cached_property
    def window(self) -> np.ndarray:
        """The kernels the metrics describe: decode tokens where there are some, else the whole run."""
        dec = self.decode_kernel_mask
        return dec if dec.any() else np.ones(self.n, bool)

    @cached_property
    def compute_mask(self) -> np.ndarray:
        return ~self.is_role("communication", "aicpu")

    def _span_ns(self, mask: np.ndarray) -> int:
        if not mask.any():
            return 0
        t = self.tokens
        if self.decode_kernel_mask.any() and mask is self.window:
            return int(t.latency_ns.sum())
        first = int(np.min(self.start, where=mask, initial=np.iinfo(np.int64).max))
        if mask.all():
            return self.last_end - first
        return self._last_end_of(mask) - first

    def step_walls_ns(self) -> np.ndarray:
        """Wall time of each profiler step the profile records (ProfilerStep#N, step_trace_time), ns; none
        where it records no steps (a kernel table alone, one window over the device span)."""
        steps = self.attribution.profiler_steps() if self.attribution is not None else None
        return np.array([st.breakdown.wall_ns for st in steps or () if st.breakdown.wall_ns], np.int64)

    def metrics(self) -> dict[str, float | None]:
        """The comparison's metric rows (``METRICS`` gives units); None where the profile cannot say, or
        where the metric means nothing for this workload or device (decode metrics of a training step)."""
        out: dict[str, float | None] = {name: None for name in METRICS}
        a = self.attribution
        if a is not None and a.run.wall_ns:
            out["device_idle_share"] = a.run.idle_ns / a.run.wall_ns
            out["compute_share"] = a.run.share("compute")
            out["communication_not_overlapped_share"] = a.run.share("communication_not_overlapped")
        w = self.window
        span = self._span_ns(w)
        t = self.tokens
        if not self.n or span <= 0:
            return out
        wl = self.workload
        walls = self.step_walls_ns()
        # every stepped run has a step time, decode too: it is the row two runs share when one of them
        # shows no tokens (a CUDA-graph replay records no shapes to count them)
        if len(walls):
            out["step_time_ms"] = float(np.median(walls) / 1e6)
        if wl.has_decode() and len(t.latency_ns):
            out["per_token_latency_ms"] = float(np.percentile(t.latency_ns, 50) / 1e6)
            out["per_token_latency_p90_ms"] = float(np.percentile(t.latency_ns, 90) / 1e6)
            # 0 (not recorded) for a graph-replayed decode: its steps are known, not its sequences
            if t.batch:
                out["tokens_per_s"] = float(t.batch * len(t.latency_ns) / (t.latency_ns.sum() / 1e9))
            host = np.maximum(t.latency_ns - t.busy_ns, 0)
            out["critical_path_ms"] = out["per_token_latency_ms"]
            out["critical_path_host_share"] = float(host.sum() / max(t.latency_ns.sum(), 1))
        if wl.is_llm() and t.prefill_ns:
            out["prefill_ms"] = t.prefill_ns / 1e6
            if t.prefill_tokens:  # the prompt tokens a prefill step runs through, over its time
                out["prefill_tokens_per_s"] = t.prefill_tokens / (t.prefill_ns / 1e9)
        busy_mask = w & self.compute_mask
        if self.vendor == "ascend":  # AI Core utilisation is an Ascend notion
            out["ai_core_utilization"] = self.busy_ns(busy_mask) / span
        device_time = float(np.sum(self.dur, where=busy_mask)) or 1.0
        att = w & self.attention_mask
        mf = self.move_fraction(att)  # of the attention kernels only
        # without the MTE2 counters (a GPU, an NPU run without PipeUtilization) attention counts as
        # memory-bound only where it is by nature, in decode (the KV cache read once a token); a prefill's
        # flash attention is compute-bound, and its share would read as memory-bound time
        if wl.is_llm() and (mf is not None or wl.has_decode()):
            move = np.ones(int(att.sum())) if mf is None else np.where(mf >= 0, mf, 1.0)
            out["attention_hbm_time_share"] = float((self.dur[att] * move).sum() / device_time)
        # Norm chains and layout copies are told by their op types (Pow, ReduceMean, TensorMove...), which a
        # GPU trace does not record (its kernels carry C++ symbols; an eager RMSNorm is five elementwise
        # kernels): there, none found means not known, never 0 (unfused_elementwise covers those chains)
        named_ops = self.vendor == "ascend"
        if wl.is_llm():
            norm = w & (self.is_role("norm") | self.chain_mask("rms_norm"))
            if named_ops or norm.any():
                out["norm_launch_overhead_share"] = float(self.slot_ns(norm).sum() / span)
        if wl.has_decode():
            layout = w & self.kv_layout_mask
            lay_t = float(self.dur[layout].sum())
            att_t = float(self.dur[att].sum())
            if named_ops or lay_t > 0:
                out["kv_cache_noncontiguous_share"] = lay_t / (lay_t + att_t) if (lay_t + att_t) > 0 else 0.0
        if self.sku.known:
            mm = w & self.is_role("matmul")
            mm[mm] = self.figure("flops", mm) > 0
            if mm.any():
                bound_share = self.figure("bound_ns", mm).sum() / max(self.dur[mm].sum(), 1)
                out["matmul_ai_core_utilization"] = float(min(bound_share, 1.0))
            moved = self.shape_figures.total("bytes_moved", busy_mask)
            # most of the device time without tensor shapes (Kineto without record_shapes, kernels replayed
            # from a CUDA graph): the profile cannot say, and a few shaped copies would read as idle HBM
            # (or as idle cubes)
            shapes_known = self._shaped_time_ns(busy_mask) >= SHAPED_TIME_MIN_SHARE * device_time
            if moved > 0 and shapes_known:
                bytes_per_s = moved / (span / 1e9)
                out["hbm_bandwidth_utilization"] = float(min(bytes_per_s / self.sku.hbm_bytes_per_s, 1.0))
            if mm.any() and shapes_known and wl.is_sequence_model() and not wl.has_decode():
                out["mfu"] = self._mfu(mm, span)
        return out

    def _shaped_time_ns(self, kernels: np.ndarray) -> int:
        """Device time of the kernels of a mask that record a tensor shape, a slice at a time."""
        sh = self.input_shapes
        has_shape = np.diff(sh.slot_offsets) > 0  # per distinct shape list where they are coded
        total = 0
        for at in range(0, self.n, _END_SLICE):
            part = slice(at, at + _END_SLICE)
            shaped = has_shape[part] if sh.codes is None else has_shape[sh.codes[part]]
            total += int(self.dur[part][kernels[part] & shaped].sum())
        return total

    def _mfu(self, matmuls: np.ndarray, span_ns: float) -> float:
        """The MatMuls' FLOPs over the run's time against the device's dense peak (int8 at its own rate):
        the prefill's and the training step's headline. Counted from the kernels' shapes, so attention run
        in fused kernels is left out: a lower bound of the model's FLOPs utilisation. A decode's is near
        zero by nature (its bound is HBM bandwidth), so it is not given there."""
        peak = self.sku.peak_flops_per_s()
        rate = np.where(self.figure("element_bytes", matmuls) == 1, 2 * peak, peak)
        peak_seconds = float((self.figure("flops", matmuls) / rate).sum())
        return min(peak_seconds / (span_ns / 1e9), 1.0)

    @cached_property
    def kv_layout_mask(self) -> np.ndarray:
        """Layout copies (Transpose, TensorMove, ConcatD, ...) on cache-shaped tensors, outside RoPE chains.

        Cache-shaped [INFERRED, docs/domain.md §6 #4]: a 4-D tensor whose last dim is the attention head dim
        and which holds more than one position (a decode RoPE input holds exactly one).
        """
        layout: np.ndarray = self.is_role("layout") & ~self.chain_mask("rope")
        if not layout.any():
            return layout
        head_dim = self.structure_head_dim
        sh = self.input_shapes
        last, rank = sh.dim(0, -1), sh.rank(0)
        d1, d2 = sh.dim(0, 1), sh.dim(0, 2)
        out_last, out_rank = self.output_shapes.dim(0, -1), self.output_shapes.dim(0, -2)
        del out_rank
        four_d = rank == 4
        dims_ok = (last == head_dim) if head_dim else (last >= 32)
        many_positions = np.maximum(d1, d2) > 1
        cache_like = four_d & dims_ok & many_positions
        del out_last
        mask: np.ndarray = layout & cache_like
        return mask

    @cached_property
    def structure_head_dim(self) -> int | None:
        # fused attention's query, or the first BatchMatMul (q @ k^T) of an unfused chain
        att = self.is_role("attention") | (self.chain_mask("attention") & self.is_role("matmul")
                                           & (self.chain_side("attention") < 0))
        hd = self.input_shapes.at(np.flatnonzero(att)).dim(0, -1)  # of those kernels only
        hd = hd[hd > 0]
        if not len(hd):
            return None
        vals, counts = np.unique(hd, return_counts=True)
        return int(vals[np.argmax(counts)])
