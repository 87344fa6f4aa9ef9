"""A ``Report`` as JSON, Markdown or a self-contained HTML page.

Every string that came from a profile (op names, shapes, file paths) is escaped for the output format:
an uploaded kernel named ``</script><script>...`` must stay text (docs/architecture.md, house rules).
"""

from __future__ import annotations

import html
import json
from typing import Any

from pypto_core.attribution import BUCKETS
from pypto_core.collective_wait import P2P_WAIT_SHARE
from pypto_core.i18n import DEFAULT_LANGUAGE, Message, msg
from pypto_core.rules.evidence_labels import shown_evidence_rows
from pypto_core.rules.finding import Report

FORMATS = ("json", "md", "html")


def render(report: Report, fmt: str, language: str = DEFAULT_LANGUAGE) -> str:
    """The report in ``fmt``; its text (findings and, for md/html, the labels) in ``language``. JSON keeps
    every id and number as they are in any language."""
    report = report.localized(language)
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, default=str) + "\n"
    if fmt == "md":
        return render_markdown(report, language)
    if fmt == "html":
        return render_html(report, language)
    raise ValueError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _md(text: Any) -> str:
    """Escape Markdown table/inline syntax in profile-provided text (backslashes, never HTML entities)."""
    s = str(text)
    for ch in ("\\", "|", "`", "*", "_", "<", ">", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s.replace("\r", " ").replace("\n", " ")


def md_cell(text: Any, limit: int = 200) -> str:
    """``_md`` for one table cell of at most ``limit`` characters: a longer text is cut (with …) before it
    is escaped, so that no escape is split."""
    raw = str(text)
    out = _md(raw)
    if len(out) <= limit:
        return out
    lo, hi = 0, len(raw)
    while lo < hi:  # the longest prefix whose escaped form, plus the ellipsis, fits
        mid = (lo + hi + 1) // 2
        if len(_md(raw[:mid])) + 1 <= limit:
            lo = mid
        else:
            hi = mid - 1
    return _md(raw[:lo]) + "…"


def _fmt_value(value: Any) -> str:
    """An evidence value as ``shown_evidence_rows`` leaves it (times, shares and structured values already in
    words, as the page prints them): a float to four digits, the rest as it is."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _headline(report: Report, language: str = DEFAULT_LANGUAGE) -> list[tuple[str, str]]:
    p = report.profile
    t = _translator(language)
    dec = p.get("decode") or {}
    rows = [(t(msg("source")), str(p.get("source", ""))), (t(msg("format")), str(p.get("format", ""))),
            (t(msg("device")), f"{p.get('device')} ({p.get('sku_source', '')})"),
            (t(msg("kernels")), str(p.get("kernel_count", 0))),
            (t(msg("device vendor / workload")), f"{p.get('device_vendor', '?')} / {p.get('workload', '?')}"),
            (t(msg("simulated")), t(msg("yes")) if p.get("simulated") else t(msg("no")))]
    if p.get("graph_launches"):
        rows.append((t(msg("kernels launched from captured graphs")),
                     t(msg("{pct:.1f}% ({calls} graph launches)",
                           pct=100 * p.get("graph_launched_share", 0.0), calls=p["graph_launches"]))))
    if dec.get("steps") and dec.get("tokens") is None:  # a graph-replayed decode: no batch recorded
        rows += [(t(msg("decode steps")), t(msg("{steps} (one token for each sequence; the batch is not "
                                                "recorded: graph replays record no shapes)",
                                                steps=dec["steps"]))),
                 (t(msg("per-token latency p50 / p90")),
                  f"{dec.get('per_token_ms_p50', 0):.3f} / {dec.get('per_token_ms_p90', 0):.3f} ms")]
    elif dec.get("steps"):
        rows += [(t(msg("decode tokens")), str(dec.get("tokens"))),
                 (t(msg("per-token latency p50 / p90")),
                  f"{dec.get('per_token_ms_p50', 0):.3f} / {dec.get('per_token_ms_p90', 0):.3f} ms"),
                 (t(msg("tokens/s")), f"{dec.get('tokens_per_s', 0):.1f}")]
    tb = p.get("time_breakdown") or {}
    if tb.get("wall_ns"):
        # the attribution's figures as they are (docs/attribution.md): the same numbers the page and API show
        parts = [f"{b} {tb[b] / 1e6:.3f} ms ({100 * tb[b] / tb['wall_ns']:.1f}%)" for b in BUCKETS
                 if tb.get(b)]
        rows.append((t(msg("where the time goes")),
                     t(msg("wall {ms:.3f} ms: ", ms=tb["wall_ns"] / 1e6)) + ", ".join(parts)))
    if p.get("ai_core_utilization") is not None:
        rows.append((t(msg("AI Core utilization")), f"{100 * float(p['ai_core_utilization']):.1f}%"))
    how = (msg("replay of every finding's change") if p.get("combined_speedup_source") == "replay"
           else msg("each saved ns counted once"))
    bound = (" " + t(msg("an upper bound: some findings assume their whole cause goes"))
             if report.combined_speedup_bound == "upper_bound" else "")
    rows.append((t(msg("estimated combined speedup")),
                 f"{report.estimated_combined_speedup:.3f}x ({t(how)}){bound}"))
    return rows


def peer_wait_headline(report: Report, language: str = DEFAULT_LANGUAGE) -> tuple[str, str] | None:
    """The run's wait for other ranks (``profile.peer_wait``) as the report's headline: (the fact, what to do
    next), or None where the rank waits for no one. It leads the report, above the findings' savings, which
    never count it."""
    pw = report.profile.get("peer_wait") or {}
    wait_us = pw.get("wait_us") or 0.0
    if wait_us <= 0:
        return None
    t = _translator(language)
    share = pw.get("share_of_run")
    consequence = (msg("Most of it is in point-to-point send/receive between pipeline stages (the pipeline "
                       "bubble): more micro-batches per step, an interleaved (virtual pipeline) schedule or "
                       "layers balanced between the stages shrink it.")
                   if (pw.get("p2p_share") or 0) >= P2P_WAIT_SHARE else
                   msg("The late rank sets this wait; the same fix on every rank may shrink it too, so the "
                       "combined speedup (which counts no wait) may understate the job's gain."))
    fact = (msg("This rank waits {ms:.1f} ms ({pct:.1f}% of the run) in collectives for other ranks.",
                ms=wait_us / 1e3, pct=100 * share) if share is not None else
            msg("This rank waits {ms:.1f} ms in collectives for other ranks.", ms=wait_us / 1e3))
    parts = pw.get("collectives") or {}
    recorded = pw.get("transit_recorded", True)
    numbers = {"exposed": (pw.get("communication_not_overlapped_us") or 0) / 1e3,
               "pct": 100 * (pw.get("waiting_share") or 0), "wait": (parts.get("wait") or 0) / 1e3,
               "idle": (parts.get("idle") or 0) / 1e3, "elapse": (parts.get("elapse") or 0) / 1e3}
    how = [] if not parts.get("elapse") else [
        msg("It is the {exposed:.1f} ms of communication not overlapped with compute times the {pct:.0f}% of "
            "the collectives' time that moves no data: notify Wait {wait:.1f} ms and Idle {idle:.1f} ms of "
            "their {elapse:.1f} ms.", **numbers) if recorded else
        msg("It is the {exposed:.1f} ms of communication not overlapped with compute times the {pct:.0f}% of "
            "the collectives' time in notify Wait ({wait:.1f} ms of their {elapse:.1f} ms).", **numbers)]
    if recorded and pw.get("idle_us"):
        # Idle is not a notify wait: say what it is and how much of the figure it makes (collective_wait)
        how.append(msg("Of the {total:.1f} ms this rank waits, {notify:.1f} ms is notify Wait on the "
                       "collectives' main stream and {idle:.1f} ms their Idle, where that stream neither "
                       "moves data nor waits on a notify: msprof reads Wait on the main stream only, so Idle "
                       "holds the other streams' waits for peers (and the gaps between the collective's "
                       "tasks).",
                       total=wait_us / 1e3, notify=(pw.get("notify_wait_us") or 0) / 1e3,
                       idle=pw["idle_us"] / 1e3))
    ranks = int(pw.get("ranks_in_profile") or report.profile.get("ranks") or 1)
    nxt = (msg("This profile holds {ranks} ranks: the cluster view (the dashboard's cluster page) compares "
               "them and shows which rank is late.", ranks=ranks) if ranks > 1 else
           msg("Upload every rank (cluster page) to see which rank is late."))
    caveat = [] if recorded else [msg(
        "No transfer time is recorded for these collectives, so their Idle ({idle:.1f} ms) may be data "
        "moving or waiting: only the notify Wait is counted, and the wait is at least this.", **numbers)]
    sep = "" if language.startswith("zh") else " "  # Chinese sentences follow each other with no space
    return t(fact), sep.join(t(m) for m in (*how, consequence, *caveat, nxt))


def not_recoverable_row(report: Report, language: str = DEFAULT_LANGUAGE) -> str | None:
    """The row that opens the findings where the rank waits for other ranks: that time is the job's to lose,
    yet no finding's saving counts it, so a list read (or sorted) by saving would never show it. None where
    the rank waits for no one."""
    pw = report.profile.get("peer_wait") or {}
    wait_us = pw.get("wait_us") or 0.0
    if wait_us <= 0:
        return None
    share = pw.get("share_of_run")
    # fix_on as the report states it; derived from p2p_share for a report stored before it was written
    fix_on = pw.get("fix_on") or ("pipeline_schedule" if (pw.get("p2p_share") or 0) >= P2P_WAIT_SHARE
                                  else "late_rank")
    pipeline = fix_on == "pipeline_schedule"
    where = (msg("the pipeline schedule (more micro-batches per step, an interleaved schedule, balanced "
                 "stages)") if pipeline else
             msg("the late rank (the cluster page compares the ranks: upload every rank)"))
    return msg("Not recoverable on this rank: {ms:.1f} ms ({pct:.1f}% of the run) waiting in collectives for "
               "other ranks. No saving below counts it; the findings are listed by what bounds the step, "
               "then severity and saving. It goes with a fix on {where}.", ms=wait_us / 1e3,
               pct=100 * float(share or 0), where=where).render(language)


def _translator(language: str) -> Any:
    return lambda m: m.render(language) if isinstance(m, Message) else str(m)


def _severity(severity: str, language: str) -> str:
    return {"high": msg("high"), "medium": msg("medium"), "low": msg("low")}.get(
        severity, msg(severity)).render(language)


def render_markdown(report: Report, language: str = DEFAULT_LANGUAGE) -> str:
    t = _translator(language)
    out = ["# " + t(msg("PyPTO analysis")), ""]
    if report.profile.get("simulated"):
        out += ["> " + t(msg("This profile is **simulated**: it was generated, not captured on hardware.")),
                ""]
    waits = peer_wait_headline(report, language)
    if waits is not None:
        out += [f"> **{_md(waits[0])}** {_md(waits[1])}", ""]
    out += ["| | |", "|---|---|"] + [f"| {k} | {_md(v)} |" for k, v in _headline(report, language)] + [""]
    out += ["## " + t(msg("Findings ({n})", n=len(report.findings))), ""]
    if not report.findings:
        out += [t(msg("No anti-pattern found with evidence.")), ""]
    unrecovered = not_recoverable_row(report, language)
    if unrecovered is not None:
        out += [f"**{_md(unrecovered)}**", ""]
    for i, f in enumerate(report.findings, 1):
        out += [f"### {i}. [{_severity(f.severity, language)}] {_md(f.title)} (`{f.rule}`)", "",
                _md(f.description), "", "- " + t(msg("time share: {pct:.1f}%", pct=100 * f.time_share)),
                "- " + t(_saving(f)) + _replayed(f, language),
                "- " + t(msg("saving model: {text}", text=_md(f.saving_model)))]
        if f.ops:
            out.append("- " + t(msg("ops: {ops}", ops=", ".join(_md(o) for o in f.ops[:12]))))
        if f.remedies:
            out.append("- " + t(msg("remedies: {files}", files=", ".join(_md(r) for r in f.remedies))))
        out += ["", f"| {t(msg('evidence'))} | {t(msg('value'))} |", "|---|---|"]
        out += [f"| {_md(_evidence_key(r))} | {_md(_fmt_value(r['value']))} |"
                for r in shown_evidence_rows(f.evidence, language)] + [""]
    if report.warnings:
        out += ["## " + t(msg("Warnings")), ""] + [f"- {_md(w)}" for w in report.warnings] + [""]
    return "\n".join(out)


def _evidence_key(row: dict[str, Any]) -> str:
    """The evidence's label with its id, the id alone when it has no label (scripts read the JSON's ids)."""
    return row["key"] if row["label"] == row["key"] else f"{row['label']} ({row['key']})"


def _saving(f: Any) -> Message:
    if getattr(f, "peer_wait_us", 0):
        return msg("estimated saving{at_most}: {us:.1f} µs, speedup {speedup:.3f}x; wait for other ranks "
                   "{peer:.1f} µs, which only a fix on the late ranks removes (not counted here)",
                   at_most=_at_most(f), us=f.estimated_saving_us, speedup=f.estimated_speedup,
                   peer=f.peer_wait_us)
    return msg("estimated saving{at_most}: {us:.1f} µs, speedup {speedup:.3f}x", at_most=_at_most(f),
               us=f.estimated_saving_us, speedup=f.estimated_speedup)


def _at_most(f: Any) -> Message | str:
    return msg(" (at most)") if getattr(f, "saving_bound", "estimate") == "upper_bound" else ""


def _replayed(f: Any, language: str = DEFAULT_LANGUAGE) -> str:
    alone = f.details.get("replayed_alone_us")
    if alone is None:
        return ""
    beyond = f.details.get("replayed_beyond_bucket_us")
    if beyond:
        text = msg(" (replayed alone: {us:.1f} µs, {beyond:.1f} µs of it beyond the time this finding "
                   "explains: the fix also closes idle time filed under other causes)", us=alone,
                   beyond=beyond).render(language)
    else:
        text = msg(" (replayed alone: {us:.1f} µs)", us=alone).render(language)
    model = f.details.get("saving_model_us")
    if model is not None:  # the replay raised the estimate: the saving model's own figure beside it
        text += msg(" (by the saving model: {us:.1f} µs)", us=model).render(language)
    after = f.details.get("replayed_after_others_us")
    if after is not None:  # alone it waits on another bottleneck (diagnose._replay_after_the_others)
        text += msg(" ({us:.1f} µs once the other findings are fixed: alone, this fix waits on them)",
                    us=after).render(language)
    return text


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def render_html(report: Report, language: str = DEFAULT_LANGUAGE) -> str:
    t = _translator(language)
    title = _h(t(msg("PyPTO analysis")))
    parts = [f"<!doctype html><html lang='{_h(language)}'><head><meta charset='utf-8'><title>{title}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em "
             "auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px "
             "6px;text-align:left}.high{color:#b00}.medium{color:#a60}"
             ".low{color:#555}</style></head><body>" + f"<h1>{title}</h1>"]
    if report.profile.get("simulated"):
        parts.append("<p>" + _h(t(msg("Simulated profile: generated, not captured on hardware."))) + "</p>")
    waits = peer_wait_headline(report, language)
    if waits is not None:
        parts.append(f"<p class='peer-wait'><strong>{_h(waits[0])}</strong> {_h(waits[1])}</p>")
    parts.append("<table>" + "".join(f"<tr><th>{_h(k)}</th><td>{_h(v)}</td></tr>"
                                     for k, v in _headline(report, language)) + "</table>")
    parts.append(f"<h2>{_h(t(msg('Findings ({n})', n=len(report.findings))))}</h2>")
    unrecovered = not_recoverable_row(report, language)
    if unrecovered is not None:
        parts.append(f"<p class='not-recoverable'><strong>{_h(unrecovered)}</strong></p>")
    for f in report.findings:
        parts.append(f"<section><h3 class='{_h(f.severity)}'>[{_h(_severity(f.severity, language))}] "
                     f"{_h(f.title)} "
                     f"<code>{_h(f.rule)}</code></h3><p>{_h(f.description)}</p><ul>"
                     f"<li>{_h(t(msg('time share: {pct:.1f}%', pct=100 * f.time_share)))}</li>"
                     f"<li>{_h(t(_saving(f)))}"
                     f"{_h(_replayed(f, language))}</li>"
                     f"<li>{_h(t(msg('saving model: {text}', text=f.saving_model)))}</li>"
                     f"<li>{_h(t(msg('ops: {ops}', ops=', '.join(f.ops[:12]))))}</li>"
                     f"<li>{_h(t(msg('remedies: {files}', files=', '.join(f.remedies))))}</li></ul>"
                     f"<table><tr><th>{_h(t(msg('evidence')))}</th><th>{_h(t(msg('value')))}</th></tr>"
                     + "".join(f"<tr><td>{_h(_evidence_key(r))}</td>"
                               f"<td>{_h(_fmt_value(r['value']))}</td></tr>"
                               for r in shown_evidence_rows(f.evidence, language))
                     + "</table></section>")
    if report.warnings:
        parts.append(f"<h2>{_h(t(msg('Warnings')))}</h2><ul>"
                     + "".join(f"<li>{_h(w)}</li>" for w in report.warnings) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
