"""The rule registry: each rule module declares everything about its rule in one ``@rule(...)``.

A rule's facts live in its own module and nowhere else: the thresholds with their evidence (what
``RuleConfig`` starts from), the model blocks a comparison measures its saving on (``compare``,
``fix_verdict``), the remedy files its findings offer (``RuleContext.emit``, ``remedies``), the columns it
reads (``diagnose_columns``, so an analysis loads only those) and the vendors and workloads it holds for.
Modules are found by scanning this package, so a new rule is one new file, plus its remedy generator if it
has one and its tests (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from pypto_core.i18n import Message
from pypto_core.profile import TABLE_NAMES, merge_columns
from pypto_core.workload import VENDORS, WORKLOADS

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.rules.context import RuleContext

# Modules of this package that are machinery, not rules.
_NOT_RULES = frozenset({"registry", "config", "context", "finding", "diagnose", "evidence_labels"})
SCOPES = ("profile", "group")  # one profile, or every rank of a multi-rank one

MatchFunction = Callable[["RuleContext"], None]


@dataclass(frozen=True)
class Threshold:
    """One threshold's default value and why it has that value: the source it comes from (a section of
    docs/domain.md or docs/formats.md, the advisor's setting) or ``[INFERRED]`` with the reasoning."""

    value: float
    evidence: str


@dataclass(frozen=True)
class Rule:
    id: str
    title: Message  # what the rule looks for, in words (rendered in the reader's language)
    match: MatchFunction  # match(ctx) emits findings through ctx.emit(...)
    saving_model: Message  # the model behind estimated savings, in words
    # threshold name -> default and evidence; a project overrides the values by name (rules/config.py)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    # the model blocks (compare.BLOCKS) whose kernels the fix changes: a comparison of the run before and
    # after the fix measures the saving there (docs/contract.md, compare findings)
    blocks: tuple[str, ...] = ()
    # the artifact files a finding offers (Finding.remedies), written by the generator in pypto_core/remedies
    # that names this rule
    remedies: tuple[str, ...] = ()
    # the columns the rule reads itself, beyond the call graph's (graph.GRAPH_COLUMNS) and what ``emit``
    # lists of flagged kernels: "table.column", or "table.*" for every column of a small table
    needs: tuple[str, ...] = ()
    scope: str = "profile"  # profile | group (multi-rank)
    module: str = ""
    vendors: tuple[str, ...] = ()  # device vendors it applies to (pypto_core.workload.VENDORS); () = all
    workloads: tuple[str, ...] = ()  # workloads it applies to (WORKLOADS); () = all, unknown included
    # the attribution bucket its findings explain (findings of the dominant bucket come first)
    explains: str = "compute"
    # "estimate": what the fix is expected to save; "upper_bound": the most it can save (the whole cause gone:
    # every gap closed, every copy hidden), so the page and the reports say "at most"
    saving_bound: str = "estimate"

    def applies_to(self, vendor: str, workload: str) -> bool:
        return ((not self.vendors or vendor in self.vendors)
                and (not self.workloads or workload in self.workloads))

    def columns(self) -> dict[str, frozenset[str] | None]:
        """``needs`` as a ``profile.ColumnSet`` (table -> columns, None for the whole table)."""
        pairs = (need.split(".", 1) for need in self.needs)
        return merge_columns(*({table: None if column == "*" else (column,)} for table, column in pairs))

    def threshold_values(self) -> dict[str, float]:
        return {name: t.value for name, t in self.thresholds.items()}


RULES: dict[str, Rule] = {}
SAVING_BOUNDS = ("estimate", "upper_bound")


def rule(id: str, *, title: Message, saving_model: Message, thresholds: Mapping[str, Threshold],
         blocks: tuple[str, ...], remedies: tuple[str, ...], needs: tuple[str, ...], scope: str = "profile",
         vendors: tuple[str, ...] = (), workloads: tuple[str, ...] = (),
         explains: str = "compute",
         saving_bound: str = "estimate") -> Callable[[MatchFunction], MatchFunction]:
    """Register ``match(ctx)`` as rule ``id`` with its facts. ``thresholds``, ``blocks``, ``remedies`` and
    ``needs`` have no default, so every rule says them, if only as ``()``; ``vendors`` and ``workloads`` say
    where its advice holds (empty: everywhere); ``saving_bound`` whether its saving is an estimate or an upper
    bound."""

    def decorate(func: MatchFunction) -> MatchFunction:
        for need in needs:
            table, _, column = need.partition(".")
            if table not in TABLE_NAMES or not column:  # a reader may add columns beyond the schema
                raise ValueError(f"rule {id!r}: needs names table.column or table.*, not {need!r}")
        for name, threshold in thresholds.items():
            if not isinstance(threshold, Threshold) or not threshold.evidence.strip():
                raise ValueError(f"rule {id!r}: threshold {name!r} needs a Threshold(value, evidence)")
        if scope not in SCOPES:
            raise ValueError(f"rule {id!r}: scope is one of {SCOPES}, not {scope!r}")
        if not set(vendors) <= set(VENDORS) or not set(workloads) <= set(WORKLOADS):
            raise ValueError(f"rule {id!r}: vendors come from {VENDORS}, workloads from {WORKLOADS}")
        if saving_bound not in SAVING_BOUNDS:
            raise ValueError(f"rule {id!r}: saving_bound is one of {SAVING_BOUNDS}, not {saving_bound!r}")
        if id in RULES and RULES[id].module != func.__module__:
            raise ValueError(f"rule id {id!r} registered twice ({RULES[id].module}, {func.__module__})")
        RULES[id] = Rule(id=id, title=title, match=func, saving_model=saving_model,
                         thresholds=MappingProxyType(dict(thresholds)), blocks=tuple(blocks),
                         remedies=tuple(remedies), needs=tuple(needs), scope=scope, module=func.__module__,
                         vendors=tuple(vendors), workloads=tuple(workloads), explains=explains,
                         saving_bound=saving_bound)
        return func

    return decorate


_discovered = False


def discover() -> dict[str, Rule]:
    """Import every rule module of this package once; returns the registry."""
    global _discovered
    if not _discovered:
        import pypto_core.rules as package

        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_") or info.name in _NOT_RULES:
                continue
            importlib.import_module(f"{package.__name__}.{info.name}")
        _discovered = True
    return RULES


def rule_blocks(rule_id: str) -> tuple[str, ...]:
    """The model blocks ``rule_id``'s saving is measured on in a comparison; () for a rule with none or an
    unknown id (a stored finding of a rule since removed)."""
    found = discover().get(rule_id)
    return found.blocks if found is not None else ()
