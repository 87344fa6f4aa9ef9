"""The thresholds a diagnosis runs with: every rule's declared defaults (``@rule(thresholds=...)``, each
with its evidence, in the rule's module), which a project overrides by name.

``RuleConfig.from_mapping({"matmul_tiling": {"efficiency_below": 0.5}, "disabled": ["block_dim"]})``
raises ``ValueError`` on an unknown rule or key, so a typo in a project setting is never silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pypto_core.rules.registry import discover


def defaults() -> dict[str, dict[str, float]]:
    """{rule id: {threshold: default value}} of every registered rule (a fresh copy each call)."""
    return {r.id: r.threshold_values() for r in discover().values()}


@dataclass
class RuleConfig:
    thresholds: dict[str, dict[str, float]] = field(default_factory=defaults)
    disabled: frozenset[str] = frozenset()

    def get(self, rule: str, key: str) -> float:
        return self.thresholds[rule][key]

    def section(self, rule: str) -> dict[str, float]:
        return dict(self.thresholds.get(rule, {}))

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any] | None) -> RuleConfig:
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


def as_config(config: RuleConfig | dict[str, Any] | None) -> RuleConfig:
    if isinstance(config, RuleConfig):
        return config
    return RuleConfig.from_mapping(config)
