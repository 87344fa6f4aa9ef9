"""Run every registered rule over one profile (or a multi-rank group) and assemble the ``Report``."""

from __future__ import annotations

import time
from typing import Any

from pypto_core.graph import OperatorCallGraph
from pypto_core.hardware import SkuSpec, resolve_sku
from pypto_core.profile import Profile, ProfileGroup
from pypto_core.rules.config import RuleConfig, as_config
from pypto_core.rules.context import RuleContext, combined_saving_ns
from pypto_core.rules.finding import Finding, Report
from pypto_core.rules.registry import discover

_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}

# What ``diagnose`` reads, for ``Profile.load(path, tables=...)``: the call graph (kernels, steps, flows,
# host_ops), the summary's time span (api_calls) and the rules' ``needs``; memory is never read.
DIAGNOSE_TABLES: tuple[str, ...] = ("kernels", "host_ops", "api_calls", "flows", "counters", "steps",
                                    "communication")
# What group-scope rules (slow_rank) read of every rank besides the primary one.
GROUP_TABLES: tuple[str, ...] = ("kernels", "steps")


def _run_rules(ctx: RuleContext, scope: str, warnings: list[str]) -> None:
    for rule in sorted(discover().values(), key=lambda r: r.id):
        if rule.scope != scope or rule.id in ctx.config.disabled:
            continue
        ctx.rule_id = rule.id
        try:
            rule.match(ctx)
        except Exception as exc:  # one broken rule must not hide the others' findings
            warnings.append(f"rule {rule.id} failed: {type(exc).__name__}: {exc}")


def _summary(profile: Profile, graph: OperatorCallGraph, ranks: int) -> dict[str, Any]:
    metrics = graph.metrics()
    t = graph.tokens
    base = profile.summary()
    return {
        "format": base["format"], "source": base["source"], "ranks": ranks,
        "device": graph.sku.name, "sku_source": graph.sku_source,
        "kernel_count": base["kernel_count"], "steps": base["steps"], "simulated": base["simulated"],
        "duration_ns": base["duration_ns"],
        "decode": {"tokens": int(len(t.latency_ns)) * max(t.batch, 1), "steps": int(len(t.latency_ns)),
                   "batch": t.batch, "per_token_ms_p50": metrics["per_token_latency_ms"] or 0.0,
                   "per_token_ms_p90": metrics["per_token_latency_p90_ms"] or 0.0,
                   "tokens_per_s": metrics["tokens_per_s"] or 0.0, "token_source": t.source},
        "ai_core_utilization": metrics["ai_core_utilization"] or 0.0,
        "metrics": metrics,
        "structure": graph.structure(),
    }


def diagnose(profile: Profile, config: RuleConfig | dict[str, Any] | None = None,
             sku: str | SkuSpec | None = None, *, sku_overrides: dict[str, float] | None = None,
             group: ProfileGroup | None = None) -> Report:
    """Findings for one profile. ``sku`` overrides what the profile says; ``config`` overrides thresholds."""
    started = time.perf_counter()
    cfg = as_config(config)
    spec, _ = resolve_sku(profile, sku, sku_overrides)
    graph = OperatorCallGraph(profile, spec)
    if not isinstance(sku, SkuSpec):
        graph.sku_source = "given" if sku else resolve_sku(profile, None)[1]
    warnings = list(profile.meta.warnings)
    if graph.sku_source == "default":
        warnings.append(f"the profile does not name its device; assumed {spec.name} (pass --sku to change)")
    ctx = RuleContext(profile=profile, graph=graph, config=cfg, group=group)
    _run_rules(ctx, "profile", warnings)
    if group is not None and group.ranks > 1:
        _run_rules(ctx, "group", warnings)
    findings = sorted(ctx.findings, key=lambda f: (_SEVERITY_RANK.get(f.severity, 3), -f.estimated_saving_us))
    total = max(ctx.total_ns, 1)
    saving = min(combined_saving_ns(graph, ctx.coverage), 0.999 * total)
    report = Report(profile=_summary(profile, graph, group.ranks if group else 1), findings=findings,
                    estimated_combined_speedup=round(total / (total - saving), 4) if graph.n else 1.0,
                    warnings=warnings)
    report.profile["analysis_s"] = round(time.perf_counter() - started, 3)
    return report


def diagnose_group(group: ProfileGroup, config: RuleConfig | dict[str, Any] | None = None,
                   sku: str | SkuSpec | None = None) -> Report:
    """Findings for the primary rank plus the cross-rank rules (slow ranks) over the whole group."""
    return diagnose(group.primary(), config, sku, group=group)


def findings_for(report: Report, rule_id: str) -> list[Finding]:
    return [f for f in report.findings if f.rule == rule_id]
