"""The nesting rule (``lod.nesting_depth``): a parent always above its children, no two slices of a row
overlapping, a step that an earlier slice straddles keeps its row; random slices and every real sample."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_core.timeline.lod import MAX_DEPTH, nesting_depth, place_rows
from tests.paths import SAMPLES, sample_cases


def lane_sorted(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((-(end - start), start))
    return start[order], end[order]


def check_rows(start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> None:
    """No slice shares a row with a slice that contains it or overlaps it; containers sit above."""
    occ = np.maximum(end, start + 1)
    n = len(start)
    for i in range(n):
        for j in range(i):  # j sorts before i: it starts earlier, or at the same time and is longer
            overlap = occ[j] > start[i]
            if overlap:
                assert depth[i] != depth[j], (i, j)
            if start[j] <= start[i] and occ[i] <= occ[j] and depth[i] < MAX_DEPTH - 1:
                assert depth[j] < depth[i], (j, i)


slices = st.lists(st.tuples(st.integers(0, 400), st.sampled_from([0, 1, 2, 5, 20, 50, 100, 300])),
                  min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(slices)
def test_random_slices_keep_parents_above_children(pairs: list[tuple[int, int]]) -> None:
    start = np.array([s for s, _ in pairs], np.int64)
    start, end = lane_sorted(start, start + np.array([d for _, d in pairs], np.int64))
    depth = nesting_depth(None, start, end).astype(np.int64)
    check_rows(start, end, depth)
    # the vectorised path and the one-at-a-time rule agree everywhere
    assert np.array_equal(depth, np.minimum(place_rows(start, np.maximum(end, start + 1)), MAX_DEPTH - 1))


@settings(max_examples=100, deadline=None)
@given(slices)
def test_the_same_rows_when_worked_a_piece_at_a_time(pairs: list[tuple[int, int]]) -> None:
    """The parent check and the one-by-one placement work on pieces of a lane (``PARENT_SLICE``,
    ``PLACE_PIECE``: memory stays bounded on a host thread's millions of calls); pieces of 1, 3 and 7 events
    give the rows one piece gives."""
    from pypto_core.timeline import lod

    start = np.array([s for s, _ in pairs], np.int64)
    start, end = lane_sorted(start, start + np.array([d for _, d in pairs], np.int64))
    whole = nesting_depth(None, start, end)
    placed = place_rows(start, np.maximum(end, start + 1))
    saved = lod.PARENT_SLICE, lod.PLACE_PIECE
    try:
        for piece in (1, 3, 7):
            lod.PARENT_SLICE = lod.PLACE_PIECE = piece
            assert np.array_equal(nesting_depth(None, start, end), whole), piece
            assert np.array_equal(place_rows(start, np.maximum(end, start + 1)), placed), piece
    finally:
        lod.PARENT_SLICE, lod.PLACE_PIECE = saved


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(0, 80)), min_size=1,
                max_size=80))
def test_lanes_are_placed_independently(rows: list[tuple[int, int, int]]) -> None:
    lane = np.array([r[0] for r in rows], np.int64)
    start = np.array([r[1] for r in rows], np.int64)
    end = start + np.array([r[2] for r in rows], np.int64)
    order = np.lexsort((-(end - start), start, lane))
    lane, start, end = lane[order], start[order], end[order]
    together = nesting_depth(lane, start, end)
    for ln in np.unique(lane):
        m = lane == ln
        assert np.array_equal(together[m], nesting_depth(None, start[m], end[m]))


def test_properly_nested_slices_get_their_stack_depth() -> None:
    # forward [0,1000) > linear [100,400) > matmul [150,350); norm [500,600) under forward
    start, end = np.array([0, 100, 150, 500]), np.array([1000, 400, 350, 600])
    assert nesting_depth(None, start, end).tolist() == [0, 1, 2, 1]


def test_a_slice_straddling_a_step_boundary_does_not_push_the_step_down() -> None:
    """ProfilerStep#10 [0,100) holds aten::to [95,102), which ends after ProfilerStep#11 [101,200) begins;
    the step's children start at 103 and 150. Before: the step went to row 1 and its children onto it."""
    names = ["ProfilerStep#10", "aten::to", "ProfilerStep#11", "aten::linear", "aten::add"]
    start = np.array([0, 95, 101, 103, 150])
    end = np.array([100, 102, 200, 140, 160])
    depth = dict(zip(names, nesting_depth(None, start, end).tolist()))
    assert depth == {"ProfilerStep#10": 0, "aten::to": 1, "ProfilerStep#11": 0, "aten::linear": 1,
                     "aten::add": 1}


def test_a_child_of_a_pushed_down_slice_stays_below_it() -> None:
    # A [0,10) row 0; B [5,20) partly overlaps A: row 1; C [12,15) is inside B only: below B (row 2)
    assert nesting_depth(None, np.array([0, 5, 12]), np.array([10, 20, 15])).tolist() == [0, 1, 2]


# -- every real sample ------------------------------------------------------------------------------------
def _sample_dirs() -> list[Path]:
    out = []
    for kind in ("ascend_pt", "msprof", "kineto"):
        if (SAMPLES / kind).is_dir():
            out.extend(sorted(p for p in (SAMPLES / kind).iterdir() if p.is_dir()))
    return out


@pytest.mark.parametrize("folder", sample_cases(_sample_dirs()),
                         ids=lambda p: f"{p.parent.name}/{p.name}" if p else "samples-missing")
def test_no_lone_bar_shares_a_row_with_a_bar_that_contains_it(folder: Path, tmp_path: Path) -> None:
    """The window API on every real sample that opens: at full resolution over the whole span, and at the
    first (whole-span) view, no bar of count 1 shares a depth with a bar of its lane containing it."""
    from pypto_core.errors import InputError
    from pypto_core.formats import open_profiles
    from pypto_core.timeline import TimelineIndex, build_timeline_index

    try:
        group = open_profiles(folder)
    except InputError as exc:  # zero-byte placeholders, fixtures without times: said so by the reader
        pytest.skip(f"{folder.name}: {exc}")
    checked = 0
    for k, profile in enumerate(group.profiles):
        ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / f"idx{k}"))
        for width in (1000, 8192):
            answer = ix.window(None, None, width)
            for t in answer["tracks"]:
                if t["kind"] != "slices":
                    continue
                s = np.array(t["start"], np.int64)
                e = s + np.maximum(np.array(t["dur"], np.int64), 1)
                d, c = np.array(t["depth"]), np.array(t["count"])
                for i in np.flatnonzero(c == 1):
                    inside = (s <= s[i]) & (e >= e[i]) & (d == d[i])
                    inside[i] = False
                    assert not inside.any(), (folder.name, t["lane"], int(s[i]))
                    checked += 1
        # the stored rows themselves: containers above, rows without overlaps, every event
        starts, ends = np.asarray(ix._a("events/start")), np.asarray(ix._a("events/end"))
        offsets = np.asarray(ix._a("events/offsets"))
        for r, (lane_id, depth) in enumerate(ix.rows.tolist()):
            a, b = int(offsets[r]), int(offsets[r + 1])
            occ = np.maximum(ends[a:b], starts[a:b] + 1)
            assert np.all(starts[a + 1:b] >= np.maximum.accumulate(occ)[:-1]), (folder.name, lane_id, depth)
    assert checked or not any(p.kernels.num_rows + p.host_ops.num_rows for p in group.profiles)
