"""A run whose largest share of time is not compute and that no finding explains says why, in words: the
rule that could not judge it and its reason, or that no host call was recorded to tell what the device
waited for. Before, the MI250 trace (93% host launch bound over 16 kernels) read "no findings" alone."""

from __future__ import annotations

import pytest

from pypto_core import formats
from pypto_core.i18n import render_stored
from pypto_core.rules import diagnose_group
from tests.paths import SAMPLES, sample_cases


def _report(sample: str):  # type: ignore[no-untyped-def]
    return diagnose_group(formats.open_profiles(SAMPLES / sample))


def _said(report, text: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [m for w, m in zip(report.warnings, report.warning_messages) if text in w and m is not None]


MI250 = "kineto/mi250_rocm/mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@pytest.mark.parametrize("sample", sample_cases([MI250]))
def test_a_rule_that_could_not_judge_the_largest_bucket_says_why(sample: str) -> None:
    report = _report(sample)
    assert report.profile["dominant_bucket"] == "host_launch_bound" and not report.findings
    said = _said(report, "could not judge")
    assert len(said) == 1
    assert report.warnings[report.warning_messages.index(said[0])] == (
        "Host launch bound is 93% of this run, its largest share, but host_bound_gaps could not judge it: "
        "the profile holds 16 kernels, fewer than the 50 it takes to tell the host's launch gaps from a "
        "pause (profile more steps)")
    chinese = render_stored(said[0], "zh-Hans")
    assert "下发瓶颈" in chinese and "16" in chinese and "host_bound_gaps" in chinese


@pytest.mark.parametrize("sample", sample_cases(["ascend_pt/llm_matmul_pipeutil_2025"]))
def test_idle_time_without_host_calls_says_they_were_not_recorded(sample: str) -> None:
    report = _report(sample)
    assert report.profile["dominant_bucket"] == "idle_other"
    assert report.profile["host_calls_recorded"] is False
    assert len(_said(report, "the profile records no host call")) == 1


@pytest.mark.parametrize("sample", sample_cases(["ascend_pt/cnn_8npu_text_level1"]))
def test_a_largest_bucket_a_finding_explains_needs_no_word(sample: str) -> None:
    report = _report(sample)
    assert report.profile["dominant_bucket"] == "communication_not_overlapped"
    assert any(f.rule == "communication_not_overlapped" for f in report.findings)
    assert not [w for w in report.warnings if "largest share" in w]
