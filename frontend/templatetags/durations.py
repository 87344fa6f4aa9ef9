"""``{{ value|duration:"us" }}``: a duration as people read it, the unit chosen by its size (92.1 ms, 850 µs,
1.4 s). The one way the profile, comparison and cluster pages print a time; the API keeps its raw ``*_ns``,
``*_us`` and ``*_ms`` fields. Views that hand text to a script (the cluster strip, the top-ops table) call
``format_duration`` itself."""

from __future__ import annotations

import re
from typing import Any

from django import template

register = template.Library()

# Nanoseconds per unit, smallest first; a value is shown in the largest unit it is at least 1 of.
UNITS: tuple[tuple[str, int], ...] = (("ns", 1), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))
_IN_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
SIGNIFICANT = 3  # 92.1 ms, 850 µs: enough to rank and compare on a page; the API has every digit
NBSP = "\u00a0"  # the number and its unit never wrap apart


def _digits(x: float) -> str:
    """``x`` (1 <= x, or 0) to ``SIGNIFICANT`` digits, trailing zeros dropped: 92.1, 850, 1.4, 1234."""
    decimals = max(SIGNIFICANT - len(str(int(x))), 0)
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def unit_of(ns: float, smallest: str = "ns") -> tuple[str, int]:
    """The unit a time of ``ns`` is shown in, and its size in ns: the largest it is at least 1 of, never below
    ``smallest`` (92.1 ms -> ("ms", 1_000_000))."""
    floor = _IN_NS[smallest]
    name, per = next((n, size) for n, size in UNITS if size == floor)
    for candidate, size in UNITS:
        if size >= floor and ns >= size:
            name, per = candidate, size
    return name, per


def format_duration(value: Any, unit: str = "ns") -> str:
    """``value`` given in ``unit`` (ns, us or µs, ms, s) as "92.1 ms"; "—" when missing or not a number,
    zero in the unit it was given ("0 µs": a bare "0" beside "12.3 ms" read as a number with no unit); a
    negative value (a delta) keeps its sign."""
    if value is None or value == "" or isinstance(value, bool):
        return "—"
    try:
        ns = float(value) * _IN_NS[unit]
    except (TypeError, ValueError, KeyError):
        return "—"
    if ns != ns or ns in (float("inf"), float("-inf")):
        return "—"
    zero = f"0{NBSP}{'µs' if unit == 'us' else unit}"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns == 0:
        return zero
    name, per = unit_of(ns)
    text = _digits(ns / per)
    # rounding may carry into the next unit: 999.6 µs is "1 ms", not "1000 µs"
    bigger = [(n, s) for n, s in UNITS if s > per]
    if float(text) >= 1000 and bigger:
        name, per = bigger[0]
        text = _digits(ns / per)
    if text == "0":
        return zero
    return f"{sign}{text}{NBSP}{name}"


@register.filter
def duration(value: Any, unit: str = "ns") -> str:
    """``{{ row.estimated_saving_us|duration:"us" }}``: see ``format_duration``."""
    return format_duration(value, unit)


_US_SUFFIXES = (" (µs)", "（µs）")
_US_KEY = re.compile(r"_us(_|$)")  # stall_us_total, flagged_time_us: a time in µs


def _is_time_key(key: str) -> bool:
    return bool(_US_KEY.search(key))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _evidence_text(key: str, value: Any) -> str:
    """A structured evidence value in words: ``{"d2d": 4096.9, "h2d": 2.8}`` under a key in µs reads
    "d2d 4.10 ms · h2d 2.8 µs"; ``{"aten::item": {"count": 4, "stall_us": 557.0}}`` reads
    "aten::item (4×, 557 µs)"; a list reads its items joined. Never a Python dict's repr."""
    def scalar(k: str, v: Any) -> str:
        if _is_number(v) and _is_time_key(k):
            return format_duration(v, "us")
        if _is_number(v) and k.endswith("_share") and 0 <= v <= 1:
            return f"{100 * v:.1f}%"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    def inner_item(k: str, x: Any) -> str:
        # a count reads "4×", a time its duration: words in no language, so no language is left out
        if k == "count" and _is_number(x):
            return f"{x}×"
        return scalar(k, x) if _is_time_key(k) else f"{k} {scalar(k, x)}"

    if isinstance(value, dict):
        parts = []
        for name, v in _most_time_first(value):
            if isinstance(v, dict):
                inner = ", ".join(inner_item(k, x) for k, x in v.items())
                parts.append(f"{name} ({inner})")
            else:
                parts.append(f"{name} {scalar(key, v)}")
        return " · ".join(parts)
    if isinstance(value, (list, tuple)):
        return ", ".join(_evidence_text(key, v) if isinstance(v, (dict, list, tuple)) else scalar(key, v)
                         for v in value)
    return scalar(key, value)


def _most_time_first(value: dict[str, Any]) -> list[tuple[str, Any]]:
    """A dict of named figures, the one with the most time first where each holds a time (sync calls by
    their stall, chain patterns by their time): PostgreSQL's jsonb keeps an object's keys in its own order
    (shortest first), not the engine's."""
    items = list(value.items())
    times = [next((float(x) for k, x in v.items() if _is_time_key(k) and _is_number(x)), None)
             if isinstance(v, dict) else None for _, v in items]
    known = [t for t in times if t is not None]
    if not items or len(known) < len(items):
        return items
    order = sorted(range(len(items)), key=lambda i: -known[i])
    return [items[i] for i in order]


def shown_evidence(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finding's evidence rows (``evidence_rows``) as a page prints them: a time in µs (its key ends in
    ``_us`` or holds ``_us_``) as "92.1 ms", its label without the "(µs)" the engine's labels carry; a share
    (``_share``) as a percent; structured values in words (``_evidence_text``); other values as they are."""
    out = []
    for row in rows:
        key, value, label = str(row.get("key", "")), row.get("value"), str(row.get("label", ""))
        if _is_time_key(key) and (_is_number(value) or isinstance(value, dict)):
            for suffix in _US_SUFFIXES:
                label = label.removesuffix(suffix)
        share = key.endswith("_share") and _is_number(value)
        if (_is_time_key(key) and _is_number(value)) or share or isinstance(value, (dict, list, tuple)):
            row = {**row, "label": label, "value": _evidence_text(key, value)}
        out.append(row)
    return out
