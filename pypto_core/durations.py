"""How a time reads for people: the unit chosen by its size (92.1 ms, 850 µs, 1.4 s). The one way the pages,
the reports (Markdown, HTML) and the evidence of a finding print a time; the JSON and the API keep their raw
``*_ns``, ``*_us`` and ``*_ms`` fields."""

from __future__ import annotations

from typing import Any

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
