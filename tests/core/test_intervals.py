"""Interval arithmetic (pypto_core/intervals.py) against a brute-force reading of the same intervals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_core.intervals import (
    intersect_intervals,
    outermost,
    sorted_distinct,
    subtract_intervals,
    union_intervals,
    union_length,
    union_length_of,
)

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), max_size=25)


def _arrays(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([a for a, _ in pairs], np.int64)
    return s, s + np.array([d for _, d in pairs], np.int64)


def _points(s: np.ndarray, e: np.ndarray) -> set[int]:
    return {t for a, b in zip(s.tolist(), e.tolist()) for t in range(a, b)}


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_union_intersection_and_difference_cover_the_right_instants(a, b) -> None:
    (s1, e1), (s2, e2) = _arrays(a), _arrays(b)
    pa_, pb = _points(s1, e1), _points(s2, e2)
    assert _points(*union_intervals(s1, e1)) == pa_ and union_length(s1, e1) == len(pa_)
    assert _points(*intersect_intervals(s1, e1, s2, e2)) == pa_ & pb
    assert _points(*subtract_intervals(s1, e1, s2, e2)) == pa_ - pb


@settings(max_examples=200, deadline=None)
@given(spans)
def test_outermost_keeps_exactly_the_calls_no_other_call_contains(pairs) -> None:
    s, e = _arrays(pairs)
    keep = outermost(s, e)
    for i in range(len(s)):
        inside = any(j != i and s[j] <= s[i] and e[i] <= e[j] and (j < i or (s[j], e[j]) != (s[i], e[i]))
                     for j in range(len(s)))
        assert keep[i] == (not inside), (pairs, i)


def test_a_compile_call_wrapping_another_counts_once() -> None:
    # CANN: AscendCL@aclopCompileAndExecute [0, 100) holds AscendCL@opCompile [10, 60); a second pair follows
    s, e = np.array([0, 10, 200, 210]), np.array([100, 60, 300, 250])
    assert outermost(s, e).tolist() == [True, False, True, False]


def test_window_index_finds_the_step_holding_each_time() -> None:
    from pypto_core.intervals import window_index

    starts, ends = np.array([10, 30], np.int64), np.array([20, 40], np.int64)
    times = np.array([5, 10, 19, 20, 25, 30, 39, 40], np.int64)
    assert window_index(starts, ends, times).tolist() == [-1, 0, 0, -1, -1, 1, 1, -1]
    assert window_index(starts[:0], ends[:0], times).tolist() == [-1] * len(times)


@settings(max_examples=200, deadline=None)
@given(spans)
def test_pieces_already_in_order_merge_as_any_others_and_stay_untouched(pairs) -> None:
    s, e = _arrays(sorted(pairs))
    kept = (s.copy(), e.copy())
    us, ue = union_intervals(s, e)  # in start order: merged without a sort
    assert _points(us, ue) == _points(*kept)
    assert (us[1:] > ue[:-1]).all() and (ue > us).all()  # sorted, disjoint, none touching
    assert s.tolist() == kept[0].tolist() and e.tolist() == kept[1].tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-20, 60), st.integers(-10, 20)), max_size=30), st.booleans())
def test_union_length_counts_each_instant_once_and_leaves_its_input(pairs, in_order) -> None:
    """Empty and reversed intervals cover nothing; overlapping, touching and nested ones count once, in start
    order (no sort) or not; the caller's arrays are left as they were."""
    s, e = _arrays(sorted(pairs) if in_order else pairs)
    kept = (s.copy(), e.copy())
    assert union_length(s, e) == len(_points(s, e))
    assert s.tolist() == kept[0].tolist() and e.tolist() == kept[1].tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-20, 60), st.integers(-10, 20), st.booleans()), max_size=30),
       st.booleans(), st.booleans())
def test_union_length_of_masked_rows_is_the_union_of_those_rows_a_slice_at_a_time(rows, in_order,
                                                                                  masked) -> None:
    """The sliced union (starts in order, three rows a slice here: pieces cross the slices' edges) and the
    copying one (starts out of order) count the instants the chosen rows cover, once each."""
    import pypto_core.intervals as intervals

    rows = sorted(rows) if in_order else rows
    s = np.array([a for a, _, _ in rows], np.int64)
    d = np.array([b for _, b, _ in rows], np.int64)
    mask = np.array([m for _, _, m in rows], bool) if masked else None
    chosen = mask if mask is not None else np.ones(len(s), bool)
    expected = len(_points(s[chosen], s[chosen] + d[chosen]))
    kept = intervals._UNION_SLICE_ROWS
    intervals._UNION_SLICE_ROWS = 3
    try:
        assert union_length_of(s, d, mask) == expected
    finally:
        intervals._UNION_SLICE_ROWS = kept
    assert union_length_of(s, d, mask) == expected  # one slice


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-5, 30), max_size=40))
def test_edges_sorted_in_place_are_the_distinct_values(values) -> None:
    scratch = np.array(values, np.int64)
    assert sorted_distinct(scratch, overwrite=True).tolist() == sorted(set(values))
    assert sorted_distinct(np.array(values, np.int64)).tolist() == sorted(set(values))
