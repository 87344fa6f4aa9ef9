"""Every rule threshold in one place, with its evidence; a project overrides any of them by name.

``RuleConfig.from_mapping({"matmul_tiling": {"efficiency_below": 0.5}, "disabled": ["block_dim"]})``
raises ``ValueError`` on an unknown rule or key, so a typo in a project setting is never silently ignored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

DEFAULTS: dict[str, dict[str, float]] = {
    "matmul_tiling": {
        # the seed article's target "< 60% of theoretical peak"; Huawei's advisor uses mac_ratio 0.8
        # (docs/domain.md §3.3)
        "efficiency_below": 0.60,
        # what a tuned MatMul reaches when the profile has no aligned peer to learn from: pypto's measured
        # 6144^3 GEMM went 62% -> 82% of peak with L2-aware blocking (docs/domain.md §1)
        "target_efficiency": 0.82,
        "min_time_share": 0.01,
        "inner_axis_elements": 256,  # advisor cube affinity (docs/domain.md §3.3)
        "inner_axis_bytes": 512,  # MatMulTransposeWeightFusionPass (docs/domain.md §2.3)
        "fractal": 16,  # cube 16x16x16 (docs/domain.md §2.3)
    },
    "attention_memory_bound": {
        # docs/domain.md §6 #1: lines up with the advisor's 0.7 vector rule (FA rule: 0.8)
        "mte2_share_above": 0.70,
        # bandwidth a fused IFA/FIA reaches [INFERRED: below docs/domain.md §7's 60-75% for whole decode
        # steps,
        # since attention reads short per-head runs]
        "fused_bandwidth_efficiency": 0.55,
        # fixed cost of one fused attention launch: FIA ~21.6-24 us at small S (docs/domain.md §3.1, §7)
        # [INFERRED split]
        "fused_overhead_us": 6.0,
        "fused_cube_efficiency": 0.50,  # [INFERRED] FIA prefill reaches about half the cube peak
        "fused_launch_gap_us": 1.5,
        "min_time_share": 0.01,
    },
    "kv_cache_layout": {
        "min_copies_per_token": 1.0,  # per-step copies, not a one-off reorder at load time
        "min_time_share": 0.005,
        # BSND cache update with scatter_update_ costs one write of the new K/V (docs/domain.md §5)
        "scatter_cost_us": 3.0,  # ReshapeAndCacheNdKernel ~3 us (docs/domain.md §3.1)
    },
    "norm_launch_overhead": {
        "fused_norm_us": 3.3,
        # launch gap of the one fused kernel: once the host issues far fewer launches it runs ahead of the
        # device, so the gap is a queued one [INFERRED]
        "fused_launch_gap_us": 1.5,  # AddRmsNorm 3.3 us (docs/domain.md §0 #10, §7: fused 2-5 us)
        "min_chains_per_token": 1.0,
        "min_time_share": 0.005,
        # fused norm kernels: flagged when their launch gaps outweigh their own time by this factor
        "gap_over_compute": 2.0,
        "fused_gap_min_share": 0.05,
    },
    "aicpu_operators": {
        "min_dur_us": 20.0,  # advisor aicpu_analysis: AI_CPU tasks > 20 us (docs/formats.md §4.3)
        "aicore_speedup": 10.0,  # [INFERRED] an AI Core kernel of the same op; the saving model says so
    },
    "dynamic_shape": {
        "min_compile_calls": 20,  # advisor MAX_OP_COMPILE_NUM (docs/formats.md §4.3)
        "min_dynamic_share": 1.0,  # advisor: no static operator at all
    },
    "host_bound_gaps": {
        "free_share_above": 0.10,  # advisor over_all: free time > 10% (docs/formats.md §4.3)
        # a graph-mode launch leaves ~1 us between kernels [INFERRED: ACL graph replays tasks back to back]
        "residual_gap_us": 1.0,
        "min_gap_us": 5.0,
        "min_kernels": 50,  # [INFERRED] a trimmed excerpt of a few kernels says nothing about free time
    },
    "format_churn": {
        "min_time_share": 0.02,
        "min_count_per_token": 1.0,
    },
    "unfused_rope": {"min_time_share": 0.005, "fused_us": 3.5, "fused_launch_gap_us": 1.5},  # _triton_rope / RotaryMul ~3.5 us (docs/domain.md §3.1)
    "unfused_swiglu": {"min_time_share": 0.005, "fused_us": 8.5, "fused_launch_gap_us": 1.5},  # SwiGlu 8.5 us (docs/domain.md §3.1)
    "block_dim": {
        "min_dur_us": 20.0,  # advisor operator checks look at ops > 20 us
        "min_time_share": 0.02,
        "max_fill": 0.8,  # pypto matmul guide: at least 0.8 x coreNum tasks (docs/domain.md §1)
    },
    "aicore_frequency": {"drop_ratio_above": 0.05},  # advisor freq_analysis: sum(max-f)/(max*n) >= 0.05
    "communication_wait": {
        "wait_share_above": 0.20,  # [INFERRED] a fifth of collective time spent waiting for peers
        "min_time_share": 0.02,
    },
    "communication_not_overlapped": {
        # msprof-analyze's cluster analysis ranks steps by Communication(Not Overlapped); a tenth of the step
        # is where it stops being noise [INFERRED]
        "share_above": 0.10,
        # communication.json splits a collective into Transit + Wait + Idle; above this share of not-transit
        # time the collective is mostly waiting for its peers, not moving data [INFERRED]
        "waiting_share_above": 0.50,
        # MindStudio's Communication Analysis guidance: a rank whose Wait Time Ratio (wait / (wait + transit))
        # is above 0.2 is waiting for a slow peer
        "slow_rank_wait_ratio": 0.20,
    },
    "memcpy_bound": {"share_above": 0.10},  # HTA's temporal breakdown: non-compute time [INFERRED threshold]
    "sync_stall": {"share_above": 0.05},  # [INFERRED] host syncs idling the device a twentieth of the step
    "data_loading": {"share_above": 0.05},  # [INFERRED] the advisor's dataloader check flags slow loaders
    "slow_rank": {"gap_above": 0.05},  # advisor slow_rank: max vs mean > 5% (docs/formats.md §4.3)
    "operator_no_bound": {
        "bound_ratio": 0.8,  # advisor config.ini operator_bound_ratio (docs/domain.md §3.3)
        "min_dur_us": 20.0,
        "min_time_share": 0.05,
    },
}


@dataclass
class RuleConfig:
    thresholds: dict[str, dict[str, float]] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    disabled: frozenset[str] = frozenset()

    def get(self, rule: str, key: str) -> float:
        return self.thresholds[rule][key]

    def section(self, rule: str) -> dict[str, float]:
        return dict(self.thresholds.get(rule, {}))

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any] | None) -> "RuleConfig":
        cfg = cls()
        if not mapping:
            return cfg
        disabled = set(mapping.get("disabled", ()))
        for rule, values in mapping.items():
            if rule == "disabled":
                continue
            if rule not in cfg.thresholds or not isinstance(values, dict):
                raise ValueError(f"unknown rule in config: {rule!r}")
            for key, value in values.items():
                if key not in cfg.thresholds[rule]:
                    raise ValueError(f"unknown threshold {rule}.{key}")
                cfg.thresholds[rule][key] = float(value)
        cfg.disabled = frozenset(disabled)
        return cfg


def as_config(config: "RuleConfig | dict[str, Any] | None") -> RuleConfig:
    if isinstance(config, RuleConfig):
        return config
    return RuleConfig.from_mapping(config)
