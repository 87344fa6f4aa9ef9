"""``unfused_elementwise`` on the real H200 traces (tests/data/h200_decode): eager PyTorch's chains of ATen
elementwise kernels are found in decode, prefill and a CUDA-graph replay of the eager step; the compiled runs,
whose kernels are Inductor's, get none; and the saving it bounds is at least what compiling the same step
measured (the static-weights compile against eager, both traced on the same machine)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pypto_core.formats import open_profile
from pypto_core.graph import OperatorCallGraph
from pypto_core.profile import Profile, ProfileMeta
from pypto_core.report_render import render_markdown
from pypto_core.rules import diagnose
from pypto_core.rules.finding import Finding, Report
from pypto_core.rules.registry import discover
from pypto_core.rules.unfused_elementwise import _chains

DATA = Path(__file__).resolve().parents[2] / "data" / "h200_decode"


@cache
def report(name: str) -> Report:
    return diagnose(open_profile(DATA / f"{name}.pt.trace.json.gz"))


def found(name: str) -> Finding | None:
    hits = [f for f in report(name).findings if f.rule == "unfused_elementwise"]
    return hits[0] if hits else None


def device_ms_per_step(name: str) -> float:
    graph = OperatorCallGraph(open_profile(DATA / f"{name}.pt.trace.json.gz"))
    return float(graph.dur.sum()) / 1e6 / report(name).profile["step_count"]


@pytest.mark.parametrize("name", ["eager", "eager_batch16", "hf_generate", "prefill", "cuda_graph"])
def test_eager_kernels_chain_as_rmsnorm_and_rotary_embeddings(name: str) -> None:
    f = found(name)
    assert f is not None
    patterns = list(f.evidence["chain_patterns"])  # most time first: {pattern: {count, time_us}}
    assert all(row["count"] >= 1 and row["time_us"] > 0 for row in f.evidence["chain_patterns"].values())
    assert any("pow → mean → add → rsqrt → mul" in p for p in patterns), patterns  # RMSNorm
    assert any("neg → cat → mul" in p for p in patterns), patterns  # rotary embedding (rotate_half)
    ev = f.evidence
    assert 0 < ev["fused_time_bound_us"] < ev["chain_time_us"]
    model_us = ev["chain_time_us"] - ev["fused_time_bound_us"]  # the saving model's figure
    assert f.details.get("saving_model_us", f.estimated_saving_us) == pytest.approx(model_us, abs=0.01)
    assert f.saving_bound == "upper_bound" and "torch.compile" in f.description
    assert ("reduce-overhead" in f.description) == (name == "cuda_graph")  # graphs replayed: compile them


@pytest.mark.parametrize("name", ["compiled", "compiled_static", "hf_generate_compiled"])
def test_compiled_runs_have_no_aten_chains_to_fuse(name: str) -> None:
    assert found(name) is None


def test_the_bound_holds_what_compiling_the_eager_step_measured() -> None:
    """The same decode step, eager and compiled with static weights: the device time a token that compiling
    saved (1.77 -> 1.28 ms) is within what the finding bounds for the eager run (0.56 ms a token)."""
    f = found("eager")
    assert f is not None
    steps = report("eager").profile["step_count"]
    bound_ms = (f.evidence["chain_time_us"] - f.evidence["fused_time_bound_us"]) / 1e3 / steps
    measured_ms = device_ms_per_step("eager") - device_ms_per_step("compiled_static")
    assert 0 < measured_ms <= bound_ms
    assert measured_ms > 0.5 * bound_ms  # a bound, not a figure of another order


def test_the_prefill_is_told_its_device_time_is_in_the_chains() -> None:
    """A compute-bound eager prefill: the finding leads (it explains compute, the dominant bucket)."""
    f = found("prefill")
    assert f is not None and f.rank == 1 and f.severity == "high"
    assert report("prefill").estimated_combined_speedup > 1.2


def test_only_llm_inference_on_gpus() -> None:
    rule = discover()["unfused_elementwise"]
    assert rule.applies_to("nvidia", "llm_prefill") and rule.applies_to("amd", "llm_decode")
    assert not rule.applies_to("ascend", "llm_decode")  # CANN op types: the Ascend chain rules
    assert not rule.applies_to("nvidia", "training")  # optimizers' chains want a fused optimizer


def test_chains_break_between_streams_and_at_other_kernels() -> None:
    elementwise = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int)"
    gemm = "nvjet_sm90_tst_256x128"
    rows = [  # (start, stream, name): stream 7 holds a chain of 3, a GEMM, a lone kernel; stream 8 two
        (0, 7, elementwise), (10, 7, elementwise), (20, 7, elementwise), (30, 7, gemm), (40, 7, elementwise),
        (5, 8, elementwise), (15, 8, elementwise),
    ]
    kernels = pa.table({"start_ns": pa.array([r[0] for r in rows], pa.int64()),
                        "dur_ns": pa.array([4] * len(rows), pa.int64()),
                        "device_id": pa.array([0] * len(rows), pa.int64()),
                        "stream_id": pa.array([r[1] for r in rows], pa.int64()),
                        "name": pa.array([r[2] for r in rows])})
    g = OperatorCallGraph(Profile(meta=ProfileMeta(format="kineto", device="NVIDIA H200"), kernels=kernels))
    fusible = np.array([r[2] == elementwise for r in rows] + [False])
    codes = np.arange(len(rows))
    found_rows, chain = _chains(g, fusible[codes], 2)
    assert [sorted(found_rows[chain == c].tolist()) for c in range(chain.max() + 1)] == [[0, 1, 2], [5, 6]]


def test_the_severity_follows_the_replayed_saving() -> None:
    """On the host-bound eager decode the model's device time (2.2 ms, 2% of the run) replays as 51 ms once
    the fused-away ops' host launches go: the finding reads "high", as the saving it shows, not "low"."""
    f = found("eager")
    assert f is not None
    model_us = f.details["saving_model_us"]
    total_us = f.estimated_saving_us / (1 - 1 / f.estimated_speedup)
    assert model_us / total_us < 0.03 and f.estimated_saving_us / total_us > 0.10
    assert f.severity == "high"
    # both figures are shown: the replayed saving, and the saving model's beside it
    md = render_markdown(report("eager"))
    assert f"(by the saving model: {model_us:.1f} µs)" in md
    assert f"replayed alone: {f.estimated_saving_us:.1f}" in md
