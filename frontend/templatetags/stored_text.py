"""``{{ profile|error_text }}``: a stored failure's reason in the page's language (analysis.texts); a row
failed before its reason was kept as a message shows its English ``error``."""

from __future__ import annotations

from typing import Any

from django import template

from analysis.texts import localized

register = template.Library()


@register.filter
def error_text(row: Any) -> str:
    """``row``: anything with ``error`` and ``error_message`` (a profile, a comparison, a page build)."""
    return localized(str(getattr(row, "error", "") or ""), getattr(row, "error_message", None))
