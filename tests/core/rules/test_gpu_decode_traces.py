"""The diagnosis on real GPU traces of an LLM decode (tests/data/h200_decode: captured on an H200 with the
SDK, eager against CUDA graphs against torch.compile, the fix each diagnosis advised applied and measured).

What these traces caught: a Kineto kernel carries no shapes (they are on the aten op that launched it), so
batch-1 decode read as prefill; cuBLAS's Hopper GEMMs (nvjet_*) were not MatMuls; transformers' rotary
matmul counted 32 token rows; a CUDA-graph run had no framework ops to align with its eager twin and no
step time beside the other's per-token latency; and torch.compile copying the weights into its graph before
every replay read as ".contiguous() copies"."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from pypto_core.compare import COMPARE_COLUMNS, ProfileComparer, compare_profiles, to_markdown
from pypto_core.formats import open_profile
from pypto_core.formats.kineto import read_kineto, write_kineto
from pypto_core.formats.launch_shapes import parse_dims
from pypto_core.graph import OperatorCallGraph
from pypto_core.pagedata import profile_page_data
from pypto_core.profile import Profile
from pypto_core.report_render import render_markdown as to_markdown_report
from pypto_core.rules import diagnose
from pypto_core.rules.finding import Report
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

DATA = Path(__file__).resolve().parents[2] / "data" / "h200_decode"
DECODES = ("eager", "eager_batch16", "hf_generate", "cuda_graph", "compiled", "compiled_static",
           "hf_generate_compiled")


def trace(name: str) -> Path:
    return DATA / f"{name}.pt.trace.json.gz"


@cache
def report(name: str) -> Report:
    return diagnose(open_profile(trace(name)))


def finding(name: str, rule: str) -> dict:
    hits = [f for f in report(name).findings if f.rule == rule]
    assert len(hits) <= 1
    return hits[0].to_dict() if hits else {}


def timing(name: str = "timing") -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", DECODES)
def test_every_decode_is_told_decode_on_an_h200(name: str) -> None:
    p = report(name).profile
    assert p["device_vendor"] == "nvidia" and p["device"].startswith("H200")
    assert p["workload"] == "llm_decode", p["workload_evidence"]


def test_prefill_is_prefill_and_compute_bound() -> None:
    p = report("prefill").profile
    assert p["workload"] == "llm_prefill"
    assert p["time_breakdown"]["compute"] / p["time_breakdown"]["wall_ns"] > 0.9
    # the GPU is kept busy: what is left to fix is on the device, eager's unfused elementwise chains
    assert [f.rule for f in report("prefill").findings] == ["unfused_elementwise"]
    # torch's profiler opens a step after the last one it records (41 µs, no kernels): not a step
    graph = OperatorCallGraph(open_profile(trace("prefill")))
    assert len(p["steps"]) == 2 and len(graph.step_walls_ns()) == 2
    step_ms = graph.metrics()["step_time_ms"]
    assert step_ms == pytest.approx(timing()["prefill_ms_per_step"], rel=0.1)  # 33.6 profiled, 32.4 not
    # a prefill's time is one prefill's, not the two recorded added up (67.2 ms)
    assert graph.metrics()["prefill_ms"] == pytest.approx(step_ms, rel=0.01)
    # one step time everywhere: the comparison's mean step is the same figure
    summary = ProfileComparer(lambda: open_profile(trace("prefill")),
                              lambda: open_profile(trace("prefill"))).compare().to_dict()["summary"]
    assert summary["base"]["per_step"]["wall_ms"] == pytest.approx(step_ms, rel=0.01)


def test_prefill_mfu_counts_the_matmuls_the_model_runs() -> None:
    """The prefill's headline is its MFU. Its MatMuls run, a step, 2 x 8 x 1024 tokens x the layers'
    weights (16 x (2 x 2048^2 + 2 x 2048 x 512 + 3 x 2048 x 5632) = 721.7 M) plus the LM head on each
    sequence's last token: 11.83 TFLOP, counted here from the kernels' launch shapes. Over the profiled
    33.6 ms step on the H200's 989.4 TFLOP/s dense bf16 peak that is 35.7%; unprofiled (32.4 ms), 36.9%."""
    graph = OperatorCallGraph(open_profile(trace("prefill")))
    metrics = graph.metrics()
    shape = timing()["shape"]
    h, kv, inter, layers = shape["hidden"], shape["hidden"] * shape["kv_heads"] // shape["heads"], \
        shape["intermediate"], shape["layers"]
    layer_weights = 2 * h * h + 2 * h * kv + 3 * h * inter
    tokens = 8 * 1024
    model_flops = 2 * tokens * layers * layer_weights + 2 * 8 * h * shape["vocab"]
    mm = graph.window & graph.is_role("matmul")
    per_step = graph.figure("flops", mm).sum() / len(graph.step_walls_ns())
    assert per_step == pytest.approx(model_flops, rel=0.01)
    peak = graph.sku.peak_flops_per_s()
    span_s = graph.step_walls_ns().sum() / 1e9
    assert metrics["mfu"] == pytest.approx(model_flops * 2 / span_s / peak, rel=0.02)
    assert 0.3 < metrics["mfu"] < 0.45
    assert model_flops / (timing()["prefill_ms_per_step"] / 1e3) / peak == pytest.approx(0.369, abs=0.005)
    assert report("prefill").profile["metrics"]["mfu"] == pytest.approx(metrics["mfu"])
    # its throughput: the 8 x 1024 prompt tokens of a step over the step (243.7 k tokens/s profiled)
    assert graph.tokens.prefill_tokens == tokens
    assert metrics["prefill_tokens_per_s"] == pytest.approx(tokens / (metrics["prefill_ms"] / 1e3))
    # a decode is bound by HBM, not by its cubes: no MFU there
    assert report("eager").profile["metrics"]["mfu"] is None
    assert report("eager").profile["metrics"]["prefill_tokens_per_s"] is None
    # without MTE2 counters a prefill's flash attention is not called memory-bound (it is compute-bound);
    # a decode's is, by nature
    assert metrics["attention_hbm_time_share"] is None
    assert report("eager").profile["metrics"]["attention_hbm_time_share"] > 0
    # the Memset aten::linear issues computes nothing of the MatMul: it does not take the MatMul's shapes
    kinds = graph.kernels["core_type"].to_pylist()
    shapes = graph.kernels["input_shapes"].to_pylist()
    assert "MEMSET" in kinds and all(not s for k, s in zip(kinds, shapes) if k in ("MEMSET", "MEMCPY"))


def test_kernels_take_the_shapes_of_the_aten_op_that_launched_them() -> None:
    profile = read_kineto(trace("eager"))
    names = profile.kernels["name"].to_pylist()
    shapes = profile.kernels["input_shapes"].to_pylist()
    lm_head = [s for n, s in zip(names, shapes) if n.startswith("nvjet") and s and s[1] == [2048, 32000]]
    assert len(lm_head) == 4  # one LM head GEMM per recorded token: aten::mm [[1, 2048], [2048, 32000]]
    assert all(s == [[1, 2048], [2048, 32000]] for s in lm_head)
    # nearly every kernel reaches the op that launched it (External id)
    assert sum(s is not None for s in shapes) > 0.95 * len(shapes)


def test_cublas_split_k_reduce_is_no_matmul() -> None:
    """Its launch carries the GEMM's shapes (aten::mm [[1, 5632], [5632, 2048]]): as a MatMul it had the
    GEMM's FLOPs again and sat above the roofline."""
    graph = OperatorCallGraph(open_profile(trace("eager")))
    names = np.array(graph.kernels["name"].to_pylist(), object)
    reduce = np.array(["splitKreduce" in n for n in names])
    gemm = np.array([n.startswith("nvjet_") for n in names])
    assert reduce.sum() == 4 * 16 and not graph.is_role("matmul")[reduce].any()  # one a layer a token
    assert graph.is_role("matmul")[gemm].all() and (graph.figure("flops", reduce) == 0).all()


def test_a_saved_folder_carries_the_same_launch_shapes(tmp_path: Path) -> None:
    write_kineto(trace("eager"), tmp_path / "saved")
    saved = Profile.load(tmp_path / "saved")
    assert saved.kernels["input_shapes"].to_pylist() == read_kineto(trace("eager")).kernels[
        "input_shapes"].to_pylist()


@pytest.mark.parametrize(("name", "batch", "tokens"), [("eager", 1, 4), ("hf_generate", 1, 4),
                                                       ("eager_batch16", 16, 4)])
def test_token_rows_count_the_batch(name: str, batch: int, tokens: int) -> None:
    graph = OperatorCallGraph(open_profile(trace(name)))
    t = graph.tokens
    # transformers' rotary embedding multiplies [1, 32, 1] by [1, 1, 1]: 32 rows, but no tokens
    assert t.batch == batch and len(t.latency_ns) == tokens
    assert int(graph.lm_head_mask.sum()) == tokens
    assert graph.structure()["vocab"] == 32000
    assert report(name).profile["structure"]["decode_batch"] == batch
    # the page's latency chart numbers the tokens as the trace does (ProfilerStep#4..7), as the timeline does
    assert profile_page_data(open_profile(trace(name)))["decode"]["steps"] == [4, 5, 6, 7]


def test_eager_decode_is_host_bound_and_told_to_capture_graphs() -> None:
    f = finding("eager", "host_bound_gaps")
    assert f and f["evidence"]["graph_launched_share"] == 0
    assert "CUDA Graphs" in f["description"] and "ACL graph" not in f["description"]
    assert report("eager").profile["dominant_bucket"] == "host_launch_bound"


def test_the_estimate_after_capturing_graphs_lands_near_the_graph_run() -> None:
    """The step the estimate leaves (the run minus the saving, per token) against the measured CUDA-graph
    run: both profiled. It is an upper bound on the saving, so the time left may only be lower than the
    graph run's, and never below the device's own busy time."""
    eager = report("eager").profile
    left_ms = (eager["time_breakdown"]["wall_ns"] / 1e6
               - finding("eager", "host_bound_gaps")["estimated_saving_us"] / 1e3) / 4
    busy_ms = eager["time_breakdown"]["compute"] / 1e6 / 4
    graph_steps = [s["time_breakdown"]["wall_ns"] / 1e6 for s in report("cuda_graph").profile["steps"]]
    measured_ms = float(np.median(graph_steps))
    assert busy_ms < left_ms < measured_ms, (busy_ms, left_ms, measured_ms)
    assert left_ms > 0.5 * measured_ms
    # without the profiler the graph run is faster still: the estimate sits between the two
    assert timing()["cuda_graph_ms_per_token"] < measured_ms


@pytest.mark.parametrize("name", ["cuda_graph", "compiled_static", "hf_generate_compiled"])
def test_a_graph_replayed_decode_is_told_to_cut_the_host_work_between_replays(name: str) -> None:
    """By hand, by torch.compile, and by transformers' generate with a static cache (82% of its kernels
    from graph replays, the rest eager): the gaps left are the host's between two replays."""
    f = finding(name, "host_bound_gaps")
    assert f["evidence"]["graph_launched_share"] > 0.8 and f["evidence"]["graph_launches"] == 4
    assert "already run from captured graphs" in f["description"]
    assert "Capture the step with CUDA Graphs" not in f["description"]
    assert not finding(name, "memcpy_bound")  # its caches and weights are static: nothing copied in


def test_a_graph_replayed_decode_is_not_told_to_capture_graphs_again() -> None:
    f = finding("cuda_graph", "host_bound_gaps")
    assert f["evidence"]["graph_launched_share"] > 0.99
    assert "already run from captured graphs" in f["description"]
    assert finding("cuda_graph", "sync_stall")  # the .item() per token drains the queue
    # no shapes on replayed kernels: the bandwidth figure is unknown, not 0
    graph = OperatorCallGraph(open_profile(trace("cuda_graph")))
    assert graph.metrics()["hbm_bandwidth_utilization"] is None


def test_weights_copied_into_a_compiled_graph_are_named_as_such() -> None:
    f = finding("compiled", "memcpy_bound")
    assert f["evidence"]["graph_input_copies_us"] > 0.9 * f["evidence"]["memcpy_split_us"]["d2d"]
    assert "mark_static_address" in f["description"] and ".contiguous()" not in f["description"]
    zh = next(x for x in report("compiled").findings if x.rule == "memcpy_bound").localized("zh-Hans")
    assert "静态地址" in zh.description
    assert not finding("compiled_static", "memcpy_bound")


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_copies_elsewhere_in_a_graph_run_are_not_called_graph_inputs() -> None:
    """The real CUDA-graph training trace copies 92.7 ms device to device in runs of 365-402 between its
    12 replays, but never right before one: no claim about graph inputs, the general advice stays."""
    found = diagnose(open_profile(SAMPLES / "kineto" / "trace_diff_pair" / "test.json.gz"))
    f = next(x for x in found.findings if x.rule == "memcpy_bound")
    assert found.profile["graph_launches"] == 12 and f.evidence["memcpy_split_us"]["d2d"] > 80_000
    assert "graph_input_copies_us" not in f.evidence and ".contiguous()" in f.description
    assert "pageable" not in f.description  # 26 µs of 96 ms: not worth a sentence


def test_the_fix_the_diagnosis_advised_is_measured_fixed() -> None:
    result = compare_profiles(lambda: open_profile(trace("compiled")),
                              lambda: open_profile(trace("compiled_static"))).to_dict()
    rows = {r["rule"]: r for r in result["findings"]}
    assert rows["memcpy_bound"]["status"] == "fixed"
    step = next(m for m in result["metrics"] if m["name"] == "step_time_ms")
    assert step["better"] is True and step["significant"]
    # and without the profiler: 2.81 -> 1.63 ms a token, measured on the same machine
    assert timing("timing_compiled_static")["compiled_ms_per_token"] < 0.7 * timing(
        "timing_compiled")["compiled_ms_per_token"]


def test_a_fix_without_kernels_of_its_own_is_measured_on_the_time_it_explains() -> None:
    """host_bound_gaps persists after the CUDA-graph capture (the host's work between replays is left), but
    the host-bound time it explains fell from 83.9 to 5.0 ms: measured, beside the estimate."""
    result = compare_profiles(lambda: open_profile(trace("eager")),
                              lambda: open_profile(trace("cuda_graph"))).to_dict()
    row = next(r for r in result["findings"] if r["rule"] == "host_bound_gaps")
    assert row["status"] == "persisting"
    assert 0.7 * row["estimated_saving_us"] < row["measured_saving_us"] < row["estimated_saving_us"]
    # the metrics per token (the graph run's steps are one replayed token each, so both sides count tokens),
    # and the savings per step too, over the baseline's 4 steps, as the profile page gives them
    assert result["normalisation"] == "per_token"
    per = row["per_unit"]
    assert per["unit"] == "per_step" and per["count"] == 4
    assert per["estimated_saving_us"] == pytest.approx(row["estimated_saving_us"] / 4)
    assert per["measured_saving_us"] == pytest.approx(row["measured_saving_us"] / 4)
    new = next(r for r in result["findings"] if r["status"] == "new")  # the graph run's own .item() sync
    assert new["per_unit"]["count"] == 4 and new["per_unit"]["measured_saving_us"] is None
    assert f"{per['estimated_saving_us']:,.1f})" in to_markdown(result)
    copies = compare_profiles(lambda: open_profile(trace("compiled")),
                              lambda: open_profile(trace("compiled_static"))).to_dict()
    fixed = next(r for r in copies["findings"] if r["rule"] == "memcpy_bound")
    # what went is the copies' own time: 4.09 ms of the 4.10 the finding saw
    assert fixed["measured_saving_us"] == pytest.approx(
        finding("compiled", "memcpy_bound")["evidence"]["memcpy_us"], rel=0.02)


def test_the_comparison_reads_a_saved_graph_run_as_decode(tmp_path: Path) -> None:
    """The dashboard compares saved profiles loaded with the comparison's columns only: they must hold what
    tells a graph replay (the runtime calls), or the graph run reads prefill beside its eager twin."""
    for name in ("eager", "cuda_graph"):
        write_kineto(trace(name), tmp_path / name)
    result = ProfileComparer(lambda: Profile.load(tmp_path / "eager", columns=COMPARE_COLUMNS),
                             lambda: Profile.load(tmp_path / "cuda_graph", columns=COMPARE_COLUMNS)
                             ).compare().to_dict()
    assert [result["summary"][side]["workload"] for side in ("base", "new")] == ["llm_decode", "llm_decode"]


def test_eager_against_cuda_graph_compares_step_time_and_aligns_kernels() -> None:
    result = ProfileComparer(lambda: open_profile(trace("eager")),
                             lambda: open_profile(trace("cuda_graph"))).compare().to_dict()
    metrics = {m["name"]: m for m in result["metrics"]}
    step = metrics["step_time_ms"]
    assert step["base"] > 4 * step["new"] and step["better"] is True
    assert metrics["hbm_bandwidth_utilization"]["new"] is None  # unknown, never a false "worse"
    # a share moves in percentage points: 6.5% -> 50.6% of the step in compute is +44.1 pp, not "+680%"
    compute = next(line for line in to_markdown(result).splitlines() if line.startswith("| compute_share |"))
    assert f"{100 * metrics['compute_share']['delta']:+.1f} pp" in compute and "+44.1 pp" in compute
    # the replayed kernels reach no aten op: both sides align by kernel name, and the GEMMs match
    assert result["alignment"]["levels"] == ["op_type", "name"]
    top = result["aligned"][0]
    assert top["status"] == "matched" and top["key"].startswith("nvjet_")
    assert abs(top["new_us"] - top["base_us"]) < 0.1 * top["base_us"]


@pytest.mark.parametrize(("text", "expected"), [
    ("[[1, 2048], [2048, 32000]]", [[1, 2048], [2048, 32000]]),
    ("[[[1, 32, 1, 32], [1, 32, 1, 32]], []]", [[1, 32, 1, 32], [1, 32, 1, 32], []]),  # a tensor list
    ("[[1, 1, 2048], [], []]", [[1, 1, 2048], [], []]),
    ("[[true, 2]]", None), ("[[-1, 2]]", None), ("[[]]", None), ("", None), ("[[1, 2]", None),
    ("{\"a\": 1}", None), ("[[1.5, 2]]", None), ("[" * 5000, None),
])
def test_input_dims_text_is_parsed_as_untrusted(text: str, expected: list | None) -> None:
    assert parse_dims(text) == expected


def test_a_share_that_grows_because_the_step_shrank_is_not_worse() -> None:
    """Marking the compiled graph's weights static took 3.5 -> 2.6 ms a step; the idle time left (the host's
    work between replays, about 1.2 ms both) became a larger share of the shorter step. That share moved
    with the step, not against the fix: neither better nor worse, said so; the step time reads better."""
    result = compare_profiles(lambda: open_profile(trace("compiled")),
                              lambda: open_profile(trace("compiled_static"))).to_dict()
    rows = {m["name"]: m for m in result["metrics"]}
    assert rows["step_time_ms"]["better"] is True
    idle = rows["device_idle_share"]
    assert idle["new"] > idle["base"] and idle["significant"]
    assert idle["better"] is None and idle["step"] == "shorter"
    assert idle["noise"]["verdict"] == "share_of_shorter_step"
    # its time barely moved: the share times the step, before and after
    before, after = idle["base"] * rows["step_time_ms"]["base"], idle["new"] * rows["step_time_ms"]["new"]
    assert after == pytest.approx(before, rel=0.1)
    # the compute share rose too, with the compute the same 1.3 ms a step: no "better" either
    compute = rows["compute_share"]
    assert compute["new"] > compute["base"] and compute["better"] is None and compute["step"] == "shorter"
    assert "a share of a shorter step" in to_markdown(result)
    # where the time behind a share did move, the share keeps its verdict: capturing the eager decode's step
    # took its idle time from 25 ms to 1.7 ms a step
    graph = compare_profiles(lambda: open_profile(trace("eager")),
                             lambda: open_profile(trace("cuda_graph"))).to_dict()
    idle = {m["name"]: m for m in graph["metrics"]}["device_idle_share"]
    assert idle["better"] is True and "step" not in idle


def test_a_decode_token_looks_up_one_row_of_the_vocabulary() -> None:
    """torch's embedding launches indexSelect with index_select's inputs ([[32000, 2048], [], [1]]; Kineto
    records no outputs): the token's row is read and written, 4 KB each, not the 131 MB table."""
    graph = OperatorCallGraph(open_profile(trace("eager")))
    shapes = graph.kernels["input_shapes"].to_pylist()
    lookup = graph.is_role("embedding")
    lookups = [i for i, s in enumerate(shapes) if s and s[0] == [32000, 2048] and lookup[i]]
    assert lookups
    row = 2048 * 2
    for i in lookups:
        assert 2 * row <= graph.figure("bytes_moved", i) < 3 * row


@pytest.mark.parametrize("name", ["eager", "compiled", "prefill"])
def test_shares_told_by_ascend_op_types_are_not_known_on_a_gpu(name: str) -> None:
    """An eager RMSNorm on a GPU is five elementwise kernels named by their C++ symbols, a KV-cache
    concatenation a CatArrayBatchedCopy: the norm-chain and cache-layout shares, told by Ascend's op types
    (Pow, ReduceMean, TensorMove...), are not known there, never 0% (unfused_elementwise
    names those chains)."""
    metrics = report(name).profile["metrics"]
    assert metrics["norm_launch_overhead_share"] is None
    assert metrics["kv_cache_noncontiguous_share"] is None
    assert metrics["attention_hbm_time_share"] is not None or name == "prefill"  # vendor-neutral: still given


def test_a_fix_that_waits_on_the_host_says_what_it_buys_once_the_host_is_fixed() -> None:
    """On the graph-replayed decode the device waits for each replay's launch: fusing the elementwise chains
    frees device time that alone shortens no step (replayed alone: 0). The finding says what it adds once
    the other findings (the host gaps) are fixed, which is the order to fix them in; a fix that pays alone
    says nothing more."""
    r = report("cuda_graph")
    chains = next(f for f in r.findings if f.rule == "unfused_elementwise")
    assert chains.details["replayed_alone_us"] < 0.5 * chains.estimated_saving_us
    after = chains.details["replayed_after_others_us"]
    assert after > 1000 and after > chains.details["replayed_alone_us"]
    # "at most" bounds every figure beside it: the saving model's 2.4 ms is kept, the estimate is the replay's
    assert chains.estimated_saving_us == after > chains.details["saving_model_us"]
    gaps = next(f for f in r.findings if f.rule == "host_bound_gaps")
    assert "replayed_after_others_us" not in gaps.details  # it pays alone
    assert all("replayed_after_others_us" not in f.details for f in report("eager").findings)
    md = to_markdown_report(r)
    assert f"({after:.1f} µs once the other findings are fixed: alone, this fix waits on them)" in md


@pytest.mark.parametrize("name", ["eager", "cuda_graph"])
def test_the_what_if_of_every_finding_is_the_headline(name: str) -> None:
    """Ticking every finding in the what-if replay reads the headline's combined speedup (the page showed
    17.82x under an 18.37x card): both are the replayed saving over the run's total."""
    r = report(name)
    asked = diagnose(open_profile(trace(name)), what_if=[f.rule for f in r.findings]).what_if
    assert asked is not None and asked["speedup"] == r.estimated_combined_speedup
    assert asked["original_ns"] / asked["duration_ns"] == pytest.approx(asked["speedup"], rel=1e-3)


def test_a_finding_the_fix_shrank_reads_reduced_not_just_persisting() -> None:
    """Graph capture (eager -> CUDA graph) took 78.8 ms of the 99 ms host-bound time the finding estimated:
    the replay still finds host gaps, so it persists, and the comparison says its time fell."""
    result = compare_profiles(open_profile(trace("eager")), open_profile(trace("cuda_graph")))
    gaps = next(f for f in result.findings if f["rule"] == "host_bound_gaps")
    assert gaps["status"] == "persisting" and gaps["reduced"] is True
    assert gaps["measured_saving_us"] >= 0.5 * gaps["estimated_saving_us"]
    assert not any(f.get("reduced") for f in result.findings if f["rule"] != "host_bound_gaps")


def test_a_finding_new_only_because_the_step_got_shorter_says_so() -> None:
    """torch.compile with static weights cut the step from 3.5 to 2.6 ms; the host's sync wait stayed about
    150 µs a step, and sync_stall crossed its share threshold: "new", with its time a step beside it. A sync
    stall that did grow (eager -> CUDA graph) stays plainly new."""
    static = compare_profiles(open_profile(trace("compiled")), open_profile(trace("compiled_static")))
    stall = next(f for f in static.findings if f["rule"] == "sync_stall")
    assert stall["status"] == "new" and stall["threshold_only"] is True
    times = stall["time_per_step_us"]
    assert times["new"] <= 1.05 * times["base"] and 100 < times["base"] < 200
    graph = compare_profiles(open_profile(trace("eager")), open_profile(trace("cuda_graph")))
    grown = next(f for f in graph.findings if f["rule"] == "sync_stall")
    assert grown["status"] == "new" and "threshold_only" not in grown


def test_a_share_moving_a_tenth_of_a_point_is_noise() -> None:
    """The attention share 3.90% -> 3.76% (eager -> CUDA graph, single values) passed the 1% relative
    tolerance and read "better"; a share needs half a point to move."""
    result = compare_profiles(open_profile(trace("eager")), open_profile(trace("cuda_graph")))
    att = result.metric("attention_hbm_time_share")
    assert abs(att["new"] - att["base"]) < 0.005 and att["significant"] is False and att["better"] is None
    assert att["noise"]["method"] == "single_value" and att["noise"]["threshold"] == 0.005
    assert att["noise"]["verdict"] == "noise"


@pytest.mark.parametrize("name", ["cuda_graph", "compiled", "compiled_static", "hf_generate_compiled"])
def test_a_graph_replayed_decode_counts_one_token_a_replayed_step(name: str) -> None:
    """A replay records no shapes, so no token rows tell its decode apart: a step of a transformer whose
    kernels came mostly from one graph replay is one token, its latency the step's (the profiled steps of
    docs/gpu_decode.md), with the batch not recorded: no tokens/s, no token count."""
    r = report(name).to_dict()
    decode = r["profile"]["decode"]
    assert decode["steps"] == 4 and decode["batch"] == 0 and decode["tokens"] is None
    assert r["profile"]["workload"] == "llm_decode"
    profiled_step = {"cuda_graph": 3.46, "compiled": 3.53, "compiled_static": 2.56,
                     "hf_generate_compiled": 3.56}[name]
    assert decode["per_token_ms_p50"] == pytest.approx(profiled_step, rel=0.05)
    metrics = r["profile"]["metrics"]
    assert metrics["tokens_per_s"] is None and decode["tokens_per_s"] is None
    assert metrics["per_token_latency_ms"] == decode["per_token_ms_p50"]


def test_a_step_of_several_replays_is_not_told_one_token() -> None:
    """Two replays in a step may be two tokens or two captured pieces of one: such a step is left without
    tokens, the run's other steps still counted."""
    from pypto_core.launches import Launches

    graph = OperatorCallGraph(open_profile(trace("cuda_graph")))
    launched = graph.launches
    steps = graph.profile.steps
    first_start = int(min(steps["start_ns"].to_pylist()))
    graph.__dict__["launches"] = Launches(launched.from_graph, launched.graph_calls + 1,
                                          np.append(launched.graph_call_starts, first_start + 1))
    assert graph.tokens.decode_step.tolist() == [False, True, True, True]
    eager = OperatorCallGraph(open_profile(trace("eager")))
    assert eager.tokens.batch == 1 and eager.tokens.decode_step.all()  # told by its token rows, as before
