"""``Profile.summary``: what the pipeline learnt of a profile, as one typed and versioned record.

Ingest writes the upload's files and the saved tables' counts and time span (``pypto_core.profile.
saved_summary``), the fan-out a many-rank upload's ranks, diagnose the report without its findings. The
pages, the API, comparisons and storage read it through ``summary_of``, the one parser. Rows written before
the record had a version (version 1: the same keys, any of them missing) read the same way; keys this
version does not know are kept as they are (``extra``).

The headline figures are copied to columns of ``Profile`` whenever a summary is written (``summary_fields``):
the project page charts and sorts profiles by them, which a JSON key cannot do cheaply.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from profiles.models import Profile

SUMMARY_VERSION = 2


@dataclass
class ProfileSummary:
    version: int = SUMMARY_VERSION
    # the upload (ingest)
    format: str | None = None  # what pypto_core.formats detected
    files: int | None = None
    unpacked_bytes: int | None = None
    largest_files: list[dict[str, Any]] = field(default_factory=list)
    # the primary rank's saved tables (pypto_core.profile.saved_summary)
    source: str | None = None
    rank: int | None = None
    device: str | None = None
    simulated: bool = False  # written by pypto synth, not measured
    kernel_count: int | None = None
    host_op_count: int | None = None
    steps: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    duration_ns: int | None = None
    warnings: list[str] = field(default_factory=list)
    # per warning, its message (pypto_core.i18n: a page shows it in its language) or None: analysis.texts
    warning_messages: list[dict[str, Any] | None] = field(default_factory=list)
    # the ranks: one folder of Parquet tables each (``analysis.storage``)
    ranks: int | None = None
    rank_folders: list[str] = field(default_factory=list)
    fanout: bool = False  # read one rank per task (pipeline.fanout)
    rank_sources: dict[str, str] = field(default_factory=dict)  # folder -> a fanned-out rank's own tables
    rank_profiles: list[dict[str, Any]] = field(default_factory=list)  # {id, rank, name, status} per rank
    # diagnose: the ``analyze`` report without its findings (those are rows), and how many there were
    report: dict[str, Any] | None = None
    finding_count: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    @property
    def report_profile(self) -> dict[str, Any]:
        """The report's ``profile`` block (workload, device, decode, time breakdown...), or {}."""
        return dict((self.report or {}).get("profile") or {})

    @property
    def decode(self) -> dict[str, Any]:
        return dict(self.report_profile.get("decode") or {})

    @property
    def per_token_ms(self) -> float | None:
        return _number(self.decode.get("per_token_ms_p50"))

    @property
    def tokens_per_s(self) -> float | None:
        return _number(self.decode.get("tokens_per_s"))

    @property
    def step_time_ms(self) -> float | None:
        return _number((self.report_profile.get("metrics") or {}).get("step_time_ms"))

    @property
    def prefill_tokens_per_s(self) -> float | None:
        return _number((self.report_profile.get("metrics") or {}).get("prefill_tokens_per_s"))

    @property
    def mfu(self) -> float | None:
        """The MatMuls' FLOP/s against the device's peak (a prefill's or a training step's headline)."""
        return _number((self.report_profile.get("metrics") or {}).get("mfu"))

    @property
    def is_simulated(self) -> bool:
        return bool(self.simulated or self.report_profile.get("simulated"))

    def to_dict(self) -> dict[str, Any]:
        """The stored (and API) form: every field by its name, unknown keys as they came."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ProfileSummary:
        """Any stored summary, of any version (a version 1 row has no ``version`` key)."""
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        values["version"] = SUMMARY_VERSION  # read into this version's shape; written back as this version
        for name in ("largest_files", "warnings", "warning_messages", "rank_folders", "rank_profiles"):
            if not isinstance(values.get(name, []), list):
                values.pop(name)
        if not isinstance(values.get("rank_sources", {}), dict):
            values.pop("rank_sources")
        if not isinstance(values.get("report"), (dict, type(None))):
            values.pop("report")
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def summary_of(profile: Profile) -> ProfileSummary:
    """The profile's summary, parsed (the one place ``Profile.summary`` is read)."""
    return ProfileSummary.from_dict(profile.summary)


def summary_fields(summary: ProfileSummary) -> dict[str, Any]:
    """The model fields to write with a summary: the JSON and its headline columns, so they never disagree."""
    return {"summary": summary.to_dict(), "per_token_ms": summary.per_token_ms,
            "tokens_per_s": summary.tokens_per_s, "step_time_ms": summary.step_time_ms,
            "simulated": summary.is_simulated}
