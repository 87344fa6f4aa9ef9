"""Rows grouped by integer keys (codes of op types, shapes, names): the group of every row and the first row
of each group, for tables of millions of kernels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def fits(values: np.ndarray, dtype: type[np.signedinteger[Any]]) -> bool:
    """Whether every integer in ``values`` fits the signed integer type ``dtype`` (no value: it does)."""
    info = np.iinfo(dtype)
    return not len(values) or (int(values.min()) >= info.min and int(values.max()) <= info.max)


def int32_if_fits(values: np.ndarray) -> np.ndarray:
    """Integers as int32 where every value fits (4 bytes a kernel, not 8), else int64. For ids and row
    positions (the replay's too), which are only compared, sorted and indexed with, tensor dims and lengths
    of time that are added to int64 times; whoever multiplies them widens first (or works in float)."""
    return values.astype(np.int32 if fits(values, np.int32) else np.int64)


def int16_if_fits(codes: np.ndarray) -> np.ndarray:
    """Codes in 2 bytes where every one fits, else as ``int32_if_fits`` gives them (not copied where they
    already have that type)."""
    if fits(codes, np.int16):
        return codes.astype(np.int16, copy=False)
    return codes if codes.dtype == np.int32 else int32_if_fits(codes)


def column_values(column: pa.ChunkedArray | pa.Array, fill: int = 0) -> np.ndarray:
    """A numeric column as numpy, a null as ``fill``: the column's own buffer, read-only and not copied, where
    it is one chunk without nulls (a projected load gives the kernels' times and lanes so), else a copy. On a
    15.7 M-kernel table the call graph's times and lanes held 375 MB beside the same columns in the table."""
    if column.null_count:
        column = pc.fill_null(column, fill)
    values: np.ndarray = column.to_numpy(zero_copy_only=False)
    return values


def group_rows(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group, group index per row) for rows keyed by equal-length int arrays; groups in
    the order of their keys (the first key most significant), as ``np.unique(..., axis=0)`` gives them.

    The keys are codes: they are packed into one integer per row. Where every combination fits a table of
    ``DENSE_SPAN`` entries (op type, shape, dtype and format codes of flagged kernels), the groups are marked
    in it a slice of rows at a time (``_Packing.ranks``): no sort, no packed key over every row (its packed
    keys and their lookup took 190 MB of a 15.7 M-kernel table), and the group of each row in 4 bytes. Where
    the keys so far fill such a table, they are replaced by their groups' ranks (in key order, so the order
    holds) before the next is packed: five codes of 15.7 M kernels (shapes, dtypes, role) kept to 4 bytes a
    row where their sort took 600 MB. Otherwise they are grouped with a 1-D sort (``axis=0`` unique sorts
    rows as structured values, ten times slower on 400 k kernels)."""
    cols = [np.asarray(k) for k in keys]  # as given (int32 codes stay 4 bytes a row): packed one at a time
    if not cols or not len(cols[0]):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    packing = _Packing.of(*cols)
    if packing is not None:  # every combination fits a table: each row's group found a slice at a time
        rank, groups = packing.ranks()
        group = np.empty(len(cols[0]), np.int32)
        for at in range(0, len(cols[0]), _SLICE):
            group[at:at + _SLICE] = rank[packing.keys(at)]
        return first_rows(group, groups), group
    packed: np.ndarray | None = None
    span = 1
    for col in cols:
        low = int(col.min())
        width = int(col.max()) - low + 1
        if packed is not None and span * width > DENSE_SPAN >= span:
            present, packed = unique_codes(packed, span)  # the keys so far as their groups' ranks
            span = len(present)
        if span * width >= 2**62:  # too many distinct combinations to pack: rows as structured values
            _, first, inverse = np.unique(np.stack([c.astype(np.int64) for c in cols], axis=1), axis=0,
                                          return_index=True, return_inverse=True)
            return first, inverse.reshape(-1)
        dtype = np.int32 if span * width <= DENSE_SPAN else np.int64
        packed = np.zeros(len(col), dtype) if packed is None else packed.astype(dtype, copy=False)
        packed *= width
        # in [0, width), worked out in the packed type, or in 8 bytes where the code's own type is wider (a
        # code's own type may not hold it: int8 codes 127 - -1)
        work = np.int64 if col.dtype.itemsize > np.dtype(dtype).itemsize else dtype
        packed += np.subtract(col, low, dtype=work).astype(dtype, copy=False)
        span *= width
    assert packed is not None
    if span <= DENSE_SPAN:
        present, inverse = unique_codes(packed, span)
        return first_rows(inverse, len(present)), inverse
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def pair_order(first: np.ndarray, second: np.ndarray) -> np.ndarray | None:
    """Row positions (int32) ordered by (``first``, ``second``), the rows of one pair in their own order: a
    stable ``np.lexsort((second, first))``, as a counting sort a slice of rows at a time. A lexsort builds
    8-byte arrays over every row (235 MB beyond its result for 15.7 M kernels). None where the pairs are too
    sparse for a table of them (more than ``DENSE_SPAN``)."""
    if not len(first):
        return np.zeros(0, np.int32)
    packing = _Packing.of(first, second)
    if packing is None:
        return None
    span, keys = packing.span, packing.keys
    count = np.zeros(span, np.int64)
    for at in range(0, len(first), _SLICE):
        count += np.bincount(keys(at), minlength=span)
    next_at = np.cumsum(count) - count  # where each pair's next row goes
    order = np.empty(len(first), np.int32)
    for at in range(0, len(first), _SLICE):
        key = keys(at)
        by_key = np.argsort(key, kind="stable")
        key = key[by_key]
        here = np.bincount(key, minlength=span)
        begins = np.cumsum(here) - here  # where each pair's rows begin in this slice
        order[next_at[key] + np.arange(len(key)) - begins[key]] = by_key + at
        next_at += here
    return order


def pair_totals(first: np.ndarray, second: np.ndarray, weights: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows keyed by two codes: the first row of each distinct pair, pairs in (``first``, ``second``) order
    (``group_rows``' first rows), and each pair's rows and summed weights (``code_totals`` over its groups), a
    slice of rows at a time: no array over every row (the packed keys and groups of 15.7 M kernels took
    125 MB), except where the pairs are too sparse for a table of them (more than ``DENSE_SPAN``)."""
    packing = _Packing.of(first, second) if len(first) else None
    if packing is None:
        first_row, group = group_rows(first, second)
        return (first_row, *code_totals(group, len(first_row), weights))
    group, groups = packing.ranks()
    first_row = np.full(groups, len(first), np.int64)
    count = np.zeros(groups, np.int64)
    total = np.zeros(groups, np.float64)
    for at in range(0, len(first), _SLICE):
        g = group[packing.keys(at)]
        np.minimum.at(first_row, g, np.arange(at, at + len(g), dtype=np.int64))
        count += np.bincount(g, minlength=groups)
        total += np.bincount(g, weights=weights[at:at + _SLICE], minlength=groups)
    return first_row, count, total


@dataclass(frozen=True)
class _Packing:
    """Tuples of integer codes packed into one int64 key each, in ``[0, span)``, a slice of rows at a time
    (the first code most significant, so keys sort as the tuples do)."""

    codes: tuple[np.ndarray, ...]
    lows: tuple[int, ...]
    widths: tuple[int, ...]
    span: int

    @classmethod
    def of(cls, *codes: np.ndarray) -> _Packing | None:
        """The packing of these codes' tuples (non-empty), or None where they span more than ``DENSE_SPAN``
        keys (too sparse for a table of them)."""
        lows = tuple(int(c.min()) for c in codes)
        widths = tuple(int(c.max()) - lo + 1 for c, lo in zip(codes, lows))
        span = int(np.prod(widths, dtype=object))
        return None if span > DENSE_SPAN else cls(codes, lows, widths, span)

    def keys(self, at: int) -> np.ndarray:
        """The keys of the rows from ``at``, ``_SLICE`` of them at most."""
        out = np.zeros(min(_SLICE, len(self.codes[0]) - at), np.int64)
        for c, lo, w in zip(self.codes, self.lows, self.widths):
            out *= w
            # in 8 bytes: a narrow code less its low may not fit its own type (1-byte ids: 127 - -1)
            out += c[at:at + _SLICE].astype(np.int64) - lo
        return out

    def present(self) -> np.ndarray:
        """Per key of the span: whether a row holds it."""
        present = np.zeros(self.span, bool)
        for at in range(0, len(self.codes[0]), _SLICE):
            present[self.keys(at)] = True
        return present

    def ranks(self) -> tuple[np.ndarray, int]:
        """The rank of each key among the keys the rows hold (a table over the span, int32; in key order,
        so in the tuples' order), and how many they hold."""
        present = self.present()
        groups = int(present.sum())
        rank = np.zeros(self.span, np.int32)
        rank[present] = np.arange(groups, dtype=np.int32)
        return rank, groups

    def unpacked(self, key: int) -> list[int]:
        """The codes of one key."""
        parts, rest = [], int(key)
        for lo, w in zip(reversed(self.lows), reversed(self.widths)):
            rest, part = divmod(rest, w)
            parts.append(part + lo)
        return parts[::-1]


def first_rows(inverse: np.ndarray, groups: int) -> np.ndarray:
    """The first row of each of ``groups`` groups, given every row's group (``np.unique``'s
    ``return_index``), a slice of rows at a time: no sort and no index array over every row."""
    first = np.full(groups, len(inverse), np.int64)
    for at in range(0, len(inverse), _SLICE):
        part = inverse[at:at + _SLICE]
        np.minimum.at(first, part, np.arange(at, at + len(part), dtype=np.int64))
    return first


def text_codes(column: pa.ChunkedArray | pa.Array, *, narrow: bool = False) -> tuple[np.ndarray, list[str]]:
    """(code per row, distinct values) of a text column, -1 for a null; a dictionary column (how
    ``Profile.load`` keeps text) gives its own codes, so no row's text is built. Its values may include
    some no row uses. The codes are int32, or with ``narrow`` in the column's own signed width (1 or 2 bytes
    a row, the column's own buffer where it has no null: 250 MB fewer for three columns of 15.7 M kernels),
    for callers that only compare them and index with them, never add to them."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    values = [v if v is not None else "" for v in col.dictionary.to_pylist()]
    codes = pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False)
    keep = narrow and codes.dtype.kind == "i" and codes.dtype.itemsize <= 4
    return (codes if keep else codes.astype(np.int32)), values


def coalesced_codes(first: np.ndarray, first_values: int, second: np.ndarray, none: int,
                    to: np.ndarray | None = None) -> np.ndarray:
    """Per row: ``first``'s code, else (where it is -1, a null) ``second``'s after the ``first_values``
    values of ``first``, else ``none``: one int32 code over both value lists (a kernel's op type, else its
    name), a slice of rows at a time (over 15.7 M kernels at once its temporaries took 250 MB). ``to``: a
    lookup those codes go through, whose type the result takes (no int32 array over every row first)."""
    out = np.empty(len(first), np.int32 if to is None else to.dtype)
    for at in range(0, len(first), _SLICE):
        a = first[at:at + _SLICE].astype(np.int32)
        b = second[at:at + _SLICE].astype(np.int32)
        code = np.where(a >= 0, a, np.where(b >= 0, first_values + b, none))
        out[at:at + len(a)] = code if to is None else to[code]
    return out


def looked_up(table: np.ndarray, codes: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``table[codes]``, a slice of rows at a time, into ``out`` (``codes`` itself may be given) or a new
    array of ``table``'s type: one lookup over every row widens the codes to 8 bytes first (125 MB of a
    15.7 M-kernel table)."""
    result = np.empty(len(codes), table.dtype) if out is None else out
    for at in range(0, len(codes), _SLICE):
        result[at:at + _SLICE] = table[codes[at:at + _SLICE]]
    return result


def code_totals(codes: np.ndarray, length: int, weights: np.ndarray | None = None,
                rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, summed weights) per code in ``[0, length)`` over the rows of a mask (every row where None), a
    slice of rows at a time: ``np.bincount`` over every row at once widens the codes to 8 bytes and the
    weights to floats first (250 MB for 15.7 M kernels). The sums are floats (zeros without ``weights``); of
    whole numbers (ns) below 2**53 they are exact, so the same as one bincount's."""
    count = np.zeros(length, np.int64)
    total = np.zeros(length, np.float64)
    for at in range(0, len(codes), _SLICE):
        part = slice(at, at + _SLICE)
        c = codes[part] if rows is None else codes[part][rows[part]]
        count += np.bincount(c, minlength=length)
        if weights is not None:
            w = weights[part] if rows is None else weights[part][rows[part]]
            total += np.bincount(c, weights=w, minlength=length)
    return count, total


def value_flags(values: list[str], test: Callable[[str], Any]) -> np.ndarray:
    """``test`` of each distinct value of a text column (``text_codes``' values), worked out once each, and a
    last False that a null's code (-1) reads: ``value_flags(values, test)[codes]`` flags the rows, with no
    text built per row."""
    return np.array([bool(test(v)) for v in values] + [False], bool)


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
    packing = _Packing.of(*codes)
    if packing is None:
        first, inverse = group_rows(*codes)
        values: np.ndarray = np.array([fn(*(int(c[r]) for c in codes)) for r in first], dtype)
        return np.asarray(values[inverse])
    lut: np.ndarray = np.zeros(packing.span, dtype)
    for key in np.flatnonzero(packing.present()):
        lut[key] = fn(*packing.unpacked(int(key)))
    out: np.ndarray = np.empty(n, dtype)
    for at in range(0, n, _SLICE):
        out[at:at + _SLICE] = lut[packing.keys(at)]
    return out


# -- codes of some rows' text, numbered as ``dictionary_encode`` of their text would number them -------------
def as_text(arr: pa.Array) -> pa.Array:
    return arr.cast(pa.string())


def _raw_codes(column: pa.ChunkedArray | pa.Array, convert: Callable[[pa.Array], pa.Array]
               ) -> tuple[np.ndarray, list[Any]]:
    """Per row, a code into ``texts`` (``convert`` applied to each chunk's distinct values; None for a null).
    A dictionary column converts its dictionary only: no row's text is built (on 1 M flagged kernels of a
    5 GB folder, eight columns of per-row text had been 180 MB at the rules' peak). Codes in 4 bytes a row
    where the texts are fewer than 2**31."""
    texts: list[Any] = []
    parts = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        # a plain column: its rows' text, encoded (nested lists cannot be hashed as they are)
        coded = chunk if pa.types.is_dictionary(chunk.type) else convert(chunk).dictionary_encode()
        values = (convert(coded.dictionary) if coded is chunk else coded.dictionary).to_pylist()
        null = len(values)
        parts.append((pc.fill_null(coded.indices, null).to_numpy(zero_copy_only=False), len(texts)))
        texts += [*values, None]
    dtype = np.int32 if len(texts) < 2**31 else np.int64
    if len(parts) == 1:
        codes, offset = parts[0]
        return np.add(codes, offset, dtype=dtype), texts
    return np.concatenate([np.add(c, o, dtype=dtype) for c, o in parts] or [np.zeros(0, dtype)]), texts


def _first_seen(raw: np.ndarray, texts: list[Any], null: Any) -> tuple[np.ndarray, list[Any]]:
    """Codes into the distinct texts (a None reads ``null``), numbered in the order the rows first show them,
    as ``dictionary_encode`` of the rows' text numbers them: what is ordered or tied by code stays so. The
    distinct texts are few beside the rows: each row's text code is marked in a table of them, no sort."""
    ids: dict[Any, int] = {}
    lut = np.array([ids.setdefault(null if t is None else t, len(ids)) for t in texts], np.int32)
    distinct = list(ids)
    if not len(raw):
        return raw.astype(np.int32), []
    present, inverse = unique_codes(lut[raw], len(distinct))
    appear = np.argsort(first_rows(inverse, len(present)), kind="stable")
    rank = np.empty(len(present), np.int32)  # 4 bytes a row: a million flagged kernels is common
    rank[appear] = np.arange(len(present), dtype=np.int32)
    return rank[inverse], [distinct[u] for u in present[appear].tolist()]


def _indices(rows: np.ndarray) -> pa.Array:
    """Row positions for ``take``, in 4 bytes where they fit."""
    return pa.array(int32_if_fits(np.asarray(rows)))


def row_codes(column: pa.ChunkedArray, rows: np.ndarray, convert: Callable[[pa.Array], pa.Array] = as_text,
              null: Any = "") -> tuple[np.ndarray, list[Any]]:
    """(code per listed row, distinct values) of ``column``'s ``rows`` as text (``convert``ed; a null reads
    ``null``), the codes numbered in the order the rows first show a value."""
    return _first_seen(*_raw_codes(column.take(_indices(rows)), convert), null)


def op_type_codes_of(kernels: pa.Table, rows: np.ndarray, null: Any = "") -> tuple[np.ndarray, list[Any]]:
    """``row_codes`` of the kernels' op type, a kernel without one taking its name (``coalesce``)."""
    take = _indices(rows)
    names, name_texts = _raw_codes(kernels["name"].take(take), as_text)
    if "op_type" not in kernels.column_names:
        return _first_seen(names, name_texts, null)
    types, type_texts = _raw_codes(kernels["op_type"].take(take), as_text)
    untyped = np.array([t is None for t in type_texts], bool)[types]
    return _first_seen(np.where(untyped, names + len(type_texts), types), type_texts + name_texts, null)
