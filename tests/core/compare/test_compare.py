"""Before/after comparison on simulated pairs (issue 8) and on real samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_core.compare import ProfileComparer, compare_profiles, regression, to_csv, to_markdown
from pypto_core.formats import open_profile
from pypto_core.hardware import SKUS
from pypto_core.rules import diagnose
from pypto_core.synth import synthesize
from tests.paths import REPO, SAMPLES

SEED_RULES = ("matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead")
TOKENS = 4

# Each metric the seed's table names, and the direction it must move when the named fix is applied.
EXPECTED_MOVES = {
    "all": {"per_token_latency_ms": "down", "tokens_per_s": "up", "kv_cache_noncontiguous_share": "down",
            "norm_launch_overhead_share": "down", "matmul_ai_core_utilization": "up"},
    "matmul_tiling": {"per_token_latency_ms": "down", "matmul_ai_core_utilization": "up"},
    "attention_memory_bound": {"per_token_latency_ms": "down"},
    "kv_cache_layout": {"per_token_latency_ms": "down", "kv_cache_noncontiguous_share": "down"},
    "norm_launch_overhead": {"per_token_latency_ms": "down", "norm_launch_overhead_share": "down"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("cmp")
    out = {"planted": open_profile(synthesize(root / "planted", tokens=TOKENS))}
    for name, fixed in [("all", frozenset(SEED_RULES))] + [(r, frozenset([r])) for r in SEED_RULES]:
        out[name] = open_profile(synthesize(root / name, tokens=TOKENS, fixed=fixed))
    return out


@pytest.fixture(scope="module")
def reports(runs: dict[str, object]) -> dict[str, object]:
    return {name: diagnose(p) for name, p in runs.items()}


@pytest.mark.parametrize("fix", list(EXPECTED_MOVES))
def test_table_moves_in_the_right_direction(runs, reports, fix) -> None:
    result = ProfileComparer(runs["planted"], runs[fix], base_report=reports["planted"],
                             candidate_report=reports[fix]).compare()
    for name, direction in EXPECTED_MOVES[fix].items():
        row = result.metric(name)
        assert row["delta"] is not None, name
        assert (row["delta"] < 0) == (direction == "down"), (fix, name, row)
        assert row["better"] is True, (fix, name, row)
    fixed_rules = set(SEED_RULES) if fix == "all" else {fix}
    status = {f["rule"]: f["status"] for f in result.findings}
    for rule in fixed_rules:
        assert status.get(rule) == "fixed", (fix, rule, status)
    for rule in set(SEED_RULES) - fixed_rules:
        assert status.get(rule) == "persisting", (fix, rule, status)


def test_latency_delta_equals_the_two_profiles_own_numbers(runs, reports) -> None:
    result = ProfileComparer(runs["planted"], runs["all"]).compare()
    row = result.metric("per_token_latency_ms")
    base = reports["planted"].profile["decode"]["per_token_ms_p50"]
    new = reports["all"].profile["decode"]["per_token_ms_p50"]
    assert row["base"] == pytest.approx(base) and row["new"] == pytest.approx(new)
    assert row["delta"] == pytest.approx(new - base)
    assert row["delta_pct"] == pytest.approx((new - base) / base * 100)
    assert row["significant"] is True and row["spread"]["base_steps"] >= 3


def test_renamed_attention_kernels_are_matched_through_their_block(runs) -> None:
    result = ProfileComparer(runs["planted"], runs["attention_memory_bound"]).compare()
    att = next(b for b in result.blocks if b["block"] == "attention")
    assert any("BatchMatMul" in op for op in att["base_op_types"])
    assert any("Attention" in op for op in att["new_op_types"])
    assert att["base_count"] > 0 and att["new_count"] > 0 and att["delta_us"] < 0
    ops = {o["op_type"]: o for o in result.ops}
    assert any(o["status"] == "added" and "Attention" in k for k, o in ops.items())


def test_estimated_savings_are_set_against_measured(runs, reports) -> None:
    result = ProfileComparer(runs["planted"], runs["all"], base_report=reports["planted"],
                             candidate_report=reports["all"]).compare()
    seen = set()
    for f in result.findings:
        if f["rule"] in SEED_RULES:
            seen.add(f["rule"])
            assert f["measured_saving_us"] and f["measured_saving_us"] > 0, f
            # the rules' saving models against what the fix really saved (issue 5 asks for 30%)
            assert abs(f["estimate_error_pct"]) < 30, f
    assert seen == set(SEED_RULES)


def test_self_comparison_reports_no_significant_change(runs) -> None:
    columns = runs["planted"].kernels.column_names
    result = ProfileComparer(runs["planted"], runs["planted"]).compare()
    # a side lets go of its kernels' text once coded, from its own copy: the caller's profile keeps them
    assert runs["planted"].kernels.column_names == columns
    assert all(m["significant"] in (False, None) for m in result.metrics)
    assert all(o["delta_us"] == 0 for o in result.ops)
    assert regression(result, 0.0) == []


def test_real_npu_sample_compared_with_itself() -> None:
    path = SAMPLES / "ascend_pt" / "cnn_8npu_text_level1" / "rank0_ascend_pt"
    prof = open_profile(path)
    result = compare_profiles(prof, prof)
    assert all(m["significant"] in (False, None) for m in result.metrics)
    assert result.ops and all(o["delta_us"] == 0 for o in result.ops)
    assert result.findings and all(f["status"] == "persisting" for f in result.findings)


def test_given_loaders_one_profile_is_held_at_a_time() -> None:
    """``ProfileComparer`` given loaders (as the worker and the CLI call it) reduces the baseline to its side
    and lets its profile go before the candidate loads, with the same result as two loaded profiles."""
    import gc
    import weakref

    pair = SAMPLES / "kineto" / "trace_diff_pair"
    alive: list[weakref.ref] = []

    def loader(name: str):
        def load():
            gc.collect()
            held = [r for r in alive if r() is not None]
            assert not held, "the baseline's profile is still held while the candidate loads"
            profile = open_profile(pair / name)
            alive.append(weakref.ref(profile))
            return profile
        return load

    lazy = ProfileComparer(loader("control.json.gz"), loader("test.json.gz"))
    assert len(alive) == 2
    loaded = ProfileComparer(open_profile(pair / "control.json.gz"), open_profile(pair / "test.json.gz"))
    assert lazy.compare().to_dict() == loaded.compare().to_dict()
    # compare_profiles diagnoses each side as it loads: the findings' status is kept
    result = compare_profiles(loader("control.json.gz"), loader("test.json.gz"))
    assert result.findings and {f["status"] for f in result.findings} <= {"fixed", "persisting", "new"}


def _kernel_time_per_step_us(path) -> tuple[dict[str, float], int]:
    """Device time per kernel name (kernels, copies, sets) that starts inside a ProfilerStep#N window, per
    step, and the number of steps: summed from the raw trace."""
    import collections
    import gzip

    events = json.load(gzip.open(path))["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    total: dict[str, float] = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and any(
                lo <= e["ts"] < hi for lo, hi in steps):
            total[e["name"]] += e.get("dur", 0) / len(steps)
    return total, len(steps)


def test_real_kineto_pair_headline_deltas() -> None:
    pair = SAMPLES / "kineto" / "trace_diff_pair"
    result = compare_profiles(open_profile(pair / "control.json.gz"), open_profile(pair / "test.json.gz"))
    ops = result.ops
    assert ops, "the pair shares GPU kernels"
    # two training runs with profiler steps and no decode: op times per step, as the aligned rows, and no
    # warning about decode tokens neither run has
    assert result.normalisation == "per_step" == result.alignment["unit"]
    assert not any("decode tokens" in w for w in result.warnings), result.warnings
    # the pair's own numbers, summed from the raw traces: device time per kernel name inside the steps,
    # per step
    (base, base_steps), (new, new_steps) = (_kernel_time_per_step_us(pair / f"{side}.json.gz")
                                            for side in ("control", "test"))
    assert base_steps == new_steps == 6
    delta = {name: new.get(name, 0) - base.get(name, 0) for name in set(base) | set(new)}
    biggest = max(delta, key=lambda name: abs(delta[name]))
    top = max(ops, key=lambda o: abs(o["delta_us"]))
    assert top["op_type"] == biggest and top["delta_us"] == pytest.approx(delta[biggest], rel=1e-6)
    total_base = sum(o["base_us"] for o in ops)
    total_new = sum(o["base_us"] + o["delta_us"] for o in ops)
    assert total_base == pytest.approx(sum(base.values()), rel=1e-6)
    assert total_new == pytest.approx(sum(new.values()), rel=1e-6)
    assert (total_new > total_base) == (sum(new.values()) > sum(base.values()))  # the test run spends more
    # the pair was recorded on two GPU generations: the comparison says so instead of hiding it
    assert (result.base["device"], result.new["device"]) == ("A100", "V100")
    assert any("different devices" in w for w in result.warnings)
    # and on two ranks of two jobs (rank 3 of 8, rank 1 of 2): said too
    assert (result.summary["base"]["rank"], result.summary["new"]["rank"]) == (3, 1)
    assert "different ranks: rank 3 vs rank 1; their figures differ by role" in " ".join(result.warnings)
    latency = result.metric("per_token_latency_ms")
    assert latency["base"] is None or latency["significant"] is not None
    # a training run's headline is its step time: the median ProfilerStep#N of each trace, tested per step
    step = result.metric("step_time_ms")
    assert (step["base"], step["new"]) == (pytest.approx(76.8335), pytest.approx(114.6895))
    assert step["noise"]["method"] == "per_step_median" and step["noise"]["base_samples"] == 6
    assert step["better"] is False and step["significant"]


def test_check_gates_a_stepped_run_on_its_step_time(tmp_path) -> None:
    """``pypto check`` of a training run (steps, no decode) names its step time; a slower run beyond the
    noise and the limit is a regression, exit 3."""
    pair = SAMPLES / "kineto" / "trace_diff_pair"
    same = subprocess.run([sys.executable, "-m", "pypto_core", "check", str(pair / "control.json.gz"),
                           "--baseline", str(pair / "control.json.gz")], capture_output=True, text=True,
                          cwd=REPO)
    assert same.returncode == 0 and same.stdout.startswith("OK step_time_ms 76.8335 -> 76.8335"), same
    # the test run: every one of its 6 steps (82-166 ms) slower than every one of the control's (75-81 ms),
    # a change the medians' spread alone calls noise
    slower = subprocess.run([sys.executable, "-m", "pypto_core", "check", str(pair / "test.json.gz"),
                             "--baseline", str(pair / "control.json.gz")], capture_output=True, text=True,
                            cwd=REPO)
    assert slower.returncode == 3, slower
    assert slower.stdout.splitlines()[0] == "REGRESSION step_time_ms: 76.834 -> 114.7 ms (+49.3%, limit 5%)"
    result = compare_profiles(open_profile(pair / "control.json.gz"), open_profile(pair / "test.json.gz"))
    step = result.metric("step_time_ms")
    assert step["noise"]["separated"] and step["noise"]["verdict"] == "worse"
    assert abs(step["new"] - step["base"]) < step["noise"]["threshold"]  # the medians' test alone: noise
    assert regression(result, 60.0) == []  # within a looser limit


def test_exports_escape_untrusted_names(runs) -> None:
    result = ProfileComparer(runs["planted"], runs["all"]).compare().to_dict()
    result["ops"].insert(0, {"op_type": "=HYPERLINK(\"x\")|<script>", "base_us": 1.0, "new_us": 0.0,
                             "delta_us": -1.0, "base_count": 1, "new_count": 0, "status": "removed"})
    md = to_markdown(result)
    assert "per_token_latency_ms" in md and "<script>" not in md and "\\|" in md
    csv_text = to_csv(result)
    assert "'=HYPERLINK" in csv_text


def test_check_command_exits_nonzero_on_regression(runs, tmp_path: Path) -> None:
    planted = runs["planted"].save(tmp_path / "planted")
    fixed = runs["all"].save(tmp_path / "fixed")
    cmd = [sys.executable, "-m", "pypto_core", "check"]
    worse = subprocess.run(cmd + [str(planted), "--baseline", str(fixed), "--max-regression", "5%"],
                           capture_output=True, text=True)
    assert worse.returncode == 3, worse.stderr
    assert "REGRESSION per_token_latency_ms" in worse.stdout
    ok = subprocess.run(cmd + [str(fixed), "--baseline", str(planted), "--max-regression", "5%"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_compare_command_json_shape(runs, tmp_path: Path) -> None:
    a = runs["planted"].save(tmp_path / "a")
    b = runs["kv_cache_layout"].save(tmp_path / "b")
    out = subprocess.run([sys.executable, "-m", "pypto_core", "compare", str(a), str(b), "--format", "json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert {"metrics", "ops", "findings"} <= set(data)
    names = {m["name"] for m in data["metrics"]}
    assert {"per_token_latency_ms", "tokens_per_s", "attention_hbm_time_share", "matmul_ai_core_utilization",
            "kv_cache_noncontiguous_share", "norm_launch_overhead_share", "hbm_bandwidth_utilization",
            "ai_core_utilization"} <= names
    assert {"op_type", "base_us", "new_us", "delta_us", "base_count", "new_count"} <= set(data["ops"][0])
    assert {f["rule"]: f["status"] for f in data["findings"]}["kv_cache_layout"] == "fixed"


@pytest.mark.parametrize("command", ["compare", "analyze"])
def test_an_unknown_sku_is_one_line_naming_the_known_ones(runs, tmp_path: Path, command: str) -> None:
    a = runs["planted"].save(tmp_path / "a")
    args = [str(a), str(a)] if command == "compare" else [str(a)]
    out = subprocess.run([sys.executable, "-m", "pypto_core", command, *args, "--sku", "bogus"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip() == f"pypto: unknown SKU 'bogus'; known: {', '.join(SKUS)}"


def test_row_order_does_not_depend_on_the_hash_seed() -> None:
    # The op, block and shape rows are gathered from a set of keys; equal deltas (the pair has op types whose
    # time moved by the same µs) used to keep the set's order, which PYTHONHASHSEED picks per process.
    pair = SAMPLES / "kineto" / "trace_diff_pair"
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outputs.append(subprocess.run(
            [sys.executable, "-m", "pypto_core", "compare", str(pair / "control.json.gz"),
             str(pair / "test.json.gz")], capture_output=True, text=True, env=env, cwd=REPO,
            check=True).stdout)
    assert outputs[0] == outputs[1]
    ops = json.loads(outputs[0])["ops"]
    deltas = [abs(o["delta_us"]) for o in ops]
    tied = [i for i in range(1, len(ops)) if deltas[i] == deltas[i - 1]]
    assert tied, "the pair has equal deltas: the order among them is what this checks"
    for i in tied:
        assert str(ops[i - 1]["op_type"]) < str(ops[i]["op_type"])


LLM_BLOCKS = {"kv_layout", "kv_update", "ffn_activation", "rope", "attention", "lm_head"}


def test_cnn_levels_have_no_llm_blocks() -> None:
    # a CNN's 4-D Transpose is no KV-cache layout copy, its Relu no FFN activation
    level1 = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level1" / "rank0_ascend_pt")
    level2 = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    blocks = {row["block"] for row in compare_profiles(level1, level2).blocks}
    assert not blocks & LLM_BLOCKS, blocks
    assert {"matmul", "activation", "communication", "other"} <= blocks, blocks


def test_llm_decode_keeps_its_blocks(runs) -> None:
    blocks = {row["block"] for row in compare_profiles(runs["planted"], runs["all"]).blocks}
    assert LLM_BLOCKS <= blocks and "activation" not in blocks, blocks


def test_steps_apart_count_as_a_change_from_five_steps_each() -> None:
    """No step of one run overlapping the other is a change (exact rank test: 2 / C(10, 5) < 1%) once each
    run has five steps; with four each it could be luck (2 / C(8, 4) = 2.9%)."""
    import numpy as np

    from pypto_core.compare import _separated

    five, later = np.array([1.0, 2, 3, 4, 5]), np.array([6.0, 7, 8, 9, 10])
    assert _separated(five, later) and _separated(later, five)
    assert not _separated(five[:4], later[:4])
    assert not _separated(np.array([1.0, 2, 3, 4, 7]), later)  # one step overlaps
