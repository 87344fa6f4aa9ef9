"""``pypto_core.fix_verdict`` on comparison results shaped as ``compare --format json`` writes them."""

from __future__ import annotations

from pypto_core.fix_verdict import noise_verdict, verdict_of


def result(status: str, measured: float | None, *, significant: bool = True,
           better: bool | None = True) -> dict:
    return {
        "normalisation": "per_token",
        "metrics": [{"name": "per_token_latency_ms", "base": 10.0, "new": 9.0, "delta_pct": -10.0,
                     "significant": significant, "better": better if significant else None}],
        "findings": [{"rule": "norm_launch_overhead", "status": status, "title": "norms",
                      "estimated_saving_us": 120.0, "measured_saving_us": measured}],
        "blocks": [{"block": "norm", "base_us": 50.0, "new_us": 20.0, "base_op_types": ["Rsqrt", "Pow"],
                    "new_op_types": ["RmsNorm"]}, {"block": "matmul", "base_us": 1.0, "new_us": 1.0}],
    }


def test_fixed_persisting_worse_and_the_measured_beside_the_estimate() -> None:
    fixed = verdict_of(result("fixed", 30.0), "norm_launch_overhead")
    assert (fixed["verdict"], fixed["estimated_saving_us"], fixed["measured_saving_us"]) == \
        ("fixed", 120.0, 30.0)
    assert fixed["kernels"] == [{"block": "norm", "base_us": 50.0, "new_us": 20.0,
                                 "base_op_types": ["Rsqrt", "Pow"], "new_op_types": ["RmsNorm"]}]
    assert fixed["noise"] == {"metric": "per_token_latency_ms", "base": 10.0, "new": 9.0, "delta_pct": -10.0,
                              "significant": True, "verdict": "better"}
    assert verdict_of(result("persisting", 3.0), "norm_launch_overhead")["verdict"] == "persisting"
    assert verdict_of(result("persisting", -3.0), "norm_launch_overhead")["verdict"] == "worse"
    assert verdict_of(result("fixed", None), "kv_cache_layout")["verdict"] == "persisting"  # not in the base


def test_a_rule_that_now_flags_other_kernels_marks_the_old_finding_fixed() -> None:
    moved = verdict_of(result("persisting", -3.0), "norm_launch_overhead",
                       base_ops=["Pow", "ReduceMean", "Rsqrt"], new_ops=["RmsNorm", "AddRmsNorm"])
    assert moved["verdict"] == "fixed" and moved["reason"].endswith("AddRmsNorm, RmsNorm")
    same = verdict_of(result("persisting", -3.0), "norm_launch_overhead", base_ops=["Rsqrt"],
                      new_ops=["Rsqrt"])
    assert same["verdict"] == "worse"


def test_noise_verdicts() -> None:
    assert noise_verdict(result("fixed", 1.0, significant=False))["verdict"] == "within noise"
    assert noise_verdict(result("fixed", 1.0, better=False))["verdict"] == "worse"
    # a change outside the noise with no verdict (two workloads: different_work) is not measured as a fix
    assert noise_verdict(result("fixed", 1.0, better=None))["verdict"] == "not measured"
    assert noise_verdict({"metrics": [{"name": "per_token_latency_ms", "base": None, "new": None}]}) == {
        "metric": None, "significant": False, "verdict": "not measured"}
