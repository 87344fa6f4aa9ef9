"""``{{ finding|in_language:"title" }}``: a stored finding's text in the page's language (pypto_core.i18n)."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils import translation
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from pypto_core.durations import format_duration
from pypto_core.i18n import normalize_language
from pypto_core.rules.finding import localize_finding

register = template.Library()


@register.filter
def in_language(finding: Any, field: str) -> str:
    """``finding``: a ``Finding`` row or its ``data`` dict; ``field``: title, description or saving_model."""
    data = getattr(finding, "data", finding) or {}
    if not isinstance(data, dict):
        return ""
    fallback = {"title": getattr(finding, "title", "")} if not isinstance(finding, dict) else {}
    language = normalize_language(translation.get_language()) or "en"
    return str(localize_finding({**fallback, **data}, language).get(field) or "")


@register.filter
def share_percent(share: Any) -> str:
    """A share of the step (0.645) as the page's other shares read: ``64.5%`` (empty when missing)."""
    try:
        return f"{100 * float(share):.1f}%"
    except (TypeError, ValueError):
        return ""


@register.filter
def metric_value(value: Any, unit: str) -> str:
    """A comparison metric as the rest of the pages print its unit: a time as a duration (``92.1 ms``), a
    share as a percent (``64.5%``), a rate to one decimal with thousands grouped (``243,739.7``); "—"
    when missing. The exports keep every digit."""
    if value is None or value == "":
        return "—"
    if unit == "ms":
        return format_duration(value, "ms")
    if unit == "share":
        return share_percent(value)
    try:
        return f"{float(value):,.1f}"
    except (TypeError, ValueError):
        return str(value)


_CODE = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text: Any) -> SafeString:
    """A saving model's setting names in backticks shown as code, not between backticks. The text is
    escaped first (it carries op names, untrusted), then only the backticked spans become ``<code>``."""
    return mark_safe(_CODE.sub(r"<code>\1</code>", str(escape(text))))  # noqa: S308 (escaped above)
