"""Diagnosis on a profile loaded with only the columns it declares (``Profile.load(path,
columns=diagnose_columns())``: every rule's ``needs``, the call graph's, the replay's, text kept as
dictionaries) gives the same report as on the whole profile, to the last number: on the dashboard demo and
on every real sample, and so does ``pypto analyze``'s way of letting the rows go once the replay has read
them (``keep_rows=False``). A rule reading a column nobody declared fails here (the column is absent, not
null).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pypto_core import formats
from pypto_core.i18n import msg
from pypto_core.profile import TABLE_NAMES, Profile, ProfileGroup
from pypto_core.rules import diagnose_columns, diagnose_group
from pypto_core.rules.registry import discover, rule
from pypto_core.synth import demo_pair
from tests.core.rules.test_real_samples import UNREADABLE, _samples
from tests.paths import SAMPLES, sample_cases


def _report(group: ProfileGroup, keep_rows: bool = True) -> dict[str, Any]:
    doc = diagnose_group(group, keep_rows=keep_rows).to_dict()
    doc["profile"].pop("analysis_s")  # the one figure that is a timing
    return doc


def _both(source: Path, tmp: Path) -> tuple[dict[str, Any], dict[str, Any], ProfileGroup]:
    """The reports of the whole and the projected load; the projected one is also diagnosed as ``pypto
    analyze`` does, letting the rows go on the way (``keep_rows=False``), which must not move a number."""
    saved = formats.write_profiles(source, tmp)
    ranks = [tmp / name for name, _ in saved.ranks]

    def projected() -> ProfileGroup:
        return ProfileGroup(profiles=[Profile.load(r, columns=diagnose_columns()) for r in ranks],
                            warnings=saved.warnings)

    whole = ProfileGroup(profiles=[Profile.load(r) for r in ranks], warnings=saved.warnings)
    let_go = projected()
    released = _report(let_go, keep_rows=False)
    assert all(p.table(name).num_rows == 0 for p in let_go.profiles for name in TABLE_NAMES)
    kept = projected()
    report = _report(kept)
    assert report == released
    return _report(whole), report, kept


def test_the_demo_reports_the_same_from_the_declared_columns(tmp_path) -> None:
    before, after = demo_pair(tmp_path / "demo")
    for i, side in enumerate((before, after)):
        whole, projected, group = _both(side, tmp_path / f"saved{i}")
        assert whole == projected
        assert whole["findings"], "the demo's planted anti-patterns are found"
        kernels = group.primary().kernels
        # the projection left the unread counters on disk and kept the names as dictionaries
        assert "aic_mac_ratio" not in kernels.column_names and "task_id" not in kernels.column_names
        assert pa.types.is_dictionary(kernels.schema.field("name").type)
        assert group.primary().memory.num_rows == 0


@pytest.mark.parametrize("sample", sample_cases([s for s in _samples() if s not in UNREADABLE]))
def test_every_sample_reports_the_same_from_the_declared_columns(sample: str, tmp_path) -> None:
    whole, projected, _ = _both(SAMPLES / sample, tmp_path / "saved")
    assert whole == projected, sample


def test_a_column_nobody_declared_is_absent_and_says_so(tmp_path) -> None:
    before, _ = demo_pair(tmp_path / "demo")
    formats.write_profiles(before, tmp_path / "saved")
    rank = next(p for p in (tmp_path / "saved").iterdir() if p.is_dir())
    profile = Profile.load(rank, columns={"kernels": ("name",)})
    assert profile.kernels.column_names == ["name"] and profile.host_ops.num_rows == 0
    with pytest.raises(KeyError):
        profile.kernels["dur_ns"]


def test_needs_name_real_tables_and_columns() -> None:
    for r in discover().values():
        for table, columns in r.columns().items():
            assert columns is None or all(columns), (r.id, table)
    with pytest.raises(ValueError, match="table.column"):
        rule("bad_needs", title=msg("t"), saving_model=msg("m"), thresholds={}, blocks=(), remedies=(),
             needs=("kernel.name",))(lambda ctx: None)


def _comparison(base: Path, new: Path, **load: Any) -> dict[str, Any]:
    from pypto_core.compare import ProfileComparer

    return ProfileComparer(Profile.load(base, **load), Profile.load(new, **load)).compare().to_dict()


def test_a_comparison_is_the_same_from_its_declared_columns(tmp_path) -> None:
    from pypto_core.compare import COMPARE_COLUMNS, COMPARE_TABLES

    before, after = demo_pair(tmp_path / "demo")
    pairs = [(before, after), (SAMPLES / "kineto/trace_diff_pair/control.json.gz",
                                SAMPLES / "kineto/trace_diff_pair/test.json.gz")]
    for i, pair in enumerate(pairs):
        saved = []
        for j, source in enumerate(pair):
            out = tmp_path / f"saved{i}{j}"
            saved.append(out / formats.write_profiles(source, out).primary()[0])
        # as it loaded before: its tables whole, text as strings
        assert _comparison(*saved, tables=COMPARE_TABLES) == _comparison(*saved, columns=COMPARE_COLUMNS)
