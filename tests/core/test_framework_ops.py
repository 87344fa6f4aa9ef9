"""Each kernel's framework op, through the trace's own links (issue 22)."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from pypto_core.formats import open_profile
from pypto_core.framework_ops import VIA_COLLECTIVE_ORDER, _queue_pairs, host_parents
from pypto_core.graph import OperatorCallGraph
from tests.paths import SAMPLES

NPU = SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt"
GPU = SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz"
needs_samples = pytest.mark.skipif(not NPU.exists(),
                                   reason="the real samples (../shared/samples) are not here")


def test_host_parents_nests_by_thread_and_time() -> None:
    # thread 1: A [0,100) > B [10,50) > C [20,30); D [60,90) in A; thread 2: E [15,25) is nobody's child
    tid = np.array([1, 1, 1, 1, 2])
    start = np.array([0, 10, 20, 60, 15])
    end = np.array([100, 50, 30, 90, 25])
    assert host_parents(tid, start, end).tolist() == [-1, 0, 1, 0, -1]


@needs_samples
def test_task_queue_pairing_reproduces_the_traces_enqueue_to_dequeue_flows() -> None:
    """torch_npu writes enqueue_to_dequeue flows into trace_view.json; the canonical tables do not keep them,
    and the FIFO pairing must give the same Enqueue for every Dequeue that launched a kernel."""
    events = json.loads((NPU / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    slices = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("enqueue", "dequeue")]

    def ns(ts: str) -> int:  # "1736412474721123.620" µs, exactly (a float loses the ns digits)
        whole, _, frac = str(ts).partition(".")
        return int(whole) * 1000 + int((frac + "000")[:3])

    def enclosing(flow_end: dict, cat: str) -> tuple[str, int]:
        ts = ns(flow_end["ts"])
        for e in slices:
            if (e["cat"] == cat and e["tid"] == flow_end["tid"]
                    and ns(e["ts"]) <= ts <= ns(e["ts"]) + e["dur"] * 1000):
                return e["name"], ns(e["ts"])
        raise AssertionError(flow_end)

    ends = collections.defaultdict(dict)
    for e in events:
        if e.get("cat") == "async_task_queue" and e.get("ph") in ("s", "f"):
            ends[e["id"]][e["ph"]] = e
    truth = {enclosing(p["f"], "dequeue")[1]: enclosing(p["s"], "enqueue")[1] for p in ends.values()}
    assert len(truth) == 159

    host = open_profile(NPU).host_ops
    names = host["name"].to_pylist()
    distinct = sorted(set(names))
    codes = np.array([distinct.index(n) for n in names])
    start = np.array(host["start_ns"].to_pylist(), np.int64)
    pairs = _queue_pairs(distinct, codes, start)
    paired = {int(start[d]): int(start[e]) for d, e in enumerate(pairs) if e >= 0}
    assert len(paired) == len(truth)
    assert paired == truth


@needs_samples
def test_npu_kernels_reach_their_framework_op() -> None:
    g = OperatorCallGraph(open_profile(NPU))
    fo = g.framework_ops
    assert (fo.op >= 0).all()  # every task of the step, collectives included
    names = g.kernels["name"].to_pylist()
    ops = {names[i]: fo.op_of(i) for i in range(g.n)}
    assert ops["Conv2D1"] == "aten::conv2d" and ops["trans_TransData_0"] == "aten::conv2d"
    hcom = [i for i, n in enumerate(names) if n.startswith("hcom_allReduce")]
    assert len(hcom) == 4 and {fo.op_of(i) for i in hcom} == {"c10d::allreduce_"}
    assert all(fo.via[i] == VIA_COLLECTIVE_ORDER for i in hcom)
    backward = {fo.op_of(i) for i, n in enumerate(names) if n.startswith("Conv2DBackprop")}
    assert backward == {"ConvolutionBackward0"}


@needs_samples
def test_gpu_kernels_reach_their_framework_op() -> None:
    g = OperatorCallGraph(open_profile(GPU))
    fo = g.framework_ops
    assert (fo.op >= 0).all()
    names = g.kernels["name"].to_pylist()
    nccl = {fo.op_of(i) for i, n in enumerate(names) if n.startswith("ncclKernel_AllReduce")}
    assert nccl == {"c10d::allreduce_"}
    # the outermost framework op, not the cuDNN-specific one inside it
    assert "aten::cudnn_convolution" not in fo.op_names and "aten::conv2d" in fo.op_names


@needs_samples
def test_kernels_linked_only_to_their_runtime_call_reach_the_op_around_it() -> None:
    """Older Kineto traces give a kernel no cpu_op id, only its cudaLaunchKernel's correlation: the call is
    inside its framework op on the calling thread, and the stack walk starts from it."""
    p = open_profile(SAMPLES / "kineto" / "trace_diff_pair" / "control.json.gz")
    assert p.flows["host_index"].null_count == p.flows.num_rows  # no host links at all in this trace
    g = OperatorCallGraph(p)
    fo = g.framework_ops
    linked = fo.op >= 0
    assert linked.mean() > 0.5
    # a copy kernel's op, checked by hand: its launch call's enclosing aten op on the same thread
    api, host = p.api_calls, p.host_ops
    api_of = dict(zip(p.flows["kernel_index"].to_pylist(), p.flows["api_index"].to_pylist()))
    names = g.kernels["name"].to_pylist()
    k = next(i for i, n in enumerate(names) if n.startswith("Memcpy HtoD") and linked[i])
    call = api.slice(api_of[k], 1).to_pylist()[0]
    around = [h for h in host.to_pylist() if h["tid"] == call["tid"] and h["start_ns"] <= call["start_ns"]
              and h["start_ns"] + h["dur_ns"] >= call["start_ns"] + call["dur_ns"]
              and h["name"].startswith("aten::")]
    assert fo.op_of(k) == min(around, key=lambda h: h["start_ns"])["name"]
