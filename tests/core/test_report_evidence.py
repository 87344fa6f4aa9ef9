"""A finding's evidence reads the same in the Markdown and HTML reports as on the profile page: one formatter
(``shown_evidence_rows``) turns times into durations, shares into percents and structured values (a rank's
sync calls, a chain's patterns) into words, never JSON, in English and in Chinese."""

from __future__ import annotations

import html

import pytest

from pypto_core import formats
from pypto_core.report_render import render
from pypto_core.rules import diagnose_group
from pypto_core.rules.evidence_labels import shown_evidence_rows
from tests.paths import SAMPLES, sample_cases

# A real training rank whose sync_stall names its blocking calls (a dict of {count, stall_us} per call).
SAMPLE = "ascend_pt/cnn_8npu_text_level1"


@pytest.mark.parametrize("sample", sample_cases([SAMPLE]))
@pytest.mark.parametrize("language", ["en", "zh-Hans"])
def test_report_evidence_is_the_page_evidence(sample: str, language: str) -> None:
    report = diagnose_group(formats.open_profiles(SAMPLES / sample))
    md, page = render(report, "md", language), render(report, "html", language)
    stall = next(f for f in report.findings if f.rule == "sync_stall")
    calls = next(r for r in shown_evidence_rows(stall.evidence, language) if r["key"] == "sync_calls")
    # the calls in words, most stalled first, each with its count and its stall as a duration
    assert calls["value"].startswith("AscendCL@aclrtSynchronizeStreamWithTimeout (2×, ")
    assert " · aten::item (15×, " in calls["value"] and "{" not in calls["value"]
    for f in report.findings:
        for row in shown_evidence_rows(f.evidence, language):
            value = row["value"] if isinstance(row["value"], str) else None
            if value is None:
                continue
            # the row's words, Markdown-escaped (chain arrows, op names) and HTML-escaped as each report does
            assert value.replace("_", "\\_").replace("*", "\\*") in md, (f.rule, row)
            assert f"<td>{html.escape(value, quote=True)}</td>" in page, (f.rule, row)
    assert '{"' not in md and "&quot;count&quot;" not in page  # no JSON object left in either report
    label = "同步调用" if language == "zh-Hans" else "Synchronisation calls"
    assert f"| {label} (sync\\_calls) | {calls['value']} |" in md
