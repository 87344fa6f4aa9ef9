"""A load of every column coded (``Profile.load(columns=EVERY_COLUMN)``: text as dictionaries, the kernel
writer's shape, dtype and format cells as codes into their distinct lists), and the worker's diagnosis step's
load (``diagnosis_step_columns``: the kernels' PMU counters no rule reads left on disk, the timeline index's
event details reading them from the saved files) give the report, the page data and every answer of the
timeline index (event details included) that a plain load gives, on the dashboard demo and the real
samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pypto_core import formats
from pypto_core.pagedata import profile_page_data
from pypto_core.profile import EVERY_COLUMN, Profile
from pypto_core.rules import diagnose
from pypto_core.rules.diagnose import diagnosis_step_columns
from pypto_core.synth import demo_pair
from pypto_core.timeline import TimelineIndex, build_timeline_index
from tests.paths import SAMPLES

SAMPLE_FOLDERS = ("ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt",
                  "ascend_pt/qwen3_0.6b_train_4npu_level2/rank_0_ascend_pt",
                  "ascend_pt/llm_matmul_pipeutil_2025/kernel_details.csv")


def _views(profile: Profile, folder: Path, saved: Path | None = None) -> dict[str, Any]:
    report = diagnose(profile).to_dict()
    report["profile"].pop("analysis_s")  # a timing
    index = TimelineIndex.open(build_timeline_index(profile, folder, saved=saved))
    window = index.window(width_px=800)
    events = [index.event(track["lane"], idx) for track in window["tracks"] if track["kind"] == "slices"
              for idx in track["idx"][:5]]  # the source rows of each lane's first bars, and their links
    return {"report": report, "pages": profile_page_data(profile), "lanes": index.lane_dicts(),
            "window": window, "events": events, "search": index.search("a", limit=20)}


def _three(source: Path, tmp: Path) -> tuple[list[dict[str, Any]], Profile, Profile]:
    """The views from a plain load, a coded load of every column and the diagnosis step's load."""
    saved = formats.write_profiles(source, tmp / "saved")
    rank = tmp / "saved" / saved.primary()[0]
    coded = Profile.load(rank, columns=EVERY_COLUMN)
    step = Profile.load(rank, columns=diagnosis_step_columns())
    views = [_views(Profile.load(rank), tmp / "plain"), _views(coded, tmp / "coded"),
             _views(step, tmp / "step", saved=rank)]
    return views, coded, step


def test_the_demo_views_are_the_same_from_coded_columns(tmp_path) -> None:
    before, _ = demo_pair(tmp_path / "demo")
    (plain, coded, step), every, loaded = _three(before, tmp_path)
    assert plain == coded == step
    assert plain["report"]["findings"] and plain["pages"]["top_ops"] and plain["events"]
    kernels = every.kernels
    assert pa.types.is_dictionary(kernels.schema.field("input_shapes").type)
    assert pa.types.is_dictionary(kernels.schema.field("name").type)
    assert "aic_mac_ratio" in kernels.column_names  # every column: nothing is left on disk
    # the step leaves the PMU counters no rule reads on disk; an event's details still show them
    assert "aic_mac_ratio" not in loaded.kernels.column_names
    assert "aic_mte2_ratio" in loaded.kernels.column_names  # read by the rules
    kernel_events = [e for e in step["events"] if e.get("table") == "kernels"]
    assert kernel_events and all("aic_mac_ratio" in e["args"] for e in kernel_events)
    # ids in 4 bytes, a column of nulls in none: the coded loads' views equal the plain load's (above)
    for table, column in (("flows", "kernel_index"), ("flows", "host_index"), ("host_ops", "tid"),
                          ("api_calls", "tid")):
        assert every.table(table).schema.field(column).type == pa.int32(), (table, column)
        assert loaded.table(table).schema.field(column).type == pa.int32(), (table, column)
    rank = next(p.parent for p in (tmp_path / "saved").rglob("profile.json"))
    assert Profile.load(rank).flows.schema.field("kernel_index").type == pa.int64()  # canonical types


@pytest.mark.parametrize("sample", SAMPLE_FOLDERS)
def test_sample_views_are_the_same_from_coded_columns(sample: str, tmp_path) -> None:
    (plain, coded, step), _, _ = _three(SAMPLES / sample, tmp_path)
    assert plain == coded == step, sample
