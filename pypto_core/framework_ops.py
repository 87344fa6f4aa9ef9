"""Which framework op each device task ran for: the ``aten::`` / ``npu::`` / ``c10d::`` op (or the autograd
node of a backward) that the model called, found through the trace's own links.

This is what two runs on different devices share: a convolution is ``aten::conv2d`` on an NPU and on a GPU,
while its kernels (TransData + Conv2D against cuDNN's xmma kernels) never have the same names. The
comparison aligns runs by it (``compare.py``), as msprof-analyze's operator compare does.

A kernel reaches its framework op in three hops, each from the profile's own records:

1. its launching host op: the flow or correlation id (``OperatorCallGraph.links``: Kineto ``ac2g``,
   torch_npu ``async_npu``); a collective the trace does not link (torch_npu writes no flow to HCCL
   tasks) is paired in issue order with the host calls that issued collectives, since collectives on a
   stream run in the order they were issued;
2. through torch_npu's task queue: a ``Dequeue@X`` slice on the queue's thread is the ``Enqueue`` slice on
   the calling thread, in order (the queue is first in, first out);
3. up the calling thread's stack (slices nested by time on one thread) to the outermost framework op:
   ``aten::conv2d`` rather than ``aten::cudnn_convolution`` or ``npu::npu_convolution``, which differ
   between vendors; for a backward, the autograd node (``ConvolutionBackward0``). Wrappers that are not
   ops of the model (``torch::autograd::AccumulateGrad``, ``ProfilerStep#N``) are stepped over.

All of it is columnar (numpy over the host-op rows); the stack walk is pointer jumping, one round per
level of nesting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.profile import Profile

# The op namespaces of PyTorch, torch_npu and distributed: a slice named so is one op of the model.
FRAMEWORK_OP = re.compile(r"^(aten|npu|torch_npu|c10d|_c10d_functional|c10d_functional|_npu|npu_inference)::")
# An autograd node's evaluation: the node names the backward op (a namespaced node is a wrapper).
_EVALUATE = "autograd::engine::evaluate_function: "
AUTOGRAD_NODE = re.compile(r"^autograd::engine::evaluate_function: ([A-Za-z_][A-Za-z0-9_]*)$")
# Host calls that issue a collective: torch_npu's task-queue dequeue of an HCCL call, else the c10d op.
COLLECTIVE_DEQUEUE = re.compile(r"^Dequeue@(Hccl|hcom)", re.I)
COLLECTIVE_CALL = re.compile(r"^c10d::|^_?c10d_functional::|^record_param_comms$")
NOT_A_SCOPE = re.compile(r"^ProfilerStep#|^Enqueue$|^Dequeue@|^## .* ##$")

# How a kernel was linked to its framework op (``FrameworkOps.via``).
VIA_NONE, VIA_LINK, VIA_QUEUE, VIA_COLLECTIVE_ORDER = 0, 1, 2, 3
VIA_NAMES = ("none", "link", "task_queue", "collective_order")
# What ``framework_ops`` reads besides the links it is given (a ``profile.ColumnSet``).
FRAMEWORK_OPS_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "host_ops": ("name", "tid", "start_ns", "dur_ns"), "api_calls": ("tid", "start_ns", "dur_ns"),
    "flows": ("api_index", "kernel_index"),
}
_MAX_DEPTH = 256  # nesting deeper than this is not a call stack (bounded work on a malformed trace)


@dataclass
class FrameworkOps:
    """Per kernel row: its framework op and the scope it was called from (codes into the label lists,
    -1 where unknown), and how it was linked (``VIA_*``)."""

    op: np.ndarray
    op_names: list[str]
    scope: np.ndarray
    scope_names: list[str]
    via: np.ndarray

    def op_of(self, kernel: int) -> str | None:
        code = int(self.op[kernel])
        return self.op_names[code] if code >= 0 else None


def _column(table: pa.Table, name: str, fill: int) -> np.ndarray:
    values: np.ndarray = pc.fill_null(table[name], fill).to_numpy(zero_copy_only=False).astype(np.int64)
    return values


def host_parents(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per host slice, the innermost slice on its thread that encloses it, or -1 (pointer jumping)."""
    n = len(tid)
    parent = np.full(n, -1, np.int64)
    if n < 2:
        return parent
    order = np.lexsort((-(end - start), start, tid))  # by thread, start, longest first: a parent precedes
    t, s, e = tid[order], start[order], end[order]
    cand = np.arange(n) - 1
    cand[1:][t[1:] != t[:-1]] = -1
    cand[0] = -1
    for _ in range(_MAX_DEPTH):
        ok = cand >= 0
        c = np.clip(cand, 0, None)
        # a candidate on the same thread that starts no later and ends no earlier encloses; else jump to
        # the candidate's own candidate (siblings in between ended before this slice began)
        encloses = ok & (t[c] == t) & (s[c] <= s) & (e[c] >= e)
        todo = ok & ~encloses
        if not todo.any():
            break
        cand = np.where(todo, cand[c], cand)
    c = np.clip(cand, 0, None)
    cand = np.where((cand >= 0) & (t[c] == t) & (s[c] <= s) & (e[c] >= e), cand, -1)
    parent[order] = np.where(cand >= 0, order[np.clip(cand, 0, None)], -1)
    return parent


def _queue_pairs(names: list[str], codes: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per host slice: for a ``Dequeue@X`` slice, the ``Enqueue`` slice it took off the queue (-1 else).

    First in, first out: the i-th dequeue is the i-th enqueue; a dequeue that starts before the next
    unpaired enqueue was enqueued before the profile began and stays unpaired [INFERRED from the sample's
    enqueue_to_dequeue flows, which this pairing reproduces]."""
    out = np.full(len(codes), -1, np.int64)
    enq_codes = [i for i, v in enumerate(names) if v == "Enqueue"]
    deq_codes = [i for i, v in enumerate(names) if v.startswith("Dequeue@")]
    if not enq_codes or not deq_codes:
        return out
    enq = np.flatnonzero(np.isin(codes, enq_codes))
    deq = np.flatnonzero(np.isin(codes, deq_codes))
    enq = enq[np.argsort(start[enq], kind="stable")]
    deq = deq[np.argsort(start[deq], kind="stable")]
    # dequeues that began before the first enqueue have theirs outside the profile
    skip = int(np.searchsorted(start[deq], start[enq[0]], side="left"))
    deq = deq[skip:]
    m = min(len(enq), len(deq))
    out[deq[:m]] = enq[:m]
    return out


def _in_order(kernels: np.ndarray, k_start: np.ndarray, calls: np.ndarray, c_start: np.ndarray) -> np.ndarray:
    """Pair kernels with the calls that issued them, in issue order: i-th with i-th where the counts agree,
    else each kernel with the last call that began before it."""
    k = kernels[np.argsort(k_start[kernels], kind="stable")]
    c = calls[np.argsort(c_start[calls], kind="stable")]
    out = np.full(len(k_start), -1, np.int64)
    if not len(k) or not len(c):
        return out
    if len(k) == len(c):
        out[k] = c
        return out
    j = np.searchsorted(c_start[c], k_start[k], side="right") - 1
    ok = j >= 0
    out[k[ok]] = c[j[ok]]
    return out


def framework_ops(profile: Profile, links: pa.Table, collective: np.ndarray,
                  k_start: np.ndarray) -> FrameworkOps:
    """Each kernel's framework op (see the module docstring). ``links``: host_index -> kernel_index
    (``OperatorCallGraph.links``); ``collective``: bool per kernel, a collective task; ``k_start``: ns."""
    n = len(k_start)
    host = profile.host_ops
    if not n or not host.num_rows:
        # no host op to tell: -1 for every kernel, in a byte a kernel (in 8, a kernel table's comparison
        # held 250 MB of them at its peak)
        return FrameworkOps(np.full(n, -1, np.int8), [], np.full(n, -1, np.int8), [], np.zeros(n, np.int8))
    enc = pc.fill_null(host["name"], "").combine_chunks().dictionary_encode()
    names: list[str] = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    tid = _column(host, "tid", -1)
    h_start = _column(host, "start_ns", 0)
    h_end = h_start + np.maximum(_column(host, "dur_ns", 0), 0)

    # 1. the launching host op of each kernel
    launcher = np.full(n, -1, np.int64)
    via = np.zeros(n, np.int8)
    if links.num_rows:
        hi = _column(links, "host_index", -1)
        ki = _column(links, "kernel_index", -1)
        ok = (hi >= 0) & (hi < host.num_rows) & (ki >= 0) & (ki < n)
        hi, ki = hi[ok], ki[ok]
        first = np.unique(ki, return_index=True)[1]  # the first link of a kernel is its launch
        launcher[ki[first]] = hi[first]
        via[ki[first]] = VIA_LINK
    # a kernel linked only to its runtime call (cudaLaunchKernel: older Kineto gives kernels no cpu_op id):
    # the call sits inside its framework op on the calling thread, so it joins the stack walk as a slice
    api, flows = profile.api_calls, profile.flows
    if api.num_rows and "api_index" in flows.column_names and (launcher < 0).any():
        ai, ki = _column(flows, "api_index", -1), _column(flows, "kernel_index", -1)
        ok = (ai >= 0) & (ai < api.num_rows) & (ki >= 0) & (ki < n)
        ai, ki = ai[ok], ki[ok]
        first = np.unique(ki, return_index=True)[1]
        ai, ki = ai[first], ki[first]
        need = launcher[ki] < 0
        ai, ki = ai[need], ki[need]
        if len(ki):
            rows, inverse = np.unique(ai, return_inverse=True)
            a_start = _column(api, "start_ns", 0)[rows]
            base = len(codes)
            tid = np.concatenate([tid, _column(api, "tid", -1)[rows]])
            h_start = np.concatenate([h_start, a_start])
            h_end = np.concatenate([h_end, a_start + np.maximum(_column(api, "dur_ns", 0)[rows], 0)])
            codes = np.concatenate([codes, np.full(len(rows), len(names), np.int64)])
            names = names + ["\x00runtime call"]  # never a framework op nor a scope name
            launcher[ki] = base + inverse.reshape(-1)
            via[ki] = VIA_LINK
    queue = _queue_pairs(names, codes, h_start)
    orphan = np.flatnonzero(collective & (launcher < 0))
    if len(orphan):
        deq_codes = [i for i, v in enumerate(names) if COLLECTIVE_DEQUEUE.search(v)]
        calls = np.flatnonzero(np.isin(codes, deq_codes))
        if not len(calls):
            call_codes = [i for i, v in enumerate(names) if COLLECTIVE_CALL.search(v)]
            calls = np.flatnonzero(np.isin(codes, call_codes))
        paired = _in_order(orphan, k_start, calls, h_start)
        hit = orphan[paired[orphan] >= 0]
        launcher[hit] = paired[hit]
        via[hit] = VIA_COLLECTIVE_ORDER

    # 2. through the task queue: a dequeue stands for its enqueue on the calling thread
    linked = launcher >= 0
    queued = np.zeros(n, bool)
    queued[linked] = queue[launcher[linked]] >= 0
    launcher[queued] = queue[launcher[queued]]
    via[queued & (via == VIA_LINK)] = VIA_QUEUE

    # 3. up the stack to the outermost framework op
    is_op_name = np.array([bool(FRAMEWORK_OP.search(v) or AUTOGRAD_NODE.search(v)) for v in names], bool)
    is_op = is_op_name[codes] if len(names) else np.zeros(len(codes), bool)
    parent = host_parents(tid, h_start, h_end)
    top = np.where(is_op, np.arange(len(codes)), -1)
    cur = parent.copy()
    for _ in range(_MAX_DEPTH):
        live = cur >= 0
        if not live.any():
            break
        c = np.clip(cur, 0, None)
        top = np.where(live & is_op[c], cur, top)
        cur = np.where(live, parent[c], -1)
    # the scope a top op was called from: its innermost enclosing slice that names a place in the model
    not_scope = np.array([bool(NOT_A_SCOPE.search(v)) for v in names], bool)[codes] if len(names) else is_op
    scope = np.where(top >= 0, parent[np.clip(top, 0, None)], -1)
    for _ in range(_MAX_DEPTH):
        skip = (scope >= 0) & not_scope[np.clip(scope, 0, None)]
        if not skip.any():
            break
        scope = np.where(skip, parent[np.clip(scope, 0, None)], scope)

    k_top = np.where(launcher >= 0, top[np.clip(launcher, 0, None)], -1)
    k_scope = np.where(k_top >= 0, scope[np.clip(k_top, 0, None)], -1)
    via = np.where(k_top >= 0, via, VIA_NONE).astype(np.int8)
    op_codes, op_names = _labels(k_top, codes, names, _op_label)
    scope_codes, scope_names = _labels(k_scope, codes, names, _scope_label)
    return FrameworkOps(op_codes, op_names, scope_codes, scope_names, via)


def _op_label(name: str) -> str:
    node = AUTOGRAD_NODE.search(name)
    return node.group(1) if node else name


def _scope_label(name: str) -> str:
    """A scope as people name it: an autograd wrapper by its node (``torch::autograd::AccumulateGrad``)."""
    return name.removeprefix(_EVALUATE)


def _labels(rows: np.ndarray, codes: np.ndarray, names: list[str],
            label: Callable[[str], str]) -> tuple[np.ndarray, list[str]]:
    """Host rows (-1: none) as codes into the distinct labels of their names."""
    out = np.full(len(rows), -1, np.int64)
    ok = rows >= 0
    if not ok.any():
        return out, []
    text = [label(names[c]) for c in range(len(names))]
    distinct = sorted(set(text[c] for c in np.unique(codes[rows[ok]])))
    index = {v: i for i, v in enumerate(distinct)}
    lut = np.array([index.get(v, -1) for v in text], np.int64)
    out[ok] = lut[codes[rows[ok]]]
    return out, distinct
