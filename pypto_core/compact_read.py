"""A saved table read one row group at a time into compact, single-chunk columns (a projected load).

Reading a whole Parquet file at once decodes every row group's codes as 4-byte indices and every id as 8
bytes before they can be narrowed: on a saved 5 GB kernel table (15.7 M kernels) the read held 1.6 GB,
unifying the row groups' dictionaries 0.5 GB more, for a table that ends at 0.95 GB. Here each row group is
decoded, put into its final place and let go before the next one:

* text is kept as codes into one dictionary per column, in 1, 2 or 4 bytes a row as the dictionary grows
  (one code is left free below the type's top, for the null code ``shapes.distinct_values`` appends);
* integers named in ``narrow`` are kept in the width it gives them (1 or 4 bytes) while every value fits,
  widened (to 2, 4, 8 bytes) once one does not;
* floats named in ``coded_floats`` are kept as codes too while they hold few distinct values (a kernel
  table's PMU ratios: their two MTE2 columns held 242 MB of a 15.7 M-kernel table as floats, 60 as codes);
* every other number keeps its own type.

Each column ends as one chunk over preallocated memory (the call graph views it as numpy without a copy,
``grouping.column_values``). What the read needs beyond the result: one row group's decoded columns, and a
byte a row for each column with nulls (its validity, packed into bits at the end).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.grouping import fits

# Dictionary sizes each code width holds: one code left free below the top (see above)
_CODE_WIDTHS = ((np.int8, 2**7 - 2), (np.int16, 2**15 - 2), (np.int32, 2**31 - 2))
FLOAT_CODES_LIMIT = 2**15 - 2  # distinct values a coded float column holds (2-byte codes at most)


class _Validity:
    """Which rows hold a value, kept only once a null is seen (a column without nulls carries no bitmap)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.valid: np.ndarray | None = None
        self.nulls = 0

    def add(self, chunk: pa.Array, at: int) -> None:
        if not chunk.null_count:
            return
        if self.valid is None:
            self.valid = np.ones(self.rows, np.bool_)
        self.valid[at:at + len(chunk)] = chunk.is_valid().to_numpy(zero_copy_only=False)
        self.nulls += chunk.null_count

    def buffer(self) -> pa.Buffer | None:
        return None if self.valid is None else pa.py_buffer(np.packbits(self.valid, bitorder="little"))


class _TooManyValues(Exception):
    """A coded column's dictionary passed its limit (``_Codes``)."""


_NAN = object()  # the lookup's key of a NaN value, which equals no other NaN


class _Codes:
    """A dictionary column: each row group's codes mapped into one dictionary of the values seen so far."""

    def __init__(self, rows: int, value_type: pa.DataType, limit: int = _CODE_WIDTHS[-1][1]) -> None:
        self.value_type = value_type
        self.limit = limit
        self.codes = np.empty(rows, _CODE_WIDTHS[0][0])
        self.width = 0
        self.lookup: dict[Any, int] = {}
        self.values: list[Any] = []
        self.validity = _Validity(rows)

    def _code(self, value: Any) -> int:
        key = value if value == value else _NAN
        code = self.lookup.get(key)
        if code is None:
            code = self.lookup[key] = len(self.values)
            self.values.append(value)
        return code

    def add(self, chunk: pa.DictionaryArray, at: int) -> None:
        # the row group's dictionary is small: its values are mapped to this column's codes one by one
        to_code = np.fromiter((self._code(v) for v in chunk.dictionary.to_pylist()), np.int64,
                              len(chunk.dictionary))
        if len(self.values) > self.limit:
            raise _TooManyValues  # before this row group's rows are written
        while len(self.values) > _CODE_WIDTHS[self.width][1]:
            self.width += 1
            self.codes = self.codes.astype(_CODE_WIDTHS[self.width][0])
        if len(to_code):
            indices = pc.fill_null(chunk.indices, 0).to_numpy(zero_copy_only=False)
            self.codes[at:at + len(chunk)] = to_code[indices]
        else:  # a row group whose rows are all null
            self.codes[at:at + len(chunk)] = 0
        self.validity.add(chunk, at)

    def finish(self) -> pa.DictionaryArray:
        index_type = pa.from_numpy_dtype(self.codes.dtype)
        indices = pa.Array.from_buffers(index_type, len(self.codes), [self.validity.buffer(),
                                                                      pa.py_buffer(self.codes)],
                                        null_count=self.validity.nulls)
        return pa.DictionaryArray.from_arrays(indices, pa.array(self.values, self.value_type))


_INT_WIDTHS = (np.int8, np.int16, np.int32, np.int64)


class _Numbers:
    """A number column in its own type, or, where ``narrow`` gives a narrower integer type, in that one while
    its values fit, widened a step at a time once one does not."""

    def __init__(self, rows: int, typ: pa.DataType,
                 narrow: type[np.signedinteger[Any]] | None = None) -> None:
        self.file_type = typ
        self.type = pa.from_numpy_dtype(narrow) if narrow is not None else typ
        # np.empty: pages a column of nulls never writes are never resident
        self.values = np.empty(rows, self.type.to_pandas_dtype())
        self.validity = _Validity(rows)

    def add(self, chunk: pa.Array, at: int) -> None:
        self.validity.add(chunk, at)
        if chunk.null_count == len(chunk):  # left unwritten (see finish)
            return
        values = (pc.fill_null(chunk, 0) if chunk.null_count else chunk).to_numpy(zero_copy_only=False)
        if self.type != self.file_type and values.dtype.itemsize > self.values.dtype.itemsize:
            self._widen_for(values)
        self.values[at:at + len(chunk)] = values

    def _widen_for(self, values: np.ndarray) -> None:
        """The narrowest integer type, from the present one up, that holds ``values`` too."""
        width = next(w for w in _INT_WIDTHS[_INT_WIDTHS.index(self.values.dtype.type):] if fits(values, w))
        if width != self.values.dtype.type:
            self.values = self.values.astype(width)
            self.type = pa.from_numpy_dtype(width)

    def finish(self) -> pa.Array:
        rows = len(self.values)
        if self.validity.nulls == rows:
            # no value (or no row): in the file's type, as a whole read gives it; its values were never
            # written, so they take no resident memory (``profile.null_column``)
            none = pa.py_buffer(np.zeros((rows + 7) // 8, np.uint8))
            values = pa.py_buffer(np.empty(rows, self.file_type.to_pandas_dtype()))
            return pa.Array.from_buffers(self.file_type, rows, [none, values], null_count=rows)
        return pa.Array.from_buffers(self.type, rows, [self.validity.buffer(), pa.py_buffer(self.values)],
                                     null_count=self.validity.nulls)


class _FloatCodes:
    """A float column as codes while it holds few distinct values (a kernel table's PMU ratios, written to a
    few decimals: 162 and 692 values over 3.1 M kernels); past ``FLOAT_CODES_LIMIT`` of them, as floats."""

    def __init__(self, rows: int, typ: pa.DataType) -> None:
        self.rows, self.type = rows, typ
        self.coded: _Codes | None = _Codes(rows, typ, limit=FLOAT_CODES_LIMIT)
        self.plain: _Numbers | None = None

    def add(self, chunk: pa.Array, at: int) -> None:
        if self.coded is not None:
            try:
                self.coded.add(pc.dictionary_encode(chunk), at)
                return
            except _TooManyValues:
                self.plain = self._decoded(self.coded, at)
                self.coded = None
        assert self.plain is not None
        self.plain.add(chunk, at)

    def _decoded(self, coded: _Codes, rows: int) -> _Numbers:
        """The first ``rows`` rows of ``coded`` as floats (its nulls kept)."""
        plain = _Numbers(self.rows, self.type)
        plain.values[:rows] = np.asarray(coded.values, plain.values.dtype)[coded.codes[:rows]]
        plain.validity = coded.validity
        return plain

    def finish(self) -> pa.Array:
        if self.coded is not None:
            return self.coded.finish()
        assert self.plain is not None
        return self.plain.finish()


class _Chunks:
    """Any other column (lists stored as lists): its row groups' chunks as they come."""

    def __init__(self, typ: pa.DataType) -> None:
        self.type = typ
        self.chunks: list[pa.Array] = []

    def add(self, chunk: pa.Array, at: int) -> None:
        self.chunks.append(chunk)

    def finish(self) -> pa.ChunkedArray:
        return pa.chunked_array(self.chunks, self.type)


def read_compact(path: str | os.PathLike[str], columns: list[str], text: Collection[str],
                 narrow: Mapping[str, type[np.signedinteger[Any]]],
                 coded_floats: Collection[str] = ()) -> pa.Table:
    """``columns`` of the Parquet file at ``path``, ``text`` ones as codes into one dictionary each,
    ``narrow`` 8-byte integers in the narrower type it gives each while they fit and ``coded_floats`` as
    codes while their values are few, one row group at a time (see the module's docstring)."""
    parquet = pq.ParquetFile(path, read_dictionary=[c for c in columns if c in text])
    rows = parquet.metadata.num_rows
    schema = parquet.schema_arrow
    builders: dict[str, _Codes | _FloatCodes | _Numbers | _Chunks] = {}
    for name in columns:
        typ = schema.field(name).type
        value_type = typ.value_type if pa.types.is_dictionary(typ) else typ  # as read: text as a dictionary
        if name in text and (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)):
            builders[name] = _Codes(rows, value_type)
        elif name in coded_floats and pa.types.is_floating(typ):
            builders[name] = _FloatCodes(rows, typ)
        elif pa.types.is_integer(typ) or pa.types.is_floating(typ):
            builders[name] = _Numbers(rows, typ, narrow.get(name) if pa.types.is_int64(typ) else None)
        else:
            builders[name] = _Chunks(typ)
    at = 0
    for group in range(parquet.num_row_groups):
        batch = parquet.read_row_group(group, columns=columns)
        for name, builder in builders.items():
            offset = at
            for chunk in batch.column(name).chunks:
                builder.add(chunk, offset)
                offset += len(chunk)
        at += batch.num_rows
        del batch
    return pa.table({name: builder.finish() for name, builder in builders.items()})
