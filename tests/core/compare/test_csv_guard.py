"""The comparison CSV against formula injection (issue 17, item 10; OWASP CSV Injection)."""

from __future__ import annotations

import csv
import io

import pytest

from pypto_core.compare import csv_safe, to_csv

HOSTILE = ["=1+1", "+SUM(A1)", "-2+3", "@SUM(A1)", "\t=cmd|' /C calc'!A0", "\r=1+1", "\n=1+1", "  =1+1",
           " \t@x", "\t", "\rplain"]
PLAIN = ["aten::mm", "MatMulV2", "a=b", "x-y", "1.5", ""]


@pytest.mark.parametrize("text", HOSTILE)
def test_formula_and_control_starts_become_text(text: str) -> None:
    assert csv_safe(text) == "'" + text


@pytest.mark.parametrize("text", PLAIN)
def test_plain_names_are_untouched(text: str) -> None:
    assert csv_safe(text) == text


def test_op_names_in_the_comparison_csv_are_guarded() -> None:
    ops = [{"op_type": name, "base_us": 1.0, "new_us": 2.0, "delta_us": 1.0, "base_count": 1, "new_count": 1}
           for name in ["\t=HYPERLINK(\"http://x\")", "  +1", "aten::mm"]]
    text = to_csv({"metrics": [], "blocks": [], "ops": ops, "findings": []})
    cells = [row[1] for row in csv.reader(io.StringIO(text)) if row and row[0] == "op_type"]
    assert cells == ["'\t=HYPERLINK(\"http://x\")", "'  +1", "aten::mm"], text
