"""A kernel's input shapes from the host op that launched it, for traces whose kernels carry none (Kineto).

torch_npu's kernel_details gives each kernel the shapes of the op it ran for; a Kineto trace records them
only on the ``cpu_op`` (``Input Dims``), which the kernel reaches by its ``External id`` (the ``flows``
row). That op is the innermost one that launched it (``aten::mm [[1, 2048], [2048, 32000]]`` for a GEMM),
so its shapes are what the MatMul dims, the LM head and the decode token rows are read from.

``Input Dims`` is the profiler's JSON text and untrusted: each distinct text is parsed once, a slot that is
not a list of ints becomes an empty slot, a tensor list (``aten::cat``) gives one slot per tensor, and a
text too long or malformed gives no shapes at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.profile import TABLE_SCHEMAS

SHAPES_TYPE = TABLE_SCHEMAS["kernels"].field("input_shapes").type
COPY_TYPES = pa.array(["MEMCPY", "MEMSET"])  # the kernels' core types that copy or fill, computing nothing
MAX_TEXT = 4096  # longer Input Dims text is not a tensor op's shapes (bounded work per distinct text)
MAX_SLOTS = 64


def parse_dims(text: str | None) -> list[list[int]] | None:
    """``"[[1, 2048], [2048, 32000], []]"`` -> ``[[1, 2048], [2048, 32000], []]``; None where the text says
    nothing usable."""
    if not text or len(text) > MAX_TEXT:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    slots: list[list[int]] = []
    for slot in value:
        if isinstance(slot, list) and slot and all(isinstance(t, list) for t in slot):
            slots.extend(_dims(t) for t in slot)  # a tensor list: one slot per tensor
        else:
            slots.append(_dims(slot))
    slots = slots[:MAX_SLOTS]
    return slots if any(slots) else None


def _dims(slot: object) -> list[int]:
    if isinstance(slot, list) and all(type(d) is int and 0 <= d < 2**62 for d in slot):
        return list(slot)
    return []


def kernel_shape_codes(kernels: int, kernel_index: np.ndarray, host_index: np.ndarray,
                       host_shapes: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Per kernel the code of its launching op's shapes (-1: none) and the parsed shapes by code.

    ``kernel_index``/``host_index``: the flows' pairs (host -1 where the kernel links to no op). Only the
    linked host rows' codes are taken: a 5 GB trace holds 6.8 M host ops for 1.6 M kernels."""
    column = host_shapes.combine_chunks() if isinstance(host_shapes, pa.ChunkedArray) else host_shapes
    encoded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    parsed = [parse_dims(t) for t in encoded.dictionary.to_pylist()]
    usable = np.array([p is not None for p in parsed] + [False], bool)
    linked = host_index >= 0
    picked = pc.take(encoded.indices, pa.array(host_index[linked]))
    del encoded
    # -1 (a null text) reads the appended False
    picked_codes = pc.fill_null(picked, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    picked_codes[~usable[picked_codes]] = -1
    codes = np.full(kernels, -1, np.int32)
    codes[kernel_index[linked]] = picked_codes
    values = pa.array([p if p is not None else [] for p in parsed], SHAPES_TYPE)
    return codes, values


def filler(kernels: int, flows: pa.Table | None, host_shapes: pa.ChunkedArray | None
           ) -> Callable[[pa.Table], pa.Table] | None:
    """A transform that gives the kernel rows passed to it in order (the whole table, or a file's row
    groups one after another) their launching ops' shapes; None where there is nothing to give: no
    links, or no shapes on the host."""
    if not kernels or flows is None or not flows.num_rows or host_shapes is None:
        return None
    if host_shapes.null_count == len(host_shapes):
        return None
    kernel_index = pc.fill_null(flows["kernel_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
    host_index = pc.fill_null(flows["host_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
    ok = (kernel_index >= 0) & (kernel_index < kernels) & (host_index < len(host_shapes))
    codes, values = kernel_shape_codes(kernels, kernel_index[ok], host_index[ok], host_shapes)
    del kernel_index, host_index, ok
    if not (codes >= 0).any():
        return None
    done = [0]

    def fill(rows: pa.Table) -> pa.Table:
        lo = done[0]
        done[0] += rows.num_rows
        part = codes[lo:done[0]]
        none = part < 0
        if "core_type" in rows.column_names:
            # a copy or a memset its op issued (aten::linear's Memset of the output) computes nothing of the
            # op: its bytes are its own, and the op's shapes would plot it as a MatMul on the roofline
            copies = pc.fill_null(pc.is_in(rows["core_type"], COPY_TYPES), False)
            none = none | copies.to_numpy(zero_copy_only=False)
        column = pc.take(values, pa.array(part, pa.int32(), mask=none))
        return rows.set_column(rows.column_names.index("input_shapes"), "input_shapes", column)

    return fill


def saved_links(folder: Path) -> tuple[pa.Table | None, pa.ChunkedArray | None]:
    """The flows and the host ops' shapes of a profile folder being written (what ``filler`` takes)."""
    flows_path, host_path = folder / "flows.parquet", folder / "host_ops.parquet"
    if not (flows_path.exists() and host_path.exists()):
        return None, None
    flows = pq.read_table(flows_path, columns=["kernel_index", "host_index"])
    if flows["host_index"].null_count == flows.num_rows:  # kernels linked to no op (older traces)
        return None, None
    host = pq.read_table(host_path, columns=["input_shapes"], read_dictionary=["input_shapes"])
    return flows, host["input_shapes"]
