"""``{{ profile|error_text }}``: a stored failure's reason in the page's language (analysis.texts); a row
failed before its reason was kept as a message shows its English ``error``. ``{{ comparison|regression_lines
}}``: its regression lines the same way, and ``{{ job|job_message }}`` a capture job's message."""

from __future__ import annotations

from typing import Any

from django import template

from analysis.texts import localized, localized_list

register = template.Library()


@register.filter
def error_text(row: Any) -> str:
    """``row``: anything with ``error`` and ``error_message`` (a profile, a comparison, a page build)."""
    return localized(str(getattr(row, "error", "") or ""), getattr(row, "error_message", None))


@register.filter
def job_message(job: Any) -> str:
    """A capture job's message in the page's language (the agent's own text as it came)."""
    return localized(str(job.message or ""), getattr(job, "message_i18n", None))


@register.filter
def regression_lines(comparison: Any) -> list[str]:
    """A comparison's regression lines in the page's language (English where no message was kept)."""
    return localized_list(comparison.regression or [], getattr(comparison, "regression_messages", None))
