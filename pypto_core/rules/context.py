"""What a rule sees (profile, call graph, SKU, its thresholds) and how it reports (``emit``).

``emit`` turns a rule's covered kernels and per-kernel savings (or the pieces of idle or communication
time it closes) into a ``Finding`` with time share, saving and Amdahl speedup computed the same way for
every rule, and keeps what each finding saves so that the combined speedup counts every nanosecond of the
wall time at most once (``combined_saving_ns``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from pypto_core import collective_wait
from pypto_core.graph import OperatorCallGraph
from pypto_core.grouping import int32_if_fits
from pypto_core.hardware import SkuSpec
from pypto_core.i18n import Message, as_message, render_stored
from pypto_core.intervals import union_length
from pypto_core.profile import Profile
from pypto_core.replay import Change
from pypto_core.rules._flagged_ops import flagged_ops
from pypto_core.rules.config import RuleConfig
from pypto_core.rules.finding import Finding, with_parameters
from pypto_core.rules.registry import Rule


def severity_for(saving_share: float, time_share: float) -> str:
    # [INFERRED] a fix worth >= 10% of the run is high, >= 3% medium; the advisor ranks by "income ratio"
    # alike
    if saving_share >= 0.10:
        return "high"
    if saving_share >= 0.03 or time_share >= 0.10:
        return "medium"
    return "low"


@dataclass
class Coverage:
    kernels: np.ndarray  # kernel row indices
    saving_ns: np.ndarray  # per index
    extra_ns: float = 0.0  # savings not tied to kernels or wall-time pieces (host compile time)
    # pieces of wall time (idle, waiting) the fix removes: (starts, ends), counted once across findings
    intervals: tuple[np.ndarray, np.ndarray] | None = None
    change: Change | None = None  # what the fix does, for the what-if replay (pypto_core.replay)


@dataclass
class RuleContext:
    profile: Profile
    graph: OperatorCallGraph
    config: RuleConfig
    rule: Rule | None = None  # the rule running now (``diagnose`` sets it before each ``match``)
    group: Any = None  # the ProfileGroup, for group-scope rules (slow ranks)
    findings: list[Finding] = field(default_factory=list)
    coverage: list[Coverage] = field(default_factory=list)
    # rule id -> why it could not judge this profile though its bucket is large (too few kernels): what the
    # report says where that bucket is the run's largest and no finding explains it
    cannot_judge: dict[str, Message] = field(default_factory=dict)

    def could_not_judge(self, reason: Message) -> None:
        """The running rule could not judge this profile: ``reason`` says why, in words for the user."""
        self.cannot_judge[self.rule_id] = reason

    @property
    def rule_id(self) -> str:
        return self.rule.id if self.rule is not None else ""

    @property
    def thresholds(self) -> dict[str, float]:
        """The running rule's thresholds: its declared defaults with the project's overrides."""
        return self.config.section(self.rule_id)

    @property
    def sku(self) -> SkuSpec:
        return self.graph.sku

    @property
    def total_ns(self) -> int:
        """The run's wall time, the Amdahl denominator: the attribution's (the steps' windows), else first
        kernel start to last kernel end."""
        g = self.graph
        a = g.attribution
        if a is not None and a.run.wall_ns:
            return int(a.run.wall_ns)
        return g.last_end - int(g.start.min()) if g.n else 0

    @property
    def vendor(self) -> str:
        return self.graph.vendor

    @property
    def workload(self) -> str:
        return self.graph.workload.kind

    @cached_property
    def peer_wait(self) -> collective_wait.PeerWait | None:
        """The run's wait for other ranks, computed once: what every finding that reports a wait for other
        ranks carries and what the report leads with; None without per-collective figures."""
        exposed = (self.bucket_ns("communication_not_overlapped") if self.graph.attribution is not None
                   else None)
        return collective_wait.peer_wait(self.profile.communication, exposed, self.total_ns)

    def bucket_ns(self, bucket: str) -> int:
        a = self.graph.attribution
        return int(a.run.buckets.get(bucket, 0)) if a is not None else 0

    def threshold(self, key: str) -> float:
        return self.config.get(self.rule_id, key)

    @property
    def tokens(self) -> int:
        """Decode steps in the run (1 if the run has no decode tokens), for per-token counts."""
        return max(int(len(self.graph.tokens.latency_ns)), 1)

    def emit(self, *, title: Message | str, description: Message | str, ops: list[str],
             evidence: dict[str, Any], kernels: np.ndarray, saving_ns: np.ndarray | float,
             saving_model: Message | str, details: dict[str, Any] | None = None,
             covered_ns: float | None = None, extra_saving_ns: float = 0.0, severity: str | None = None,
             intervals: tuple[np.ndarray, np.ndarray] | None = None, change: Change | None = None,
             waits_for_peers: bool = False) -> Finding:
        """Record one finding. ``kernels``: the row indices it covers; ``saving_ns``: per kernel (or one
        total spread over them by duration); ``covered_ns``: time it covers (default: their durations);
        ``intervals``: pieces of wall time the fix removes, whose length adds to the saving; ``change``: what
        the fix does to the run for the replay (default: the kernels shortened by their savings);
        ``waits_for_peers``: the finding is about collectives that wait for other ranks: it carries the run's
        wait (``peer_wait``, the one figure, reported and never saved here: only the other ranks remove it).
        The text is a ``Message`` (pypto_core.i18n): the finding keeps its English rendering and its
        template. The finding offers the remedies its rule declares."""
        g = self.graph
        remedies = self.rule.remedies if self.rule is not None else ()
        # row indices in 4 bytes where they fit: a finding on every kernel of a 2.1 M-kernel run held 17 MB
        kernels = np.asarray(kernels)
        kernels = int32_if_fits(kernels if kernels.dtype.kind in "iu" else kernels.astype(np.int64))
        spread = np.ndim(saving_ns) == 0  # one total, spread over the kernels by their run time
        # the kernels' durations only where they are read (a spread saving, the time they cover by default)
        dur = g.dur[kernels].astype(np.float64) if spread or covered_ns is None else np.zeros(0)
        if spread:
            total = float(saving_ns)
            weights = dur / dur.sum() if dur.sum() > 0 else np.full(len(kernels), 1.0 / max(len(kernels), 1))
            per = weights * total
            del weights
            np.maximum(per, 0.0, out=per)
        else:
            per = np.maximum(np.asarray(saving_ns, np.float64), 0.0)  # the caller's array is left as it is
        total_ns = max(self.total_ns, 1)
        closed = union_length(*intervals) if intervals is not None else 0
        saving = float(per.sum() + extra_saving_ns + closed)
        covered = float(dur.sum() if covered_ns is None else covered_ns)
        del dur
        time_share = min(covered / total_ns, 1.0)
        saving = min(saving, 0.999 * total_ns)
        speedup = total_ns / (total_ns - saving)
        peer_wait = self.peer_wait.wait_ns if waits_for_peers and self.peer_wait is not None else 0.0
        # a wait the other ranks cause ranks the finding (the job loses it) but is not this rank's saving
        weight = max(saving, peer_wait) / total_ns
        # the English text is rendered from the stored form, so every language renders the same numbers
        text = {k: _plain(as_message(m).to_dict()) for k, m in
                (("title", title), ("description", description), ("saving_model", saving_model))}
        details = dict(details or {})
        if self.rule is not None and self.rule.thresholds:
            # the thresholds and assumed figures this run was judged by (a project's overrides included):
            # the saving model names them, the page and the reports show their values
            details.setdefault("parameters", self.config.section(self.rule_id))
        if remedies and "ops" not in details and len(kernels):
            # what the remedies target: the flagged kernels by op type, shapes, dtypes and formats
            listed = flagged_ops(g, kernels)
            details["ops"], details["op_groups"] = listed["groups"], listed["group_count"]
        finding = Finding(
            rule=self.rule_id, severity=severity or severity_for(weight, time_share),
            title=render_stored(text["title"]) or "", description=render_stored(text["description"]) or "",
            ops=ops, evidence=_plain(evidence), time_share=round(time_share, 6),
            estimated_saving_us=round(saving / 1e3, 3), estimated_speedup=round(speedup, 4),
            saving_bound=self.rule.saving_bound if self.rule is not None else "estimate",
            peer_wait_us=round(peer_wait / 1e3, 3),
            remedies=list(remedies), saving_model=with_parameters(render_stored(text["saving_model"]) or "",
                                                                  details.get("parameters")),
            details=_plain(details), messages=text,
        )
        self.findings.append(finding)
        if change is None and per.sum() > 0:
            change = Change(kernels=kernels, saving_ns=per)
        if not per.any():
            # kernels named with no saving of their own (their gaps are ``intervals``) add nothing to the
            # combined saving: not kept (a 5 GB simulated folder's host_bound_gaps held 19 MB of them)
            kernels, per = np.zeros(0, kernels.dtype), np.zeros(0)  # new arrays: a view would keep them
        self.coverage.append(Coverage(kernels, per, extra_saving_ns, intervals, change))
        return finding


def _plain(value: Any) -> Any:
    """numpy scalars and arrays -> JSON-ready Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        f = float(value)
        return round(f, 6) if np.isfinite(f) else None
    if isinstance(value, float):
        return round(value, 6) if np.isfinite(value) else None
    return value


def combined_saving_ns(graph: OperatorCallGraph, coverage: list[Coverage]) -> float:
    """Savings of all findings together, every nanosecond of wall time counted once.

    A kernel's saving splits into the part inside its own run time (at most its duration, summed over
    findings) and the part in the idle gap before it; those gap parts and every finding's closed intervals
    (idle or waiting time) are one union of pieces of wall time, so two findings that close the same gap
    are not added. The kernel parts are capped by the device-busy time of the attribution: shortening
    kernels that run under others cannot shorten the run by more than the run spends busy.
    """
    if not coverage:
        return 0.0
    # Only the kernels some finding names are worked on (the others save nothing): a few arrays over those,
    # not over every kernel of the run (five float arrays of 25 MB each on 3.1 M kernels). They are found
    # with a mask and placed with a position map (5 bytes a kernel), not sorted: on 2.1 M kernels named by
    # several findings, a sort of their lists took 2.7 s.
    named = np.zeros(graph.n, bool)
    for c in coverage:
        named[c.kernels] = True
    touched = np.flatnonzero(named)
    del named
    position = np.full(graph.n, -1, np.int32)
    position[touched] = np.arange(len(touched), dtype=np.int32)
    total = np.zeros(len(touched), np.float64)
    extra = 0.0
    starts, ends = [], []
    for c in coverage:
        if len(c.kernels):
            np.add.at(total, position[c.kernels], c.saving_ns)
        extra += c.extra_ns
        if c.intervals is not None:
            starts.append(c.intervals[0])
            ends.append(c.intervals[1])
    del position
    dur = graph.dur[touched].astype(np.float64)
    busy_part = float(np.minimum(total, dur).sum())
    a = graph.attribution
    if a is not None:
        b = a.run.buckets
        busy_part = min(busy_part, float(b["compute"] + b["communication_not_overlapped"] + b["memcpy"]))
    gap = total  # worked in place: the saving beyond each kernel's run time, at most the gap before it
    gap -= dur
    del dur
    np.maximum(gap, 0.0, out=gap)
    np.minimum(gap, graph.gap_before_ns[touched], out=gap)
    has_gap = np.flatnonzero(gap > 0)
    start = graph.start[touched[has_gap]]
    del touched
    starts.append((start - gap[has_gap]).astype(np.int64))
    del gap, has_gap
    ends.append(start.astype(np.int64))
    closed = union_length(np.concatenate(starts), np.concatenate(ends))
    return float(busy_part + closed + extra)
