"""Run every registered rule over one profile (or a multi-rank group) and assemble the ``Report``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pypto_core.attribution import BUCKET_WORDS, attribute
from pypto_core.graph import DIAGNOSIS_GRAPH_COLUMNS, OperatorCallGraph
from pypto_core.hardware import SkuSpec, resolve_sku
from pypto_core.i18n import Message, msg, render
from pypto_core.launches import unread_correlation_ids
from pypto_core.memory import release_freed_memory
from pypto_core.profile import (
    SUMMARY_COLUMNS,
    TABLE_NAMES,
    TABLE_SCHEMAS,
    ColumnSet,
    Profile,
    ProfileGroup,
    merge_columns,
)
from pypto_core.replay import REPLAY_COLUMNS, Change, Replay, records_launches
from pypto_core.rules._flagged_ops import FLAGGED_OPS_COLUMNS
from pypto_core.rules.config import RuleConfig, as_config
from pypto_core.rules.context import Coverage, RuleContext, combined_saving_ns, severity_for
from pypto_core.rules.finding import Finding, Report
from pypto_core.rules.registry import discover

_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}

# What ``diagnose`` reads, for ``Profile.load(path, tables=...)``: the call graph (kernels, steps, flows,
# host_ops), the summary's time span (api_calls) and the rules' ``needs``; memory is never read.
DIAGNOSE_TABLES: tuple[str, ...] = ("kernels", "host_ops", "api_calls", "flows", "counters", "steps",
                                    "communication")
# Per-step breakdowns listed in a report (each ~0.4 KB of JSON): a serving trace of 100 k steps keeps the
# first ones; the run's breakdown covers them all.
MAX_REPORT_STEPS = 10_000
# What group-scope rules (slow_rank) read of every rank besides the primary one.
GROUP_TABLES: tuple[str, ...] = ("kernels", "steps")


def diagnose_columns() -> dict[str, frozenset[str] | None]:
    """The columns ``diagnose`` reads, for ``Profile.load(path, columns=...)``: the call graph's (with the
    attribution and workload; not the framework ops, which no rule reads), the replay's, the summary's, what
    ``emit`` lists of flagged kernels and every rule's ``needs``. The memory table is never read; on a 1 GB
    simulated profile the PipeUtilization counters other than MTE2, host op categories, API levels and the
    host calls' thread ids are left on disk."""
    return merge_columns(DIAGNOSIS_GRAPH_COLUMNS, REPLAY_COLUMNS, SUMMARY_COLUMNS, FLAGGED_OPS_COLUMNS,
                         *(r.columns() for r in discover().values()))


def diagnosis_step_columns() -> dict[str, frozenset[str] | None]:
    """What the worker's diagnosis step loads for the rules, the page data and the timeline index: every
    column of every table, except the kernels' extra columns (a kernel table's PMU counters, about 30 float
    columns) that no rule reads (``diagnose_columns``). The timeline index's event details take those from
    the saved files a batch at a time (``build_timeline_index(saved=...)``)."""
    out: dict[str, frozenset[str] | None] = {name: None for name in TABLE_NAMES}
    read = diagnose_columns().get("kernels") or frozenset()
    out["kernels"] = frozenset(TABLE_SCHEMAS["kernels"].names) | read
    return out


def _run_rules(ctx: RuleContext, scope: str, warnings: list[Message | str]) -> None:
    vendor, workload = ctx.vendor, ctx.workload
    for rule in sorted(discover().values(), key=lambda r: r.id):
        if rule.scope != scope or rule.id in ctx.config.disabled or not rule.applies_to(vendor, workload):
            continue
        ctx.rule = rule
        try:
            rule.match(ctx)
        except Exception as exc:  # one broken rule must not hide the others' findings
            warnings.append(msg("rule {rule} failed: {error}", rule=rule.id,
                                error=f"{type(exc).__name__}: {exc}"))


def _summary(profile: Profile, graph: OperatorCallGraph, group: ProfileGroup | None) -> dict[str, Any]:
    metrics = graph.metrics()
    t = graph.tokens
    base = profile.summary()
    wl = graph.workload
    a = graph.attribution
    # the steps the attribution counts (the profiler's empty tail step is none), else the profile's
    recorded = a.profiler_steps() if a is not None else None
    steps = len(recorded) if recorded is not None else base["steps"]
    out: dict[str, Any] = {
        "format": base["format"], "source": base["source"], "ranks": group.ranks if group else 1,
        "device": graph.sku.name, "sku_source": graph.sku_source, "device_vendor": graph.vendor,
        "workload": wl.kind, "workload_evidence": wl.evidence,
        "kernel_count": base["kernel_count"], "step_count": steps, "simulated": base["simulated"],
        "duration_ns": base["duration_ns"],
        "ai_core_utilization": metrics["ai_core_utilization"],
        "metrics": metrics,
        "structure": graph.structure(),
        "time_breakdown": a.run.to_dict() if a else None,
        "attribution_source": a.source if a else None,
        # False: no host call recorded, so sync wait, data loading and host launch bound are not measured
        "host_calls_recorded": a.host_recorded if a else None,
        "attribution_note": a.note.render() if a and a.note else None,
        "dominant_bucket": a.run.dominant() if a else None,
        "steps": [st.to_dict() for st in a.steps[:MAX_REPORT_STEPS]] if a else [],
        "streams": a.streams if a else {},
        # how the tasks were launched: the share a captured graph's replay issued (pypto_core.launches)
        "graph_launched_share": round(graph.launches.share(graph.window), 4),
        "graph_launches": graph.launches.graph_calls,
    }
    if a is not None and len(a.steps) > MAX_REPORT_STEPS:
        out["steps_listed"] = MAX_REPORT_STEPS  # the run's time_breakdown still sums every step
    if wl.has_decode() and len(t.latency_ns):
        # a graph-replayed decode records no batch: its steps are known, its tokens (steps x batch) are not
        out["decode"] = {"tokens": int(len(t.latency_ns)) * t.batch if t.batch else None,
                         "steps": int(len(t.latency_ns)),
                         "batch": t.batch, "per_token_ms_p50": metrics["per_token_latency_ms"] or 0.0,
                         "per_token_ms_p90": metrics["per_token_latency_p90_ms"] or 0.0,
                         # null where the batch is not recorded, as in metrics: one figure for one concept
                         "tokens_per_s": (metrics["tokens_per_s"] or 0.0) if t.batch else None,
                         "token_source": t.source}
    if group is not None and group.ranks > 1:
        # the other ranks carry only GROUP_TABLES (no host calls): their idle time is not split by host state
        ranked = sorted(group.profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))
        out["rank_breakdowns"] = []
        for p in ranked:
            ra = a if p is profile else attribute(p)
            out["rank_breakdowns"].append({"rank": p.meta.rank, "source": ra.source if ra else None,
                                           "time_breakdown": ra.run.to_dict() if ra else None,
                                           "dominant_bucket": ra.run.dominant() if ra else None,
                                           "steps": [st.to_dict() for st in ra.steps] if ra else []})
    return out


# The run's largest bucket, when it is not compute and holds at least this share of the run with no finding
# to explain it, is named in a warning that says why (a report of "no findings" on a run 93% host launch
# bound, the MI250 trace's 16 kernels, said nothing) [INFERRED: a quarter of the run is worth a word]
UNEXPLAINED_MIN_SHARE = 0.25


def _unexplained_bucket(ctx: RuleContext) -> Message | None:
    """Where the run's largest bucket is not compute, holds ``UNEXPLAINED_MIN_SHARE`` of it or more, and no
    finding explains it: why. A rule that explains it could not judge the profile (its reason), the profile
    records no host call to tell what the device waited for (idle time), or no rule knows what to fix."""
    a = ctx.graph.attribution
    if a is None:
        return None
    dominant = a.run.dominant()
    if dominant is None or dominant == "compute" or a.run.share(dominant) < UNEXPLAINED_MIN_SHARE:
        return None
    rules = discover()
    if any(f.rule in rules and rules[f.rule].explains == dominant for f in ctx.findings):
        return None
    bucket, pct = BUCKET_WORDS[dominant], 100 * a.run.share(dominant)
    for rule_id, reason in sorted(ctx.cannot_judge.items()):
        if rules[rule_id].explains == dominant:
            return msg("{bucket} is {pct:.0f}% of this run, its largest share, but {rule} could not judge "
                       "it: {reason}", bucket=bucket, pct=pct, rule=rule_id, reason=reason)
    if dominant == "idle_other" and not a.host_recorded:
        return msg("{bucket} is {pct:.0f}% of this run, its largest share: the profile records no host call, "
                   "so what the device waited for is not known (profile the host side too: torch_npu's "
                   "trace_view.json, or a Kineto trace with CPU activities)", bucket=bucket, pct=pct)
    return msg("{bucket} is {pct:.0f}% of this run, its largest share, and no rule found what to fix in it: "
               "the time breakdown and the timeline show where it goes", bucket=bucket, pct=pct)


def combined_speedup(graph: OperatorCallGraph, coverage: list[Coverage], total_ns: int) -> float:
    """Every finding fixed at once: savings counted once each (``combined_saving_ns``), and never more than
    the attribution allows: the compute no finding shortens stays, so the run cannot drop below it."""
    if not total_ns or not coverage:
        return 1.0
    saving = combined_saving_ns(graph, coverage)
    a = graph.attribution
    if a is not None:
        shortened = sum(float(np.minimum(c.saving_ns, graph.dur[c.kernels]).sum()) for c in coverage
                        if len(c.kernels))
        floor = max(a.run.buckets["compute"] - shortened, 0.0)
        saving = min(saving, total_ns - floor)
    saving = min(saving, 0.999 * total_ns)
    return round(total_ns / (total_ns - saving), 4)


def diagnose(profile: Profile, config: RuleConfig | dict[str, Any] | None = None,
             sku: str | SkuSpec | None = None, *, sku_overrides: dict[str, float] | None = None,
             group: ProfileGroup | None = None, what_if: list[str] | None = None,
             graph: OperatorCallGraph | None = None, keep_rows: bool = True) -> Report:
    """Findings for one profile. ``sku`` overrides what the profile says; ``config`` overrides thresholds;
    ``what_if`` lists rule ids whose findings are replayed together into ``report.what_if``; ``graph``: the
    profile's call graph, built by the caller for the same ``sku`` to share it with the page data and the
    timeline index (the worker's diagnose step: one attribution, not three). ``keep_rows=False``: the caller
    is done with the profile's (and the group's) rows, which are let go once the replay has read them
    (``pypto analyze``)."""
    started = time.perf_counter()
    cfg = as_config(config)
    spec, _ = resolve_sku(profile, sku, sku_overrides)
    if not keep_rows:
        profile.drop_columns(unread_correlation_ids(profile))
    if graph is None or graph.profile is not profile or graph.sku.name != spec.name:
        graph = OperatorCallGraph(profile, spec)
    # The attribution first, while the call graph holds no shapes: its temporaries are the largest, and they
    # are handed back before the rules build theirs.
    graph.attribution  # noqa: B018 (computed and cached here)
    release_freed_memory()
    if not isinstance(sku, SkuSpec):
        graph.sku_source = "given" if sku else resolve_sku(profile, None)[1]
    warnings: list[Message | str] = list(profile.meta.warnings)
    if graph.sku_source == "default" and profile.meta.device:
        # NPU_INFO and info.json often name the family only ("Ascend910B"), whose parts differ in cores
        # and clocks
        warnings.append(msg("the profile names the chip family ({family}) but not its part; assumed {sku} "
                            "(give the device to change it: the upload's Device (SKU) field, or pypto "
                            "analyze --sku)", family=profile.meta.device, sku=spec.name))
    elif graph.sku_source == "default":
        warnings.append(msg("the profile does not name its Ascend part; assumed {sku} (give the device to "
                            "change it: the upload's Device (SKU) field, or pypto analyze --sku)",
                            sku=spec.name))
    elif graph.sku_source == "unknown":
        warnings.append(msg("no figures are known for this {vendor} device ({sku}): peak-based metrics are "
                            "left out (give the device: the upload's Device (SKU) field, or pypto analyze "
                            "--sku)", vendor=graph.vendor, sku=spec.name))
    if graph.workload.kind == "unknown":
        warnings.append(msg("the workload could not be told from this profile (too few kernels or host ops): "
                            "only the rules that hold for every workload ran"))
    if graph.attribution is not None and graph.attribution.note:
        warnings.append(graph.attribution.note)
    ctx = RuleContext(profile=profile, graph=graph, config=cfg, group=group)
    _run_rules(ctx, "profile", warnings)
    if group is not None and group.ranks > 1:
        _run_rules(ctx, "group", warnings)
    unexplained = _unexplained_bucket(ctx)
    if unexplained is not None:
        warnings.append(unexplained)
    summary = _summary(profile, graph, group)
    # the run's wait for other ranks, the figure the findings that report one carry (RuleContext.peer_wait):
    # the headline of a rank whose step waits for its peers, which no saving counts
    summary["peer_wait"] = (ctx.peer_wait.to_dict(ctx.total_ns, summary["ranks"])
                            if ctx.peer_wait is not None else None)
    summary["combined_speedup_source"] = "interval_model"
    # The rules and the summary are done with the shapes, chains and gaps (180 MB on a 5 GB simulated
    # folder): the combined saving's and the replay's arrays never sit beside them. The combined saving
    # beside them was the analysis's peak there.
    graph.drop_rule_caches()
    release_freed_memory()
    combined = combined_speedup(graph, ctx.coverage, ctx.total_ns)
    if not keep_rows:
        _release_rows(profile, graph, group, keep=REPLAY_COLUMNS)  # the replay is built from these alone
    replay = _replayable(profile, graph, asked=what_if is not None)
    if not keep_rows:
        # the replay holds what its runs need: they never stack on the tables (400 MB on a 5 GB simulated
        # folder, where the runs were the analysis's peak)
        _release_rows(profile, graph, group)
    if replay is not None:
        replayed = _replay_findings(ctx, replay)
        if replay.linked_share >= REPLAY_MIN_LINKED:
            combined, summary["combined_speedup_source"] = replayed, "replay"
    findings = _ranked(ctx.findings, graph)
    upper = any(f.saving_bound == "upper_bound" and f.estimated_saving_us > 0 for f in findings)
    bound = "upper_bound" if upper else "estimate"
    report = Report(profile=summary, findings=findings, estimated_combined_speedup=combined,
                    combined_speedup_bound=bound, warnings=[render(w) for w in warnings],
                    warning_messages=[w.to_dict() if isinstance(w, Message) else None for w in warnings])
    if what_if is not None:
        report.what_if = _what_if(ctx, replay, graph, what_if)
    report.profile["analysis_s"] = round(time.perf_counter() - started, 3)
    return report


def _release_rows(profile: Profile, graph: OperatorCallGraph, group: ProfileGroup | None,
                  keep: ColumnSet | None = None) -> None:
    """For a caller done with the rows (``diagnose(keep_rows=False)``): the other ranks' rows go, and the
    profile's but for ``keep``; the call graph reads the kernels left."""
    for other in group.profiles if group is not None else []:
        if other is not profile:
            other.release_rows()
    profile.release_rows(keep)
    graph.kernels = profile.kernels
    release_freed_memory()


# The replay re-times what the profile links: where most tasks have no recorded launch (a kernel table
# without its timeline), what held them back is unknown and the interval model gives the combined figure.
REPLAY_MIN_LINKED = 0.5


def _replayable(profile: Profile, graph: OperatorCallGraph, *, asked: bool = False) -> Replay | None:
    """The replay of this rank, where there are tasks to re-time and it is trusted: a profile that records
    no launch at all (a kernel table alone) is left to the saving models, as its combined figure is
    (``REPLAY_MIN_LINKED``), unless a what-if replay is ``asked`` for. On a 3.1 M-kernel table that is
    about 600 MB and 6 s not spent on figures nobody would trust."""
    a = graph.attribution
    if a is None or a.source != "timeline" or not graph.n:
        return None  # no tasks to re-time: the findings keep their saving models
    if not asked and not records_launches(profile):
        return None
    return Replay(profile, a)


def _replay_findings(ctx: RuleContext, replay: Replay) -> float:
    """The combined speedup is the replay of every finding's change together; each finding also records
    what its own change alone buys in the replay (``details.replayed_alone_us``), beside its saving model."""
    total_ns = max(ctx.total_ns, 1)
    rules = discover()
    for f, cov in zip(ctx.findings, ctx.coverage):
        if cov.change is not None:
            alone = round(replay.run(cov.change).saving_ns / 1e3, 3)
            f.details["replayed_alone_us"] = alone
            explains = rules[f.rule].explains if f.rule in rules else None
            beyond = alone - ctx.bucket_ns(explains) / 1e3 if explains else 0.0
            if beyond > 0.5:
                # the replayed fix closes more than the time this finding explains (graph capture also
                # removes the untraced Python between ops, filed as other idle): said, never hidden
                f.details["replayed_beyond_bucket_us"] = round(beyond, 3)
            if f.saving_bound == "upper_bound" and alone > f.estimated_saving_us:
                # an upper bound bounds both models: the replay of the fix found more than the saving model;
                # the severity follows the saving shown (sync_stall on the H200 CUDA-graph run: 25% of the
                # run replayed, "medium" from its model's share)
                f.details["saving_model_us"] = f.estimated_saving_us
                _raise_saving(f, alone, total_ns)
    changed = [(f, c.change) for f, c in zip(ctx.findings, ctx.coverage) if c.change is not None]
    if not changed:
        return 1.0
    every_ns = replay.run(Change.merge([change for _, change in changed])).saving_ns
    _replay_after_the_others(changed, replay, every_ns)
    for f, _ in changed:
        after = f.details.get("replayed_after_others_us")
        if after is not None and f.saving_bound == "upper_bound" and after > f.estimated_saving_us:
            # "at most" bounds every figure shown beside it: the unfused chains of the H200 graph-replayed
            # decode read "at most 2.4 ms" beside "3.15 ms once the other findings are fixed"
            f.details.setdefault("saving_model_us", f.estimated_saving_us)
            _raise_saving(f, after, total_ns)
    return run_speedup(total_ns, every_ns)


def _raise_saving(f: Finding, saving_us: float, total_ns: float) -> None:
    """A finding's saving raised to a replayed figure, its speedup and severity following it."""
    f.estimated_saving_us = saving_us
    f.estimated_speedup = run_speedup(total_ns, saving_us * 1e3)
    f.severity = severity_for(max(saving_us, f.peer_wait_us) * 1e3 / total_ns, f.time_share)


def run_speedup(total_ns: float, saving_ns: float) -> float:
    """A replayed saving as a speedup on the findings' own scale (the run's total, ``RuleContext.total_ns``,
    not the replay's span): one finding alone reads the same speedup in the headline as in its row (10.775x
    against 10.967x on the H200 eager decode before), and every finding ticked in the what-if replay the
    headline's (17.82x against 18.37x)."""
    total = max(total_ns, 1)
    return round(total / (total - min(saving_ns, 0.999 * total)), 4)


# A fix that alone buys less than this share of its saving model waits on another bottleneck: what it adds
# to the other findings' fixes is replayed and shown beside it.
ALONE_BELOW_MODEL = 0.5


def _replay_after_the_others(changed: list[tuple[Finding, Change]], replay: Replay, every_ns: float) -> None:
    """``details.replayed_after_others_us``: what a finding's fix adds once every other finding's is in
    (every change replayed, less every change but its own), for a fix that alone buys little of its model.
    Kernels shortened inside a CUDA graph whose replays wait for the host save nothing alone, however much
    device time they free: on the H200 graph-replayed decode the unfused elementwise chains replay at 0 µs
    alone and 3.15 ms after the host gaps are closed. That says which fix comes first."""
    for f, _ in changed:
        alone = f.details.get("replayed_alone_us", 0.0)
        others = [c for g, c in changed if g is not f]
        if not others or alone >= ALONE_BELOW_MODEL * f.estimated_saving_us:
            continue
        added = round((every_ns - replay.run(Change.merge(others)).saving_ns) / 1e3, 3)
        if added > alone + 0.5:
            f.details["replayed_after_others_us"] = added


def _what_if(ctx: RuleContext, replay: Replay | None, graph: OperatorCallGraph,
             rules: list[str]) -> dict[str, Any]:
    """The run replayed with the changes of the listed rules' findings (unknown or absent rules are named)."""
    chosen = [c.change for f, c in zip(ctx.findings, ctx.coverage)
              if f.rule in rules and c.change is not None]
    found = sorted({f.rule for f in ctx.findings if f.rule in rules})
    out: dict[str, Any] = {"rules": found, "not_found": sorted(set(rules) - set(found)), "duration_ns": None,
                           "per_token_ms": None, "speedup": 1.0}
    if replay is None:
        note = msg("this profile has no device tasks to replay")
        out["note"], out["note_message"] = note.render(), note.to_dict()  # English, and for other languages
        return out
    res = replay.run(Change.merge(chosen))
    # the run's total and what the replay saves of it, as the headline's combined speedup reads them
    total = max(ctx.total_ns, 1)
    saving = min(res.saving_ns, 0.999 * total)
    out.update({"duration_ns": int(round(total - saving)), "original_ns": int(total),
                "speedup": run_speedup(total, res.saving_ns)})
    decode = graph.tokens.decode_step
    if graph.workload.has_decode() and len(decode) == len(res.step_ns) and decode.any():
        out["per_token_ms"] = round(float(np.median(res.step_ns[decode])) / 1e6, 6)
    return out


def _ranked(findings: list[Finding], graph: OperatorCallGraph) -> list[Finding]:
    """What the step is bound by first: findings that explain the attribution's dominant bucket, then by
    severity and saving (a large saving on a minor bucket never hides the main bottleneck)."""
    a = graph.attribution
    dominant = a.run.dominant() if a is not None else None
    rules = discover()

    def key(f: Finding) -> tuple[int, int, float]:
        explains = rules[f.rule].explains if f.rule in rules else None
        return (0 if explains == dominant else 1, _SEVERITY_RANK.get(f.severity, 3), -f.estimated_saving_us)

    ranked = sorted(findings, key=key)
    for i, f in enumerate(ranked, 1):
        f.rank = i
    return ranked


def diagnose_group(group: ProfileGroup, config: RuleConfig | dict[str, Any] | None = None,
                   sku: str | SkuSpec | None = None, what_if: list[str] | None = None,
                   keep_rows: bool = True) -> Report:
    """Findings for the primary rank plus the cross-rank rules (slow ranks) over the whole group."""
    return diagnose(group.primary(), config, sku, group=group, what_if=what_if, keep_rows=keep_rows)


def findings_for(report: Report, rule_id: str) -> list[Finding]:
    return [f for f in report.findings if f.rule == rule_id]
