"""How the device tasks were launched: one host call per task (eager mode), or many tasks from one call (a
captured graph replayed: CUDA/HIP graphs, an ACL graph, a GE model run by TorchAir).

It matters to the advice: "capture the step as a graph" is wrong for a run that already does, as LLM serving
usually does for decode (vLLM's CUDA graphs, vLLM-Ascend's ACL graph). There the idle time between tasks is
the host's work between two graph replays (scheduling, input preparation, sampling), which only overlapping or
cutting that work removes.

A launch call is a graph's when it issued ``GRAPH_MIN_TASKS`` tasks or more, or when its name is a graph
launch (``GRAPH_LAUNCH_NAMES``) for the traces whose graph tasks are linked to it one by one. The links are
the profile's flows to runtime calls (``api_index``), else the correlation ids tasks share with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.attribution import HOST_SLICE_ROWS
from pypto_core.grouping import text_codes, value_flags
from pypto_core.profile import Profile

# Eager launch calls issue one task each: cudaLaunchKernel, cudaMemcpyAsync and torch_npu's Node@launch do
# in every real trace in the samples (1 task per call, 0 exceptions), while the real CUDA-graph trace's
# cudaGraphLaunch calls issued 339-502 tasks each. A margin over small fused launches [INFERRED].
GRAPH_MIN_TASKS = 8
# The runtime calls that replay a captured graph: CUDA and HIP graphs, CANN's model runtime instance (ACL
# graph, aclmdlRIExecuteAsync) and model execution (GE graphs, TorchAir).
GRAPH_LAUNCH_NAMES = re.compile(r"(cuda|hip)GraphLaunch|aclmdlRIExecute|aclmdlExecute|ModelExecute", re.I)
# most kernels from graph replays: the run (or the step) is the captured one [INFERRED]
GRAPH_REPLAY_MIN_SHARE = 0.5

# What ``launches`` reads (a ``profile.ColumnSet``).
LAUNCH_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "kernels": ("correlation_id",), "flows": ("kernel_index", "api_index"),
    "api_calls": ("name", "correlation_id", "start_ns"),
}


def unread_correlation_ids(profile: Profile) -> dict[str, tuple[str, ...]]:
    """The correlation-id columns no link of this profile reads: where flows link tasks to host ops, the
    call graph takes them (``OperatorCallGraph.links``), not the host ops' ids; where they also link tasks to
    runtime calls (``api_index``), the launches and the replay's issue times take them, not the tasks' or
    the calls' ids; where there is no host call at all, nothing reads the tasks' ids. A diagnosis done with
    the rows lets them go: 8 bytes a task, host op and call where the profile fills them (a 5 GB simulated
    folder fills only its calls': 17 MB)."""
    flows = profile.flows
    if not flows.num_rows:
        # no host call to link a task to (a kernel table alone): the tasks' ids are read by nothing (a
        # 15.7 M-kernel table's held 120 MB)
        alone = not profile.host_ops.num_rows and not profile.api_calls.num_rows
        return {"kernels": ("correlation_id",)} if alone else {}
    unread: dict[str, tuple[str, ...]] = {"host_ops": ("correlation_id",)}
    if "api_index" in flows.column_names:
        unread.update({"kernels": ("correlation_id",), "api_calls": ("correlation_id",)})
    return unread


@dataclass(frozen=True)
class Launches:
    """Per kernel row whether a graph launch issued it, and how many graph launches the run made."""

    from_graph: np.ndarray  # bool per kernel row
    graph_calls: int  # launch calls that replayed a graph (by their task count or their name)
    # when each of those calls started (ns; a call without a start is left out), in the calls' table order
    graph_call_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def share(self, mask: np.ndarray | None = None) -> float:
        """Share of the kernels (of ``mask``'s) that a graph launch issued."""
        rows = self.from_graph if mask is None else self.from_graph[mask]
        return float(rows.mean()) if len(rows) else 0.0


def launches(profile: Profile) -> Launches:
    """The kernels a graph launch issued (see the module docstring): flows to runtime calls where the profile
    has them, else the correlation ids kernels share with runtime calls."""
    n = profile.kernels.num_rows
    api = profile.api_calls
    if not n or not api.num_rows:
        return Launches(np.zeros(n, bool), 0)
    named = _named_graph_calls(api)
    links = _call_links(profile)
    if links is None:
        return Launches(np.zeros(n, bool), int(named.sum()), _starts(api, named))
    tasks = np.zeros(api.num_rows, np.int32)
    for _, call in links():
        tasks += np.bincount(call, minlength=api.num_rows).astype(np.int32)
    graph_call = (tasks >= GRAPH_MIN_TASKS) | named
    from_graph = np.zeros(n, bool)
    for kernel, call in links():
        from_graph[kernel[graph_call[call]]] = True
    return Launches(from_graph, int(graph_call.sum()), _starts(api, graph_call))


def _starts(api: pa.Table, calls: np.ndarray) -> np.ndarray:
    """The start times of the ``calls`` (a mask over the API rows) that have one."""
    if not calls.any():
        return np.zeros(0, np.int64)
    start = api["start_ns"].take(pa.array(np.flatnonzero(calls)))
    return np.asarray(pc.drop_null(start).to_numpy(zero_copy_only=False), np.int64)


def copies_before_replays(profile: Profile, launched: Launches, copies: np.ndarray) -> np.ndarray:
    """Per kernel row: one of ``copies`` launched in the run of copies right before a graph launch, with
    nothing else launched in between: a replay's inputs copied into the graph's own buffers (torch.compile's
    CUDA graphs copy every input that is not a static address). Launch calls in host start order."""
    n = profile.kernels.num_rows
    out = np.zeros(n, bool)
    api = profile.api_calls
    if not launched.graph_calls or not copies.any() or not api.num_rows or "start_ns" not in api.column_names:
        return out
    links = _call_links(profile)
    if links is None:
        return out
    call_of = np.full(n, -1, np.int64)
    for kernel, call in links():
        call_of[kernel] = call
    # per launching call: 2 a graph launch, 1 it launched copies only, 0 anything else
    graph_call = _named_graph_calls(api)
    graph_call[call_of[launched.from_graph & (call_of >= 0)]] = True
    linked = call_of >= 0
    launching = np.zeros(api.num_rows, bool)
    launching[call_of[linked]] = True
    not_copy = np.zeros(api.num_rows, bool)
    not_copy[call_of[linked & ~copies]] = True
    label = np.where(graph_call, 2, np.where(not_copy, 0, 1))
    rows = np.flatnonzero(launching | graph_call)
    start = pc.fill_null(api["start_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = rows[np.argsort(start[rows], kind="stable")]
    seq = label[rows]
    # the next call that is not a copy, after each position: a graph launch makes the copies before it its
    # inputs
    breaks = np.flatnonzero(seq != 1)
    nxt = np.searchsorted(breaks, np.arange(len(seq)), side="right")
    feeds = np.zeros(len(seq), bool)
    has_next = nxt < len(breaks)
    feeds[has_next] = seq[breaks[nxt[has_next]]] == 2
    feeds &= seq == 1
    fed_call = np.zeros(api.num_rows, bool)
    fed_call[rows[feeds]] = True
    out[linked] = fed_call[call_of[linked]] & copies[linked]
    return out


def _call_links(profile: Profile) -> Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]] | None:
    """(kernel rows, runtime call rows) pairs, as often as called: the flows to runtime calls where the
    profile has them, else the correlation ids kernels share with runtime calls; None without either."""
    n, api, flows = profile.kernels.num_rows, profile.api_calls, profile.flows
    if flows.num_rows and "api_index" in flows.column_names:
        return partial(_flow_links, flows, n, api.num_rows)  # a slice of flows at a time, each time
    if "correlation_id" in profile.kernels.column_names and "correlation_id" in api.column_names:
        linked = [_correlation_links(profile.kernels["correlation_id"], api["correlation_id"])]
        return linked.__iter__
    return None


def _flow_links(flows: pa.Table, n: int, calls: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(kernel row, runtime call row) of each flow that links the two, a slice of flows at a time (the
    flows outnumber the kernels; their whole columns as int64 would take 70 MB on a 5 GB folder)."""
    for at in range(0, flows.num_rows, HOST_SLICE_ROWS):
        part = flows.slice(at, HOST_SLICE_ROWS)
        kernel = pc.fill_null(part["kernel_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
        call = pc.fill_null(part["api_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
        ok = (kernel >= 0) & (kernel < n) & (call >= 0) & (call < calls)
        yield kernel[ok], call[ok]


def _correlation_links(kernel_ids: pa.ChunkedArray,
                       call_ids: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel row, runtime call row) of each kernel whose correlation id a runtime call carries."""
    kc = pc.fill_null(kernel_ids, -1).to_numpy(zero_copy_only=False)
    ac = pc.fill_null(call_ids, -2).to_numpy(zero_copy_only=False)
    order = np.argsort(ac, kind="stable")
    j = np.clip(np.searchsorted(ac[order], kc), 0, len(order) - 1)
    hit = ac[order][j] == kc
    return np.nonzero(hit)[0], order[j[hit]]


def _named_graph_calls(api: pa.Table) -> np.ndarray:
    """Per runtime call: its name is a graph launch (worked out once per distinct name)."""
    codes, values = text_codes(api["name"])
    return np.asarray(value_flags(values, GRAPH_LAUNCH_NAMES.search)[codes])
