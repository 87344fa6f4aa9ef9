"""Kernels launched from captured graphs (pypto_core.launches), and the advice a run that already captures
its step gets: on the real CUDA-graph trace in the samples, and on two traces of one host-bound step, one
launched kernel by kernel and one from a captured graph."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pypto_core import formats
from pypto_core.graph import OperatorCallGraph
from pypto_core.rules import diagnose_group
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

pytestmark = pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)

PAIR = SAMPLES / "kineto" / "trace_diff_pair"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def test_the_real_cuda_graph_trace_names_its_graph_launched_tasks() -> None:
    """The trace_diff pair's new run replays 12 CUDA graphs: the tasks found from the graph are exactly the
    device tasks sharing a cudaGraphLaunch's correlation id, counted here from the raw JSON."""
    events = json.loads(gzip.open(PAIR / "test.json.gz").read())["traceEvents"]
    launches = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    from_graph = sum(1 for e in events if e.get("cat") in DEVICE_CATS
                     and e.get("args", {}).get("correlation") in launches)
    graph = OperatorCallGraph(formats.open_profiles(PAIR / "test.json.gz").primary())
    assert graph.launches.graph_calls == len(launches) == 12
    assert int(graph.launches.from_graph.sum()) == from_graph == 5046
    assert 0.3 < graph.launches.share() < 0.35  # the rest of the step still runs eagerly


@pytest.mark.parametrize("sample", ["kineto/trace_diff_pair/control.json.gz", "kineto/a100_nccl_2rank",
                                    "ascend_pt/cnn_8npu_text_level1/rank0_ascend_pt",
                                    "ascend_pt/cnn_8npu_db_level1/rank0_ascend_pt"])
def test_eager_runs_launch_nothing_from_a_graph(sample: str) -> None:
    graph = OperatorCallGraph(formats.open_profiles(SAMPLES / sample).primary())
    assert graph.launches.graph_calls == 0 and not graph.launches.from_graph.any()


def _host_bound_trace(path: Path, *, captured: bool, steps: int = 20, kernels: int = 60,
                      host_work: str = "schedule_and_prepare_inputs") -> Path:
    """A GPU trace of a host-bound loop: each step the host works 3 ms (scheduling, input preparation),
    then launches 60 short kernels, from one cudaGraphLaunch (``captured``) or one cudaLaunchKernel each."""
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    corr = 1
    t = 1_000_000.0
    for step in range(steps):
        step_start = t
        events.append({"ph": "X", "cat": "cpu_op", "name": host_work, "pid": 1, "tid": 1,
                       "ts": t, "dur": 3000.0, "args": {}})
        t += 3000.0
        launch_at, device_at = t, t + 10.0
        calls = 1 if captured else kernels
        for c in range(calls):
            cid = corr + c
            events.append({"ph": "X", "cat": "cuda_runtime",
                           "name": "cudaGraphLaunch" if captured else "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": launch_at + 4.0 * c, "dur": 3.0, "args": {"correlation": cid}})
            events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": cid, "pid": 1, "tid": 1,
                           "ts": launch_at + 4.0 * c})
        for k in range(kernels):
            cid = corr if captured else corr + k
            ts = device_at + (20.0 * k if captured else 4.0 * k + 16.0 * k)
            events.append({"ph": "X", "cat": "kernel", "name": f"void fused_kernel_{k % 7}<float>()",
                           "pid": 0, "tid": 7, "ts": ts, "dur": 16.0,
                           "args": {"correlation": cid, "stream": 7, "device": 0}})
            events.append({"ph": "f", "bp": "e", "cat": "ac2g", "name": "ac2g", "id": cid, "pid": 0, "tid": 7,
                           "ts": ts})
        corr += calls
        t = device_at + 20.0 * kernels + 50.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                       "tid": 1, "ts": step_start, "dur": t - step_start, "args": {}})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


@pytest.mark.parametrize("captured", [False, True])
def test_a_run_that_already_captures_its_step_is_not_told_to_capture_it(tmp_path: Path,
                                                                         captured: bool) -> None:
    group = formats.open_profiles(_host_bound_trace(tmp_path / "trace.json", captured=captured))
    report = diagnose_group(group)
    (finding,) = [f for f in report.findings if f.rule == "host_bound_gaps"]
    assert finding.evidence["host_launch_bound_share"] > 0.5
    if captured:
        assert finding.evidence["graph_launched_share"] == 1.0 and finding.evidence["graph_launches"] == 20
        assert "Capturing the step again does not remove these gaps" in finding.description
        assert "Capture the step with CUDA Graphs" not in finding.description
        assert "already run from captured graphs" in finding.saving_model
        assert finding.details["graph_mode"] is False
    else:
        assert finding.evidence["graph_launched_share"] == 0.0 and finding.evidence["graph_launches"] == 0
        assert "Capture the step with CUDA Graphs" in finding.description
        assert finding.details["graph_mode"] is True


def test_without_flows_the_correlation_ids_tell_the_graph_launched_tasks() -> None:
    """A profile whose reader kept no flows: tasks and runtime calls sharing a correlation id are linked, and
    a call that issued 8 tasks is a graph's whatever its name, while a named graph launch issuing fewer is
    one too."""
    import pyarrow as pa

    from pypto_core.launches import GRAPH_MIN_TASKS, launches
    from pypto_core.profile import Profile, ProfileMeta

    corr = [1] * GRAPH_MIN_TASKS + [2, 3, 4] + [5, 5] + [None]
    kernels = pa.table({"name": [f"k{i}" for i in range(len(corr))],
                        "correlation_id": pa.array(corr, pa.int64())})
    api = pa.table({"name": ["someRuntimeLaunch", "cudaLaunchKernel", "cudaLaunchKernel", "cudaLaunchKernel",
                             "AscendCL@aclmdlRIExecuteAsync"],
                    "correlation_id": pa.array([1, 2, 3, 4, 5], pa.int64())})
    found = launches(Profile(meta=ProfileMeta(format="kineto"), kernels=kernels, api_calls=api))
    assert found.graph_calls == 2
    assert found.from_graph.tolist() == [True] * GRAPH_MIN_TASKS + [False] * 3 + [True, True] + [False]


def test_the_report_says_how_much_of_the_run_a_captured_graph_launched() -> None:
    from pypto_core.report_render import render

    report = diagnose_group(formats.open_profiles(PAIR / "test.json.gz"))
    assert report.profile["graph_launches"] == 12
    assert report.profile["graph_launched_share"] == pytest.approx(5046 / 15632, abs=1e-4)
    assert "| kernels launched from captured graphs | 32.3% (12 graph launches) |" in render(report, "md")
    assert "| 由捕获的图下发的算子 | 32.3%（图下发 12 次） |" in render(report, "md", "zh-Hans")
    eager = diagnose_group(formats.open_profiles(PAIR / "control.json.gz"))
    assert eager.profile["graph_launches"] == 0
    assert "| kernels launched from captured graphs |" not in render(eager, "md")


def test_graph_launches_linked_to_no_kernel_are_named_not_counted(tmp_path: Path) -> None:
    """Graph launches the profile links to no task (their tasks unrecorded or unlinked): the finding says the
    run launches graphs and that the profile cannot tell which part of the step they hold."""
    path = _host_bound_trace(tmp_path / "trace.json", captured=False)
    trace = json.loads(path.read_text())
    trace["traceEvents"] += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1,
                              "ts": 1_000_100.0 + i, "dur": 0.5, "args": {"correlation": 90_000 + i}}
                             for i in range(3)]
    path.write_text(json.dumps(trace))
    report = diagnose_group(formats.open_profiles(path))
    (finding,) = [f for f in report.findings if f.rule == "host_bound_gaps"]
    assert finding.evidence["graph_launches"] == 3 and finding.evidence["graph_launched_share"] == 0.0
    assert "already launches captured graphs (3 times), but the profile links none" in finding.description


def test_a_serving_engines_graph_replays_are_llm_serving_and_told_what_is_left(tmp_path: Path) -> None:
    """vLLM's decode replayed from CUDA graphs: no shapes, so no decode token can be told apart, but the
    engine's frames say LLM serving; the steps' time is the headline metric, and the advice is the serving
    one (async scheduling), not graph capture."""
    path = _host_bound_trace(tmp_path / "trace.json", captured=True, host_work="vllm.v1.engine.core.step")
    report = diagnose_group(formats.open_profiles(path))
    assert report.profile["workload"] == "llm_serving"
    assert report.profile["workload_evidence"]["serving_frames"] is True
    assert "decode" not in report.profile  # no token was found: no per-token figures of zero
    assert report.profile["metrics"]["step_time_ms"] == pytest.approx(4.26, abs=0.01)
    assert report.profile["metrics"]["per_token_latency_ms"] is None
    (finding,) = [f for f in report.findings if f.rule == "host_bound_gaps"]
    assert "vLLM's async scheduling" in finding.description
    assert "eager-mode decode" not in finding.description
