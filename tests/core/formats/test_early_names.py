"""Process names found before the scan (torch_npu names its host process after its events)."""

import gzip
import json
from pathlib import Path

import pytest

from pypto_core.formats import chrome_trace, eventscan
from pypto_core.formats.chrome_trace import read_trace_view, write_trace_view
from pypto_core.formats.early_names import early_process_names
from pypto_core.profile import TABLE_NAMES, Profile
from tests.paths import SAMPLES

LEVEL2 = SAMPLES / "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def test_names_are_found_wherever_they_are_and_however_they_are_written(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": "aten::mm", "pid": 7, "tid": 7, "ts": "1.0", "dur": 1},
        {"args": {"name": "Python"}, "ph": "M", "pid": 7, "tid": 0, "name": "process_name"},  # args first
        {"name": "process_name", "ph": "M", "pid": "dev-3", "args": {"name": "Ascend Hardware"}},
        {"name": "process_name", "ph": "M", "pid": 9, "args": {"name": 'odd "quoted" {name}'}},
        {"name": "x", "ph": "X", "pid": 9, "args": {"note": "process_name"}},  # the word, not the event
        {"name": "process_name", "ph": "M", "pid": 11, "args": {}},  # no name: left to the scan
    ]
    src = tmp_path / "t.json"
    src.write_text(json.dumps(events, indent=1), encoding="utf-8")
    found = early_process_names(src, lambda name: True)
    assert found == {"7": "Python", "dev-3": "Ascend Hardware", "9": 'odd "quoted" {name}'}
    assert early_process_names(src, lambda name: name == "Python") == {"7": "Python"}
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert early_process_names(gz, lambda name: True) == {}  # gzip: the scan names them
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert early_process_names(empty, lambda name: True) == {}


def test_the_real_host_process_is_named_before_its_slices_are_read(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """In the sample, 'Python' is named after its 1,496 events: found ahead, its slices stream; the tables
    are those of the reading that waits for the name."""
    found = early_process_names(LEVEL2, lambda name: True)
    assert found["3178231"] == "Python" and "CANN" in found.values()
    monkeypatch.setattr(eventscan, "EVENT_CAP", 200)  # many batches, the name far from the first
    write_trace_view(LEVEL2, tmp_path / "early")
    monkeypatch.setattr(chrome_trace, "early_process_names", lambda *args: {})
    write_trace_view(LEVEL2, tmp_path / "late")
    early, late = Profile.load(tmp_path / "early"), Profile.load(tmp_path / "late")
    for name in TABLE_NAMES:
        assert early.table(name).equals(late.table(name)), name
    assert early.host_ops.num_rows > 1000 and early.flows.num_rows > 0
    assert read_trace_view(LEVEL2).host_ops.num_rows == early.host_ops.num_rows
