"""``Finding`` and ``Report``: the versioned result of a diagnosis (docs/contract.md
``analyze --format json``)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pypto_core.i18n import DEFAULT_LANGUAGE, localized_texts, render_stored

REPORT_SCHEMA_VERSION = 1
SEVERITIES = ("high", "medium", "low")


@dataclass
class Finding:
    # the rule's id; fixed for the seed's four: matmul_tiling, attention_memory_bound, kv_cache_layout,
    # norm_launch_overhead
    rule: str
    severity: str  # high | medium | low
    title: str
    description: str
    ops: list[str] = field(default_factory=list)  # op types or names involved
    # numbers with units in the key, e.g. "mte2_ratio_pct"
    evidence: dict[str, Any] = field(default_factory=dict)
    time_share: float = 0.0  # share of device time the finding covers, 0..1
    estimated_saving_us: float = 0.0  # per profile (or per step where stated in evidence)
    estimated_speedup: float = 1.0
    # "estimate" or "upper_bound" (the whole cause gone; a real fix gets part of it): the rule's declaration
    saving_bound: str = "estimate"
    # Time this rank spends waiting for other ranks, which goes only if they arrive together: a fix on the
    # other ranks (slow_rank), so it is never part of this profile's estimated saving or combined speedup.
    peer_wait_us: float = 0.0
    # The finding's place in the report's order (1 = first): what bounds the step first (the findings that
    # explain the attribution's dominant bucket), then severity, then saving. A list sorted by
    # estimated_saving_us alone puts a rank's small local savings above the wait that costs the job most.
    rank: int = 0
    remedies: list[str] = field(default_factory=list)  # artifact file names
    saving_model: str = ""  # the explicit model behind estimated_saving_us, in words
    details: dict[str, Any] = field(default_factory=dict)  # structured data for remedies (shapes, op names)
    # the text's templates and parameters ({"title": Message.to_dict(), ...}): any language renders from them
    messages: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def localized(self, language: str) -> Finding:
        """The same finding with its text in ``language``; ids and numbers are untouched."""
        text = localized_text(self.messages, language, self.to_dict())
        return replace(self, title=text["title"], description=text["description"],
                       saving_model=text["saving_model"])


# The finding fields whose text is rendered from ``Finding.messages``.
TEXT_FIELDS = ("title", "description", "saving_model")


def localized_text(messages: dict[str, Any] | None, language: str,
                   fallback: dict[str, Any]) -> dict[str, str]:
    """{field: text in ``language``} for the text fields; a field without a stored message keeps its text."""
    out = {}
    for name in TEXT_FIELDS:
        text = render_stored((messages or {}).get(name), language)
        out[name] = text if text is not None else str(fallback.get(name) or "")
    parameters = (fallback.get("details") or {}).get("parameters")
    out["saving_model"] = with_parameters(out["saving_model"], parameters)
    return out


def with_parameters(text: str, parameters: dict[str, Any] | None) -> str:
    """A saving model that names a rule's threshold in backticks, `min_gap_us`, reads it with the value the
    run used, `min_gap_us` = 5: a reader sees the figure, not only the setting's name. A name already
    followed by its value is left alone (the English text is stored that way)."""
    for key, value in (parameters or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = re.sub(rf"`{re.escape(key)}`(?! = )", f"`{key}` = {value:g}", text)
    return text


def localize_finding(data: dict[str, Any], language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    """A stored finding (``Finding.to_dict()``) with its text in ``language``."""
    return {**data, **localized_text(data.get("messages"), language, data)}


@dataclass
class Report:
    profile: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    estimated_combined_speedup: float = 1.0
    # "upper_bound" when a finding counted in the combined speedup is an upper bound, else "estimate"
    combined_speedup_bound: str = "estimate"
    warnings: list[str] = field(default_factory=list)
    # per warning, its template and parameters (Message.to_dict()) or None for a plain string: any language
    # renders from them
    warning_messages: list[dict[str, Any] | None] = field(default_factory=list)
    schema_version: int = REPORT_SCHEMA_VERSION
    what_if: dict[str, Any] | None = None  # the replay of the findings asked for (analyze --what-if)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "profile": self.profile,
            "findings": [f.to_dict() for f in self.findings],
            "estimated_combined_speedup": self.estimated_combined_speedup,
            "combined_speedup_bound": self.combined_speedup_bound,
            "warnings": list(self.warnings),
            "warning_messages": list(self.warning_messages),
            **({"what_if": self.what_if} if self.what_if is not None else {}),
        }

    def localized(self, language: str) -> Report:
        """The same report with its findings' and warnings' text in ``language``."""
        return replace(self, findings=[f.localized(language) for f in self.findings],
                       warnings=localized_warnings(self.warnings, self.warning_messages, language))


def localized_warnings(warnings: list[str], messages: list[dict[str, Any] | None] | None,
                       language: str) -> list[str]:
    """``warnings`` in ``language`` where their stored messages allow; a plain string stays as it is."""
    return localized_texts(warnings, messages, language)
