"""Rows grouped by integer keys (codes of op types, shapes, names): the group of every row and the first row
of each group, for tables of millions of kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def group_rows(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group, group index per row) for rows keyed by equal-length int arrays; groups in
    the order of their keys (the first key most significant), as ``np.unique(..., axis=0)`` gives them.

    The keys are codes: they are packed into one int64 per row and grouped with a 1-D sort (``axis=0``
    unique sorts rows as structured values, ten times slower on 400 k kernels)."""
    cols = [np.asarray(k) for k in keys]  # as given (int32 codes stay 4 bytes a row): packed one at a time
    if not cols or not len(cols[0]):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = 1
    ranges = []
    for col in cols:
        low = int(col.min())
        width = int(col.max()) - low + 1
        if span * width >= 2**62:  # too many distinct combinations to pack: rows as structured values
            _, first, inverse = np.unique(np.stack([c.astype(np.int64) for c in cols], axis=1), axis=0,
                                          return_index=True, return_inverse=True)
            return first, inverse.reshape(-1)
        ranges.append((low, width))
        span *= width
    packed = np.zeros(len(cols[0]), np.int64)
    for col, (low, width) in zip(cols, ranges):
        packed *= width
        np.add(packed, col, out=packed, casting="unsafe")  # any integer codes, widened as they are added
        packed -= low
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def text_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """(code per row, distinct values) of a text column, -1 for a null; a dictionary column (how
    ``Profile.load`` keeps text) gives its own codes, so no row's text is built. Its values may include
    some no row uses."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    values = [v if v is not None else "" for v in col.dictionary.to_pylist()]
    codes = pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, values


# ``map_code_tuples`` marks the tuples present in a table of every possible one while there are at most this
# many (16 MB), and works through the rows a slice at a time: on 15.7 M kernels it holds a slice's keys
# (8 MB) instead of a sort's five arrays over every row (600 MB).
DENSE_SPAN = 1 << 24
_SLICE = 1_000_000


def unique_codes(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for codes in ``[0, span)``, ``span`` at most ``DENSE_SPAN``:
    the codes present marked in a table of every possible one, no sort (the inverse as int32)."""
    seen = np.zeros(span, bool)
    seen[key] = True
    present = np.flatnonzero(seen)
    del seen
    position = np.zeros(span, np.int32)
    position[present] = np.arange(len(present), dtype=np.int32)
    return present, position[key]


def map_code_tuples(fn: Callable[..., int], *codes: np.ndarray, dtype: type = np.int16) -> np.ndarray:
    """``fn(*tuple)`` for every row's tuple of codes (e.g. a kernel's core type and name codes, from
    ``text_codes``), called once per distinct tuple: what is worked out once per distinct text, spread to
    the rows."""
    n = len(codes[0]) if codes else 0
    if not n:
        return np.zeros(0, dtype)
    lows = [int(c.min()) for c in codes]
    widths = [int(c.max()) - lo + 1 for c, lo in zip(codes, lows)]
    span = int(np.prod(widths, dtype=object))
    if span > DENSE_SPAN:
        first, inverse = group_rows(*codes)
        values: np.ndarray = np.array([fn(*(int(c[r]) for c in codes)) for r in first], dtype)
        return np.asarray(values[inverse])

    def keys(at: int) -> np.ndarray:
        out = np.zeros(min(_SLICE, n - at), np.int64)
        for c, lo, w in zip(codes, lows, widths):
            out *= w
            out += c[at:at + _SLICE] - lo
        return out

    present = np.zeros(span, bool)
    for at in range(0, n, _SLICE):
        present[keys(at)] = True
    lut: np.ndarray = np.zeros(span, dtype)
    for key in np.flatnonzero(present):
        parts, rest = [], int(key)
        for lo, w in zip(reversed(lows), reversed(widths)):
            rest, part = divmod(rest, w)
            parts.append(part + lo)
        lut[key] = fn(*reversed(parts))
    out: np.ndarray = np.empty(n, dtype)
    for at in range(0, n, _SLICE):
        out[at:at + _SLICE] = lut[keys(at)]
    return out


# -- codes of some rows' text, numbered as ``dictionary_encode`` of their text would number them -------------
def as_text(arr: pa.Array) -> pa.Array:
    return arr.cast(pa.string())


def _raw_codes(column: pa.ChunkedArray | pa.Array, convert: Callable[[pa.Array], pa.Array]
               ) -> tuple[np.ndarray, list[Any]]:
    """Per row, a code into ``texts`` (``convert`` applied to each chunk's distinct values; None for a null).
    A dictionary column converts its dictionary only: no row's text is built (on 1 M flagged kernels of a
    5 GB folder, eight columns of per-row text had been 180 MB at the rules' peak)."""
    texts: list[Any] = []
    parts = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        # a plain column: its rows' text, encoded (nested lists cannot be hashed as they are)
        coded = chunk if pa.types.is_dictionary(chunk.type) else convert(chunk).dictionary_encode()
        values = (convert(coded.dictionary) if coded is chunk else coded.dictionary).to_pylist()
        null = len(values)
        parts.append(pc.fill_null(coded.indices, null).to_numpy(zero_copy_only=False).astype(np.int64)
                     + len(texts))
        texts += [*values, None]
    return (np.concatenate(parts) if parts else np.zeros(0, np.int64)), texts


def _first_seen(raw: np.ndarray, texts: list[Any], null: Any) -> tuple[np.ndarray, list[Any]]:
    """Codes into the distinct texts (a None reads ``null``), numbered in the order the rows first show them,
    as ``dictionary_encode`` of the rows' text numbers them: what is ordered or tied by code stays so."""
    ids: dict[Any, int] = {}
    lut = np.array([ids.setdefault(null if t is None else t, len(ids)) for t in texts], np.int64)
    distinct = list(ids)
    if not len(raw):
        return raw.astype(np.int32), []
    uniq, first, inverse = np.unique(lut[raw], return_index=True, return_inverse=True)
    appear = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int32)  # 4 bytes a row: a million flagged kernels is common
    rank[appear] = np.arange(len(uniq), dtype=np.int32)
    return rank[inverse.reshape(-1)], [distinct[u] for u in uniq[appear].tolist()]


def row_codes(column: pa.ChunkedArray, rows: np.ndarray, convert: Callable[[pa.Array], pa.Array] = as_text,
              null: Any = "") -> tuple[np.ndarray, list[Any]]:
    """(code per listed row, distinct values) of ``column``'s ``rows`` as text (``convert``ed; a null reads
    ``null``), the codes numbered in the order the rows first show a value."""
    return _first_seen(*_raw_codes(column.take(pa.array(np.asarray(rows, np.int64))), convert), null)


def op_type_codes_of(kernels: pa.Table, rows: np.ndarray, null: Any = "") -> tuple[np.ndarray, list[Any]]:
    """``row_codes`` of the kernels' op type, a kernel without one taking its name (``coalesce``)."""
    take = pa.array(np.asarray(rows, np.int64))
    names, name_texts = _raw_codes(kernels["name"].take(take), as_text)
    if "op_type" not in kernels.column_names:
        return _first_seen(names, name_texts, null)
    types, type_texts = _raw_codes(kernels["op_type"].take(take), as_text)
    untyped = np.array([t is None for t in type_texts], bool)[types]
    return _first_seen(np.where(untyped, names + len(type_texts), types), type_texts + name_texts, null)
