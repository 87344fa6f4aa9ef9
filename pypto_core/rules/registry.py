"""The rule registry: each rule module registers itself with ``@rule(...)``; modules are found by scanning
this package, so a new rule is one new file and nothing else (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto_core.i18n import Message
from pypto_core.profile import TABLE_NAMES, merge_columns

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.rules.context import RuleContext

# Modules of this package that are machinery, not rules.
_NOT_RULES = frozenset({"registry", "config", "context", "finding", "diagnose"})  # and any _private helper


@dataclass(frozen=True)
class Rule:
    id: str
    title: Message  # what the rule looks for, in words (rendered in the reader's language)
    match: Callable[..., None]  # match(ctx) emits findings through ctx.emit(...)
    saving_model: Message  # the model behind estimated savings, in words
    remedies: tuple[str, ...] = ()
    # the columns the rule reads itself, beyond the call graph's (graph.GRAPH_COLUMNS) and what ``emit``
    # lists of flagged kernels: "table.column", or "table.*" for every column of a small table
    needs: tuple[str, ...] = ()
    scope: str = "profile"  # profile | group (multi-rank)
    module: str = ""
    vendors: tuple[str, ...] = ()  # device vendors it applies to (pypto_core.workload.VENDORS); () = all
    workloads: tuple[str, ...] = ()  # workloads it applies to (WORKLOADS); () = all, unknown included
    explains: str = "compute"  # the attribution bucket its findings explain (findings of the dominant come first)
    # "estimate": what the fix is expected to save; "upper_bound": the most it can save (the whole cause gone:
    # every gap closed, every copy hidden), so the page and the reports say "up to"
    saving_bound: str = "estimate"

    def applies_to(self, vendor: str, workload: str) -> bool:
        return ((not self.vendors or vendor in self.vendors)
                and (not self.workloads or workload in self.workloads))

    def columns(self) -> dict[str, frozenset[str] | None]:
        """``needs`` as a ``profile.ColumnSet`` (table -> columns, None for the whole table)."""
        pairs = (need.split(".", 1) for need in self.needs)
        return merge_columns(*({table: None if column == "*" else (column,)} for table, column in pairs))


RULES: dict[str, Rule] = {}
SAVING_BOUNDS = ("estimate", "upper_bound")


def rule(id: str, *, title: Message, saving_model: Message, remedies: tuple[str, ...] = (),
         needs: tuple[str, ...] = (), scope: str = "profile", vendors: tuple[str, ...] = (),
         workloads: tuple[str, ...] = (), explains: str = "compute",
         saving_bound: str = "estimate") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``match(ctx)`` as rule ``id``; ``vendors`` and ``workloads`` say where its advice holds."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for need in needs:
            table, _, column = need.partition(".")
            if table not in TABLE_NAMES or not column:
                raise ValueError(f"rule {id!r}: needs names table.column or table.*, not {need!r}")
        if saving_bound not in SAVING_BOUNDS:
            raise ValueError(f"rule {id!r}: saving_bound is one of {SAVING_BOUNDS}, not {saving_bound!r}")
        if id in RULES and RULES[id].module != func.__module__:
            raise ValueError(f"rule id {id!r} registered twice ({RULES[id].module}, {func.__module__})")
        RULES[id] = Rule(id=id, title=title, match=func, saving_model=saving_model, remedies=tuple(remedies),
                         needs=tuple(needs), scope=scope, module=func.__module__, vendors=tuple(vendors),
                         workloads=tuple(workloads), explains=explains, saving_bound=saving_bound)
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
