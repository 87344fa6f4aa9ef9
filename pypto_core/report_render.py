"""A ``Report`` as JSON, Markdown or a self-contained HTML page.

Every string that came from a profile (op names, shapes, file paths) is escaped for the output format:
an uploaded kernel named ``</script><script>...`` must stay text (STYLE.md, charts section).
"""

from __future__ import annotations

import html
import json
from typing import Any

from pypto_core.attribution import BUCKETS
from pypto_core.rules.finding import Report

FORMATS = ("json", "md", "html")


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, default=str) + "\n"
    if fmt == "md":
        return render_markdown(report)
    if fmt == "html":
        return render_html(report)
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
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def _headline(report: Report) -> list[tuple[str, str]]:
    p = report.profile
    dec = p.get("decode") or {}
    rows = [("source", str(p.get("source", ""))), ("format", str(p.get("format", ""))),
            ("device", f"{p.get('device')} ({p.get('sku_source', '')})"), ("kernels", str(p.get("kernel_count", 0))),
            ("device vendor / workload", f"{p.get('device_vendor', '?')} / {p.get('workload', '?')}"),
            ("simulated", "yes" if p.get("simulated") else "no")]
    if dec.get("steps"):
        rows += [("decode tokens", str(dec.get("tokens"))),
                 ("per-token latency p50 / p90", f"{dec.get('per_token_ms_p50', 0):.3f} / {dec.get('per_token_ms_p90', 0):.3f} ms"),
                 ("tokens/s", f"{dec.get('tokens_per_s', 0):.1f}")]
    tb = p.get("time_breakdown") or {}
    if tb.get("wall_ns"):
        # the attribution's figures as they are (docs/attribution.md): the same numbers the page and API show
        parts = [f"{b} {tb[b] / 1e6:.3f} ms ({100 * tb[b] / tb['wall_ns']:.1f}%)" for b in BUCKETS if tb.get(b)]
        rows.append(("where the time goes", f"wall {tb['wall_ns'] / 1e6:.3f} ms: " + ", ".join(parts)))
    if p.get("ai_core_utilization") is not None:
        rows.append(("AI Core utilization", f"{100 * float(p['ai_core_utilization']):.1f}%"))
    how = ("replay of every finding's change" if p.get("combined_speedup_source") == "replay"
           else "each saved ns counted once")
    rows.append(("estimated combined speedup", f"{report.estimated_combined_speedup:.3f}x ({how})"))
    return rows


def render_markdown(report: Report) -> str:
    out = ["# PyPTO analysis", ""]
    if report.profile.get("simulated"):
        out += ["> This profile is **simulated**: it was generated, not captured on hardware.", ""]
    out += ["| | |", "|---|---|"] + [f"| {k} | {_md(v)} |" for k, v in _headline(report)] + [""]
    out += [f"## Findings ({len(report.findings)})", ""]
    if not report.findings:
        out += ["No anti-pattern found with evidence.", ""]
    for i, f in enumerate(report.findings, 1):
        out += [f"### {i}. [{f.severity}] {_md(f.title)} (`{f.rule}`)", "", _md(f.description), "",
                f"- time share: {100 * f.time_share:.1f}%",
                f"- estimated saving: {f.estimated_saving_us:.1f} us, speedup {f.estimated_speedup:.3f}x"
                + _replayed(f),
                f"- saving model: {_md(f.saving_model)}"]
        if f.ops:
            out.append("- ops: " + ", ".join(_md(o) for o in f.ops[:12]))
        if f.remedies:
            out.append("- remedies: " + ", ".join(_md(r) for r in f.remedies))
        out += ["", "| evidence | value |", "|---|---|"]
        out += [f"| {_md(k)} | {_md(_fmt_value(v))} |" for k, v in f.evidence.items()] + [""]
    if report.warnings:
        out += ["## Warnings", ""] + [f"- {_md(w)}" for w in report.warnings] + [""]
    return "\n".join(out)


def _replayed(f: Any) -> str:
    alone = f.details.get("replayed_alone_us")
    return "" if alone is None else f" (replayed alone: {alone:.1f} us)"


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def render_html(report: Report) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>PyPTO analysis</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}.high{color:#b00}.medium{color:#a60}"
             ".low{color:#555}</style></head><body><h1>PyPTO analysis</h1>"]
    if report.profile.get("simulated"):
        parts.append("<p><strong>Simulated profile</strong>: generated, not captured on hardware.</p>")
    parts.append("<table>" + "".join(f"<tr><th>{_h(k)}</th><td>{_h(v)}</td></tr>" for k, v in _headline(report))
                 + "</table>")
    parts.append(f"<h2>Findings ({len(report.findings)})</h2>")
    for f in report.findings:
        parts.append(f"<section><h3 class='{_h(f.severity)}'>[{_h(f.severity)}] {_h(f.title)} <code>{_h(f.rule)}</code></h3>"
                     f"<p>{_h(f.description)}</p><ul><li>time share: {100 * f.time_share:.1f}%</li>"
                     f"<li>estimated saving: {f.estimated_saving_us:.1f} us, speedup {f.estimated_speedup:.3f}x"
                     f"{_h(_replayed(f))}</li>"
                     f"<li>saving model: {_h(f.saving_model)}</li>"
                     f"<li>ops: {_h(', '.join(f.ops[:12]))}</li><li>remedies: {_h(', '.join(f.remedies))}</li></ul>"
                     "<table><tr><th>evidence</th><th>value</th></tr>"
                     + "".join(f"<tr><td>{_h(k)}</td><td>{_h(_fmt_value(v))}</td></tr>" for k, v in f.evidence.items())
                     + "</table></section>")
    if report.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_h(w)}</li>" for w in report.warnings) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
