"""``{{ value|duration:"us" }}`` (pypto_core/durations.py): the one way the pages and reports print a
time, its unit chosen by the size (a finding's saving in µs and a table's step time in ms read alike)."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from pypto_core.durations import format_duration

NB = "\u00a0"


@pytest.mark.parametrize(("value", "unit", "text"), [
    (92_100, "us", f"92.1{NB}ms"),
    (850, "us", f"850{NB}µs"),
    (1.4, "s", f"1.4{NB}s"),
    (1400, "ms", f"1.4{NB}s"),
    (810.022, "ms", f"810{NB}ms"),
    (420_174.3, "us", f"420{NB}ms"),  # the qwen3 rank's wait for other ranks, printed as "420174.3 µs" before
    (149_000_000, "ns", f"149{NB}ms"),
    (3.22, "ms", f"3.22{NB}ms"),
    (12, "ns", f"12{NB}ns"),
    (999.6, "us", f"1{NB}ms"),  # rounding carries into the next unit, never "1000 µs"
    (999_999, "ns", f"1{NB}ms"),
    (-8990.3, "us", f"-8.99{NB}ms"),  # a delta keeps its sign
    (3600, "s", f"3600{NB}s"),
    (0, "us", f"0{NB}µs"),  # zero keeps a unit: "Memory copy 0" read as a bare number
    (0, "ns", f"0{NB}ns"),
    (0.0, "ms", f"0{NB}ms"),
    (0.0001, "ns", f"0{NB}ns"),
    (None, "us", "—"),
    ("", "us", "—"),
    ("n/a", "us", "—"),
    (float("nan"), "ms", "—"),
    (5, "minutes", "—"),
])
def test_format_duration(value, unit, text) -> None:
    assert format_duration(value, unit) == text


def test_the_filter_is_the_helper() -> None:
    out = Template('{% load durations %}{{ a|duration:"us" }}|{{ b|duration:"ms" }}|{{ c|duration }}').render(
        Context({"a": 850.4, "b": 92.14, "c": 1_500_000_000}))
    assert out == f"850{NB}µs|92.1{NB}ms|1.5{NB}s"


def test_evidence_times_read_as_durations_without_the_engine_unit() -> None:
    from pypto_core.rules.evidence_labels import evidence_rows, shown_evidence

    rows = shown_evidence(evidence_rows({"rank_0_free_us": 158558.0, "kind": "free", "threshold": 0.05,
                                         "communication_not_overlapped_us": 95962.016}, "en"))
    by_key = {r["key"]: r for r in rows}
    assert by_key["rank_0_free_us"]["label"] == "Rank 0: free time"
    assert by_key["rank_0_free_us"]["value"] == "159\u00a0ms"
    assert by_key["communication_not_overlapped_us"]["value"] == "96\u00a0ms"
    assert by_key["threshold"]["value"] == 0.05  # not a time: as it is
    zh = {r["key"]: r for r in shown_evidence(evidence_rows({"rank_0_free_us": 1500.0}, "zh-Hans"))}
    assert "µs" not in zh["rank_0_free_us"]["label"] and zh["rank_0_free_us"]["value"] == "1.5\u00a0ms"


def test_structured_evidence_reads_as_words_not_a_python_dict() -> None:
    """sync_stall's sync_calls and memcpy_bound's memcpy_split_us (real samples hold both) are dicts: the
    page shows names with their figures, times as durations, never ``{'aten::item': {...}}``."""
    from pypto_core.rules.evidence_labels import evidence_rows, shown_evidence

    rows = shown_evidence(evidence_rows({
        "sync_calls": {"aten::item": {"count": 45, "stall_us": 1767.952},
                       "AscendCL@aclrtMemcpy": {"count": 6, "stall_us": 247.012}},
        "memcpy_split_us": {"d2d": 4096.985, "h2d": 2.848},
        "op_names": ["a", "b"]}, "en"))
    by_key = {r["key"]: r["value"] for r in rows}
    # a count as "45×", a time as its duration: no English word left in a Chinese page
    assert by_key["sync_calls"] == (f"aten::item (45×, 1.77{NB}ms) · "
                                    f"AscendCL@aclrtMemcpy (6×, 247{NB}µs)")
    assert by_key["memcpy_split_us"] == f"d2d 4.1{NB}ms · h2d 2.85{NB}µs"
    assert by_key["op_names"] == "a, b"
    assert not any("{" in str(v) for v in by_key.values())


def test_chain_patterns_read_with_their_counts_and_times() -> None:
    """unfused_elementwise's chain_patterns on the H200 eager decode: each pattern with its chain count and
    time, the label without the "(µs)" of fused_time_bound_us beside it."""
    from pypto_core.rules.evidence_labels import evidence_rows, shown_evidence

    rows = {r["key"]: r for r in shown_evidence(evidence_rows({
        "chain_patterns": {"add → copy → pow → mean": {"count": 128, "time_us": 1500.98},
                           "fill → fill → where": {"count": 64, "time_us": 269.311}},
        "fused_time_bound_us": 628.734}, "zh-Hans"))}
    assert rows["chain_patterns"]["value"] == (f"add → copy → pow → mean (128×, 1.5{NB}ms) · "
                                               f"fill → fill → where (64×, 269{NB}µs)")
    assert rows["fused_time_bound_us"]["value"] == f"629{NB}µs"
    assert "µs" not in rows["fused_time_bound_us"]["label"]


def test_named_figures_read_most_time_first_whatever_order_they_are_stored_in() -> None:
    """PostgreSQL's jsonb keeps an object's keys shortest first: the page orders them by their time."""
    from pypto_core.rules.evidence_labels import evidence_rows, shown_evidence

    stored = {"fill → where": {"count": 64, "time_us": 269.3},
              "add → copy → pow → mean": {"count": 128, "time_us": 1500.98}}
    value = shown_evidence(evidence_rows({"chain_patterns": stored}, "en"))[0]["value"]
    assert value.startswith("add → copy → pow → mean (128×") and value.endswith(f"(64×, 269{NB}µs)")
    calls = {"aten::item": {"count": 4, "stall_us": 50.0},
             "cudaStreamSynchronize": {"count": 2, "stall_us": 900.0}}
    shown = shown_evidence(evidence_rows({"sync_calls": calls}, "en"))[0]["value"]
    assert shown.startswith("cudaStreamSynchronize")


def test_evidence_shares_read_as_percents_and_every_time_as_a_duration() -> None:
    from pypto_core.rules.evidence_labels import evidence_rows, shown_evidence

    rows = {r["key"]: r["value"] for r in shown_evidence(evidence_rows(
        {"host_launch_bound_share": 0.770118, "share_of_step": 0.6537, "stall_us_total": 596.721,
         "graph_launches": 0}, "en"))}
    assert rows["host_launch_bound_share"] == "77.0%" and rows["share_of_step"] == "65.4%"
    assert rows["stall_us_total"] == f"597{NB}µs"
    assert rows["graph_launches"] == 0


def test_a_saving_model_shows_setting_names_as_code_and_escapes_the_rest() -> None:
    from frontend.templatetags.finding_text import code_spans

    out = code_spans("every gap over `min_gap_us` = 5 in <script>alert(1)</script> `a&b`")
    assert out == ("every gap over <code>min_gap_us</code> = 5 in &lt;script&gt;alert(1)&lt;/script&gt; "
                   "<code>a&amp;b</code>")

