"""Tensor shape, dtype and format cells → structured Arrow lists.

Kernel tables describe each input/output slot in one cell: shapes ``"4096,1,2048;4096,1,1024;;"`` (slots
split by ``;``, dims by ``,``, an empty slot is a scalar or an absent optional input), dtypes
``DT_BF16;DT_BF16``, formats ``ND;ND`` (docs/formats.md §0.3). The same few strings repeat on thousands of
rows, so each batch is dictionary-encoded and only its *distinct* strings are parsed (with a cache across
batches); the rows then take their parsed value by index, all in Arrow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.formats.csvtable import clean_strings

SHAPES_TYPE = pa.list_(pa.list_(pa.int64()))
STRINGS_TYPE = pa.list_(pa.string())
# How the streaming kernel writer stores these columns in Parquet: the cleaned cell text, dictionary-encoded
# (see ``cell_text`` and ``from_cell_text``).
CELL_TEXT_TYPE = pa.dictionary(pa.int32(), pa.string())

# Distinct shape strings seen so far; bounded so that a hostile file cannot grow it without end.
_CACHE_LIMIT = 200_000
_shape_cache: dict[str, list[list[int]] | None] = {}


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_shape_text(text: str) -> list[list[int]] | None:
    """``"4096,1,2048;;2048"`` → ``[[4096, 1, 2048], [], [2048]]``; None when a dim is not an integer.

    Every slot is kept (empty ones as ``[]``) so that slot *i* lines up with dtype *i*.
    """
    cached = _shape_cache.get(text)
    if cached is not None or text in _shape_cache:
        return cached
    value: list[list[int]] | None
    try:
        value = [[int(d) for d in slot.split(",")] if slot.strip() else [] for slot in text.split(";")]
    except ValueError:
        value = None
    if value is not None and any(not _INT64_MIN <= d <= _INT64_MAX for slot in value for d in slot):
        value = None  # a dimension no tensor can have: unreadable, not an overflow later in Arrow
    if len(_shape_cache) < _CACHE_LIMIT:
        _shape_cache[text] = value
    return value


def _unique_parse(arr: pa.Array, parse: Callable[[str], Any],
                  out_type: pa.DataType) -> tuple[pa.Array, int, str]:
    """Parse each distinct string of ``arr`` once; returns (parsed array, bad count, first bad example).

    A dictionary array (as the kernel reader asks Arrow's CSV parser for) is used as it is; a plain one is
    dictionary-encoded first.
    """
    if pa.types.is_dictionary(arr.type):
        values, indices = clean_strings(arr.dictionary), arr.indices
    else:
        encoded = pc.dictionary_encode(clean_strings(arr))
        values, indices = encoded.dictionary, encoded.indices
    uniques = values.to_pylist()
    # A blank cell is null, not unreadable; only non-blank values that fail to parse count as bad.
    parsed = [parse(u) if u is not None else None for u in uniques]
    out = pa.array(parsed, type=out_type).take(indices)
    bad_ids = [i for i, (u, p) in enumerate(zip(uniques, parsed)) if u is not None and p is None]
    if not bad_ids:
        return out, 0, ""
    bad_mask = pc.is_in(indices, pa.array(bad_ids, type=indices.type))
    count = pc.sum(pc.cast(bad_mask, pa.int64())).as_py() or 0
    return out, count, uniques[bad_ids[0]]


def parse_shapes(arr: pa.Array | pa.ChunkedArray) -> tuple[pa.Array | pa.ChunkedArray, int, str]:
    """A column of shape cells → ``list<list<int64>>``; also the count and an example of unreadable cells."""
    if isinstance(arr, pa.ChunkedArray):
        results = [parse_shapes(c) for c in arr.chunks]
        bad = sum(r[1] for r in results)
        example = next((r[2] for r in results if r[1]), "")
        return pa.chunked_array([r[0] for r in results], type=SHAPES_TYPE), bad, example
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), SHAPES_TYPE), 0, ""
    if not pa.types.is_dictionary(arr.type):
        arr = arr.cast(pa.string())
    return _unique_parse(arr, parse_shape_text, SHAPES_TYPE)


def _split_names(text: str) -> list[str]:
    return [s.strip() for s in text.split(";")]


def parse_name_lists(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``DT_BF16;INT64`` / ``ND;ND`` cells → ``list<string>`` (one entry per slot; blanks kept as "")."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([parse_name_lists(c) for c in arr.chunks], type=STRINGS_TYPE)
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), STRINGS_TYPE)
    if pa.types.is_dictionary(arr.type):  # split the distinct values only, then expand
        return pc.take(pc.split_pattern(clean_strings(arr.dictionary), ";"), arr.indices)
    cleaned = clean_strings(arr.cast(pa.string()))
    return pc.split_pattern(cleaned, ";")


# ------------------------------------------------------------------------------- storage as cell text
# Parquet's nested lists cost half of a kernel CSV's conversion time (the per-row expansion of parsed
# lists and their repetition levels), while the cells repeat: a 1 GB kernel_details.csv has a few hundred
# distinct shape strings. So the streaming writer stores each such column as its cleaned cell text,
# dictionary-encoded (the dictionary is what Parquet keeps), and ``Profile.load`` expands it back into the
# canonical lists: the same values, parsed once per distinct string.


def _dictionary(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(cleaned distinct values, indices) of a text column."""
    if pa.types.is_dictionary(arr.type):
        return clean_strings(arr.dictionary), arr.indices
    encoded = pc.dictionary_encode(clean_strings(arr.cast(pa.string())))
    return encoded.dictionary, encoded.indices


def _as_cell_text(values: pa.Array, indices: pa.Array, keep: pa.Array | None = None) -> pa.DictionaryArray:
    """A dictionary array whose nulls are in the indices (Parquet refuses nulls inside a dictionary);
    ``keep``: per distinct value, False for values stored as null (unreadable shapes)."""
    drop = pc.is_null(values) if keep is None else pc.or_(pc.is_null(values), pc.invert(keep))
    if pc.any(drop).as_py():
        indices = pc.if_else(pc.take(drop, indices), pa.scalar(None, indices.type), indices)
        values = pc.fill_null(values, "")
    return pa.DictionaryArray.from_arrays(indices.cast(pa.int32()), values)


def shape_cell_text(arr: pa.Array) -> tuple[pa.Array, int, str]:
    """Shape cells in their storage form (:data:`CELL_TEXT_TYPE`), null where unreadable; also the count and
    an example of unreadable cells, as :func:`parse_shapes` reports them."""
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), CELL_TEXT_TYPE), 0, ""
    values, indices = _dictionary(arr)
    uniques = values.to_pylist()
    readable = [u is None or parse_shape_text(u) is not None for u in uniques]
    out = _as_cell_text(values, indices, pa.array(readable, pa.bool_()))
    bad_ids = [i for i, ok in enumerate(readable) if not ok]
    if not bad_ids:
        return out, 0, ""
    count = pc.sum(pc.cast(pc.is_in(indices, pa.array(bad_ids, type=indices.type)), pa.int64())).as_py() or 0
    return out, count, uniques[bad_ids[0]]


def name_list_cell_text(arr: pa.Array) -> pa.Array:
    """Dtype / format cells in their storage form (:data:`CELL_TEXT_TYPE`)."""
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), CELL_TEXT_TYPE)
    return _as_cell_text(*_dictionary(arr))


def from_cell_text(arr: pa.Array | pa.ChunkedArray, list_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Stored cell text back to the canonical ``list<list<int64>>`` (shapes) or ``list<string>`` (names)."""
    if list_type == SHAPES_TYPE:
        return parse_shapes(arr)[0]
    return parse_name_lists(arr)


def coded_from_cell_text(arr: pa.Array | pa.ChunkedArray,
                         list_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """Stored cell text as a dictionary of the canonical lists: only the distinct cells are parsed and held,
    each row keeps its 4-byte code (``dictionary_decode`` gives what :func:`from_cell_text` gives)."""
    if isinstance(arr, pa.ChunkedArray):
        parsed: list[tuple[pa.Array, pa.Array]] = []  # (cell text, lists) of the dictionaries seen

        def chunk(c: pa.Array) -> pa.Array:
            if not pa.types.is_dictionary(c.type):
                return coded_from_cell_text(c, list_type)
            lists = next((v for d, v in parsed if d is c.dictionary or d.equals(c.dictionary)), None)
            if lists is None:  # unified chunks share one dictionary: parsed once
                lists = from_cell_text(c.dictionary, list_type)
                parsed.append((c.dictionary, lists))
            return pa.DictionaryArray.from_arrays(c.indices, lists)

        return pa.chunked_array([chunk(c) for c in arr.chunks], type=pa.dictionary(pa.int32(), list_type))
    if pa.types.is_null(arr.type):
        return pa.DictionaryArray.from_arrays(pa.nulls(len(arr), pa.int32()), pa.array([], list_type))
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr.cast(pa.string()))
    lists = from_cell_text(arr.dictionary, list_type)
    return pa.DictionaryArray.from_arrays(arr.indices, lists)  # codes in the width they came in
