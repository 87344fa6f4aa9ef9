"""Unit tests of the engine on decoder profiles built in code: each rule fires when its anti-pattern is
planted and stays quiet when it is not; registry, config, Amdahl, SKU table, rendering."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pypto_core.graph import METRICS, OperatorCallGraph
from pypto_core.hardware import SKUS, detect_sku, get_sku, normalize_sku_name
from pypto_core.profile import Profile, ProfileGroup, ProfileMeta
from pypto_core.report_render import render
from pypto_core.rules import diagnose, diagnose_group
from pypto_core.rules.config import RuleConfig, defaults
from pypto_core.rules.diagnose import findings_for
from pypto_core.rules.registry import discover
from tests.core.rules.builders import T0, decoder_profile

SEED_FOUR = ("matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead")


def rules_of(report) -> set[str]:
    return {f.rule for f in report.findings}


def test_registry_discovers_every_rule_module() -> None:
    rules = discover()
    assert set(SEED_FOUR) <= set(rules)
    assert len(rules) >= 12
    for r in rules.values():
        assert r.saving_model and r.title
        assert r.id in defaults() and r.thresholds


@pytest.mark.parametrize("rule_id", SEED_FOUR)
def test_seed_rule_found_only_when_planted(rule_id: str) -> None:
    planted = diagnose(decoder_profile(planted=frozenset([rule_id])))
    assert rule_id in rules_of(planted)
    assert not (set(SEED_FOUR) - {rule_id}) & rules_of(planted)
    clean = diagnose(decoder_profile(planted=frozenset()))
    assert not set(SEED_FOUR) & rules_of(clean)


def test_seed_savings_track_the_built_cost() -> None:
    base = decoder_profile().summary()["duration_ns"]
    for rule_id in ("matmul_tiling", "attention_memory_bound", "kv_cache_layout"):
        prof = decoder_profile(planted=frozenset([rule_id]))
        measured_us = (prof.summary()["duration_ns"] - base) / 1e3
        est = next(f for f in diagnose(prof).findings if f.rule == rule_id).estimated_saving_us
        assert abs(est - measured_us) / measured_us < 0.35, (rule_id, est, measured_us)


def test_finding_shape_and_remedies() -> None:
    report = diagnose(decoder_profile(planted=frozenset(SEED_FOUR)))
    by_rule = {f.rule: f for f in report.findings}
    assert by_rule["matmul_tiling"].remedies == ["aoe_tune_ops.json", "aoe_tune.sh"]
    assert by_rule["kv_cache_layout"].remedies == ["kv_cache_layout_patch.py"]
    assert by_rule["attention_memory_bound"].remedies == ["fused_attention_patch.py"]
    assert by_rule["norm_launch_overhead"].remedies == ["norm_fusion_patch.py"]
    mm = by_rule["matmul_tiling"]
    assert mm.details["shapes"][0]["k"] == 4100 and mm.details["shapes"][0]["padded_k"] == 4352
    assert any("256" in reason for reason in mm.details["shapes"][0]["misalignment"])
    assert mm.details["op_names"] and mm.details["op_types"] == ["MatMulV2"]
    for f in report.findings:
        assert f.saving_model and f.description and 0 < f.time_share <= 1
        assert f.estimated_speedup >= 1.0
        assert any(("_us" in k) or ("_pct" in k) or ("share" in k)
                   or ("_gbps" in k) for k in f.evidence), f.rule
    json.dumps(report.to_dict())  # serialisable


def test_combined_speedup_is_amdahl_over_the_union_not_a_product() -> None:
    report = diagnose(decoder_profile(planted=frozenset(SEED_FOUR), eager_gap_us=40.0))
    total = report.profile["time_breakdown"]["wall_ns"]
    saving = sum(f.estimated_saving_us for f in report.findings) * 1e3
    assert {"host_bound_gaps", "norm_launch_overhead"} <= rules_of(report)
    # norm fusion and graph mode close the same launch gaps: the union counts them once, so the combined
    # speedup is below what adding the savings would give, and above the best single finding
    assert report.estimated_combined_speedup < total / max(total - saving, 1) - 0.01
    assert report.estimated_combined_speedup > max(f.estimated_speedup for f in report.findings)
    # and never more than the attribution allows: the compute no finding shortens stays
    compute = report.profile["time_breakdown"]["compute"]
    shortened = sum(f.estimated_saving_us * 1e3 for f in report.findings
                    if f.rule in ("matmul_tiling", "attention_memory_bound"))
    assert report.estimated_combined_speedup <= total / max(compute - shortened, 1)


def test_extra_rules_fire_on_their_patterns() -> None:
    report = diagnose(decoder_profile(extra=["aicpu", "transdata"]))
    assert {"aicpu_operators", "format_churn"} <= rules_of(report)
    assert not {"aicpu_operators", "format_churn"} & rules_of(diagnose(decoder_profile()))


def test_host_bound_gaps_follow_the_launch_gap() -> None:
    eager = diagnose(decoder_profile(planted=frozenset(["norm_launch_overhead"]), eager_gap_us=40.0))
    assert "host_bound_gaps" in rules_of(eager)
    assert "host_bound_gaps" not in rules_of(diagnose(decoder_profile()))


def _steps_with_host_work_before(prepare_ms: float) -> Profile:
    """Three 10 ms steps of 100 vector kernels (20 us each, 20 us host-bound gaps between them), each step
    opening with ``prepare_ms`` of host work before its first kernel (step_trace_time's Preparing)."""
    names, starts, durs, host, host_start, host_dur, step_start, step_end = [], [], [], [], [], [], [], []
    for step in range(3):
        t = T0 + step * 20_000_000
        step_start.append(t)
        step_end.append(t + 20_000_000)
        first = t + int(prepare_ms * 1e6) + 50_000
        host += ["prepare_batch"]
        host_start.append(t)
        host_dur.append(first - t)
        for i in range(100):
            k = first + i * 40_000
            names.append("Add")
            starts.append(k)
            durs.append(20_000)
            host.append("aten::add")  # the launch that fills the gap before the next kernel
            host_start.append(k)
            host_dur.append(40_000)
    kernels = pa.table({"name": names, "op_type": names, "core_type": ["AI_VECTOR_CORE"] * len(names),
                        "start_ns": pa.array(starts, pa.int64()), "dur_ns": pa.array(durs, pa.int64()),
                        "stream_id": pa.array([2] * len(names), pa.int64())})
    host_ops = pa.table({"name": host, "start_ns": pa.array(host_start, pa.int64()),
                         "dur_ns": pa.array(host_dur, pa.int64())})
    steps = pa.table({"step_id": [1, 2, 3], "start_ns": pa.array(step_start, pa.int64()),
                      "end_ns": pa.array(step_end, pa.int64())})
    return Profile(meta=ProfileMeta(format="ascend_pt", device="910B3"), kernels=kernels, host_ops=host_ops,
                   steps=steps)


def test_host_bound_gaps_say_how_much_is_host_work_before_the_first_kernel() -> None:
    """Host work before a step's first kernel is host-bound time too, but not a gap a captured graph closes
    by itself: where it is a large part, the finding says how much (and its evidence always does)."""
    (found,) = findings_for(diagnose(_steps_with_host_work_before(6.0)), "host_bound_gaps")
    assert found.evidence["before_first_kernel_us"] == pytest.approx(3 * 6_050, rel=0.01)
    assert "18.1 ms of it is host work before each step's first kernel" in found.description
    (short,) = findings_for(diagnose(_steps_with_host_work_before(0.2)), "host_bound_gaps")
    assert short.evidence["before_first_kernel_us"] == pytest.approx(3 * 250, rel=0.01)
    assert "before each step's first kernel" not in short.description


def test_block_dim_and_unfused_chains() -> None:
    prof = decoder_profile()
    k = prof.kernels
    # RoPE and SwiGLU as the advisor's unfused sequences, built by hand: Slice Neg ConcatD Mul Add / Swish Mul
    ops = ["StridedSlice", "Neg", "ConcatD", "Mul", "Add", "Swish", "Mul"] * 20
    t0 = int(k["start_ns"][0].as_py()) - 10_000_000
    extra = pa.table({"name": ops, "op_type": ops, "core_type": ["AI_VECTOR_CORE"] * len(ops),
                      "start_ns": pa.array([t0 + i * 30_000 for i in range(len(ops))], pa.int64()),
                      "dur_ns": pa.array([3_000] * len(ops), pa.int64()),
                      "stream_id": pa.array([2] * len(ops), pa.int64()),
                      "block_dim": pa.array([4] * len(ops), pa.int64())})
    prof2 = Profile(meta=prof.meta, kernels=pa.concat_tables([extra, k.select(extra.column_names)]),
                    steps=prof.steps)
    found = rules_of(diagnose(prof2))
    assert {"unfused_rope", "unfused_swiglu"} <= found
    assert not {"unfused_rope", "unfused_swiglu"} & rules_of(diagnose(prof))


def test_aicore_frequency_and_communication_wait() -> None:
    prof = decoder_profile()
    start = int(prof.kernels["start_ns"][0].as_py())
    counters = pa.table({"track": ["AI Core Freq (MHz) dev 0"] * 10,
                         "ts_ns": pa.array([start + i * 1000 for i in range(10)], pa.int64()),
                         "value": [1800.0] * 5 + [1200.0] * 5})
    comm = pa.table({"name": ["hcom_allReduce__1"], "start_ns": pa.array([start], pa.int64()),
                     "elapse_ns": pa.array([2_000_000], pa.int64()),
                     "wait_ns": pa.array([1_500_000], pa.int64())})
    slow = Profile(meta=prof.meta, kernels=prof.kernels, steps=prof.steps, counters=counters,
                   communication=comm)
    found = rules_of(diagnose(slow))
    assert {"aicore_frequency", "communication_wait"} <= found
    steady = Profile(meta=prof.meta, kernels=prof.kernels, steps=prof.steps,
                     counters=counters.set_column(2, "value", pa.array([1800.0] * 10)))
    assert "aicore_frequency" not in rules_of(diagnose(steady))


def test_slow_rank_in_a_group() -> None:
    def rank(i: int, computing_ms: float) -> Profile:
        # ranks that kept only their step_trace_time (as rank 1 of the Qwen3 sample): attributed from it
        steps = pa.table({"step_id": pa.array([0], pa.int64()), "start_ns": pa.array([T0], pa.int64()),
                          "end_ns": pa.array([T0 + int(20e6)], pa.int64()),
                          "computing_ns": pa.array([int(computing_ms * 1e6)], pa.int64()),
                          "communication_ns": pa.array([1_000_000], pa.int64()),
                          "free_ns": pa.array([0], pa.int64())})
        return Profile(meta=ProfileMeta(format="ascend_pt", rank=i, device="910B3"), steps=steps)

    skewed = diagnose_group(ProfileGroup(profiles=[rank(0, 10), rank(1, 10), rank(2, 14), rank(3, 10)]))
    slow = [f for f in skewed.findings if f.rule == "slow_rank"]
    assert slow and slow[0].details["slow_rank"] == 2
    even = diagnose_group(ProfileGroup(profiles=[rank(i, 10) for i in range(4)]))
    assert "slow_rank" not in rules_of(even)


def test_slow_rank_fires_on_a_spread_that_matters_for_the_step() -> None:
    """The advisor's measure: a kind of time's spread over the ranks (max - min) against the mean step time.
    Two ranks whose free time differs by 21 ms in an 810 ms step (the Qwen3 4-NPU ranks: 2.7% of the step,
    though 7% above the mean free time) are even; a rank idling 60 ms more than its peers (7.4%) is slow,
    and the finding names the figure it compared."""
    def rank(i: int, free_ms: float) -> Profile:
        steps = pa.table({"step_id": pa.array([0], pa.int64()), "start_ns": pa.array([T0], pa.int64()),
                          "end_ns": pa.array([T0 + int(810e6)], pa.int64()),
                          "computing_ns": pa.array([int(231e6)], pa.int64()),
                          "communication_ns": pa.array([int((810 - 231 - free_ms) * 1e6)], pa.int64()),
                          "free_ns": pa.array([int(free_ms * 1e6)], pa.int64())})
        return Profile(meta=ProfileMeta(format="ascend_pt", rank=i, device="910B3"), steps=steps)

    even = diagnose_group(ProfileGroup(profiles=[rank(0, 158.6), rank(1, 137.0)]))
    assert "slow_rank" not in rules_of(even)
    group = ProfileGroup(profiles=[rank(0, 137.0), rank(1, 197.0), rank(2, 137.0), rank(3, 140.0)])
    (slow,) = findings_for(diagnose_group(group), "slow_rank")
    assert slow.details["slow_rank"] == 1 and slow.evidence["kind"] == "free"
    assert slow.evidence["spread_us"] == pytest.approx(60_000, rel=1e-3)
    assert slow.evidence["step_time_us"] == pytest.approx(810_000, rel=1e-3)
    assert slow.evidence["spread_vs_step"] == pytest.approx(60 / 810, abs=1e-3)
    assert slow.evidence["spread_vs_step"] > slow.evidence["threshold"] == 0.05
    assert "by 60.0 ms, 7% of the step" in slow.title


def _rank_of_stage(i: int, stage: int, computing_ms: float, world: int) -> Profile:
    """A rank that kept only its step_trace_time, with torch_npu's profiler_metadata.json naming the job's
    world size and the rank's pipeline stage (its place in its ``pp`` group)."""
    steps = pa.table({"step_id": pa.array([0], pa.int64()), "start_ns": pa.array([T0], pa.int64()),
                      "end_ns": pa.array([T0 + int(20e6)], pa.int64()),
                      "computing_ns": pa.array([int(computing_ms * 1e6)], pa.int64()),
                      "communication_ns": pa.array([1_000_000], pa.int64()),
                      "free_ns": pa.array([0], pa.int64())})
    metadata = {"distributed_args": {"rank": i, "world_size": world},
                "parallel_group_info": {"group_name_9": {"group_name": "pp", "group_rank": stage,
                                                         "global_ranks": [i % 2, i % 2 + 2]}}}
    return Profile(meta=ProfileMeta(format="ascend_pt", rank=i, device="910B3", extra={"metadata": metadata}),
                   steps=steps)


def test_slow_rank_compares_ranks_of_one_pipeline_stage_and_names_the_ranks_missing() -> None:
    """Pipeline stages run different layers: a later stage computing more is not a slow rank. Ranks 0, 1 run
    stage 0 and ranks 2, 3 stage 1 (which computes 40% more by design); rank 3 is 30% slower than its stage
    peer, so it is named, against rank 2 only. With 2 of 8 ranks uploaded the finding says so."""
    ranks = [_rank_of_stage(0, 0, 10, 4), _rank_of_stage(1, 0, 10, 4), _rank_of_stage(2, 1, 14, 4),
             _rank_of_stage(3, 1, 18.2, 4)]
    (slow,) = findings_for(diagnose_group(ProfileGroup(profiles=ranks)), "slow_rank")
    assert slow.details["slow_rank"] == 3 and slow.details["ranks_compared"] == [2, 3]
    assert "only the ranks of one stage are compared: 2, 3" in slow.description
    assert "of the job's" not in slow.description  # every rank is here
    by_design = [_rank_of_stage(0, 0, 10, 4), _rank_of_stage(1, 0, 10, 4), _rank_of_stage(2, 1, 14, 4),
                 _rank_of_stage(3, 1, 14, 4)]
    assert "slow_rank" not in rules_of(diagnose_group(ProfileGroup(profiles=by_design)))
    two_of_eight = [_rank_of_stage(0, 0, 10, 8), _rank_of_stage(1, 0, 13, 8)]
    (part,) = findings_for(diagnose_group(ProfileGroup(profiles=two_of_eight)), "slow_rank")
    assert part.details["slow_rank"] == 1 and part.evidence["world_size"] == 8
    assert "Only 2 of the job's 8 ranks are in this upload" in part.description


def test_config_overrides_and_rejects_typos() -> None:
    prof = decoder_profile(planted=frozenset(["matmul_tiling"]))
    assert "matmul_tiling" not in rules_of(diagnose(prof, {"matmul_tiling": {"efficiency_below": 0.2}}))
    assert "matmul_tiling" not in rules_of(diagnose(prof, {"disabled": ["matmul_tiling"]}))
    with pytest.raises(ValueError):
        RuleConfig.from_mapping({"matmul_tiling": {"efficency_below": 0.2}})
    with pytest.raises(ValueError):
        RuleConfig.from_mapping({"no_such_rule": {}})


def test_graph_metrics_and_structure() -> None:
    g = OperatorCallGraph(decoder_profile(tokens=5, layers=3))
    m = g.metrics()
    assert set(METRICS) == set(m)
    for name in ("per_token_latency_ms", "tokens_per_s", "attention_hbm_time_share",
                 "matmul_ai_core_utilization", "kv_cache_noncontiguous_share", "norm_launch_overhead_share",
                 "hbm_bandwidth_utilization", "ai_core_utilization"):
        assert m[name] is not None, name
    assert m["tokens_per_s"] == pytest.approx(1000 / m["per_token_latency_ms"], rel=0.01)
    assert 0.75 < m["matmul_ai_core_utilization"] <= 0.81  # the builder runs MatMuls at 80% of the bound
    st = g.structure()
    assert st["layers"] == 3 and st["hidden"] == 4096 and st["vocab"] == 32000 and st["head_dim"] == 128
    planted = OperatorCallGraph(decoder_profile(planted=frozenset(["kv_cache_layout"])))
    assert planted.metrics()["kv_cache_noncontiguous_share"] > 0.2
    assert m["kv_cache_noncontiguous_share"] == 0.0


def test_links_fall_back_to_correlation_then_containment() -> None:
    prof = decoder_profile(tokens=1, layers=1)
    n = prof.kernels.num_rows
    starts = prof.kernels["start_ns"].to_numpy()
    host = pa.table({"name": ["aten::op"] * n, "start_ns": pa.array(starts - 500, pa.int64()),
                     "dur_ns": pa.array([1000] * n, pa.int64()),
                     "correlation_id": pa.array(range(n), pa.int64())})
    with_corr = Profile(meta=prof.meta, kernels=prof.kernels.set_column(
        prof.kernels.schema.get_field_index("correlation_id"), "correlation_id",
        pa.array(range(n), pa.int64())), host_ops=host)
    links = OperatorCallGraph(with_corr).links()
    assert links.num_rows == n and set(links["kind"].to_pylist()) == {"correlation"}
    contained = OperatorCallGraph(Profile(meta=prof.meta, kernels=prof.kernels, host_ops=host)).links()
    assert contained.num_rows == n
    assert contained["host_index"].to_pylist() == contained["kernel_index"].to_pylist()


def test_sku_table_and_detection() -> None:
    assert get_sku("910B2").fp16_tflops.value == pytest.approx(353.89, abs=0.01)
    assert get_sku("910B4").fp16_tflops.value == pytest.approx(245.76, abs=0.01)
    assert get_sku("910B2").fp16_tflops.tag == "derived"
    assert get_sku("910B2").ridge_flop_per_byte == pytest.approx(221, abs=1)
    assert {"910B1", "910B2", "910B3", "910B4", "910_93", "910A", "310P3", "A100", "H100",
            "H200"} <= set(SKUS)
    over = get_sku("910B3", {"hbm_gbps": 1200})
    assert over.hbm_gbps.value == 1200 and over.hbm_gbps.tag == "project_override"
    assert "hbm_gbps" in over.overridden
    assert normalize_sku_name("Ascend910B3") == "910B3"
    assert normalize_sku_name("NVIDIA A100-SXM4-80GB") == "A100"
    assert normalize_sku_name("Ascend910_9382") == "910_93"
    assert detect_sku(Profile(meta=ProfileMeta(device="Ascend910B4"))) == "910B4"
    assert detect_sku(Profile()) is None
    spec = get_sku("910B3")
    assert spec.bound_time_s(2e12, 0) == pytest.approx(2e12 / (spec.fp16_tflops.value * 1e12))


def test_sku_choice_changes_the_verdict_basis() -> None:
    report = diagnose(decoder_profile(planted=frozenset(["matmul_tiling"]), device=None), sku="910B4")
    assert report.profile["device"] == "910B4" and report.profile["sku_source"] == "given"
    default = diagnose(decoder_profile(device=None))
    assert any(w.startswith("the profile does not name its Ascend part; assumed 910B3")
               for w in default.warnings)
    # a family name only (NPU_INFO's "Ascend910B"): the warning names it, not "does not name"
    family = decoder_profile(device=None)
    family.meta.device = "Ascend910B"
    warned = diagnose(family).warnings
    assert any(w.startswith("the profile names the chip family (Ascend910B) but not its part; assumed 910B3")
               for w in warned), warned


def test_empty_profile_is_quiet() -> None:
    report = diagnose(Profile())
    assert report.findings == [] and report.estimated_combined_speedup == 1.0


def test_html_and_markdown_escape_profile_strings() -> None:
    prof = decoder_profile(planted=frozenset(["matmul_tiling"]))
    evil = "</script><script>alert(1)</script>{{ secret }}"
    names = pa.array([evil] * prof.kernels.num_rows)
    prof = Profile(meta=ProfileMeta(format="ascend_pt", device="910B3", source=evil), steps=prof.steps,
                   kernels=prof.kernels.set_column(0, "name", names))
    report = diagnose(prof)
    html = render(report, "html")
    assert "<script>" not in html and "&lt;/script&gt;" in html
    md = render(report, "md")
    assert "</script>" not in md
    assert json.loads(render(report, "json"))["findings"]


def test_fused_norms_that_wait_on_the_host_are_flagged_with_their_gaps() -> None:
    # fused RmsNorm kernels (3 us) each behind a 40 us host gap: the rule's second signature. Each saves its
    # gap above graph mode's residual (1 us), and nothing else is counted
    tokens, layers = 4, 2
    profile = decoder_profile(tokens=tokens, layers=layers, fused_norm_gap_us=40.0)
    report = diagnose(profile)
    finding = next(f for f in report.findings if f.rule == "norm_launch_overhead")
    gaps = OperatorCallGraph(profile).gap_before_ns[
        [i for i, op in enumerate(profile.kernels["op_type"].to_pylist()) if op == "RmsNorm"]]
    waiting = gaps[gaps > 0]  # the run's first kernel, a norm, has no gap before it
    assert len(waiting) == tokens * (2 * layers + 1) - 1
    assert finding.evidence["host_waiting_fused_norms"] == len(waiting)
    assert finding.evidence["unfused_chains"] == 0
    # 40 us each, 41 where a step's 1 us tail comes before it
    assert finding.estimated_saving_us == pytest.approx(float((waiting - 1_000).sum()) / 1e3, abs=0.01)
    # with the gaps short again the signature is gone
    quiet = diagnose(decoder_profile(tokens=tokens, layers=layers, fused_norm_gap_us=2.0))
    assert "norm_launch_overhead" not in rules_of(quiet)
