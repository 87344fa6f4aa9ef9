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
}
DEFAULT_DTYPE_BYTES = 2  # fp16/bf16, what LLM inference mostly runs in


def _as_list_array(column: pa.ChunkedArray | pa.Array, empty_type: pa.DataType) -> pa.Array:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) and arr.null_count:
        arr = pc.if_else(pc.is_null(arr), pa.array([[]] * len(arr), empty_type), arr)
    return arr


@dataclass
class Shapes:
    """Per kernel: a number of slots (tensors); per slot: a number of dims."""

    # int64, len = kernels + 1: slots of kernel i are [slot_offsets[i], slot_offsets[i+1])
    slot_offsets: np.ndarray
    dim_offsets: np.ndarray  # int64, len = slots + 1
    dims: np.ndarray  # int64 values

    @classmethod
    def from_column(cls, column: pa.ChunkedArray | pa.Array) -> Shapes:
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

    @property
    def kernels(self) -> int:
        return len(self.slot_offsets) - 1

    def slot_count(self) -> np.ndarray:
        return np.diff(self.slot_offsets)

    def _slot_index(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """Global slot index of slot ``slot`` of every kernel, and whether it exists."""
        idx = self.slot_offsets[:-1] + slot
        ok = slot < self.slot_count()
        return np.where(ok, idx, 0), ok

    def rank(self, slot: int) -> np.ndarray:
        """Number of dims of that slot (0 where absent)."""
        idx, ok = self._slot_index(slot)
        if len(self.dim_offsets) <= 1:
            return np.zeros(self.kernels, np.int64)
        lens = np.diff(self.dim_offsets)
        return np.where(ok, lens[np.minimum(idx, len(lens) - 1)], 0)

    def dim(self, slot: int, axis: int) -> np.ndarray:
        """Dim ``axis`` (negative counts from the end) of slot ``slot`` per kernel; 0 where absent."""
        idx, ok = self._slot_index(slot)
        r = self.rank(slot)
        ok = ok & ((r > axis) if axis >= 0 else (r >= -axis))
        if not len(self.dims):
            return np.zeros(self.kernels, np.int64)
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

    def elements(self, slot: int) -> np.ndarray:
        idx, ok = self._slot_index(slot)
        per_slot = self.slot_elements()
        if not len(per_slot):
            return np.zeros(self.kernels, np.int64)
        return np.where(ok, per_slot[np.minimum(idx, len(per_slot) - 1)], 0)

    def leading(self, slot: int, keep_last: int) -> np.ndarray:
        """Product of the dims of ``slot`` before its last ``keep_last`` dims (batch count); 1 if none."""
        total = self.elements(slot)
        tail = np.ones(self.kernels, np.int64)
        for axis in range(1, keep_last + 1):
            d = self.dim(slot, -axis)
            tail = tail * np.where(d > 0, d, 1)
        return np.where(tail > 0, total // np.maximum(tail, 1), 1)


def dtype_bytes(column: pa.ChunkedArray | pa.Array, slot_offsets: np.ndarray) -> np.ndarray:
    """Bytes per element of every slot, aligned with ``slot_offsets`` (default 2 where unknown)."""
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
    # Where a kernel lists fewer dtypes than shapes, keep the default for that kernel's slots.
    dt_off = np.asarray(arr.offsets, np.int64) - int(arr.offsets[0].as_py())
    for i in np.nonzero(same)[0]:  # rare path: mismatched rows only on odd readers
        out[slot_offsets[i]:slot_offsets[i + 1]] = per_slot[dt_off[i]:dt_off[i + 1]]
    return out


def tensor_bytes(shapes: Shapes, dtypes: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Total bytes of all tensors of every kernel (inputs or outputs, whichever ``shapes`` holds)."""
    if shapes.kernels == 0:
        return np.zeros(0, np.float64)
    per_slot = shapes.slot_elements().astype(np.float64) * dtype_bytes(dtypes, shapes.slot_offsets)
    cum = np.concatenate([[0.0], np.cumsum(per_slot)])
    per_kernel: np.ndarray = cum[shapes.slot_offsets[1:]] - cum[shapes.slot_offsets[:-1]]
    return per_kernel


def first_dtype_bytes(dtypes: pa.ChunkedArray | pa.Array, slot_offsets: np.ndarray) -> np.ndarray:
    per_slot = dtype_bytes(dtypes, slot_offsets)
    n = len(slot_offsets) - 1
    has = np.diff(slot_offsets) > 0
    if not len(per_slot):
        return np.full(n, DEFAULT_DTYPE_BYTES, np.int64)
    return np.where(has, per_slot[np.minimum(slot_offsets[:-1], len(per_slot) - 1)], DEFAULT_DTYPE_BYTES)
