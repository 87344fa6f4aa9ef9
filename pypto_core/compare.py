"""``ProfileComparer``: the before/after proof of a fix (docs/contract.md ``compare --format json``).

Three views of the same two profiles:

* metrics: the seed's table (``graph.METRICS``: per-token latency, tokens/s, attention HBM time share, ...),
  with units, delta, whether the change is better (no verdict between two workloads), and whether it is
  outside the noise;
* ops: device time aligned by op type, by model block (so a kernel renamed by a fix, e.g. BatchMatMul +
  SoftmaxV2 -> IncreFlashAttention, is matched through the attention block it serves), and by shape;
* findings: each baseline finding marked fixed, persisting or new, its estimated saving set against the
  measured one;
* aligned: device time aligned by what the model did, so that runs on different devices (an NPU against a
  GPU) line up: each kernel under the framework op it ran for (``framework_ops``: ``aten::conv2d``,
  ``ConvolutionBackward0``), else its op type, else its readable name (``kernel_names``); every row says
  which (``aligned_by``) and carries the kernels each side launched for it;
* summary: each side's time attribution (compute split, communication not overlapped, copies, idle) per
  step, side by side, with the device each ran on and its peaks.

Every metric row carries its noise test (``noise``: samples, spread, threshold, verdict).

Profiles of different lengths are compared per decode token where they have tokens (a rerun that decodes
more tokens is not "slower"), else over the whole run. Works across formats and devices: GPU/CPU Kineto
kernels get the same roles and blocks as Ascend ones (``op_roles``), as msprof-analyze's compare maps them.
"""

from __future__ import annotations

import copy
import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.attribution import BUCKETS, TimeAttribution, step_windows
from pypto_core.framework_ops import FrameworkOps
from pypto_core.graph import GRAPH_COLUMNS, METRICS, OperatorCallGraph
from pypto_core.grouping import code_totals, group_rows, int16_if_fits, looked_up, pair_totals
from pypto_core.hardware import SkuSpec
from pypto_core.i18n import Message, msg, stored_texts
from pypto_core.intervals import window_index
from pypto_core.kernel_names import readable
from pypto_core.memory import release_freed_memory
from pypto_core.profile import Profile, ProfileMeta, merge_columns
from pypto_core.report_render import md_cell
from pypto_core.rules.finding import Report
from pypto_core.rules.registry import discover, rule_blocks
from pypto_core.workload import WORKLOAD_WORDS, Workload

COMPARE_SCHEMA_VERSION = 1
# The tables a comparison reads (through OperatorCallGraph): a saved profile can be loaded with only these
# (``Profile.load(path, tables=COMPARE_TABLES)``). api_calls: how the kernels were launched (a graph
# replay's run is decode) and the runtime calls the attribution splits idle time by, as the diagnosis reads
# them (27 MB more at 1 GB, measured: docs/benchmarks_gpu_session.json).
COMPARE_TABLES: tuple[str, ...] = ("kernels", "steps", "host_ops", "api_calls", "flows")
# The columns of those (``Profile.load(path, columns=COMPARE_COLUMNS)``): the call graph's, and the op types,
# names and shapes the op, block and shape rows group by.
COMPARE_COLUMNS = merge_columns({t: c for t, c in GRAPH_COLUMNS.items() if t in COMPARE_TABLES},
                                {"kernels": ("op_type", "name", "input_shapes")})

# A single-valued metric (no per-step samples) changes "significantly" only beyond this relative tolerance:
# shares computed from the same kernels move by far less than 1% between two reads of one run [INFERRED].
SINGLE_VALUE_REL_TOLERANCE = 0.01
# ... and, for a share, beyond this many points: the H200 decode's attention share 3.9% -> 3.8% passed 1%
# relative and read "better" [INFERRED: a profiler's jitter on a share is a few tenths of a point]
SINGLE_VALUE_SHARE_POINTS = 0.005
# With per-step samples: a delta is significant when it exceeds this many standard errors of the medians.
NOISE_Z = 3.0
MIN_SAMPLES = 3  # per-step samples each side needs for the noise test to use them
# Metrics whose per-step values come from the time attribution (one sample per step window).
ATTRIBUTION_SHARES: dict[str, tuple[str, ...]] = {
    "device_idle_share": ("sync_wait", "data_loading", "host_launch_bound", "idle_other"),
    "compute_share": ("compute",),
    "communication_not_overlapped_share": ("communication_not_overlapped",),
}
# The metrics that are a share of the step's (or the run's) time: their denominator moves with the step
# (``_shares_of_a_changed_step``); efficiencies (MatMul against the roofline) and ratios between kernels do
# not.
TIME_SHARES = frozenset({*ATTRIBUTION_SHARES, "attention_hbm_time_share", "norm_launch_overhead_share",
                         "ai_core_utilization", "critical_path_host_share"})
# A share's time (the attribution's buckets a step) that moved less than this is the same time: its share
# moved with the step alone (``_shares_of_a_changed_step``) [INFERRED: the profiler's own jitter on a step]
SAME_TIME_REL = 0.05
ALIGN_LEVELS: tuple[str, ...] = ("framework_op", "op_type", "name")
ALIGN_FRAMEWORK_MIN_SHARE = 0.5  # device time reaching a framework op, on both sides, to align by it
ALIGNED_KERNELS = 8  # kernels listed per side of an aligned row (the rest counted)
MD_CELL_MAX = 200  # characters of one Markdown table cell

# A profile, or what loads one: a comparison given loaders builds one side at a time (``_Side.of``).
ProfileSource = Profile | Callable[[], Profile]


@dataclass
class _Sums:
    """One side's kernels in one unit's scope, summed per code: what the op, block, shape and aligned rows
    read (kilobytes, whatever the profile's size). Times are ns, not yet divided by the unit's count."""

    ops: tuple[np.ndarray, np.ndarray]  # (kernels, ns) per op-type code
    shapes: tuple[np.ndarray, np.ndarray]  # per "op shape" code
    blocks: tuple[np.ndarray, np.ndarray]  # per index into ``BLOCKS``
    block_ops: dict[int, np.ndarray]  # per block present: its kernels per op-type code
    framework_share: float  # of the scope's device time, in kernels that reach a framework op
    # by framework op or not: each aligned row's ns and kernels, and its named kernels' (name, full name,
    # kernels, ns), the largest first
    aligned: dict[bool, dict[tuple[str, str], dict[str, Any]]]


@dataclass
class _Side:
    """What the comparison needs from one profile, computed once (``of``): its figures, and its kernels
    summed per code in each unit's scope (``_Sums``) and per block (what a fix's measured saving reads).
    Neither the profile's tables, its call graph nor any array a kernel is held, so the other side is loaded
    and built in their place: a side holds kilobytes (it held about 40 bytes a kernel, 610 MB of a 15.7
    M-kernel table beside the other side's build)."""

    meta: ProfileMeta
    sku: SkuSpec
    sku_source: str
    vendor: str
    workload: Workload
    attribution: TimeAttribution | None  # its per-step figures (the pieces of time are not held)
    metrics: dict[str, float | None]
    tokens: int  # decode steps used for per-token normalisation (0: whole-run comparison)
    token_latency_ms: np.ndarray  # per decode step, for the noise test
    step_walls_ns: np.ndarray  # per profiler step
    n: int  # kernels
    op_labels: list[str]  # op type, else kernel name
    shape_labels: list[str]  # "op shape"
    # per unit op times are compared in (``ProfileComparer._aligned_unit``: per_token, per_step, whole_run)
    # with kernels in its scope: their sums and what their times are divided by (tokens, steps, 1)
    units: dict[str, tuple[_Sums, float]]
    # per index into BLOCKS: the kernels' time plus the device idle gap each launch left before it, ns, of
    # every kernel ("all") and of the decode steps' ("decode")
    block_ns: dict[str, np.ndarray]

    @classmethod
    def of(cls, source: ProfileSource, sku: str | None) -> _Side:
        """The side of a profile, or of what a loader returns: loaded here, it is freed once the side is
        built."""
        # a shallow copy: its tables are the caller's until it lets go of some (below)
        profile = copy.copy(source() if callable(source) else source)
        graph = OperatorCallGraph(profile, sku)
        t = graph.tokens
        metrics = graph.metrics()
        latency = t.latency_ns.astype(np.float64) / 1e6
        block = kernel_block_codes(graph)[0]
        # the metrics and blocks are taken: what they were built from is not held while the codes are made
        # (on a 3.1 M-kernel table, 360 MB), nor the attribution's pieces of time (its per-step figures stay)
        # and the kernels' steps (the decode mask stays): another 130 MB
        graph.drop_shapes()
        graph.drop_chains()
        decode = graph.decode_kernel_mask
        graph.drop_tokens()
        if graph.attribution is not None:
            graph.attribution.segments = None
        k = profile.kernels
        # each kernel's codes in 2 bytes where they fit, narrowed as each is made (``_encode``,
        # ``_shape_codes``: the 4-byte ones beside their copies were the side's peak)
        op_codes, op_labels = _op_type_codes(k)
        fw = graph.framework_ops
        w_start, w_end, _ = step_windows(profile, graph.start, graph.end)
        in_steps = (window_index(w_start, w_end, graph.start) >= 0, float(len(w_start)))
        full_codes, full_names = (_encode(pc.fill_null(k["name"], "")) if graph.n
                                  else (np.zeros(0, np.int16), []))
        shape_codes, shape_labels = _shape_codes(k, (op_codes, op_labels))
        keys, labels, name_codes, names, plain = _alignment_codes(k, fw)
        codes = _KernelCodes(dur=graph.dur, block=block, op_types=op_codes, shapes=shape_codes, keys=keys,
                             labels=labels, name_codes=name_codes, names=names, plain=plain,
                             scope=int16_if_fits(fw.scope), scope_names=fw.scope_names, full_codes=full_codes,
                             full_names=full_names)
        del op_codes, shape_codes, keys, name_codes, plain, full_codes, fw
        # the kernels' names, shapes and counters are coded: only their times and lanes are read after (the
        # gaps), so the rest of the table goes before the sums (180 MB of a 15.7 M-kernel table), from this
        # side's copy of the profile: the caller's keeps its table (it may compare it again, or with itself)
        workload = graph.workload
        graph.kernels = profile.kernels = k.select([c for c in _GAP_COLUMNS if c in k.column_names])
        del k
        tokens = int(len(t.latency_ns))
        scopes = {"per_token": (decode, float(tokens)), "per_step": in_steps,
                  "whole_run": (np.ones(graph.n, bool), 1.0)}
        units: dict[str, tuple[_Sums, float]] = {}
        summed: list[tuple[np.ndarray, _Sums]] = []  # scopes of the same kernels are summed once
        for unit, (mask, per) in scopes.items():
            if not mask.any():
                continue
            same = next((sums for other, sums in summed if np.array_equal(other, mask)), None)
            if same is None:
                same = codes.sums(mask, len(op_labels), len(shape_labels))
                summed.append((mask, same))
            units[unit] = (same, per)
        del summed, scopes
        gap = graph.gap_before_ns
        block_ns = {"all": _block_ns(block, graph.dur, gap, None)}
        if decode.any():
            block_ns["decode"] = _block_ns(block, graph.dur, gap, decode)
        return cls(meta=profile.meta, sku=graph.sku, sku_source=graph.sku_source, vendor=graph.vendor,
                   workload=workload, attribution=graph.attribution, metrics=metrics,
                   tokens=tokens, token_latency_ms=latency, step_walls_ns=graph.step_walls_ns(), n=graph.n,
                   op_labels=op_labels, shape_labels=shape_labels, units=units, block_ns=block_ns)


_GAP_COLUMNS = ("start_ns", "dur_ns", "device_id", "stream_id")  # what the gaps before kernels read


def _block_ns(block: np.ndarray, dur: np.ndarray, gap: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Per index into BLOCKS: the time of its kernels (of a mask's rows) plus their gaps, whole ns (exact
    float sums of whole ns, turned back into integers)."""
    ns = code_totals(block, len(BLOCKS), dur, rows)[1] + code_totals(block, len(BLOCKS), gap, rows)[1]
    whole: np.ndarray = np.rint(ns).astype(np.int64)
    return whole


@dataclass
class _KernelCodes:
    """A side's kernels while it is built: their times and codes, from which each unit's sums are made."""

    dur: np.ndarray
    block: np.ndarray
    op_types: np.ndarray
    shapes: np.ndarray
    keys: np.ndarray  # alignment key: framework op where one is known, else plain
    labels: list[tuple[str, str]]  # (aligned_by, key) of each alignment key
    name_codes: np.ndarray  # readable kernel name
    names: list[str]
    plain: np.ndarray  # alignment key by op type, else readable name
    scope: np.ndarray  # framework scope the kernel was called from (-1: none)
    scope_names: list[str]
    full_codes: np.ndarray  # the kernel's own name
    full_names: list[str]

    def sums(self, mask: np.ndarray, op_labels: int, shape_labels: int) -> _Sums:
        blocks = code_totals(self.block, len(BLOCKS), self.dur, mask)
        block_ops = {int(b): code_totals(self.op_types, op_labels, rows=mask & (self.block == b))[0]
                     for b in np.flatnonzero(blocks[0])}
        reach = code_totals((self.keys != self.plain).view(np.int8), 2, self.dur, mask)[1]
        device_ns = reach[0] + reach[1]
        framework_share = float(reach[1] / device_ns) if device_ns > 0 else 0.0
        by_framework = self.aligned(mask, by_framework=True)
        same = self.keys is self.plain  # no framework op known: the plain keys themselves
        return _Sums(ops=code_totals(self.op_types, op_labels, self.dur, mask),
                     shapes=code_totals(self.shapes, shape_labels, self.dur, mask), blocks=blocks,
                     block_ops=block_ops, framework_share=framework_share,
                     aligned={True: by_framework,
                              False: by_framework if same else self.aligned(mask, by_framework=False)})

    def aligned(self, scope: np.ndarray, by_framework: bool) -> dict[tuple[str, str], dict[str, Any]]:
        """The aligned rows of the kernels in ``scope``, in ns (``ProfileComparer._aligned_side`` divides)."""
        keys = self.keys if by_framework else self.plain
        labels, names = self.labels, self.names
        # the scope's rows, a copy only where it leaves some out (every array here over all of them took
        # 1 GB of two 15.7 M-kernel tables' comparison)
        sel = None if scope.all() else np.flatnonzero(scope)

        def scoped(values: np.ndarray) -> np.ndarray:
            return values if sel is None else values[sel]

        count, total = code_totals(keys, len(labels), self.dur, scope)
        width = max(len(names), 1)
        # (label, readable name) pairs in their codes' order; a readable name's full name: its first kernel's
        keys_in, names_in, dur_in = scoped(keys), scoped(self.name_codes), scoped(self.dur)
        first, pair_c, pair_t = pair_totals(keys_in, names_in, dur_in)
        pair = keys_in[first].astype(np.int64) * width + names_in[first]
        del names_in
        example = first if sel is None else sel[first]
        scopes = scoped(self.scope)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for code in np.flatnonzero(count):
            out[labels[code]] = {"ns": float(total[code]), "count": int(count[code]), "kernels": [],
                                 "more": 0, "module": None}
        for j in np.argsort(-pair_t, kind="stable"):
            row = out[labels[int(pair[j]) // width]]
            if len(row["kernels"]) >= ALIGNED_KERNELS:
                row["more"] += 1
                continue
            full = self.full_names[int(self.full_codes[int(example[j])])] or ""
            label = names[int(pair[j]) % width]
            row["kernels"].append((label, full if full != label else None, int(pair_c[j]), float(pair_t[j])))
        # the module a row's kernels were called from: the scope holding most of its time
        has_scope = scopes >= 0
        if has_scope.any():
            sw = max(len(self.scope_names), 1)
            k = keys_in[has_scope].astype(np.int64)
            sp, sinv = np.unique(k * sw + scopes[has_scope], return_inverse=True)
            st = np.bincount(sinv.reshape(-1), weights=dur_in[has_scope].astype(np.float64),
                             minlength=len(sp))
            for j in np.argsort(st, kind="stable"):  # largest last, so it wins
                label_code, sc = divmod(int(sp[j]), sw)
                out[labels[label_code]]["module"] = self.scope_names[sc]
        return out


# The model blocks ``kernel_blocks`` sorts kernels into; a rule's measured saving comes from the blocks it
# declares (``@rule(blocks=...)``, ``rules.registry.rule_blocks``). "activation" is a non-transformer's
# activation (a CNN's Relu), which is no FFN.
BLOCKS: tuple[str, ...] = ("other", "matmul", "ffn_activation", "rope", "norm", "kv_update", "kv_layout",
                           "attention", "lm_head", "communication", "activation")
# Each block in words on a page (the ids stay in the JSON and the exports).
BLOCK_LABELS: dict[str, Message] = {
    "other": msg("other"), "matmul": msg("MatMul"), "ffn_activation": msg("FFN activation"),
    "rope": msg("RoPE"), "norm": msg("norm"), "kv_update": msg("KV cache update"),
    "kv_layout": msg("KV cache layout copies"), "attention": msg("attention"), "lm_head": msg("LM head"),
    "communication": msg("communication"), "activation": msg("activation"),
}


def block_label(block: str, language: str) -> str:
    """A block's name in ``language``; an unknown id as it is."""
    label = BLOCK_LABELS.get(block)
    return label.render(language) if label is not None else block


# Blocks that only a transformer has, and of those the ones only LLM inference has (a KV cache, an LM head per
# decode step): op-role heuristics alone (a 4-D Transpose, a Relu) name them on a CNN's ops otherwise.
TRANSFORMER_BLOCKS: frozenset[str] = frozenset({"ffn_activation", "rope", "attention"})
LLM_INFERENCE_BLOCKS: frozenset[str] = frozenset({"kv_update", "kv_layout", "lm_head"})


def kernel_block_codes(graph: OperatorCallGraph) -> tuple[np.ndarray, list[str]]:
    """Per kernel the index in ``BLOCKS`` of the model block it serves (see :func:`kernel_blocks`).
    Transformer blocks are named only where the workload is a transformer's (``Workload.is_sequence_model``),
    KV-cache and LM-head blocks only for LLM inference; elsewhere those kernels stay matmul, norm,
    communication, activation or other."""
    out = np.zeros(graph.n, np.int8)  # other; a byte a kernel holds an index into the 11 BLOCKS
    if graph.n == 0:
        return out, list(BLOCKS)
    workload = graph.workload
    allowed = set(BLOCKS)
    if not workload.is_llm():
        allowed -= LLM_INFERENCE_BLOCKS
    if not workload.is_sequence_model():
        allowed -= TRANSFORMER_BLOCKS
    activation = "ffn_activation" if "ffn_activation" in allowed else "activation"
    # later assignments win: specific chains and masks override the plain role
    for block, mask in (
            ("matmul", lambda: graph.is_role("matmul")),
            (activation,
             lambda: graph.is_role("activation", "activation_piece") | graph.chain_mask("swiglu")),
            ("rope", lambda: graph.is_role("rope") | graph.chain_mask("rope")),
            ("norm", lambda: graph.is_role("norm") | graph.chain_mask("rms_norm")),
            ("kv_update", lambda: graph.is_role("kv_update")),
            ("kv_layout", lambda: graph.kv_layout_mask),
            ("attention", lambda: graph.attention_mask),
            ("lm_head", lambda: graph.lm_head_mask),
            ("communication", lambda: graph.is_role("communication"))):
        if block in allowed:
            out[mask()] = BLOCKS.index(block)
    return out, list(BLOCKS)


def kernel_blocks(graph: OperatorCallGraph) -> np.ndarray:
    """The model block each kernel serves: attention, kv_layout, kv_update, norm, rope, matmul,
    ffn_activation, lm_head, communication, activation (not a transformer's), other."""
    codes, labels = kernel_block_codes(graph)
    names: np.ndarray = np.array(labels, dtype=object)[codes]
    return names


_Codes = tuple[np.ndarray, list[str]]  # an integer code per kernel, and the text of each code
# per kernel: a key code into (aligned_by, key) labels, those labels, a readable-name code, the names
# (key code per kernel, (aligned_by, key) labels, readable-name code per kernel, readable names, key code
# per kernel without the framework op level)
_AlignmentKeys = tuple[np.ndarray, list[tuple[str, str]], np.ndarray, list[str], np.ndarray]


def _encode(values: np.ndarray | pa.Array | pa.ChunkedArray) -> _Codes:
    """Dictionary-encode a text column (Arrow's hash table in C++, not np.unique over Python strings); the
    codes in 2 bytes where they fit (``_narrowed``), so that no second 4-byte copy stands beside Arrow's."""
    arr = pa.array(values, type=pa.string()) if isinstance(values, np.ndarray) else values
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type) and not arr.null_count:
        # already coded (a projected load): its codes renumbered in order of first appearance, as encoding
        # the text would number them, without expanding one string a row (1.7 GB on a 5 GB kernel table);
        # values of one text (a shape list and an empty one both "") made one code first
        labels = arr.dictionary.to_pylist()
        if None not in labels:
            distinct: dict[str, int] = {}
            merged = np.array([distinct.setdefault(v, len(distinct)) for v in labels], np.int32)
            codes = arr.indices if len(distinct) == len(labels) else \
                pa.array(merged[arr.indices.to_numpy(zero_copy_only=False)])
            seen = codes.dictionary_encode()
            values = list(distinct)
            return _narrowed((seen.indices.to_numpy(zero_copy_only=False),
                              [values[i] for i in seen.dictionary.to_pylist()]))
    if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    enc = arr.dictionary_encode()
    return _narrowed((enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()))


def _narrowed(codes: _Codes) -> _Codes:
    return int16_if_fits(codes[0]), codes[1]


def _op_type_codes(k: pa.Table) -> _Codes:
    """Op type (else kernel name) per kernel."""
    if k.num_rows and not k["op_type"].null_count:  # every kernel has one: kept coded where it is
        return _encode(k["op_type"])
    return _encode(pc.coalesce(k["op_type"], k["name"], pa.scalar("?")))


def _shape_codes(k: pa.Table, op_types: _Codes) -> _Codes:
    """"op shape" per kernel as codes (2 bytes where they fit): op codes and shape-text codes paired as
    integers, and text built only for the distinct pairs (not one Python string per kernel)."""
    ops, op_labels = op_types
    if not k.num_rows:
        return ops, op_labels
    shapes, shape_labels = _encode(_shape_cells(k["input_shapes"]))
    first, codes = group_rows(ops, shapes)  # pairs in (op, shape) order, with no sort where they are few
    labels = [op_labels[ops[r]] + " " + shape_labels[shapes[r]] for r in first]
    return int16_if_fits(codes), labels


def _alignment_codes(k: pa.Table, fw: FrameworkOps) -> _AlignmentKeys:
    """Per kernel: a key code into (aligned_by, key) labels, and a readable-name code into names."""
    n = k.num_rows
    raw_codes, raw_names = _encode(pc.fill_null(k["name"], "?")) if n else (np.zeros(0, np.int16), [])
    op_type = pc.fill_null(k["op_type"], "").combine_chunks() if n else pa.array([], pa.string())
    op_codes, op_labels = _encode(op_type) if n else (np.zeros(0, np.int16), [])
    # a kernel's label: its op type where the profile has one (Ascend numbers its kernels: Conv2D1,
    # trans_TransData_12), else its readable name (CUDA kernels)
    first, pair_inv = group_rows(op_codes, raw_codes)  # (op type, name) pairs, in their codes' order
    pair_label = [op_labels[op_codes[r]] or readable(raw_names[raw_codes[r]]) for r in first]
    del raw_codes
    names = sorted(set(pair_label))
    index = {v: i for i, v in enumerate(names)}
    name_codes = looked_up(int16_if_fits(np.array([index[v] for v in pair_label], np.int32)), pair_inv)
    del pair_inv
    labels = ([("framework_op", v) for v in fw.op_names] + [("op_type", v) for v in op_labels]
              + [("name", v) for v in names])
    nf, no = len(fw.op_names), len(op_labels)
    # every kernel's key in 2 bytes where every label's code fits, a slice at a time: over every kernel at
    # once, its temporaries took 250 MB of a 15.7 M-kernel table
    key_type = np.int16 if len(labels) <= np.iinfo(np.int16).max else np.int32
    has_op = np.array([bool(v) for v in op_labels], bool)  # per op-type code: a real op type, not ""
    plain = np.empty(n, key_type)
    for at in range(0, n, _KEY_SLICE):
        part = slice(at, at + _KEY_SLICE)
        op = op_codes[part].astype(key_type)
        plain[part] = np.where(has_op[op], op + nf, name_codes[part].astype(key_type) + (nf + no))
    del op_codes
    # a kernel's framework op where one is known (none without host ops: the plain keys themselves)
    keys = None
    if nf:
        keys = np.empty(n, key_type)
        for at in range(0, n, _KEY_SLICE):
            part = slice(at, at + _KEY_SLICE)
            keys[part] = np.where(fw.op[part] >= 0, fw.op[part], plain[part])
    return (plain if keys is None else keys), labels, name_codes, names, plain


_KEY_SLICE = 1 << 20  # kernels whose alignment keys are worked out at once


def _shape_cells(shapes: pa.ChunkedArray) -> pa.Array:
    """Each kernel's input shapes as text ("" for none); coded shapes stay coded (the text of each distinct
    cell, not of each row)."""
    arr = shapes.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        text, indices = pc.fill_null(shapes_text(arr.dictionary), ""), arr.indices
        if arr.null_count:  # a kernel without shapes: a code of its own, for "" (a load leaves one free)
            text = pa.concat_arrays([text, pa.array([""], text.type)])
            indices = pc.fill_null(indices, len(text) - 1)
        return pa.DictionaryArray.from_arrays(indices, text)
    return pc.fill_null(shapes_text(arr), "")


def shapes_text(shapes: pa.Array | pa.ChunkedArray) -> pa.Array:
    """list<list<int64>> shapes as the profilers write them: dims joined by ',', inputs by ';'."""
    arr = shapes.combine_chunks() if isinstance(shapes, pa.ChunkedArray) else shapes
    if pa.types.is_dictionary(arr.type):  # coded (Profile.load(columns=...)): the distinct lists joined once
        return shapes_text(arr.dictionary).take(arr.indices)
    s = arr.cast(pa.list_(pa.list_(pa.string())))
    inner = pc.binary_join(s.flatten(), ",")
    outer = pa.ListArray.from_arrays(s.offsets, inner, mask=s.is_null())
    return pc.binary_join(outer, ";")


def _median_se(samples: np.ndarray) -> tuple[float, float]:
    """Median and its standard error (1.253·σ/√n, σ from the MAD so one outlier step does not dominate)."""
    med = float(np.median(samples))
    sigma = 1.4826 * float(np.median(np.abs(samples - med)))
    return med, 1.253 * sigma / math.sqrt(len(samples))


@dataclass
class ComparisonResult:
    metrics: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    blocks: list[dict[str, Any]]
    shapes: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    base: dict[str, Any]
    new: dict[str, Any]
    # per_token | per_step | whole_run: the unit of every op time (ops, blocks, shapes and the aligned rows)
    normalisation: str
    warnings: list[str] = field(default_factory=list)  # in English
    # per warning, its template and parameters (Message.to_dict()): a page renders it in its language
    warning_messages: list[dict[str, Any] | None] = field(default_factory=list)
    aligned: list[dict[str, Any]] = field(default_factory=list)
    alignment: dict[str, Any] = field(default_factory=dict)  # unit, and per side the time share per level
    summary: dict[str, Any] = field(default_factory=dict)  # per side: attribution per step, device

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": COMPARE_SCHEMA_VERSION, "normalisation": self.normalisation,
                "base": self.base, "new": self.new, "metrics": self.metrics, "ops": self.ops,
                "blocks": self.blocks, "shapes": self.shapes, "findings": self.findings,
                "warnings": self.warnings, "warning_messages": self.warning_messages,
                "aligned": self.aligned, "alignment": self.alignment,
                "summary": self.summary}

    def metric(self, name: str) -> dict[str, Any]:
        for row in self.metrics:
            if row["name"] == name:
                return row
        raise KeyError(name)


class ProfileComparer:
    """Compare a baseline and a candidate profile; optionally with their diagnosis reports.

    Each side is a profile or a loader of one (``ProfileSource``). Given loaders, one profile is held at a
    time: the baseline is loaded, reduced to its side and freed before the candidate loads (measured on two
    3.1 M-kernel tables: a peak of 1.31 GB with both loaded first, 0.89 GB given loaders)."""

    def __init__(self, base: ProfileSource, candidate: ProfileSource, *, sku: str | None = None,
                 base_report: Report | dict[str, Any] | None = None,
                 candidate_report: Report | dict[str, Any] | None = None) -> None:
        self.base = _Side.of(base, sku)
        release_freed_memory()
        self.new = _Side.of(candidate, sku)
        release_freed_memory()
        self.base_report = _report_dict(base_report)
        self.new_report = _report_dict(candidate_report)

    @property
    def per_token(self) -> bool:
        return self.base.tokens > 0 and self.new.tokens > 0

    def compare(self, *, top_shapes: int = 30) -> ComparisonResult:
        warnings: list[Message] = []
        b, n = self.base, self.new
        if b.sku.name != n.sku.name:
            warnings.append(msg("different devices: {base} vs {new}; shares and utilisations are each "
                                "relative to their own device's peaks", base=b.sku.name,
                                new=n.sku.name))
        kinds = (b.workload.kind, n.workload.kind)
        if self.different_work:
            # a training step against a decode token is two programs: the times differ by what runs, not by a
            # fix (an Ascend CNN training rank read "82.6% better" against an H200 decode)
            warnings.append(msg("different workloads: {base} vs {new}; the two runs do different work, so "
                                "their times and findings are not a before and after of one change",
                                base=WORKLOAD_WORDS[kinds[0]], new=WORKLOAD_WORDS[kinds[1]]))
        ranks = (b.meta.rank, n.meta.rank)
        if None not in ranks and ranks[0] != ranks[1]:
            # ranks of one job differ by design (their pipeline stage, their share of the data): a change
            # between them is not a change of the run
            warnings.append(msg("different ranks: rank {base} vs rank {new}; their figures differ by role as "
                                "well as by any change (compare the same rank of each run)",
                                base=ranks[0], new=ranks[1]))
        unit = self._aligned_unit()
        if unit == "whole_run":
            warnings.append(msg("neither decode tokens nor profiler steps in both profiles: op times compare "
                                "whole runs"))
        elif unit == "per_step" and (b.tokens or n.tokens):
            warnings.append(msg("no decode tokens found in one of the profiles: op times compare profiler "
                                "steps ({base} and {new} steps)", base=_step_count(b), new=_step_count(n)))
        texts, messages = stored_texts(warnings)
        aligned, alignment = self._aligned()
        return ComparisonResult(
            metrics=self._metrics(), ops=self._ops(), blocks=self._blocks(), shapes=self._shapes(top_shapes),
            findings=self._findings(), base=_side_summary(b), new=_side_summary(n),
            normalisation=unit, warnings=texts,
            warning_messages=messages,
            aligned=aligned, alignment=alignment,
            summary={"base": _attribution_summary(b, self.base_report),
                     "new": _attribution_summary(n, self.new_report)})

    # -- metrics ------------------------------------------------------------------------------------
    def _metrics(self) -> list[dict[str, Any]]:
        rows = []
        for name, (unit, higher_better) in METRICS.items():
            bv, nv = self.base.metrics.get(name), self.new.metrics.get(name)
            row: dict[str, Any] = {"name": name, "unit": unit, "base": bv, "new": nv, "delta": None,
                                   "delta_pct": None, "better": None, "significant": None}
            if bv is not None and nv is not None:
                delta = nv - bv
                row["delta"] = delta
                row["delta_pct"] = (delta / bv * 100.0) if bv else (0.0 if delta == 0 else None)
                row["significant"], row["spread"] = self._significance(name, bv, nv)
                row["better"] = (delta > 0) == higher_better if delta != 0 and row["significant"] else None
                if delta != 0 and not row["significant"]:
                    row["better"] = None  # inside the noise: neither better nor worse
            row["noise"] = self._noise(name, row)
            rows.append(row)
        self._shares_of_a_changed_step(rows)
        if self.different_work:
            # two programs, not a before and after of one change: the deltas stand, no verdict (an Ascend CNN
            # training rank read "step time 82.6% better" against an H200 decode, the warning above it)
            for row in rows:
                if row["better"] is not None:
                    row["better"] = None
                    row["different_work"] = True
                    row["noise"]["verdict"] = _verdict(row)
        return rows

    @property
    def different_work(self) -> bool:
        """Whether the two runs are known to do different work (a training step against a decode token)."""
        kinds = (self.base.workload.kind, self.new.workload.kind)
        return "unknown" not in kinds and kinds[0] != kinds[1]

    def _shares_of_a_changed_step(self, rows: list[dict[str, Any]]) -> None:
        """A share of the step moves when the step does: a run made faster elsewhere shows its idle share
        grow with the idle time unchanged (torch.compile with static weights: 1.2 ms both, 35% of 3.5 ms
        against 50% of 2.6 ms), and its compute share grow with the compute unchanged (1.27 against 1.28
        ms). A time share whose verdict runs against the step time's (or the token latency's), or whose
        time a step barely moved (``SAME_TIME_REL``), is no verdict by itself: it reads ``step: shorter``
        (or ``longer``) and neither better nor worse; the times are beside it (the summary, the op tables)."""
        headline = "per_token_latency_ms" if self.per_token else "step_time_ms"
        time_row = next((r for r in rows if r["name"] == headline), None)
        faster = time_row["better"] if time_row is not None else None
        if faster is None:
            return
        for row in rows:
            if row["name"] not in TIME_SHARES or row["better"] is None:
                continue
            before, after = (_bucket_ms_per_step(s, row["name"]) for s in (self.base, self.new))
            unmoved = (before is not None and after is not None
                       and abs(after - before) <= SAME_TIME_REL * max(before, after))
            if row["better"] != faster or unmoved:
                row["better"] = None
                row["step"] = "shorter" if faster else "longer"
                row["noise"]["verdict"] = _verdict(row)

    def _step_samples(self, side: _Side, name: str) -> np.ndarray | None:
        """Per-step values of a metric, where the profile has them (token latencies, attribution shares)."""
        if name in ("per_token_latency_ms", "tokens_per_s", "critical_path_ms"):
            return side.token_latency_ms if self.per_token else None
        if name == "step_time_ms":
            return side.step_walls_ns / 1e6
        buckets = ATTRIBUTION_SHARES.get(name)
        a = side.attribution
        if buckets is None or a is None:
            return None
        return np.array([sum(s.breakdown.buckets[b] for b in buckets) / s.breakdown.wall_ns
                         for s in a.steps if s.breakdown.wall_ns], np.float64)

    def _noise(self, name: str, row: dict[str, Any]) -> dict[str, Any]:
        """The noise test of one metric row as the page and exports show it: how many samples each side
        had, their spread, the threshold a change must pass, and the verdict."""
        bs, ns = self._step_samples(self.base, name), self._step_samples(self.new, name)
        out: dict[str, Any] = {"base_samples": 0 if bs is None else int(len(bs)),
                               "new_samples": 0 if ns is None else int(len(ns))}
        if row["base"] is None or row["new"] is None:
            return {**out, "method": "n/a", "threshold": None, "verdict": "n/a"}
        spread = row.get("spread")
        if spread is not None:  # token latency: the medians' standard errors (``_significance``)
            out.update(method="per_step_median", threshold=spread["noise_ms"])
        elif bs is not None and ns is not None and len(bs) >= MIN_SAMPLES and len(ns) >= MIN_SAMPLES:
            _, bse = _median_se(bs)
            _, nse = _median_se(ns)
            threshold = NOISE_Z * math.hypot(bse, nse)
            out.update(method="per_step_median", threshold=threshold, base_spread=_spread(bs),
                       new_spread=_spread(ns))
            # or every step of one run beyond every step of the other: the medians' spread can read a real
            # change as noise when one run's steps scatter (the Kineto pair: 75-81 ms against 82-166 ms)
            separated = _separated(bs, ns)
            if separated:
                out["separated"] = True
            significant = abs(row["new"] - row["base"]) > threshold or separated
            if significant != row["significant"]:
                row["significant"] = significant
                higher_better = METRICS[name][1]
                row["better"] = (row["delta"] > 0) == higher_better if row["delta"] and significant else None
        else:
            out.update(method="single_value",
                       threshold=_single_value_tolerance(name, row["base"], row["new"]))
        out["verdict"] = _verdict(row)
        return out

    def _significance(self, name: str, bv: float, nv: float) -> tuple[bool, dict[str, float] | None]:
        if name in ("per_token_latency_ms", "tokens_per_s", "critical_path_ms") and self.per_token \
                and len(self.base.token_latency_ms) >= 3 and len(self.new.token_latency_ms) >= 3:
            bm, bse = _median_se(self.base.token_latency_ms)
            nm, nse = _median_se(self.new.token_latency_ms)
            noise = NOISE_Z * math.hypot(bse, nse)
            spread = {"base_median_ms": bm, "new_median_ms": nm, "noise_ms": noise,
                      "base_steps": len(self.base.token_latency_ms),
                      "new_steps": len(self.new.token_latency_ms)}
            return abs(nm - bm) > noise, spread
        return abs(nv - bv) > _single_value_tolerance(name, bv, nv), None

    # -- op-level diff ------------------------------------------------------------------------------
    def _grouped(self, side: _Side, which: str) -> dict[Any, tuple[float, int]]:
        """The op-type ("ops"), shape ("shapes") or block ("blocks") rows of a side in the compared unit."""
        got = side.units.get(self._aligned_unit())  # the kernels counted, their times divided by per
        if got is None:
            return {}
        sums, per = got
        count, total = getattr(sums, which)
        labels = {"ops": side.op_labels, "shapes": side.shape_labels, "blocks": list(BLOCKS)}[which]
        return {labels[i]: (float(total[i]) / per / 1000.0, int(count[i])) for i in np.flatnonzero(count)}

    def _diff_rows(self, key_name: str, base: dict[Any, tuple[float, int]],
                   new: dict[Any, tuple[float, int]]) -> list[dict[str, Any]]:
        rows = []
        for key in set(base) | set(new):
            bu, bc = base.get(key, (0.0, 0))
            nu, nc = new.get(key, (0.0, 0))
            rows.append({key_name: key, "base_us": bu, "new_us": nu, "delta_us": nu - bu,
                         "base_count": bc, "new_count": nc,
                         "status": "removed" if nc == 0 else "added" if bc == 0 else "changed"})
        # ties (equal deltas, many at 0) by key: the rows come from a set, whose order is the hash seed's
        rows.sort(key=lambda r: (-abs(r["delta_us"]), str(r[key_name])))
        return rows

    def _ops(self) -> list[dict[str, Any]]:
        return self._diff_rows("op_type", self._grouped(self.base, "ops"), self._grouped(self.new, "ops"))

    def _blocks(self) -> list[dict[str, Any]]:
        rows = self._diff_rows("block", self._grouped(self.base, "blocks"), self._grouped(self.new, "blocks"))
        for row in rows:  # which op types served the block on each side: how a renamed kernel is matched
            row["base_op_types"] = self._block_ops(self.base, row["block"])
            row["new_op_types"] = self._block_ops(self.new, row["block"])
        return rows

    def _block_ops(self, side: _Side, block: str) -> list[str]:
        got = side.units.get(self._aligned_unit())
        counts = got[0].block_ops.get(BLOCKS.index(block)) if got is not None and block in BLOCKS else None
        if counts is None:
            return []
        labels = side.op_labels
        present = sorted(np.flatnonzero(counts).tolist(), key=lambda i: labels[i])
        order = np.argsort(-counts[present], kind="stable")
        return [labels[present[i]] for i in order[:8]]

    def _shapes(self, top: int) -> list[dict[str, Any]]:
        rows = self._diff_rows("op_shape", self._grouped(self.base, "shapes"),
                               self._grouped(self.new, "shapes"))
        return rows[:top]

    # -- alignment by what the model did -------------------------------------------------------------
    def _aligned_unit(self) -> str:
        """The unit of every op time compared: per_token where both decode, else per_step where both have
        profiler steps (a rerun of more steps or tokens is not "slower"), else whole_run."""
        if self.per_token:
            return "per_token"
        if _step_count(self.base) and _step_count(self.new):
            return "per_step"
        return "whole_run"

    def _framework_share(self, side: _Side, unit: str) -> float:
        """Share of the side's device time (in the compared scope) whose kernels reach a framework op."""
        got = side.units.get(unit)
        return got[0].framework_share if got is not None else 0.0

    def _aligned_side(self, side: _Side, unit: str, by_framework: bool
                      ) -> dict[tuple[str, str], dict[str, Any]]:
        """A side's aligned rows (summed as it was built: ``_KernelCodes.aligned``), per unit."""
        got = side.units.get(unit)
        if got is None:
            return {}
        sums, per = got
        return {key: {"us": row["ns"] / per / 1000.0, "count": row["count"],
                      "kernels": [{"name": name, "full_name": full, "count": count,
                                   "count_per_unit": round(count / per, 2), "us": ns / per / 1000.0}
                                  for name, full, count, ns in row["kernels"]],
                      "more": row["more"], "module": row["module"]}
                for key, row in sums.aligned[by_framework].items()}

    def _aligned(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        unit = self._aligned_unit()
        # by framework op only where both runs reach theirs: a run replayed from a CUDA graph links its
        # kernels to the graph launch, not to aten ops, and every row would read removed on one side and
        # added on the other; then both align by op type, else kernel name
        by_framework = min(self._framework_share(self.base, unit),
                           self._framework_share(self.new, unit)) >= ALIGN_FRAMEWORK_MIN_SHARE
        base = self._aligned_side(self.base, unit, by_framework)
        new = self._aligned_side(self.new, unit, by_framework)
        empty = {"us": 0.0, "count": 0, "kernels": [], "more": 0, "module": None}
        rows = []
        for key in set(base) | set(new):
            b, n = base.get(key, empty), new.get(key, empty)
            bu, nu = b["us"], n["us"]
            rows.append({"aligned_by": key[0], "key": key[1], "module": b["module"] or n["module"],
                         "base_module": b["module"], "new_module": n["module"],
                         "base_us": bu, "new_us": nu, "delta_us": nu - bu,
                         "ratio": (nu / bu) if bu > 0 else None,
                         "slower": "new" if nu > bu else "base" if bu > nu else None,
                         "base_count": b["count"], "new_count": n["count"],
                         "base_kernels": b["kernels"], "new_kernels": n["kernels"],
                         "base_kernels_more": b["more"], "new_kernels_more": n["more"],
                         "status": "removed" if not n["count"] else "added" if not b["count"] else "matched"})
        rows.sort(key=lambda r: (-max(r["base_us"], r["new_us"]), r["aligned_by"], r["key"]))
        alignment: dict[str, Any] = {"unit": unit,
                                     "levels": list(ALIGN_LEVELS if by_framework else ALIGN_LEVELS[1:])}
        for side_name in ("base", "new"):
            total = sum(r[f"{side_name}_us"] for r in rows) or 1.0
            shares = {lvl: sum(r[f"{side_name}_us"] for r in rows if r["aligned_by"] == lvl) / total
                      for lvl in ALIGN_LEVELS}
            shares["framework_op_matched"] = sum(r[f"{side_name}_us"] for r in rows if r["aligned_by"] ==
                                                 "framework_op" and r["status"] == "matched") / total
            alignment[side_name] = {"device_us": sum(r[f"{side_name}_us"] for r in rows), "shares": shares}
        return rows, alignment

    # -- findings -----------------------------------------------------------------------------------
    def _block_time_ns(self, side: _Side, blocks: tuple[str, ...], scope: str) -> float:
        """Kernel time of ``blocks`` in ``scope`` (every kernel, "decode" or "not_decode"), plus the device
        idle gap each launch left before it (a removed kernel also removes that gap)."""
        chosen = [BLOCKS.index(b) for b in blocks if b in BLOCKS]
        every = side.block_ns["all"]
        decode = side.block_ns.get("decode", np.zeros_like(every))
        ns = {"all": every, "decode": decode, "not_decode": every - decode}[scope]
        return float(ns[chosen].sum())

    def _measured_saving_us(self, blocks: tuple[str, ...]) -> float:
        """What the fix saved, on the baseline's scale (the same scope as the rules' estimates: the whole
        run).

        Decode time is compared per token and scaled by the baseline's token count, so a rerun that decoded a
        different number of tokens is still compared fairly; the rest of the run (prefill) is compared as is.
        """
        b, n = self.base, self.new
        if not self.per_token:
            return (self._block_time_ns(b, blocks, "all") - self._block_time_ns(n, blocks, "all")) / 1000.0
        decode = (self._block_time_ns(b, blocks, "decode") / b.tokens
                  - self._block_time_ns(n, blocks, "decode") / n.tokens) * b.tokens
        rest = self._block_time_ns(b, blocks, "not_decode") - self._block_time_ns(n, blocks, "not_decode")
        return (decode + rest) / 1000.0

    def _bucket_saving_us(self, bucket: str) -> float | None:
        """What a fix saved of the time it explains (a rule without kernels of its own: host gaps, syncs,
        copies), on the baseline's scale: the bucket's time per step, before less after, times the
        baseline's steps; None without steps on both sides (runs of different lengths)."""
        before, after = (_buckets_ns_per_step(s, (bucket,)) for s in (self.base, self.new))
        if before is None or after is None:
            return None
        return (before - after) * _step_count(self.base) / 1000.0

    def _findings(self) -> list[dict[str, Any]]:
        if self.base_report is None:
            return []
        base = {f["rule"]: f for f in self.base_report.get("findings", [])}
        new = {f["rule"]: f for f in (self.new_report or {}).get("findings", [])}
        rows = []
        # runs on two vendors' devices are two programs: a finding the other run lacks was not fixed there
        same_vendor = self.base.vendor == self.new.vendor
        explained = [_explained_bucket(rule) for rule in base if not rule_blocks(rule)]
        for rule, f in base.items():
            # A rule that cannot fire on the other side (its vendor or workload) proves nothing there: an NPU
            # finding absent from a GPU run is not fixed, it does not apply
            if not _applies(rule, self.new):
                status = "not_applicable"
            elif rule in new:
                status = "persisting"
            else:
                status = "fixed" if same_vendor else "not_comparable"
            row: dict[str, Any] = {"rule": rule, "status": status, "title": f.get("title", ""),
                                   **_title_message(f), "estimated_saving_us": f.get("estimated_saving_us"),
                                   "measured_saving_us": None}
            blocks = rule_blocks(rule)
            bucket = _explained_bucket(rule)
            # a bucket two of the baseline's findings explain cannot say which of them saved what
            measured: float | None = None
            if blocks:
                measured = self._measured_saving_us(blocks)
            elif bucket is not None and explained.count(bucket) == 1 and status in ("fixed", "persisting"):
                measured = self._bucket_saving_us(bucket)
            if measured is not None:
                row["measured_saving_us"] = measured
                est = f.get("estimated_saving_us")
                if est and measured:
                    row["estimate_error_pct"] = (est - measured) / abs(measured) * 100.0
                # still found, but its time fell by at least half of what fixing it was to save (graph
                # capture on the H200 decode: 78.8 ms of 99 ms measured, the rest still host-bound)
                row["reduced"] = bool(status == "persisting" and est and measured >= REDUCED_SHARE * est)
            self._per_unit(row, self.base)
            rows.append(row)
        for rule, f in new.items():
            if rule not in base:
                status = "new" if _applies(rule, self.base) else "not_applicable"
                rows.append({"rule": rule, "status": status, "title": f.get("title", ""), **_title_message(f),
                             "estimated_saving_us": f.get("estimated_saving_us"), "measured_saving_us": None})
                if status == "new":
                    self._threshold_only(rows[-1])
                self._per_unit(rows[-1], self.new)
        return rows

    def _threshold_only(self, row: dict[str, Any]) -> None:
        """A new finding whose time a step did not grow (``SAME_TIME_REL``) only crossed its share threshold
        because the step got shorter (sync_stall on torch.compile with static weights: 154 µs a step before
        and 149 after, "new"): ``threshold_only``, with the time a step of each side beside it."""
        bucket = _explained_bucket(row["rule"])
        if bucket is None:
            return
        before, after = (_buckets_ns_per_step(side, (bucket,)) for side in (self.base, self.new))
        if before is not None and after is not None and after <= before * (1 + SAME_TIME_REL):
            row["threshold_only"] = True
            row["time_per_step_us"] = {"base": before / 1e3, "new": after / 1e3}

    def _per_unit(self, row: dict[str, Any], side: _Side) -> None:
        """A finding's savings are over its run (the baseline's scale; a new finding's, the candidate's):
        beside them, the same per profiler step of that run, as its profile page gives them, where both runs
        have steps. Never per decode token: a saving over the run holds the prefill's part too, which no
        token owns (the demo's norm fix saved 47 ms over 2 prefill and 2 decode steps)."""
        count = _step_count(side) if self._aligned_unit() != "whole_run" else 0
        if count > 1:
            row["per_unit"] = {"unit": "per_step", "count": int(count), **{
                key: (row[key] / count if row.get(key) is not None else None)
                for key in ("estimated_saving_us", "measured_saving_us")}}


# A persisting finding whose measured saving reaches this share of its estimate reads "persisting, reduced".
REDUCED_SHARE = 0.5


def _single_value_tolerance(name: str, base: float, new: float) -> float:
    """How far a single-valued metric must move to be a change: 1% of the larger value, and for a share at
    least ``SINGLE_VALUE_SHARE_POINTS`` (both values zero: no change)."""
    relative = SINGLE_VALUE_REL_TOLERANCE * max(abs(base), abs(new))
    if METRICS.get(name, ("", True))[0] == "share" and relative:
        return max(relative, SINGLE_VALUE_SHARE_POINTS)
    return relative


def _or_dash(value: Any) -> str:
    return "—" if value is None else str(value)


def _explained_bucket(rule_id: str) -> str | None:
    """The time bucket a rule's finding explains, where it is one of the attribution's idle or copy buckets
    (compute is measured on the rule's blocks instead)."""
    rule = discover().get(rule_id)
    return rule.explains if rule is not None and rule.explains in BUCKETS and rule.explains != "compute" \
        else None


def _applies(rule_id: str, side: _Side) -> bool:
    """Whether ``rule_id`` can fire on this side's vendor and workload (an unknown rule: assume it can)."""
    rule = discover().get(rule_id)
    return rule is None or rule.applies_to(side.vendor, side.workload.kind)


def _spread(samples: np.ndarray) -> dict[str, float]:
    return {"median": float(np.median(samples)), "min": float(samples.min()), "max": float(samples.max())}


# Steps each run needs before "no step of one overlaps the other" counts as a change: the chance of that by
# luck is 2 / C(n + m, n) (the exact Mann-Whitney test at U = 0), under 1% from five steps each.
MIN_SEPARATED_STEPS = 5


def _separated(base: np.ndarray, new: np.ndarray) -> bool:
    """Every step of one run lies beyond every step of the other (``MIN_SEPARATED_STEPS`` each at least)."""
    if min(len(base), len(new)) < MIN_SEPARATED_STEPS:
        return False
    return bool(new.min() > base.max() or new.max() < base.min())


def _verdict(row: dict[str, Any]) -> str:
    """better | worse | noise | same | n/a | share_of_shorter_step | share_of_longer_step | different_work:
    one word per metric row, the page's and the exports'."""
    if row.get("base") is None or row.get("new") is None:
        return "n/a"
    if row.get("significant") is False and row.get("delta"):
        return "noise"
    if row.get("different_work"):
        return "different_work"  # two workloads: a difference, neither better nor worse
    if row.get("step"):
        return f"share_of_{row['step']}_step"  # moved with the step time (``_shares_of_a_changed_step``)
    words: dict[Any, str] = {True: "better", False: "worse"}
    return words.get(row.get("better"), "same")


def _title_message(finding: dict[str, Any]) -> dict[str, Any]:
    """The title's template and parameters, for a page or report in any language (pypto_core.i18n)."""
    title = (finding.get("messages") or {}).get("title")
    return {"messages": {"title": title}} if title else {}


def _report_dict(report: Report | dict[str, Any] | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return report.to_dict() if isinstance(report, Report) else report


def _side_summary(side: _Side) -> dict[str, Any]:
    meta = side.meta
    return {"format": meta.format, "source": meta.source, "device": side.sku.name,
            "cann_version": meta.cann_version, "simulated": meta.simulated,
            "kernel_count": side.n, "decode_steps": side.tokens}


def _buckets_ns_per_step(side: _Side, buckets: tuple[str, ...]) -> float | None:
    """The attribution's time in ``buckets``, ns per profiler step; None for a side without steps."""
    steps = _step_count(side)
    if side.attribution is None or not steps:
        return None
    return sum(side.attribution.run.buckets[b] for b in buckets) / steps


def _bucket_ms_per_step(side: _Side, name: str) -> float | None:
    """The time behind an attribution share (``ATTRIBUTION_SHARES``), ms a step; None for another metric
    or a side without steps."""
    buckets = ATTRIBUTION_SHARES.get(name)
    per_step = _buckets_ns_per_step(side, buckets) if buckets is not None else None
    return per_step / 1e6 if per_step is not None else None


def _step_count(side: _Side) -> int:
    """Profiler steps of a side (0 where the profile has none: one window over the device span)."""
    steps = side.attribution.profiler_steps() if side.attribution is not None else None
    return len(steps) if steps else 0


def _attribution_summary(side: _Side, report: dict[str, Any] | None = None) -> dict[str, Any]:
    """One side of the overall summary: where each step's time went (the attribution's own figures, per
    step and their mean), on which device and rank, and the device's peaks; ``ranks``: the same per rank,
    from the diagnosis report's rank breakdowns where the profile had several ranks, else this rank's."""
    meta = side.meta
    sku = side.sku
    device = {"name": sku.name, "vendor": side.vendor, "source": side.sku_source, "known": sku.known,
              "fp16_tflops": sku.fp16_tflops.value if sku.known else None,
              "hbm_gbps": sku.hbm_gbps.value if sku.known else None,
              "hbm_gib": sku.hbm_gib.value if sku.known else None,
              "cores": int(sku.ai_cores.value) if sku.known else None}
    out: dict[str, Any] = {"rank": meta.rank, "device": device, "workload": side.workload.kind,
                           "source": None, "steps": [], "per_step": None}
    a = side.attribution
    if a is None:
        return out
    steps = [_bucket_row(st.step_id, st.breakdown) for st in a.steps]
    n = max(len(steps), 1)
    mean = _bucket_row(None, a.run)
    for key in ("wall_ms", *[f"{b}_ms" for b in BUCKETS], "communication_overlapped_ms", "idle_ms"):
        mean[key] = mean[key] / n
    mean["compute_split_ms"] = {kk: v / n for kk, v in mean["compute_split_ms"].items()}
    mean["memcpy_split_ms"] = {kk: v / n for kk, v in mean["memcpy_split_ms"].items()}
    out.update(source=a.source, steps=steps, per_step=mean, step_count=len(steps))
    out["ranks"] = [_rank_row(meta.rank, a.run.to_dict(), len(steps))]
    breakdowns = ((report or {}).get("profile") or {}).get("rank_breakdowns") or []
    if breakdowns:
        out["ranks"] = [_rank_row(r.get("rank"), r.get("time_breakdown") or {}, len(r.get("steps") or []))
                        for r in breakdowns]
    return out


def _rank_row(rank: int | None, tb: dict[str, Any], steps: int) -> dict[str, Any]:
    """One rank's mean step from its attribution (``Breakdown.to_dict``): ms per step and shares."""
    wall = tb.get("wall_ns") or 0
    n = max(steps, 1)
    idle = sum(tb.get(b, 0) for b in ("sync_wait", "data_loading", "host_launch_bound", "idle_other"))
    row: dict[str, Any] = {"rank": rank, "steps": steps, "wall_ms": wall / 1e6 / n}
    for key, ns in (("compute", tb.get("compute", 0)),
                    ("communication_not_overlapped", tb.get("communication_not_overlapped", 0)),
                    ("memcpy", tb.get("memcpy", 0)), ("idle", idle)):
        row[f"{key}_ms"] = ns / 1e6 / n
        row[f"{key}_share"] = ns / wall if wall else None
    return row


def _bucket_row(step_id: int | None, b: Any) -> dict[str, Any]:
    wall = b.wall_ns or 1
    row: dict[str, Any] = {"step_id": step_id, "wall_ms": b.wall_ns / 1e6}
    for bucket in BUCKETS:
        row[f"{bucket}_ms"] = b.buckets[bucket] / 1e6
        row[f"{bucket}_share"] = b.buckets[bucket] / wall
    row["idle_ms"] = b.idle_ns / 1e6
    row["idle_share"] = b.idle_ns / wall
    row["communication_overlapped_ms"] = b.communication_overlapped_ns / 1e6
    row["compute_split_ms"] = {k: v / 1e6 for k, v in b.compute_split.items() if v}
    row["memcpy_split_ms"] = {k: v / 1e6 for k, v in b.memcpy_split.items() if v}
    return row


def compare_profiles(base: ProfileSource, candidate: ProfileSource, *, sku: str | None = None,
                     with_findings: bool = True) -> ComparisonResult:
    """Diagnose both profiles (for the findings' status) and compare them; given loaders, one profile is
    held at a time (each is diagnosed as it loads)."""
    if not with_findings:
        return ProfileComparer(base, candidate, sku=sku).compare()
    from pypto_core.rules import diagnose

    reports: list[Report] = []

    def diagnosed(source: ProfileSource) -> Callable[[], Profile]:
        def load() -> Profile:
            profile = source() if callable(source) else source
            reports.append(diagnose(profile, sku=sku))
            return profile
        return load

    comparer = ProfileComparer(diagnosed(base), diagnosed(candidate), sku=sku)
    comparer.base_report, comparer.new_report = (_report_dict(r) for r in reports)
    return comparer.compare()


# -- exports ----------------------------------------------------------------------------------------
def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if unit == "share":
            return f"{value * 100:.1f}%"
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def _md_cell(text: Any) -> str:
    """Op and kernel names are untrusted: escaped for Markdown (not HTML), at most ``MD_CELL_MAX`` chars."""
    return md_cell(text, MD_CELL_MAX)


def _noise_text(m: dict[str, Any]) -> str:
    noise = m.get("noise") or {}
    method = noise.get("method")
    if method in (None, "n/a"):
        return "n/a"
    if method == "single_value":
        return f"single value: ±{_fmt(noise.get('threshold'), m['unit'])}"
    separated = "; no step of one run overlaps the other" if noise.get("separated") else ""
    return (f"±{_fmt(noise.get('threshold'), m['unit'])} over {noise.get('base_samples')}/"
            f"{noise.get('new_samples')} steps{separated}")


def kernels_text(kernels: list[dict[str, Any]], more: int = 0) -> str:
    """``TransData ×2 + Conv2D``: the kernels one side launched for an aligned row, by count."""
    parts = []
    for k in kernels:
        n = k.get("count_per_unit", k["count"])
        parts.append(k["name"] + (f" ×{n:g}" if n != 1 else ""))
    return " + ".join(parts) + (f" + {more} more" if more else "")


_VERDICT_TEXT = {"share_of_shorter_step": "a share of a shorter step (see the times)",
                 "share_of_longer_step": "a share of a longer step (see the times)",
                 "different_work": "different work: not a before and after"}
_UNIT_TEXT = {"per_token": "µs per token", "per_step": "µs per step", "whole_run": "µs"}
_CSV_UNIT = {"per_token": "us/token", "per_step": "us/step", "whole_run": "us"}


def to_markdown(result: ComparisonResult | dict[str, Any]) -> str:
    """The comparison ready for a pull request: metrics with their noise test, the overall summary side by
    side, device time aligned by what the model did, op types and findings. Escaped for Markdown."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    lines = ["| Metric | Unit | Before | After | Δ | Better | Noise "
             "test |", "|---|---|---:|---:|---:|:---:|---|"]
    for m in data["metrics"]:
        if m["base"] is None and m["new"] is None:
            continue
        if m["unit"] == "share" and m["delta"] is not None:  # a share moves in percentage points
            delta = f"{100 * m['delta']:+.1f} pp"
        else:
            delta = "n/a" if m["delta_pct"] is None else f"{m['delta_pct']:+.1f}%"
        if m.get("significant") is False and m["delta"]:
            delta += " (noise)"
        better = {True: "✅", False: "❌", None: "—"}[m["better"]]
        verdict = (m.get("noise") or {}).get("verdict") or _verdict(m)
        noise = "n/a" if verdict == "n/a" else f"{_noise_text(m)} → {_VERDICT_TEXT.get(verdict, verdict)}"
        lines.append(f"| {m['name']} | {m['unit']} | {_fmt(m['base'], m['unit'])} "
                     f"| {_fmt(m['new'], m['unit'])} | {delta} | {better} | {_md_cell(noise)} |")
    lines += _summary_markdown(data.get("summary") or {})
    aligned = data.get("aligned") or []
    if aligned:
        al = data.get("alignment") or {}
        unit = _UNIT_TEXT.get(al.get("unit", ""), "µs")
        shares = [f"{side} {100 * al[side]['shares']['framework_op']:.1f}%"
                  for side in ("base", "new") if side in al]
        lines += ["", f"**Aligned by what the model did** ({unit}; device time in rows aligned by "
                  "framework op: "
                  + ", ".join(shares) + ")", "",
                  "| Aligned by | Key | Module | Before | After | Δ | Before kernels | After kernels |",
                  "|---|---|---|---:|---:|---:|---|---|"]
        for r in aligned[:30]:
            lines.append(f"| {r['aligned_by']} | {_md_cell(r['key'])} | {_md_cell(r.get('module') or '')} "
                         f"| {r['base_us']:,.1f} | {r['new_us']:,.1f} | {r['delta_us']:+,.1f} "
                         f"| {_md_cell(kernels_text(r['base_kernels'], r.get('base_kernels_more', 0)))} "
                         f"| {_md_cell(kernels_text(r['new_kernels'], r.get('new_kernels_more', 0)))} |")
    unit = _UNIT_TEXT.get(data["normalisation"], "µs")
    lines += ["", f"**Model blocks** ({unit})", "", "| Block | Before | After | Δ | Before ops | After ops |",
              "|---|---:|---:|---:|---|---|"]
    for b in data["blocks"]:
        before = ", ".join(readable(o) for o in b["base_op_types"])
        after = ", ".join(readable(o) for o in b["new_op_types"])
        lines.append(f"| {_md_cell(b['block'])} | {b['base_us']:,.1f} | {b['new_us']:,.1f} "
                     f"| {b['delta_us']:+,.1f} "
                     f"| {_md_cell(before)} | {_md_cell(after)} |")
    lines += ["", f"**Op types** ({unit}, largest changes)", "",
              "| Op type | Before | After | Δ | Count before | Count after "
              "|", "|---|---:|---:|---:|---:|---:|"]
    for o in data["ops"][:20]:
        lines.append(f"| {_md_cell(readable(str(o['op_type'])))} | {o['base_us']:,.1f} | {o['new_us']:,.1f} "
                     f"| {o['delta_us']:+,.1f} | {o['base_count']} | {o['new_count']} |")
    if data["findings"]:
        per_unit = "; in brackets, per profiler step" if data["normalisation"] != "whole_run" else ""
        lines += ["", f"**Findings** (savings over the whole run{per_unit})", "",
                  "| Rule | Status | Estimated saving (µs) | Measured saving (µs) |", "|---|---|---:|---:|"]
        for f in data["findings"]:
            status = f["status"] + (" (reduced)" if f.get("reduced") else "") + (
                " (its time a step did not grow: the step got shorter)" if f.get("threshold_only") else "")
            lines.append(f"| {f['rule']} | {status} | {_saving_cell(f, 'estimated_saving_us')} "
                         f"| {_saving_cell(f, 'measured_saving_us')} |")
    for w in data.get("warnings", []):
        lines.append(f"\n> {_md_cell(w)}")
    return "\n".join(lines) + "\n"


def _saving_cell(finding: dict[str, Any], key: str) -> str:
    """A finding's saving over the run, and in brackets per profiler step (``per_unit``)."""
    per = (finding.get("per_unit") or {}).get(key)
    return f"{_fmt(finding.get(key))} ({_fmt(per)})" if per is not None else _fmt(finding.get(key))


def _summary_markdown(summary: dict[str, Any]) -> list[str]:
    """Where each step's time went, side by side (the attribution's figures: ms per step and share)."""
    base, new = summary.get("base") or {}, summary.get("new") or {}
    if not base.get("per_step") and not new.get("per_step"):
        return []

    def device(side: dict[str, Any]) -> str:
        d = side.get("device") or {}
        if not d.get("known"):
            return f"{d.get('name', '?')} (peaks unknown)"
        return f"{d['name']}: {d['fp16_tflops']:g} TFLOPS fp16, {d['hbm_gbps']:g} GB/s HBM"

    def cell(side: dict[str, Any], key: str) -> str:
        step = side.get("per_step")
        if not step:
            return "n/a"
        return f"{step[key + '_ms']:,.3f} ms ({100 * step[key + '_share']:.1f}%)" if key != "wall" \
            else f"{step['wall_ms']:,.3f} ms"

    lines = ["", "**Where each step's time goes** (mean per step)", "", "| | Before | After |",
             "|---|---|---|",
             f"| device | {_md_cell(device(base))} | {_md_cell(device(new))} |",
             # a trace that names no rank (one process) reads "—", never Python's None
             f"| rank / steps | {_or_dash(base.get('rank'))} / {base.get('step_count', 0)} "
             f"| {_or_dash(new.get('rank'))} / {new.get('step_count', 0)} |",
             f"| workload | {base.get('workload')} | {new.get('workload')} |"]
    for key in ("wall", "compute", "communication_not_overlapped", "memcpy", "idle"):
        lines.append(f"| {key} | {cell(base, key)} | {cell(new, key)} |")
    return lines


def to_csv(result: ComparisonResult | dict[str, Any]) -> str:
    """One table: metric rows (with their noise test), op-type, block and aligned rows, with a `section`
    column; cells are CSV-quoted by the writer and guarded against formula injection."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "name", "unit", "base", "new", "delta", "delta_pct", "better", "significant",
                "base_count", "new_count", "noise_method", "noise_threshold", "base_samples", "new_samples",
                "verdict", "aligned_by", "module", "base_kernels", "new_kernels"])
    for m in data["metrics"]:
        noise = m.get("noise") or {}
        w.writerow(["metric", m["name"], m["unit"], m["base"], m["new"], m["delta"], m["delta_pct"],
                    m["better"], m.get("significant"), "", "", noise.get("method", ""),
                    noise.get("threshold", ""), noise.get("base_samples", ""), noise.get("new_samples", ""),
                    noise.get("verdict", "")])
    op_unit = _CSV_UNIT.get(data.get("normalisation", ""), "us")
    for section, key in (("block", "block"), ("op_type", "op_type")):
        for o in data["blocks" if section == "block" else "ops"]:
            w.writerow([section, csv_safe(o[key]), op_unit, o["base_us"], o["new_us"], o["delta_us"], "", "",
                        "", o["base_count"], o["new_count"]])
    unit = _CSV_UNIT.get((data.get("alignment") or {}).get("unit", ""), "us")
    for r in data.get("aligned") or []:
        w.writerow(["aligned", csv_safe(r["key"]), unit, r["base_us"], r["new_us"], r["delta_us"], "", "", "",
                    r["base_count"], r["new_count"], "", "", "", "", "", r["aligned_by"],
                    csv_safe(r.get("module") or ""),
                    csv_safe(kernels_text(r["base_kernels"], r.get("base_kernels_more", 0))),
                    csv_safe(kernels_text(r["new_kernels"], r.get("new_kernels_more", 0)))])
    for f in data["findings"]:
        w.writerow(["finding", f["rule"], "us", f.get("estimated_saving_us"), f.get("measured_saving_us"), "",
                    "", "", "", f["status"], ""])
    return buf.getvalue()


_FORMULA_START = ("=", "+", "-", "@")
_CONTROL_START = ("\t", "\r", "\n")


def csv_safe(text: Any) -> str:
    """Spreadsheet formula injection (OWASP CSV Injection): a cell starting with = + - @, a tab, CR or LF, or
    with = + - @ after leading blanks, is shown as text (a leading quote), never run as a formula."""
    s = str(text)
    if s[:1] in _FORMULA_START + _CONTROL_START or s.lstrip(" \t\r\n")[:1] in _FORMULA_START:
        return "'" + s
    return s


# The headline metrics a regression is judged on: decode's, and a training or other stepped run's step time.
REGRESSION_METRICS = ("per_token_latency_ms", "tokens_per_s", "prefill_ms", "step_time_ms")


def regression(result: ComparisonResult | dict[str, Any], max_regression_pct: float) -> list[str]:
    """The headline metrics that got worse by more than ``max_regression_pct`` and outside the noise, in
    English (``pypto check``, the API's ``lines``)."""
    return [m.render() for m in regression_messages(result, max_regression_pct)]


def regression_messages(result: ComparisonResult | dict[str, Any],
                        max_regression_pct: float) -> list[Message]:
    """``regression``'s lines as messages, for a page in its reader's language."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    worse = []
    for m in data["metrics"]:
        if m["name"] not in REGRESSION_METRICS:
            continue
        if m["better"] is False and m["delta_pct"] is not None and abs(m["delta_pct"]) > max_regression_pct:
            worse.append(msg("{metric}: {base} -> {new} {unit} ({delta:+.1f}%, limit {limit:g}%)",
                             metric=m["name"], base=_fmt(m["base"]), new=_fmt(m["new"]), unit=m["unit"],
                             delta=m["delta_pct"], limit=max_regression_pct))
    return worse
