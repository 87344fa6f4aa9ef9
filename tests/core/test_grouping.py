"""``group_rows``: rows grouped by packed integer keys give what ``np.unique(axis=0)`` gives; ``unique_codes``
(codes marked in a table, no sort) gives what ``np.unique(return_inverse=True)`` gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_core.grouping import code_totals, group_rows, unique_codes


def _reference(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, first, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda width: st.lists(
    st.tuples(*[st.integers(-3, 40) for _ in range(width)]), min_size=1, max_size=60)))
def test_groups_match_unique_rows(rows: list[tuple[int, ...]]) -> None:
    keys = [np.array(col, np.int64) for col in zip(*rows)]
    first, inverse = group_rows(*keys)
    ref_first, ref_inverse = _reference(*keys)
    assert first.tolist() == ref_first.tolist()
    assert inverse.tolist() == ref_inverse.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=40),
       st.sampled_from([0, 2**40, -2**35, 2**31 - 3]), st.sampled_from([np.int8, np.int32, np.int64]))
def test_narrow_keys_far_from_zero_group_in_the_table(rows: list[tuple[int, int]], offset: int,
                                                      dtype: type) -> None:
    """Keys of few distinct values far from zero (tensor dims, ids) are packed from their lowest value, so
    their combinations fit the table (``DENSE_SPAN``) and the 4-byte packed key never overflows."""
    small = np.array([r[1] for r in rows], dtype)
    wide = np.array([r[0] + offset for r in rows], np.int64)
    first, inverse = group_rows(wide, small)
    ref_first, ref_inverse = _reference(wide, small.astype(np.int64))
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_one_byte_codes_spanning_their_whole_type_pack_without_wrapping() -> None:
    """int8 codes from -1 (a null) to 127: their width, 129, does not fit their own type."""
    codes = np.array([127, -1, 5, 127, -1, 0], np.int8)
    other = np.array([1, 1, 0, 1, 2, 0], np.int16)
    first, inverse = group_rows(codes, other)
    ref_first, ref_inverse = _reference(codes.astype(np.int64), other.astype(np.int64))
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_keys_past_the_table_group_by_the_ranks_of_the_keys_before() -> None:
    """Combinations beyond ``DENSE_SPAN`` (a dim of 2**20 beside one of 2**10) where the first key's groups
    are few: it is replaced by their ranks before the second is packed, and the groups and their order are
    the sort's (the table, no sort; each row's group in 4 bytes)."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**20, 5000)
    b = rng.integers(0, 2**10, 5000)
    c = rng.integers(-5, 2**11, 5000).astype(np.int16)
    first, inverse = group_rows(a, b, c)
    ref_first, ref_inverse = _reference(a, b, c.astype(np.int64))
    assert inverse.dtype == np.int32
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_sparse_keys_past_the_table_even_as_ranks_group_by_sorting() -> None:
    """5000 distinct values of a wide key beside a key of 2**13 values: past the table even as ranks, so
    they take the sort; same groups."""
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2**20, 5000)
    b = rng.integers(0, 2**13, 5000)
    first, inverse = group_rows(a, b)
    ref_first, ref_inverse = _reference(a, b)
    assert inverse.dtype == np.int64
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_keys_too_wide_to_pack_fall_back_to_rows() -> None:
    big = np.array([2**40, 0, 2**40, 5], np.int64)
    other = np.array([2**30, 1, 2**30, 1], np.int64)
    first, inverse = group_rows(big, other, big)
    ref_first, ref_inverse = _reference(big, other, big)
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_no_rows() -> None:
    first, inverse = group_rows(np.zeros(0, np.int64))
    assert len(first) == 0 and len(inverse) == 0


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3).flatmap(lambda width: st.lists(
    st.tuples(*[st.integers(-1, 30) for _ in range(width)]), min_size=1, max_size=80)), st.booleans())
def test_map_code_tuples_calls_once_per_distinct_tuple_and_spreads_it(rows: list[tuple[int, ...]],
                                                                       dense: bool) -> None:
    """Each distinct tuple of codes (-1 a null) is worked out once and every row gets its own tuple's value,
    both by the table of every tuple and by the sort it falls back to when that table would be too big."""
    import pypto_core.grouping as grouping

    keys = [np.array(col, np.int32) for col in zip(*rows)]
    seen: list[tuple[int, ...]] = []

    def value(*t: int) -> int:
        return sum((i + 1) * 31 ** k for k, i in enumerate(t)) % 30_000

    def fn(*t: int) -> int:
        seen.append(t)
        return value(*t)

    before = grouping.DENSE_SPAN
    grouping.DENSE_SPAN = before if dense else 1
    try:
        out = grouping.map_code_tuples(fn, *keys)
    finally:
        grouping.DENSE_SPAN = before
    assert out.tolist() == [value(*r) for r in rows]
    assert sorted(seen) == sorted(set(rows))  # once per distinct tuple


def test_text_codes_keep_a_dictionarys_codes_and_mark_nulls() -> None:
    import pyarrow as pa

    from pypto_core.grouping import text_codes

    plain = pa.chunked_array([["a", None, "b"], ["a"]])
    codes, values = text_codes(plain)
    assert [values[c] if c >= 0 else None for c in codes] == ["a", None, "b", "a"]
    coded = pa.chunked_array([pa.array(["x", "y", None, "x"]).dictionary_encode()])
    codes, values = text_codes(coded)
    assert [values[c] if c >= 0 else None for c in codes] == ["x", "y", None, "x"]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300).flatmap(lambda span: st.tuples(
    st.just(span), st.lists(st.integers(0, span - 1), min_size=1, max_size=80))))
def test_codes_marked_in_a_table_match_a_sort(case: tuple[int, list[int]]) -> None:
    span, codes = case
    key = np.array(codes, np.int64)
    present, inverse = unique_codes(key, span)
    ref_present, ref_inverse = np.unique(key, return_inverse=True)
    assert present.tolist() == ref_present.tolist()
    assert inverse.tolist() == ref_inverse.reshape(-1).tolist()
    assert inverse.dtype == np.int32


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 40), st.integers(0, 9)), min_size=1, max_size=60))
def test_narrow_keys_group_as_wide_ones(rows: list[tuple[int, int]]) -> None:
    wide = [np.array(col, np.int64) for col in zip(*rows)]
    narrow = [col.astype(np.int32) for col in wide[:1]] + [wide[1].astype(np.int8)]
    first, inverse = group_rows(*narrow)
    ref_first, ref_inverse = group_rows(*wide)
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**12), st.booleans()), max_size=40),
       st.booleans())
def test_code_totals_a_slice_at_a_time_are_one_bincounts(rows, masked) -> None:
    """Counts and summed ns per code over a mask's rows, three rows a slice (codes in 2 bytes, as a comparison
    holds them): the figures of one bincount over the chosen rows."""
    import pypto_core.grouping as grouping

    codes = np.array([c for c, _, _ in rows], np.int16)
    ns = np.array([w for _, w, _ in rows], np.int64)
    mask = np.array([m for _, _, m in rows], bool) if masked else None
    chosen = mask if mask is not None else np.ones(len(codes), bool)
    kept = grouping._SLICE
    grouping._SLICE = 3
    try:
        count, total = code_totals(codes, 8, ns, mask)
    finally:
        grouping._SLICE = kept
    assert count.tolist() == np.bincount(codes[chosen], minlength=8).tolist()
    expected = np.bincount(codes[chosen], weights=ns[chosen].astype(np.float64), minlength=8)
    assert total.tolist() == expected.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 9), st.integers(0, 6), st.integers(0, 10**12)), min_size=1,
                max_size=40), st.booleans())
def test_pair_totals_a_slice_at_a_time_are_the_groups_totals(rows, sparse) -> None:
    """Each (first, second) pair's first row, rows and summed ns, three rows a slice (2-byte codes as the
    comparison holds them; pairs too sparse for a table go through ``group_rows``): the figures of
    ``group_rows`` and one ``code_totals`` over its groups."""
    import pypto_core.grouping as grouping
    from pypto_core.grouping import pair_totals

    first = np.array([a for a, _, _ in rows], np.int16)
    second = np.array([b for _, b, _ in rows], np.int64 if sparse else np.int16)
    if sparse:
        second = second * 2**40  # past a table of every pair
    ns = np.array([w for _, _, w in rows], np.int64)
    kept = grouping._SLICE
    grouping._SLICE = 3
    try:
        first_row, count, total = pair_totals(first, second, ns)
    finally:
        grouping._SLICE = kept
    ref_first, group = group_rows(first, second)
    ref_count, ref_total = code_totals(group, len(ref_first), ns)
    assert first_row.tolist() == ref_first.tolist()
    assert count.tolist() == ref_count.tolist() and total.tolist() == ref_total.tolist()
