"""``analyze`` on every real sample in ../shared/samples: it runs, and it finds exactly what the sample's own
files back (sample_oracle.py reads them without the engine).

Where msprof-analyze's advisor checks the same thing on the same data (docs/formats.md §4.3), the verdicts are
compared in comments beside the assertions.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pyarrow as pa
import pytest

from pypto_core import formats  # noqa: E402
from pypto_core.errors import InputError
from pypto_core.profile import Profile, ProfileGroup, ProfileMeta
from pypto_core.report_render import render
from pypto_core.rules import diagnose_group
from pypto_core.rules.registry import discover
from tests.core.rules.sample_oracle import UNPREDICTED, expected_rules, read_facts
from tests.paths import REPO, SAMPLES, sample_cases

# Every sample's rules are predicted from its own files by tests/core/rules/sample_oracle.py (the standard
# library reading step_trace_time, communication.json, kernel_details, the CANN API calls and torch_npu's
# Overlap Analysis, or for Kineto the kernels, copies and launches), never from the engine. FLOOR pins what
# the files say today, so that a change of the oracle itself cannot empty the expectation unnoticed: the CNN
# and Qwen3 training steps are bound by communication not overlapped (torch_npu's own step_trace_time); the
# advisor's Dynamic Shape holds where kernel_details says every op is dynamic (docs/formats.md §4.3). The
# Qwen3 ranks' free time differs by 21.7 ms in an 810 ms step (2.7%, under the advisor's 5% of the step): no
# slow rank there.
FLOOR: dict[str, set[str]] = {
    "ascend_pt/qwen3_0.6b_train_4npu_level2": {"communication_not_overlapped", "communication_wait",
                                               "dynamic_shape"},
    "ascend_pt/cnn_8npu_text_level1": {"communication_not_overlapped", "host_bound_gaps", "dynamic_shape",
                                       "sync_stall", "block_dim"},
    "ascend_pt/trimmed_2023_memoryl0": {"communication_not_overlapped", "communication_wait", "block_dim",
                                         "aicpu_operators"},
    "kineto/a100_nccl_2rank/nccl_data.json.gz": {"host_bound_gaps"},
    "kineto/trace_diff_pair/test.json.gz": {"memcpy_bound"},
}
# Samples that hold only zero-byte files (msinsight's file-naming fixtures), and the message they must give.
UNREADABLE = {"msprof/file_naming_placeholders": r"file is empty \(0 bytes\)"}
SEED_FOUR = {"matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead"}


def _samples() -> list[str]:
    out = []
    for top in ("ascend_pt", "msprof", "kineto"):
        for p in sorted((SAMPLES / top).iterdir()) if (SAMPLES / top).exists() else []:
            if top == "kineto":
                out += [str(f.relative_to(SAMPLES)) for f in sorted(p.iterdir())]
            else:
                out.append(str(p.relative_to(SAMPLES)))
    return out


@pytest.mark.parametrize("sample", sample_cases(_samples()))
def test_analyze_runs_on_every_sample(sample: str) -> None:
    if sample in UNREADABLE:
        # zero-byte placeholders: analyze must refuse them with the clear message, not skip them
        with pytest.raises(InputError, match=UNREADABLE[sample]):
            formats.open_profiles(SAMPLES / sample)
        return
    group = formats.open_profiles(SAMPLES / sample)
    report = diagnose_group(group)
    assert not [w for w in report.warnings if w.startswith("rule ")], report.warnings  # no rule crashed
    found = {f.rule for f in report.findings}
    # None of these real runs is an LLM decode run with the
    # seed's anti-patterns: no seed finding without evidence
    assert not found & SEED_FOUR, (sample, found)
    evidence = expected_rules(read_facts(SAMPLES / sample))
    assert FLOOR.get(sample, set()) <= set(evidence), (sample, evidence)
    assert found == set(evidence), {"sample": sample, "unbacked": sorted(found - set(evidence)),
                                    "missed": sorted(set(evidence) - found), "evidence": evidence}
    assert not {r for r in found if UNPREDICTED.match(r)}, found
    # an upper bound bounds the replay of its own fix too: "at most X" never sits beside a larger replayed
    # saving
    for f in report.findings:
        alone = f.details.get("replayed_alone_us")
        if f.saving_bound == "upper_bound" and alone is not None:
            assert f.estimated_saving_us >= alone, (sample, f.rule, f.estimated_saving_us, alone)
        # a replayed saving larger than the time its finding explains says by how much
        beyond = f.details.get("replayed_beyond_bucket_us")
        explained = (report.profile["time_breakdown"].get(discover()[f.rule].explains, 0) / 1e3
                     if alone is not None else 0)
        assert beyond == (pytest.approx(alone - explained, abs=0.01) if alone is not None
                          and alone - explained > 0.5 else None), (sample, f.rule, beyond, alone, explained)
        if beyond:
            assert "beyond the time this finding explains" in render(report, "md"), (sample, f.rule)
    json.dumps(report.to_dict())


def test_cli_analyze_json_on_a_real_sample(tmp_path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "pypto_core", "analyze",
                           str(SAMPLES / "ascend_pt/qwen3_0.6b_train_4npu_level2/rank_0_ascend_pt"), "--sku",
                           "910B2", "-o", str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["profile"]["device"] == "910B2" and doc["profile"]["kernel_count"] == 2463
    assert {"rule", "severity", "title", "description", "ops", "evidence", "time_share",
            "estimated_saving_us", "estimated_speedup", "remedies"} <= set(doc["findings"][0])


def test_cli_analyze_unreadable_input_exits_2(tmp_path) -> None:
    bad = tmp_path / "nothing.csv"
    bad.write_text("not a profile\n")
    proc = subprocess.run([sys.executable, "-m", "pypto_core", "analyze", str(bad)], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 2 and "nothing.csv" in proc.stderr


def _group_from_cluster_csv(path) -> ProfileGroup:
    profiles = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"] != "rank":
                continue
            steps = pa.table({"step_id": pa.array([0], pa.int64()),
                              "computing_ns": pa.array([int(float(row["Computing"]) * 1e3)], pa.int64()),
                              "communication_ns": pa.array(
                                  [int(float(row["Communication(Not Overlapped)"]) * 1e3)], pa.int64()),
                              "free_ns": pa.array([int(float(row["Free"]) * 1e3)], pa.int64())})
            profiles.append(Profile(meta=ProfileMeta(rank=int(row["Index"]), device="910B3"), steps=steps))
    return ProfileGroup(profiles=profiles)


def test_slow_rank_on_the_peer_cluster_tables() -> None:
    # msprof-analyze's cluster step table (peer_outputs): the advisor's slow_rank (SlowRankAnalyzer,
    # 26.2.0) flags a column whose spread over the ranks (max - min) is above 5% of the mean step time
    # (Computing + Communication + Free); so does ours (docs/formats.md §4.3). In the 8-rank advisor run
    # computing is even (a 1.6 ms spread in a 1.71 s step) but free (host-idle) time spreads 596 ms, 35% of
    # the step, and rank 1 has the most: the advisor's slow rank for free time (get_global_step_rank), and
    # ours. The advisor's own verdict on these tables is recorded in docs/attribution.md.
    report = diagnose_group(_group_from_cluster_csv(SAMPLES / "peer_outputs/msprof_analyze_cluster_advisor/"
                                                    "cluster_step_trace_time.csv"))
    slow = [f for f in report.findings if f.rule == "slow_rank"]
    assert slow and slow[0].details["slow_rank"] == 1 and slow[0].evidence["kind"] == "free"
    assert slow[0].evidence["computing_spread_vs_step"] < 0.05
    assert slow[0].evidence["spread_vs_step"] == pytest.approx(
        slow[0].evidence["spread_us"] / slow[0].evidence["step_time_us"], rel=1e-3)
    assert slow[0].evidence["spread_us"] == pytest.approx(1488610.06 - 892836.90, rel=1e-3)
    # The 16-rank 2023 run: computing spreads 4.9 ms (1.6% of a ~300 ms step), below the threshold; free
    # time spreads 29 ms (8.7% of a 338 ms step): rank 13 idles the most.
    report16 = diagnose_group(_group_from_cluster_csv(SAMPLES / "peer_outputs/msprof_analyze_cluster_2023/"
                                                      "cluster_step_trace_time.csv"))
    [slow16] = [f for f in report16.findings if f.rule == "slow_rank"]
    assert slow16.evidence["kind"] == "free" and slow16.details["slow_rank"] == 13
    assert slow16.evidence["computing_spread_vs_step"] < 0.05 < slow16.evidence["spread_vs_step"]


def _waiting_samples() -> list[str]:
    """Samples whose own communication.json says the collectives mostly wait (Transit under half of
    Elapse)."""
    out = []
    for sample in _samples():
        if sample.startswith("kineto") or sample in UNREADABLE:
            continue
        facts = read_facts(SAMPLES / sample)
        if facts.comm_elapse and facts.step_rows and facts.comm_transit < 0.5 * facts.comm_elapse:
            out.append(sample)
    return out


@pytest.mark.parametrize("sample", sample_cases(_waiting_samples() if SAMPLES.exists() else []))
def test_a_wait_for_other_ranks_is_never_this_ranks_saving(sample: str) -> None:
    # A collective that waits is waiting for a late peer: only a fix on that rank removes the wait. On the
    # CNN 8-NPU rank 0 (step_trace_time: Communication(Not Overlapped) 96.0 ms of a 130 ms step;
    # communication.json: Transit 8.1 of 199.9 ms) counting the wait as this rank's saving read 6.8x; what is
    # in this rank's power is the few ms of transfer that compute could hide.
    facts = read_facts(SAMPLES / sample)
    waiting_share = (facts.comm_elapse - facts.comm_transit) / facts.comm_elapse
    exposed_us = facts.step_rows[0]["comm_no"]
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    [finding] = [f for f in report.findings if f.rule == "communication_not_overlapped"]
    assert finding.peer_wait_us == pytest.approx(exposed_us * waiting_share, rel=0.10)
    assert finding.estimated_saving_us <= exposed_us * (1 - waiting_share) * 1.10 + 1.0
    assert finding.saving_bound == "upper_bound" and finding.severity == "high"
    # one figure: every finding about the same collectives carries the run's wait, and so does the headline
    assert report.profile["peer_wait"]["wait_us"] == finding.peer_wait_us
    for wait in (f for f in report.findings if f.rule == "communication_wait"):
        assert wait.estimated_saving_us == 0 and wait.peer_wait_us == finding.peer_wait_us
    # Every finding fixed together still waits for the other ranks: the run cannot drop below that wait.
    wall_us = report.profile["time_breakdown"]["wall_ns"] / 1e3
    assert wall_us / report.estimated_combined_speedup >= finding.peer_wait_us


CNN_RANK0 = "ascend_pt/cnn_8npu_text_level2"


@pytest.mark.parametrize("sample", sample_cases([CNN_RANK0]))
def test_the_wait_for_other_ranks_is_the_headline(sample: str) -> None:
    # CNN 8-NPU rank 0: its own files say it waits for the other ranks most of its step (step_trace_time:
    # Communication(Not Overlapped) 96.0 ms of 148.8; communication.json: Transit 4% of the collectives'
    # Elapse), while its findings' combined speedup is 1.40x and counts none of that wait. The wait leads.
    facts = read_facts(SAMPLES / sample)
    oracle_us = facts.step_rows[0]["comm_no"] * (facts.comm_elapse - facts.comm_transit) / facts.comm_elapse
    oracle_share = oracle_us / facts.total  # the ProfilerStep span of trace_view.json
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    pw = report.profile["peer_wait"]
    assert pw["wait_us"] == pytest.approx(oracle_us, rel=0.005)
    assert pw["share_of_run"] == pytest.approx(oracle_share, rel=0.005)
    assert 90_000 < pw["wait_us"] < 95_000 and pw["transit_recorded"] and pw["ranks_in_profile"] == 1
    assert [f.peer_wait_us for f in report.findings if f.peer_wait_us] == [pw["wait_us"]]
    said = f"This rank waits {pw['wait_us'] / 1e3:.1f} ms ({100 * pw['share_of_run']:.1f}% of the run)"
    assert said.startswith("This rank waits 92.1 ms (61.9% of the run)")
    md, page = render(report, "md"), render(report, "html")
    for text, findings_start in ((md, "## Findings"), (page, "<h2>Findings")):
        assert said in text
        # above the findings' savings, with where to look next: one rank here, so upload the others
        assert text.index(said) < text.index(findings_start) < text.index("estimated saving")
        assert "Upload every rank (cluster page) to see which rank is late." in text
    assert "在集合通信中等待其他 Rank 92.1 ms（占运行时间的 61.9%）" in render(report, "md", "zh-Hans")
    # its three numbers read as one: the not-overlapped time (step_trace_time) times the share of the
    # collectives' time that moves no data (communication.json's Elapse less Transit)
    how = (f"It is the {facts.step_rows[0]['comm_no'] / 1e3:.1f} ms of communication not overlapped with "
           f"compute times the {100 * (1 - facts.comm_transit / facts.comm_elapse):.0f}% of the collectives' "
           f"time that moves no data")
    parts = pw["collectives"]  # Elapse = Transit + Wait + Idle, as communication.json splits it
    assert parts["transit"] + parts["wait"] + parts["idle"] == pytest.approx(parts["elapse"], rel=0.001)
    transit_share = facts.comm_transit / facts.comm_elapse
    assert parts["transit"] / parts["elapse"] == pytest.approx(transit_share, rel=0.01)
    split = (f"notify Wait {parts['wait'] / 1e3:.1f} ms and Idle {parts['idle'] / 1e3:.1f} ms of their "
             f"{parts['elapse'] / 1e3:.1f} ms.")
    assert how in md and split in md
    assert json.loads(render(report, "json"))["profile"]["peer_wait"] == pw


@pytest.mark.parametrize("sample", sample_cases(["ascend_pt/qwen3_0.6b_train_4npu_level2"]))
def test_a_profile_with_every_rank_points_to_the_cluster_view(sample: str) -> None:
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    pw = report.profile["peer_wait"]
    assert pw["ranks_in_profile"] == report.profile["ranks"] == 2
    md = render(report, "md")
    assert "This profile holds 2 ranks: the cluster view" in md and "Upload every rank" not in md
    # communication.json's time split writes Transit 0 here and its links' bandwidth info the transfer: 97.5
    # of the collectives' 420.2 ms, taken from the links, so the wait is the rest, not all of it
    assert pw["transit_recorded"] and 97_000 < pw["collectives"]["transit_from_links"] < 98_000
    assert "No transfer time is recorded" not in md
    # and 97% of that wait is in batchSendRecv between the two pipeline stages: the bubble, said as such
    assert pw["p2p_share"] > 0.9 and "(the pipeline bubble)" in md
    [comm] = [f for f in report.findings if f.rule == "communication_not_overlapped"]
    assert "point-to-point send/receive between pipeline stages" in comm.description
    assert "The slow rank is the one to fix" not in comm.description


def _without_collectives() -> list[str]:
    """Samples whose own files record no collective at all (no communication.json rows, no HCCL/NCCL task)."""
    out = []
    for sample in _samples():
        if sample in UNREADABLE:
            continue
        facts = read_facts(SAMPLES / sample)
        if not facts.comm_elapse and not facts.comm:
            out.append(sample)
    return out


def test_the_single_device_inference_samples_have_no_collectives() -> None:
    if not SAMPLES.exists():  # pragma: no cover
        pytest.skip("needs the real samples")
    # the msprof export of a single-device inference run (workload inference_other) is among them
    assert "msprof/db_8npu_2023" in _without_collectives()


@pytest.mark.parametrize("sample", sample_cases(_without_collectives() if SAMPLES.exists() else []))
def test_no_wait_headline_without_collectives(sample: str) -> None:
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    assert report.profile["peer_wait"] is None
    assert "in collectives for other ranks" not in render(report, "md")
    assert "peer-wait" not in render(report, "html")


@pytest.mark.parametrize("sample", sample_cases(["kineto/a100_nccl_2rank/nccl_data.json.gz"]))
def test_nccl_kernels_claim_no_wait_for_other_ranks(sample: str) -> None:
    # A Kineto trace records one duration per NCCL kernel: transfer and waiting are not told apart (HTA does
    # not split them either), so the engine claims no wait for other ranks and says it cannot tell.
    group = formats.open_profiles(SAMPLES / sample)
    assert group.primary().communication.num_rows  # the collectives are there, with no split of their time
    report = diagnose_group(group)
    assert report.profile["peer_wait"] is None
    assert not [f.rule for f in report.findings if f.peer_wait_us]
    assert "in collectives for other ranks" not in render(report, "md")


@pytest.mark.parametrize("sample", sample_cases(_waiting_samples() if SAMPLES.exists() else []))
def test_the_wait_no_local_fix_recovers_opens_the_findings(sample: str) -> None:
    # On the CNN 8-NPU rank 0 a list sorted by saving reads host_bound_gaps 31.4 ms, sync_stall 8.0 ms,
    # dynamic_shape 5.2 ms, then the collectives' 3.9 ms of hideable transfer: the 92.1 ms this rank waits for
    # its peers, the step's largest cost, has no place in it. The report's order leads with what bounds the
    # step, each finding carries its place (rank), and the findings open with the wait and where it is fixed.
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    assert [f.rank for f in report.findings] == list(range(1, len(report.findings) + 1))
    dominant = report.profile["dominant_bucket"]
    assert dominant == "communication_not_overlapped"
    assert report.findings[0].rule == "communication_not_overlapped"
    assert json.loads(render(report, "json"))["findings"][0]["rank"] == 1
    pw = report.profile["peer_wait"]
    assert pw["fix_on"] == ("pipeline_schedule" if pw["p2p_share"] >= 0.5 else "late_rank")
    row = (f"Not recoverable on this rank: {pw['wait_us'] / 1e3:.1f} ms ({100 * pw['share_of_run']:.1f}% of "
           "the run) waiting in collectives for other ranks.")
    where = ("the pipeline schedule" if pw["fix_on"] == "pipeline_schedule" else "the late rank")
    for fmt, first in (("md", "### 1."), ("html", "<section>")):
        text = render(report, fmt)
        findings = text.split("Findings (")[1]
        assert row in findings and findings.index(row) < findings.index(first), fmt
        assert f"It goes with a fix on {where}" in findings
    assert "本 Rank 无法自行挽回" in render(report, "md", "zh-Hans")
    # no finding's saving counts the wait, and the saving-sorted list would have put it last or nowhere
    assert all(f.estimated_saving_us < pw["wait_us"] for f in report.findings)


def test_a_rank_that_waits_for_no_one_has_no_such_row() -> None:
    if not SAMPLES.exists():
        pytest.skip("needs the real samples")
    report = diagnose_group(formats.open_profiles(SAMPLES / "ascend_pt/timeline_2024/trace_view.json"))
    assert report.profile.get("peer_wait") is None
    assert "Not recoverable on this rank" not in render(report, "md")
    assert [f.rank for f in report.findings] == list(range(1, len(report.findings) + 1))


def test_a_saving_model_names_its_thresholds_with_the_values_used() -> None:
    """The saving model's setting names (`min_gap_us`) read with the values the run was judged by, a
    project's override included, in English and in Chinese; details.parameters lists every threshold."""
    from pypto_core.rules.finding import localize_finding

    if not SAMPLES.exists():
        pytest.skip("needs the real samples")
    group = formats.open_profiles(SAMPLES / "ascend_pt/timeline_2024/trace_view.json")
    report = diagnose_group(group, {"host_bound_gaps": {"min_gap_us": 7.5}})
    by_rule = {f.rule: f for f in report.findings}
    gaps, aicpu = by_rule["host_bound_gaps"], by_rule["aicpu_operators"]
    assert gaps.details["parameters"]["min_gap_us"] == 7.5
    assert set(gaps.details["parameters"]) == set(discover()["host_bound_gaps"].thresholds)
    assert "`min_gap_us` = 7.5" in gaps.saving_model and "`residual_gap_us` = " in gaps.saving_model
    assert "`aicore_speedup` = 10" in aicpu.saving_model and "[INFERRED]" not in aicpu.saving_model
    zh = localize_finding(aicpu.to_dict(), "zh-Hans")["saving_model"]
    assert "`aicore_speedup` = 10" in zh and "假设" in zh
    # rendered once more (a stored finding read again) the values are not doubled
    assert localize_finding(gaps.to_dict(), "en")["saving_model"] == gaps.saving_model


def test_a_lookup_moves_its_rows_not_its_whole_table() -> None:
    """An embedding lookup (GatherV2 of a [151936, 1024] vocabulary for 4096 tokens) reads the rows it
    writes, and its gradient adds those rows into a zeroed table: counted whole, the Qwen3 sample's lookup
    moved 320 MB in 49 µs (6.5 TB/s on a 1.6 TB/s 910B) and its gradient 639 MB in 130 µs."""
    from pypto_core.graph import OperatorCallGraph
    from pypto_core.hardware import resolve_sku

    if not SAMPLES.exists():
        pytest.skip("needs the real samples")
    profile = formats.open_profiles(SAMPLES / "ascend_pt/qwen3_0.6b_train_4npu_level2").primary()
    spec = resolve_sku(profile, None)[0]
    graph = OperatorCallGraph(profile, spec)
    op_types = profile.kernels["op_type"].to_pylist()
    rows_bytes = 4096 * 1024 * 2  # the 4096 looked-up rows of bf16
    for i, op in enumerate(op_types):
        if op == "GatherV2":  # read the rows, write them, read the 4096 int64 indices (+ the axis)
            assert graph.figure("bytes_moved", i) == pytest.approx(2 * rows_bytes + 4096 * 8, abs=64)
        if op in ("GatherV2", "EmbeddingDenseGradV2"):
            assert graph.figure("bytes_moved", i) / (graph.dur[i] / 1e9) < spec.hbm_bytes_per_s
    assert {"GatherV2", "EmbeddingDenseGradV2"} <= set(op_types)


@pytest.mark.parametrize("sample", ["ascend_pt/timeline_2024",
                                    "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt"])
def test_sync_calls_list_each_stall_once(sample: str) -> None:
    """``.item()`` nests: aten::item calls aten::_local_scalar_dense, which calls the runtime's memcpy or
    stream sync. Only the outermost call is listed, so the listed stalls add up to the finding's own."""
    if not SAMPLES.exists():
        pytest.skip("needs the real samples")
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    stall = next(f for f in report.findings if f.rule == "sync_stall")
    calls = stall.evidence["sync_calls"]
    assert "aten::item" in calls and "aten::_local_scalar_dense" not in calls
    assert sum(c["stall_us"] for c in calls.values()) == pytest.approx(stall.evidence["stall_us_total"],
                                                                       abs=0.01 * len(calls))
    assert all(c["stall_us"] > 0 for c in calls.values())


@pytest.mark.parametrize(("sample", "cause"), sample_cases([
    ("ascend_pt/qwen3_0.6b_train_4npu_level2", "the pipeline bubble"),
    ("ascend_pt/cnn_8npu_text_level1", "The cause is on the other ranks"),
]))
def test_a_collective_wait_names_the_cause_the_headline_names(sample: str, cause: str) -> None:
    """The Qwen ranks wait in sends and receives (a pipeline's bubble: the headline says fix the schedule);
    their communication_wait finding said "the cause is on the other ranks", and the cluster page found no
    slow rank. The CNN rank waits in all-reduces for late ranks, as the finding says."""
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    pw = report.profile["peer_wait"]
    wait = next((f for f in report.findings if f.rule == "communication_wait"), None)
    pipeline = pw["fix_on"] == "pipeline_schedule"
    assert pipeline == (cause == "the pipeline bubble")
    assert wait is not None or not pipeline  # the Qwen ranks' wait is a finding of its own
    if wait is not None:
        assert cause in wait.description
