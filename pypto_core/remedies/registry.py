"""Rule id -> remedy generator, found by registration (no hand-kept list), and ``generate_artifacts``.

A generator names the rule it serves (``rule = "..."``); the files a finding offers are the rule's own
declaration (``@rule(remedies=...)``), so a generator for a rule that declares none is refused.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Any, Protocol

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.context import RemedyContext, profile_meta_dict
from pypto_core.rules.finding import Finding, Report
from pypto_core.rules.registry import discover


class RemedyGenerator(Protocol):
    rule: str  # the id of the rule it serves (a class attribute)

    def generate(self, ctx: RemedyContext) -> list[Artifact]: ...


_GENERATORS: dict[str, type[RemedyGenerator]] = {}
_NOT_GENERATORS = {"artifact", "bundle", "context", "header", "model_diff", "registry", "safe_text"}


def register(cls: type[RemedyGenerator]) -> type[RemedyGenerator]:
    if cls.rule in _GENERATORS and _GENERATORS[cls.rule] is not cls:
        raise ValueError(f"two remedy generators for rule {cls.rule!r}")
    _GENERATORS[cls.rule] = cls
    return cls


def generators() -> dict[str, type[RemedyGenerator]]:
    """Every generator module in this package, imported once so that its ``@register`` runs; each serves a
    registered rule that declares the files it offers."""
    import pypto_core.remedies as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in _NOT_GENERATORS:
            importlib.import_module(f"{package.__name__}.{module.name}")
    rules = discover()
    for rule_id, cls in _GENERATORS.items():
        declared = rules.get(rule_id)
        if declared is None or not declared.remedies:
            raise ValueError(f"remedy generator {cls.__name__} serves {rule_id!r}, but no registered rule of "
                             "that id declares remedies (@rule(remedies=...))")
    return dict(_GENERATORS)


def generate_artifacts(report_or_findings: Report | Iterable[Finding], *, profile_meta: Any = None,
                       model_source: str | None = None, model_filename: str | None = None) -> list[Artifact]:
    """Every artifact for every finding that has a generator, with names unique across the analysis.

    ``profile_meta`` is a ``ProfileMeta`` or a dict; for a ``Report`` it defaults to the report's profile
    block.
    ``model_source`` is the user's model file (text), for the unified diffs; without it no diff is made.
    """
    if isinstance(report_or_findings, Report):
        findings = list(report_or_findings.findings)
        if profile_meta is None:
            profile_meta = report_or_findings.profile
    else:
        findings = list(report_or_findings)
    meta = profile_meta_dict(profile_meta)
    table = generators()
    artifacts: list[Artifact] = []
    taken: set[str] = set()
    for finding in findings:
        generator = table.get(finding.rule)
        if generator is None:
            continue
        ctx = RemedyContext(finding=finding, profile_meta=meta, model_source=model_source,
                            model_filename=model_filename)
        for artifact in generator().generate(ctx):
            name = _unique(artifact.name, taken)
            taken.add(name)
            artifacts.append(artifact if name == artifact.name else _renamed(artifact, name))
    return artifacts


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, ext = name.rpartition(".")
    stem, ext = (stem, dot + ext) if dot else (name, "")
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}_{n}{ext}"
    return candidate


def _renamed(artifact: Artifact, name: str) -> Artifact:
    return Artifact(name=name, kind=artifact.kind, content=artifact.content, rule=artifact.rule,
                    header=artifact.header)
