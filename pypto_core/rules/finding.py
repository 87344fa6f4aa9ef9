"""``Finding`` and ``Report``: the versioned result of a diagnosis (CONTRACT.md ``analyze --format json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

REPORT_SCHEMA_VERSION = 1
SEVERITIES = ("high", "medium", "low")


@dataclass
class Finding:
    rule: str  # fixed ids for the seed's four: matmul_tiling, attention_memory_bound, kv_cache_layout, norm_launch_overhead
    severity: str  # high | medium | low
    title: str
    description: str
    ops: list[str] = field(default_factory=list)  # op types or names involved
    evidence: dict[str, Any] = field(default_factory=dict)  # numbers with units in the key, e.g. "mte2_ratio_pct"
    time_share: float = 0.0  # share of device time the finding covers, 0..1
    estimated_saving_us: float = 0.0  # per profile (or per step where stated in evidence)
    estimated_speedup: float = 1.0
    remedies: list[str] = field(default_factory=list)  # artifact file names
    saving_model: str = ""  # the explicit model behind estimated_saving_us, in words
    details: dict[str, Any] = field(default_factory=dict)  # structured data for remedies (shapes, op names)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    profile: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    estimated_combined_speedup: float = 1.0
    warnings: list[str] = field(default_factory=list)
    schema_version: int = REPORT_SCHEMA_VERSION
    what_if: dict[str, Any] | None = None  # the replay of the findings asked for (analyze --what-if)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "profile": self.profile,
            "findings": [f.to_dict() for f in self.findings],
            "estimated_combined_speedup": self.estimated_combined_speedup,
            "warnings": list(self.warnings),
            **({"what_if": self.what_if} if self.what_if is not None else {}),
        }
