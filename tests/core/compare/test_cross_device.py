"""Compare anything with anything (issue 22): an NPU run against a GPU run, aligned by what the model did.

The pair is the shared samples' ImageNet CNN training on an Ascend 910B (torch_npu, one step) and a CNN
training on an A100 (Kineto, NCCL, three steps): kernel names never match across the two, framework ops do.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pypto_core.compare import ALIGN_LEVELS, ProfileComparer, to_csv, to_markdown
from pypto_core.formats import open_profile, open_profiles
from pypto_core.graph import OperatorCallGraph
from pypto_core.synth import synthesize
from tests.paths import REPO, SAMPLES

NPU = SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt"
GPU = SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz"
CUDA_PAIR = SAMPLES / "kineto" / "trace_diff_pair"
# Metrics that mean something only for LLM decode / prefill: none may appear for a training pair.
LLM_METRICS = ("per_token_latency_ms", "per_token_latency_p90_ms", "tokens_per_s", "prefill_ms",
               "attention_hbm_time_share", "kv_cache_noncontiguous_share", "norm_launch_overhead_share",
               "critical_path_ms", "critical_path_host_share")
HTML_ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")

pytestmark = pytest.mark.skipif(not NPU.exists(), reason="the real samples (../shared/samples) are not here")


@pytest.fixture(scope="module")
def npu_gpu() -> tuple[object, object, dict]:
    base, new = open_profile(NPU), open_profile(GPU)
    return base, new, ProfileComparer(base, new).compare().to_dict()


def _scope_us(profile: object) -> float:
    """Device time per step of the kernels inside the profiler steps, from the tables themselves."""
    k = profile.kernels
    start = np.array(k["start_ns"].to_pylist(), np.int64)
    dur = np.array(k["dur_ns"].to_pylist(), np.int64)
    st = np.array(profile.steps["start_ns"].to_pylist(), np.int64)
    en = np.array(profile.steps["end_ns"].to_pylist(), np.int64)
    inside = ((start[:, None] >= st[None, :]) & (start[:, None] < en[None, :])).any(axis=1)
    return float(dur[inside].sum()) / len(st) / 1000.0


def test_npu_against_gpu_is_aligned_by_framework_op(npu_gpu) -> None:
    base, new, result = npu_gpu
    rows = result["aligned"]
    assert rows and all(r["aligned_by"] in ALIGN_LEVELS and r["key"] for r in rows)
    al = result["alignment"]
    assert al["unit"] == "per_step"
    for side, profile in (("base", base), ("new", new)):
        total = sum(r[f"{side}_us"] for r in rows)
        # every kernel inside the steps is in exactly one row: the rows add up to the profile's own time
        assert total == pytest.approx(_scope_us(profile), rel=1e-9)
        by_op = sum(r[f"{side}_us"] for r in rows if r["aligned_by"] == "framework_op")
        matched = sum(r[f"{side}_us"] for r in rows if r["aligned_by"] == "framework_op" and r["status"]
                      == "matched")
        assert al[side]["shares"]["framework_op"] == pytest.approx(by_op / total)
        assert by_op / total >= 0.8, (side, by_op / total)
        # measured on the samples: 99.3% (NPU) and 80.9% (GPU) of device time in ops both sides ran
        assert matched / total >= 0.8, (side, matched / total)
    rows_by_key = {r["key"]: r for r in rows}
    allreduce = rows_by_key["c10d::allreduce_"]
    assert allreduce["status"] == "matched"
    assert [k["name"] for k in allreduce["base_kernels"]] == ["hcom_allReduce_"]
    assert allreduce["new_kernels"][0]["name"].startswith("NCCL AllReduce")
    conv = rows_by_key["aten::conv2d"]
    assert {"Conv2D", "TransData"} <= {k["name"] for k in conv["base_kernels"]}
    assert any(k["name"].startswith(("cuDNN conv", "cutlass")) for k in conv["new_kernels"])
    assert conv["module"] == "DistributedDataParallel.forward"
    assert rows_by_key["ConvolutionBackward0"]["slower"] in ("base", "new")


def test_training_pair_shows_no_decode_metric(npu_gpu) -> None:
    _, _, result = npu_gpu
    metrics = {m["name"]: m for m in result["metrics"]}
    for name in LLM_METRICS:
        assert metrics[name]["base"] is None and metrics[name]["new"] is None, name
    assert metrics["ai_core_utilization"]["new"] is None  # an Ascend notion, not an A100's
    assert metrics["ai_core_utilization"]["base"] is not None
    md = to_markdown(result)
    for name in LLM_METRICS:
        assert f"| {name} |" not in md, name


def test_summary_side_by_side_is_the_attribution(npu_gpu) -> None:
    base, new, result = npu_gpu
    metrics = {m["name"]: m for m in result["metrics"]}
    for side, profile in (("base", base), ("new", new)):
        s = result["summary"][side]
        run = OperatorCallGraph(profile).attribution.run
        assert s["step_count"] == len(profile.steps)
        assert s["per_step"]["wall_ms"] == pytest.approx(run.wall_ns / 1e6 / s["step_count"])
        # one number per concept: the summary's shares are the metrics' shares
        assert s["per_step"]["compute_share"] == pytest.approx(metrics["compute_share"][side])
        assert s["per_step"]["idle_share"] == pytest.approx(metrics["device_idle_share"][side])
        parts = ("compute", "communication_not_overlapped", "memcpy", "idle")
        assert sum(s["per_step"][f"{p}_ms"] for p in parts) == pytest.approx(s["per_step"]["wall_ms"])
        assert len(s["steps"]) == s["step_count"] and s["workload"] == "training"
        (rank,) = s["ranks"]  # one rank per side here
        assert rank["rank"] == profile.meta.rank
        assert rank["wall_ms"] == pytest.approx(s["per_step"]["wall_ms"])
        assert rank["compute_share"] == pytest.approx(s["per_step"]["compute_share"])
    assert result["summary"]["base"]["device"]["vendor"] == "ascend"
    gpu = result["summary"]["new"]["device"]
    assert (gpu["name"], gpu["vendor"], gpu["fp16_tflops"]) == ("A100", "nvidia", 312.0)


def test_every_metric_carries_its_noise_test(npu_gpu) -> None:
    _, _, result = npu_gpu
    for m in result["metrics"]:
        noise = m["noise"]
        assert {"method", "threshold", "verdict", "base_samples", "new_samples"} <= set(noise)
        if m["base"] is None or m["new"] is None:
            assert noise["verdict"] == "n/a"
            continue
        # one step on the NPU side: a single value, judged against the relative tolerance
        assert noise["method"] == "single_value" and noise["threshold"] > 0
        expect = ("noise" if abs(m["new"] - m["base"]) <= noise["threshold"]
                  else f"share_of_{m['step']}_step" if m.get("step")  # moved with the step time
                  else "better" if m["better"] else "worse")
        assert noise["verdict"] == expect, m
    csv_text = to_csv(result)
    assert "noise_threshold" in csv_text.splitlines()[0] and "\naligned," in csv_text


def test_noise_test_uses_per_step_samples_when_both_sides_have_them() -> None:
    pair = [open_profile(CUDA_PAIR / n) for n in ("control.json.gz", "test.json.gz")]
    result = ProfileComparer(*pair).compare().to_dict()
    share = next(m for m in result["metrics"] if m["name"] == "compute_share")
    steps = [len(p.steps) for p in pair]
    assert min(steps) >= 3  # six profiler steps each
    assert share["noise"]["method"] == "per_step_median"
    assert (share["noise"]["base_samples"], share["noise"]["new_samples"]) == tuple(steps)
    assert share["noise"]["base_spread"]["min"] <= share["noise"]["base_spread"]["max"]
    assert share["significant"] == (abs(share["new"] - share["base"]) > share["noise"]["threshold"])
    # the A100 step is faster than the V100's: the compute share of the slower step rose with it (an older
    # GPU's longer kernels), which is neither better nor worse by itself
    step = next(m for m in result["metrics"] if m["name"] == "step_time_ms")
    assert step["new"] > step["base"] and step["better"] is False
    assert share["new"] > share["base"] and share["better"] is None
    assert share["noise"]["verdict"] == "share_of_longer_step"


@pytest.mark.parametrize("pair", ["npu_gpu", "cuda_pair"])
def test_markdown_export_has_no_html_entity_and_short_cells(pair, npu_gpu) -> None:
    if pair == "npu_gpu":
        result = npu_gpu[2]
    else:
        result = ProfileComparer(*[open_profile(CUDA_PAIR / n) for n in ("control.json.gz", "test.json.gz")]
                                 ).compare().to_dict()
    md = to_markdown(result)
    assert not HTML_ENTITY.search(md), HTML_ENTITY.search(md)
    assert "_ZN" not in md  # mangled symbols are demangled and collapsed
    for line in md.splitlines():
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert all(len(c.strip()) <= 200 for c in cells), max(cells, key=len)
    # the full names stay in the JSON, one click away on the page
    fulls = [k["full_name"] for r in result["aligned"] for k in r["base_kernels"] + r["new_kernels"]
             if k["full_name"]]
    if pair == "cuda_pair":
        assert any(len(f) > 200 for f in fulls)


@pytest.mark.parametrize("skus", [("910B3", "910B4"), ("910B2", "910B3")])
def test_simulated_pairs_across_skus_say_how_each_row_is_aligned(tmp_path, skus) -> None:
    base = open_profile(synthesize(tmp_path / "a", tokens=4, sku=skus[0]))
    new = open_profile(synthesize(tmp_path / "b", tokens=4, sku=skus[1],
                                  fixed=frozenset({"kv_cache_layout"})))
    result = ProfileComparer(base, new).compare().to_dict()
    assert result["alignment"]["unit"] == "per_token"
    assert result["aligned"] and all(r["aligned_by"] in ALIGN_LEVELS for r in result["aligned"])
    for side in ("base", "new"):
        assert result["alignment"][side]["shares"]["framework_op"] >= 0.8
    assert (result["base"]["device"], result["new"]["device"]) == skus
    json.dumps(result)  # the stored comparison is plain JSON


def test_summary_lists_every_rank_of_a_multi_rank_profile(npu_gpu, tmp_path) -> None:
    """A group's diagnosis report carries each rank's attribution: the comparison's summary shows them all."""
    from pypto_core.rules import diagnose

    group = open_profiles(SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2")
    primary = group.primary()
    report = diagnose(primary, group=group).to_dict()
    base, new, _ = npu_gpu
    result = ProfileComparer(primary, new, base_report=report).compare().to_dict()
    ranks = result["summary"]["base"]["ranks"]
    expected = report["profile"]["rank_breakdowns"]
    assert [r["rank"] for r in ranks] == [r["rank"] for r in expected] and len(ranks) >= 2
    for row, rb in zip(ranks, expected):
        tb = rb["time_breakdown"]
        if tb and tb["wall_ns"]:
            assert row["compute_share"] == pytest.approx(tb["compute"] / tb["wall_ns"])


def test_an_npu_finding_is_not_fixed_on_a_gpu_run() -> None:
    """Ascend-only rules (dynamic shapes, Block Dim) cannot fire on an A100 trace: their findings are marked
    not applicable there, never fixed. A rule that holds on both vendors is persisting where the GPU run has
    it too; where it lacks it, the finding is not comparable, not fixed: two vendors' runs are two programs
    (the CNN rank's communication and sync findings once read "fixed" beside an unrelated A100 trace)."""
    from pypto_core.compare import compare_profiles
    from pypto_core.rules.registry import discover

    rows = {f["rule"]: f["status"] for f in compare_profiles(open_profile(NPU), open_profile(GPU)).findings}
    rules = discover()
    ascend_only = {r for r in rows if rules[r].vendors == ("ascend",)}
    assert {"dynamic_shape", "block_dim"} <= ascend_only, rows
    assert all(rows[r] == "not_applicable" for r in ascend_only), rows
    both = {r: s for r, s in rows.items() if r not in ascend_only}
    assert set(both.values()) <= {"persisting", "new", "not_comparable"}, rows
    not_comparable = {r for r, s in both.items() if s == "not_comparable"}
    assert {"communication_not_overlapped", "sync_stall"} <= not_comparable


def test_runs_of_two_workloads_say_so() -> None:
    """An Ascend CNN training step against an H200 decode read "step time 82.6% better": two programs, not a
    before and after, and the comparison says so; two training runs on two vendors do not get that line."""
    if not (SAMPLES / "SOURCES.md").is_file():  # pragma: no cover
        pytest.skip("needs the real samples")
    decode = REPO / "tests" / "data" / "h200_decode" / "eager.pt.trace.json.gz"
    result = ProfileComparer(open_profile(NPU), open_profile(decode)).compare()
    assert "different workloads: Training vs LLM decode" in " ".join(result.warnings)
    from pypto_core.i18n import loaded_texts, render

    zh = [render(t, "zh-Hans") for t in loaded_texts(result.warnings, result.warning_messages)]
    assert any("训练 对比 LLM Decode 阶段" in w for w in zh), zh  # the workloads in words, never their ids
    # the H200 trace names no rank: the export says "—", never Python's None
    assert "| rank / steps | 0 / 1 | — / 4 |" in to_markdown(result) and "None" not in to_markdown(result)
    # no row is better or worse: the changes outside the noise stand as deltas with their own verdict
    assert all(m["better"] is None for m in result.metrics)
    moved = [m for m in result.metrics if m.get("different_work")]
    assert moved and all(m["noise"]["verdict"] == "different_work" and m["delta"] for m in moved)
    assert "step_time_ms" in {m["name"] for m in moved}  # the 82.6% that read "better"
    assert "different work: not a before and after" in to_markdown(result)
    same_kind = ProfileComparer(open_profile(NPU), open_profile(GPU)).compare()
    assert not any("different workloads" in w for w in same_kind.warnings)
    assert not any(m.get("different_work") for m in same_kind.metrics)
    assert any(m["better"] is not None for m in same_kind.metrics)  # two training runs keep their verdicts
