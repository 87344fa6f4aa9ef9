"""pypto_core.synth: simulated profiles in the real formats (issue 4).

Numbers are computed from the written files with the csv/json modules, never from the generator's own
bookkeeping, so these tests check what a reader would see.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from pypto_core.cli import main
from pypto_core.synth import RULES, synthesize, synthesize_run

PROMPT = 256
TOKENS = 3


def read_kernels(run_dir: Path) -> list[dict[str, str]]:
    path = next(run_dir.glob("ASCEND_PROFILER_OUTPUT/kernel_details.csv"), None) or next(
        run_dir.glob("mindstudio_profiler_output/op_summary_*.csv"))
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def per_token_ms(rows: list[dict[str, str]]) -> list[float]:
    """Device time per decode step: every kernel's duration plus the idle wait in front of it."""
    steps: dict[int, float] = defaultdict(float)
    for r in rows:
        steps[int(r["Step Id"])] += float(r["Duration(us)"]) + float(r["Wait Time(us)"])
    return [steps[s] / 1000 for s in sorted(steps) if s > 0]


def type_time(rows: list[dict[str, str]]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        out[r["Type"]] += float(r["Duration(us)"])
    return out


def shape_dims(cell: str) -> list[list[int]]:
    return [[int(d) for d in s.split(",")] for s in cell.strip('"').split(";") if s]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return synthesize_run(tmp_path_factory.mktemp("planted"), tokens=TOKENS, prompt_tokens=PROMPT)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return synthesize_run(tmp_path_factory.mktemp("fixed"), tokens=TOKENS, prompt_tokens=PROMPT,
                          fixed=frozenset(RULES))


# --- on-disk format details --------------------------------------------------------------------------------


def test_kernel_details_format_cann83(planted) -> None:
    raw = (planted.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_bytes()
    lines = raw.split(b"\r\n")
    assert lines[-1] == b"" and all(b"\n" not in line for line in lines), "every line ends in CRLF"
    header = lines[0].decode().split(",")
    assert header[:12] == ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type",
                           "OP State", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"]
    assert header[12:14] == ["Block Dim", "Mix Block Dim"] and "Block Num" not in header
    assert header[-1] == "cube_utilization(%)" and "aic_mte2_ratio" in header and "aiv_vec_ratio" in header
    assert len(header) == 47  # Step Id + the 46 op_summary columns of docs/domain.md §3.2
    first = lines[1].decode()
    assert re.search(r",\d{16}\.\d{3}\t,", first), "start time: epoch µs, 3 decimals, trailing TAB"
    assert re.search(r',"""\d+(,\d+)*(;\d+(,\d+)*)*""",', first), "shapes are triple-quoted"
    assert len(lines) - 2 == planted.kernel_count


def test_2026_variant_and_msprof_layout(tmp_path) -> None:
    run = synthesize_run(tmp_path, tokens=1, prompt_tokens=64, layout="msprof", variant="2026",
                         model="qwen2.5-7b")
    assert re.fullmatch(r"PROF_\d{6}_\d{17}_[0-9A-Z]+", run.path.name)
    out = run.path / "mindstudio_profiler_output"
    names = sorted(p.name for p in out.iterdir())
    for module in ("op_summary", "op_statistic", "api_statistic", "step_trace"):
        assert any(re.fullmatch(module + r"_\d{14}\.csv", n) for n in names), module
    assert any(re.fullmatch(r"msprof_\d{14}\.json", n) for n in names)
    rows = read_kernels(run.path)
    assert len(rows) == run.kernel_count
    header = list(rows[0])
    assert header[0] == "Device_id" and "Op Name" in header and "Task Type" in header
    assert "Block Num" in header and "Mix Block Num" in header and "Block Dim" not in header
    info = json.loads((run.path / "device_0" / "info.json.0").read_text())
    assert info["simulated"] is True and info["DeviceInfo"][0]["ai_core_num"] == 20
    trace = json.loads(next(out.glob("msprof_*.json")).read_text())
    assert not any(e.get("cat") == "cpu_op" for e in trace), "msprof timelines have no Python process"


def test_trace_view_structure(planted) -> None:
    text = (planted.path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text()
    events = json.loads(text)
    assert isinstance(events, list), "a bare array, no traceEvents wrapper"
    timed = [e for e in events if e["ph"] != "M"]
    assert all(isinstance(e["ts"], str) and re.fullmatch(r"\d{16}\.\d{3}", e["ts"]) for e in timed)
    assert all(isinstance(e["dur"], (int, float)) for e in timed if e["ph"] == "X")
    processes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"Python", "CANN", "Ascend Hardware", "Overlap Analysis"} <= processes
    steps = sorted(e["name"] for e in timed if e["name"].startswith("ProfilerStep#"))
    assert steps == [f"ProfilerStep#{i}" for i in range(TOKENS + 1)]
    for cat in ("HostToDevice", "async_npu"):
        starts = {e["id"] for e in timed if e.get("cat") == cat and e["ph"] == "s"}
        ends = {e["id"] for e in timed if e.get("cat") == cat and e["ph"] == "f"}
        assert len(starts) == planted.kernel_count and starts == ends, cat
    device = [e for e in timed if e["ph"] == "X" and "Task Type" in e.get("args", {})]
    assert len(device) == planted.kernel_count
    # every flow goes forward in time: the host launch precedes the device task
    by_id = defaultdict(dict)
    for e in timed:
        if e.get("cat") == "async_npu":
            by_id[e["id"]][e["ph"]] = e["ts"]
    assert all(float(v["s"]) <= float(v["f"]) for v in by_id.values())


def test_simulated_mark(planted) -> None:
    info = json.loads((planted.path / "profiler_info_0.json").read_text())
    meta = json.loads((planted.path / "profiler_metadata.json").read_text())
    assert info["simulated"] is True and info["cann_version"] == "8.3.RC1"
    assert meta["simulated"] is True and meta["device"] == "910B3"
    assert meta["pypto_synth"]["planted"] == list(RULES)
    assert re.fullmatch(r"pypto-synth_\d+_\d{17}_ascend_pt", planted.path.name)


# --- what the anti-patterns look like ----------------------------------------------------------------------


def test_planted_op_types_and_shapes(planted) -> None:
    rows = read_kernels(planted.path)
    types = {r["Type"] for r in rows}
    assert {"Pows", "ReduceMean", "Rsqrt", "Cast"} <= types  # unfused RMSNorm chain
    assert {"BatchMatMulV2", "SoftmaxV2"} <= types and "FusedInferAttentionScore" not in types
    assert {"Transpose", "ConcatD", "TensorMove"} <= types and "ScatterUpdate" not in types
    assert not {"RmsNorm", "AddRmsNorm"} & types
    mms = [r for r in rows if r["Type"] == "MatMulV2"]
    unaligned = [r for r in mms if any(d % 256 for dims in shape_dims(r["Input Shapes"]) for d in dims[-1:])
                 or any(d % 256 for d in shape_dims(r["Output Shapes"])[0][-1:])]
    assert unaligned, "FFN / LM-head MatMuls with an inner or output axis not a multiple of 256"
    assert any(r["Accelerator Core"] == "MIX_AIC" for r in mms), \
        "unaligned inner axis flips MatMul to MIX_AIC"
    decode_bmm = [r for r in rows if r["Type"] == "BatchMatMulV2" and r["Step Id"] != "0"]
    assert min(float(r["aic_mte2_ratio"]) for r in decode_bmm) > 0.7, "decode attention is MTE2-bound"
    # cache-shaped copies: TensorMove of [B, N_kv, S, D] with S = the context length
    moves = [shape_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "TensorMove" and r["Step Id"]
             == "2"]
    assert moves and all(m[2] == PROMPT + 2 for m in moves)


def test_fixed_op_types_and_shapes(fixed) -> None:
    rows = read_kernels(fixed.path)
    types = {r["Type"] for r in rows}
    assert {"AddRmsNorm", "RmsNorm", "FusedInferAttentionScore", "ScatterUpdate"} <= types
    assert not {"Pows", "ReduceMean", "Rsqrt", "BatchMatMulV2", "SoftmaxV2", "Transpose", "ConcatD",
                "TensorMove"} & types
    for r in rows:
        if r["Type"] == "MatMulV2":
            assert r["Accelerator Core"] == "AI_CORE" and r["Block Dim"] == "20"
            assert all(dims[-1] % 256 == 0 for dims in shape_dims(r["Input Shapes"])[:2])
        if r["Type"] == "FusedInferAttentionScore":
            assert r["Accelerator Core"] == "MIX_AIC" and float(r["aic_mte2_ratio"]) < 0.7


def test_counters_consistent_with_durations(planted) -> None:
    for r in read_kernels(planted.path)[:400]:
        dur = float(r["Duration(us)"])
        core_time = float(r["aicore_time(us)"]) or float(r["aiv_time(us)"])
        assert 0.5 * dur < core_time <= dur
        for pipe in ("aic_mac", "aic_mte2", "aiv_vec", "aiv_mte2"):
            ratio, t = float(r[pipe + "_ratio"]), float(r[pipe + "_time(us)"])
            total = float(r["aicore_time(us)"] if pipe.startswith("aic") else r["aiv_time(us)"])
            # ratios are written with 3 decimals, so time = ratio * total holds to 0.0005 * total
            assert 0 <= ratio < 1 and t == pytest.approx(ratio * total, abs=0.0006 * total + 0.002)


# --- plausibility (docs/domain.md §7)
# -------------------------------------------------------------------------


def test_per_token_latency_ranges(planted, fixed) -> None:
    before, after = per_token_ms(read_kernels(planted.path)), per_token_ms(read_kernels(fixed.path))
    assert len(before) == len(after) == TOKENS
    assert all(40 <= t <= 60 for t in before), before
    assert all(12 <= t <= 20 for t in after), after
    assert sum(before) / TOKENS == pytest.approx(planted.per_token_ms, rel=1e-3)


@pytest.mark.parametrize("which", ["planted", "fixed"])
def test_matmul_dominates_device_time(which, request) -> None:
    run = request.getfixturevalue(which)
    rows = [r for r in read_kernels(run.path) if r["Step Id"] != "0"]
    by_type = type_time(rows)
    assert max(by_type, key=by_type.get) == "MatMulV2"
    share = by_type["MatMulV2"] / sum(by_type.values())
    assert share > (0.75 if which == "fixed" else 0.5), share


def test_each_single_fix_saves_its_stated_cost(tmp_path, planted, fixed) -> None:
    """The measured planted-vs-fixed difference of each rule equals its exposed cost, and they add up."""
    base = planted.per_token_ms
    total = 0.0
    for rule in RULES:
        one = synthesize_run(tmp_path / rule, tokens=TOKENS, prompt_tokens=PROMPT, fixed=frozenset({rule}))
        measured = base - sum(per_token_ms(read_kernels(one.path))) / TOKENS
        stated = planted.planted_cost_per_token_ns[rule] / 1e6
        assert measured > 2.0, (rule, measured)  # each fix is worth milliseconds per token
        assert measured == pytest.approx(stated, rel=0.05), rule
        assert rule not in one.planted_cost_ns and one.rule_cost_per_token_ns[rule] > 0
        total += stated
    assert base - fixed.per_token_ms == pytest.approx(total, rel=0.03)


# --- determinism, size, CLI ---------------------------------------------------------------------------------


def test_deterministic_with_seed(tmp_path) -> None:
    kw = dict(tokens=1, prompt_tokens=32, model="llama3-8b", sku="910B4")
    a = synthesize(tmp_path / "a", seed=7, **kw)
    b = synthesize(tmp_path / "b", seed=7, **kw)
    c = synthesize(tmp_path / "c", seed=8, **kw)
    for name in ("kernel_details.csv", "trace_view.json", "op_statistic.csv"):
        out_a, out_b = a / "ASCEND_PROFILER_OUTPUT" / name, b / "ASCEND_PROFILER_OUTPUT" / name
        assert out_a.read_bytes() == out_b.read_bytes()
    assert (a / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_bytes() != (
        c / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_bytes()


def test_size_mb_adds_decode_steps(tmp_path) -> None:
    run = synthesize_run(tmp_path, tokens=1, prompt_tokens=32, model="qwen2.5-7b", fixed=frozenset(RULES),
                         size_mb=4)
    assert run.decode_tokens > 1
    written = sum(p.stat().st_size for p in (run.path / "ASCEND_PROFILER_OUTPUT").glob("*"))
    assert 4e6 <= written < 6e6
    assert len(per_token_ms(read_kernels(run.path))) == run.decode_tokens


def test_cli_synth(tmp_path, capsys) -> None:
    assert main(["synth", str(tmp_path), "--tokens", "1", "--prompt", "16", "--model", "llama3-8b", "--fixed",
                 "norm_launch_overhead,kv_cache_layout", "--layout", "msprof", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["planted"] == ["matmul_tiling", "attention_memory_bound"] and summary["simulated"] is True
    assert Path(summary["path"]).is_dir()
    with pytest.raises(SystemExit) as exc:
        main(["synth", str(tmp_path), "--fixed", "no_such_rule"])
    assert exc.value.code == 2


# --- the readers read every variant back (issue 3's open_profile) -------------------------------------------


@pytest.mark.parametrize("layout", ["ascend_pt", "msprof"])
@pytest.mark.parametrize("variant", ["cann83", "2026"])
def test_readers_read_every_variant(tmp_path, layout, variant) -> None:
    from pypto_core import formats
    run = synthesize_run(tmp_path, tokens=2, prompt_tokens=32, model="llama3-8b", layout=layout,
                         variant=variant)
    profile = formats.open_profile(run.path)
    kernels = profile.kernels
    assert kernels.num_rows == run.kernel_count
    written = read_kernels(run.path)
    block_col = "Block Num" if variant == "2026" else "Block Dim"
    assert kernels["block_dim"].to_pylist() == [int(r[block_col]) for r in written]
    type_col = "OP Type" if layout == "msprof" else "Type"
    assert sorted(set(kernels["op_type"].to_pylist())) == sorted({r[type_col] for r in written})
    assert kernels["start_ns"][0].as_py() % 1000 == int(written[0][
        "Task Start Time(us)" if layout == "msprof" else "Start Time(us)"].strip().split(".")[1])
    if layout == "ascend_pt":
        assert profile.meta.simulated is True
        steps = kernels["step_id"].to_pylist()
        assert [steps.count(s) for s in range(3)] == run.kernels_per_step
