"""Columnar views of the kernels' ``input_shapes``/``output_shapes`` (list<list<int64>>) and dtypes.

The rules need per-kernel dims (M, K, N of a MatMul, the last dim of a cache tensor) and byte counts for
millions of kernels, so everything here works on flat numpy arrays (values + offsets), never one Python
list per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.grouping import int32_if_fits

# Bytes per element, keyed by the dtype spellings kernel_details / op_summary / Kineto use (docs/formats.md
# §0.3).
DTYPE_BYTES: dict[str, int] = {
    "float16": 2, "dt_float16": 2, "fp16": 2, "half": 2, "float16_t": 2,
    "bf16": 2, "dt_bf16": 2, "bfloat16": 2,
    "float": 4, "float32": 4, "dt_float": 4, "fp32": 4, "dt_float32": 4,
    "double": 8, "float64": 8, "dt_double": 8,
    "int8": 1, "dt_int8": 1, "uint8": 1, "dt_uint8": 1, "bool": 1, "dt_bool": 1,
    "int16": 2, "dt_int16": 2, "uint16": 2,
    "int32": 4, "dt_int32": 4, "uint32": 4, "dt_uint32": 4,
    "int64": 8, "dt_int64": 8, "uint64": 8, "dt_uint64": 8,
    "int4": 1, "dt_int4": 1,  # packed two per byte; one byte is a safe upper bound
    "complex64": 8,
    # PyTorch's names, as a Kineto trace's ``Input type`` gives them (lower-cased)
    "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2,
    "signed char": 1, "unsigned char": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
    "c10::float8_e4m3fnuz": 1, "c10::float8_e5m2fnuz": 1, "c10::complex<float>": 8,
}
DEFAULT_DTYPE_BYTES = 2  # fp16/bf16, what LLM inference mostly runs in


def _as_list_array(column: pa.ChunkedArray | pa.Array, empty_type: pa.DataType) -> pa.Array:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) and arr.null_count:
        arr = pc.if_else(pc.is_null(arr), pa.array([[]] * len(arr), empty_type), arr)
    return arr


def is_coded(column: pa.ChunkedArray | pa.Array) -> bool:
    """A list column kept dictionary-encoded (``Profile.load(columns=...)``): per kernel a code into the
    distinct values, which are all that is parsed and held."""
    return bool(pa.types.is_dictionary(column.type))


def distinct_values(column: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(values, codes) of a dictionary-encoded column: its distinct values plus a last null one, and per
    row the index of its value (a null row points at the null)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = pa.concat_arrays([arr.dictionary, pa.nulls(1, arr.dictionary.type)])
    # in the loaded codes' own width where it holds the null's code (a projected load leaves that code free,
    # ``compact_read``): 1 or 2 bytes a kernel, where int32 held 120 MB for a 15.7 M-kernel table's input and
    # output shapes; at most 4. Whoever does arithmetic on them widens first.
    index = arr.indices.type
    width = index if pa.types.is_signed_integer(index) and len(values) - 1 < 2 ** (index.bit_width - 1) \
        and index.bit_width <= 32 else pa.int32()
    codes = pc.fill_null(arr.indices.cast(width), len(values) - 1).to_numpy(zero_copy_only=False)
    return values, codes


def decoded(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A list column with one list per row (a dictionary-encoded one expanded)."""
    return column.dictionary_decode() if is_coded(column) else column


@dataclass
class Shapes:
    """Per kernel: a number of slots (tensors); per slot: a number of dims.

    The arrays describe rows: one per kernel, or, for a dictionary-encoded column (``codes`` set), one per
    distinct shape list, the kernels pointing at theirs (a few hundred distinct lists for millions of
    kernels: every per-kernel figure is computed once per distinct list, then gathered by code).
    """

    slot_offsets: np.ndarray  # int64, len = rows + 1: slots of row i are [slot_offsets[i], slot_offsets[i+1])
    dim_offsets: np.ndarray  # int64, len = slots + 1
    dims: np.ndarray  # int64 values
    codes: np.ndarray | None = None  # per kernel, its row; None: row i is kernel i
    values: pa.Array | None = None  # the rows as list<list<int64>> when coded

    @classmethod
    def from_column(cls, column: pa.ChunkedArray | pa.Array) -> Shapes:
        if is_coded(column):
            values, codes = distinct_values(column)
            rows = cls.from_column(values)
            rows.codes, rows.values = codes, values
            return rows
        arr = _as_list_array(column, pa.list_(pa.list_(pa.int64())))
        if len(arr) == 0:
            return cls(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64))
        slot_offsets = np.asarray(arr.offsets, dtype=np.int64)
        slot_offsets = slot_offsets - slot_offsets[0]
        slots = arr.flatten()
        slots = _as_list_array(slots, pa.list_(pa.int64()))
        dim_offsets = np.asarray(slots.offsets, dtype=np.int64)
        dim_offsets = dim_offsets - (dim_offsets[0] if len(dim_offsets) else 0)
        dims = pc.fill_null(slots.flatten(), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if len(dim_offsets) == 0:
            dim_offsets = np.zeros(1, np.int64)
        return cls(slot_offsets, dim_offsets, dims)

    def at(self, kernels: np.ndarray) -> Shapes:
        """The same shapes seen by the kernels ``kernels`` only (e.g. one kernel of each distinct shape
        pair): per-kernel figures then come out one per listed kernel."""
        rows = self.codes[kernels] if self.codes is not None else np.asarray(kernels, np.int64)
        return Shapes(self.slot_offsets, self.dim_offsets, self.dims, codes=rows, values=self.values)

    @property
    def kernels(self) -> int:
        return len(self.codes) if self.codes is not None else self._rows

    @property
    def _rows(self) -> int:
        return len(self.slot_offsets) - 1

    def _per_kernel(self, per_row: np.ndarray) -> np.ndarray:
        return per_row if self.codes is None else per_row[self.codes]

    def slot_count(self) -> np.ndarray:
        return self._per_kernel(np.diff(self.slot_offsets))

    def rank(self, slot: int) -> np.ndarray:
        """Number of dims of that slot (0 where absent)."""
        return self._per_kernel(self._row_rank(slot))

    def dim(self, slot: int, axis: int) -> np.ndarray:
        """Dim ``axis`` (negative counts from the end) of slot ``slot`` per kernel; 0 where absent."""
        return self._per_kernel(self._row_dim(slot, axis))

    def elements(self, slot: int) -> np.ndarray:
        return self._per_kernel(self._row_elements(slot))

    def leading(self, slot: int, keep_last: int) -> np.ndarray:
        """Product of the dims of ``slot`` before its last ``keep_last`` dims (batch count); 1 if none."""
        total = self._row_elements(slot)
        tail = np.ones(self._rows, np.int64)
        for axis in range(1, keep_last + 1):
            d = self._row_dim(slot, -axis)
            tail = tail * np.where(d > 0, d, 1)
        return self._per_kernel(np.where(tail > 0, total // np.maximum(tail, 1), 1))

    def _slot_index(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """Global slot index of slot ``slot`` of every row, and whether it exists."""
        idx = self.slot_offsets[:-1] + slot
        ok = slot < np.diff(self.slot_offsets)
        return np.where(ok, idx, 0), ok

    def _row_rank(self, slot: int) -> np.ndarray:
        idx, ok = self._slot_index(slot)
        if len(self.dim_offsets) <= 1:
            return np.zeros(self._rows, np.int64)
        lens = np.diff(self.dim_offsets)
        return np.where(ok, lens[np.minimum(idx, len(lens) - 1)], 0)

    def _row_dim(self, slot: int, axis: int) -> np.ndarray:
        idx, ok = self._slot_index(slot)
        r = self._row_rank(slot)
        ok = ok & ((r > axis) if axis >= 0 else (r >= -axis))
        if not len(self.dims):
            return np.zeros(self._rows, np.int64)
        start = self.dim_offsets[np.minimum(idx, len(self.dim_offsets) - 2)]
        pos = start + axis if axis >= 0 else start + r + axis
        pos = np.clip(pos, 0, len(self.dims) - 1)
        return np.where(ok, self.dims[pos], 0)

    def slot_elements(self) -> np.ndarray:
        """Element count of every slot (a scalar slot with no dims counts 1, an absent one 0)."""
        n_slots = len(self.dim_offsets) - 1
        if n_slots <= 0:
            return np.zeros(0, np.int64)
        lens = np.diff(self.dim_offsets)
        out = np.ones(n_slots, np.int64)
        nonempty = lens > 0
        if nonempty.any() and len(self.dims):
            starts = self.dim_offsets[:-1][nonempty]
            out[nonempty] = np.multiply.reduceat(np.maximum(self.dims, 0), starts)
        return out

    def _row_elements(self, slot: int) -> np.ndarray:
        idx, ok = self._slot_index(slot)
        per_slot = self.slot_elements()
        if not len(per_slot):
            return np.zeros(self._rows, np.int64)
        return np.where(ok, per_slot[np.minimum(idx, len(per_slot) - 1)], 0)


def dtype_bytes(column: pa.ChunkedArray | pa.Array, slot_offsets: np.ndarray) -> np.ndarray:
    """Bytes per element of every slot, aligned with ``slot_offsets`` (default 2 where unknown); one list
    of dtypes per row of ``slot_offsets``."""
    arr = _as_list_array(column, pa.list_(pa.string()))
    n_slots = int(slot_offsets[-1]) if len(slot_offsets) else 0
    out = np.full(n_slots, DEFAULT_DTYPE_BYTES, np.int64)
    if len(arr) == 0 or n_slots == 0:
        return out
    names = pc.utf8_lower(pc.fill_null(arr.flatten(), ""))
    uniq = pc.unique(names)
    lut = np.array([DTYPE_BYTES.get(u, DEFAULT_DTYPE_BYTES) for u in uniq.to_pylist()], np.int64)
    codes = pc.index_in(names, value_set=uniq).to_numpy(zero_copy_only=False)
    per_slot = lut[codes] if len(codes) else np.zeros(0, np.int64)
    counts = np.diff(np.asarray(arr.offsets, np.int64))
    same = counts == np.diff(slot_offsets)
    if same.all() and len(per_slot) == n_slots:
        return per_slot
    # Where a row lists as many dtypes as shapes, its slots take them; elsewhere they keep the default.
    # Gathered at once: a slot's dtype is the one at the same position in its row's list.
    dt_off = np.asarray(arr.offsets, np.int64) - int(arr.offsets[0].as_py())
    slot_row = np.repeat(np.arange(len(counts)), np.diff(slot_offsets))
    take = np.flatnonzero(same[slot_row])
    out[take] = per_slot[dt_off[slot_row[take]] + take - slot_offsets[slot_row[take]]]
    return out


def _aligned(shapes: Shapes,
             dtypes: pa.ChunkedArray | pa.Array) -> tuple[Shapes, pa.Array, np.ndarray | None]:
    """Shapes and dtypes row for row, and per kernel its row (None: a row per kernel). Both coded: one row
    per distinct (shape list, dtype list) pair the kernels have, so each pair is computed once."""
    if shapes.codes is not None and shapes.values is not None and is_coded(dtypes):
        dtype_values, dtype_codes = distinct_values(dtypes)
        # the pair code worked in place, and each kernel's row in 4 bytes: 12 bytes a kernel at once, where
        # the pair's expression and an int64 row took 32 (110 MB on a 3.1 M-kernel table's bytes moved)
        pair = shapes.codes.astype(np.int64)
        pair *= len(dtype_values)
        pair += dtype_codes
        del dtype_codes
        size = len(shapes.values) * len(dtype_values)
        if size <= 4 * len(pair) + 1024:  # a table of every pair: O(n)
            seen = np.zeros(size, np.int32 if size < 2**31 else np.int64)
            seen[pair] = 1
            distinct = np.flatnonzero(seen)
            seen[distinct] = np.arange(len(distinct))
            inverse = seen[pair]
            del seen
        else:
            distinct, inverse = np.unique(pair, return_inverse=True)
            inverse = int32_if_fits(inverse)
        del pair
        rows = Shapes.from_column(shapes.values.take(pa.array(distinct // len(dtype_values))))
        return rows, dtype_values.take(pa.array(distinct % len(dtype_values))), inverse.reshape(-1)
    if shapes.codes is not None and shapes.values is not None:
        shapes = Shapes.from_column(shapes.values.take(pa.array(shapes.codes)))
    return shapes, decoded(dtypes), None


def _gathered(per_row: np.ndarray, inverse: np.ndarray | None) -> np.ndarray:
    return per_row if inverse is None else per_row[inverse]


def tensor_bytes(shapes: Shapes, dtypes: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Total bytes of all tensors of every kernel (inputs or outputs, whichever ``shapes`` holds)."""
    if shapes.kernels == 0:
        return np.zeros(0, np.float64)
    rows, row_dtypes, inverse = _aligned(shapes, dtypes)
    per_slot = rows.slot_elements().astype(np.float64) * dtype_bytes(row_dtypes, rows.slot_offsets)
    cum = np.concatenate([[0.0], np.cumsum(per_slot)])
    return _gathered(cum[rows.slot_offsets[1:]] - cum[rows.slot_offsets[:-1]], inverse)


def slot_bytes(shapes: Shapes, dtypes: pa.ChunkedArray | pa.Array, slot: int) -> np.ndarray:
    """Bytes of tensor ``slot`` of every kernel (float); 0 where the kernel has no such slot."""
    rows, row_dtypes, inverse = _aligned(shapes, dtypes)
    per_slot = dtype_bytes(row_dtypes, rows.slot_offsets)
    if not len(per_slot):
        return np.zeros(shapes.kernels)
    idx = rows.slot_offsets[:-1] + slot
    ok = slot < np.diff(rows.slot_offsets)
    width = per_slot[np.clip(idx, 0, len(per_slot) - 1)]
    return _gathered(np.where(ok, rows._row_elements(slot) * width, 0).astype(np.float64), inverse)


def first_dtype_bytes(shapes: Shapes, dtypes: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Bytes per element of every kernel's first tensor (the default where it has none), as int8: no dtype
    in ``DTYPE_BYTES`` is wider than 8 bytes, and a byte a kernel is what this array holds."""
    rows, row_dtypes, inverse = _aligned(shapes, dtypes)
    slot_offsets = rows.slot_offsets
    per_slot = dtype_bytes(row_dtypes, slot_offsets)
    n = len(slot_offsets) - 1
    has = np.diff(slot_offsets) > 0
    if not len(per_slot):
        return _gathered(np.full(n, DEFAULT_DTYPE_BYTES, np.int8), inverse)
    per_row = np.where(has, per_slot[np.minimum(slot_offsets[:-1], len(per_slot) - 1)], DEFAULT_DTYPE_BYTES)
    return _gathered(per_row.astype(np.int8), inverse)
