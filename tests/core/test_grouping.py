"""``group_rows``: rows grouped by packed integer keys give what ``np.unique(axis=0)`` gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_core.grouping import group_rows


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


def test_keys_too_wide_to_pack_fall_back_to_rows() -> None:
    big = np.array([2**40, 0, 2**40, 5], np.int64)
    other = np.array([2**30, 1, 2**30, 1], np.int64)
    first, inverse = group_rows(big, other, big)
    ref_first, ref_inverse = _reference(big, other, big)
    assert first.tolist() == ref_first.tolist() and inverse.tolist() == ref_inverse.tolist()


def test_no_rows() -> None:
    first, inverse = group_rows(np.zeros(0, np.int64))
    assert len(first) == 0 and len(inverse) == 0
