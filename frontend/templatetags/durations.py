"""``{{ value|duration:"us" }}``: a duration as people read it (``pypto_core.durations.format_duration``), the
one way the profile, comparison and cluster pages print a time. Views that hand text to a script (the cluster
strip, the top-ops table) call ``format_duration`` itself."""

from __future__ import annotations

from typing import Any

from django import template

from pypto_core.durations import format_duration

register = template.Library()


@register.filter
def duration(value: Any, unit: str = "ns") -> str:
    """``{{ row.estimated_saving_us|duration:"us" }}``: see ``format_duration``."""
    return format_duration(value, unit)
