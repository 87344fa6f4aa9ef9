"""A folder written by Profile.save opens directly through open_profile (no re-parse), alone or as ranks."""

import json

import pytest

from pypto_core.commands.compare import load_any
from pypto_core.errors import InputError
from pypto_core.formats import detect_format, open_profile, open_profiles
from tests.paths import SAMPLES

OP_SUMMARY = SAMPLES / "msprof" / "op_summary_fixture" / "op_summary_1.csv"


@pytest.fixture(scope="module")
def original():
    return open_profile(OP_SUMMARY)


def test_saved_folder_is_detected_and_loaded(original, tmp_path):
    saved = original.save(tmp_path / "saved")
    found = detect_format(saved)
    assert found.kind == "saved" and "profile.json" in found.found and "kernels.parquet" in found.found
    loaded = open_profile(saved)
    assert loaded.kernels.equals(original.kernels)  # exact, counters and ns included
    assert loaded.meta.source == original.meta.source and loaded.meta.format == "msprof"


def test_load_any_goes_through_open_profile(original, tmp_path):
    saved = original.save(tmp_path / "saved")
    assert load_any(str(saved)).kernels.equals(original.kernels)
    assert load_any(str(OP_SUMMARY)).kernels.num_rows == 20


def test_folder_of_saved_ranks_is_a_group(original, tmp_path):
    for rank in (0, 1):
        original.meta.rank = rank
        original.save(tmp_path / "run" / f"rank{rank}")
    group = open_profiles(tmp_path / "run")
    assert sorted(p.meta.rank for p in group.profiles) == [0, 1]


def test_profile_json_without_parquet_or_schema_is_not_a_saved_profile(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "profile.json").write_text(json.dumps({"meta": {}}), encoding="utf-8")
    assert detect_format(folder).kind != "saved"  # (a loose JSON object is tried as Kineto)
    (folder / "kernels.parquet").write_bytes(b"PAR1")
    assert detect_format(folder).kind != "saved"  # still no schema_version


def test_newer_schema_is_refused(original, tmp_path):
    saved = original.save(tmp_path / "saved")
    doc = json.loads((saved / "profile.json").read_text(encoding="utf-8"))
    doc["schema_version"] = 999
    (saved / "profile.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match="schema_version"):
        open_profile(saved)
