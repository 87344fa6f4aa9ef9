"""A kernel's input shapes and dtypes from the host op that launched it, for traces whose kernels carry
none (Kineto).

torch_npu's kernel_details gives each kernel the shapes and dtypes of the op it ran for; a Kineto trace
records them only on the ``cpu_op`` (``Input Dims``, ``Input type``), which the kernel reaches by its
``External id`` (the ``flows`` row). That op is the innermost one that launched it (``aten::mm [[1, 2048],
[2048, 32000]]`` of ``c10::BFloat16`` for a GEMM), so its shapes are what the MatMul dims, the LM head and
the decode token rows are read from, and its dtypes what the bytes and the peak (an FP8 GEMM runs at twice
the bf16 rate) are.

The texts are the profiler's JSON and untrusted: each distinct text is parsed once, a slot that is not a
list of ints becomes an empty slot, a tensor list (``aten::cat``) gives one slot per tensor, and a text too
long or malformed gives nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypto_core.profile import TABLE_SCHEMAS

SHAPES_TYPE = TABLE_SCHEMAS["kernels"].field("input_shapes").type
COPY_TYPES = pa.array(["MEMCPY", "MEMSET"])  # the kernels' core types that copy or fill, computing nothing
MAX_TEXT = 4096  # longer Input Dims text is not a tensor op's shapes (bounded work per distinct text)
MAX_SLOTS = 64
MAX_TYPE_NAME = 64
TYPES_TYPE = TABLE_SCHEMAS["kernels"].field("input_dtypes").type


def _json_list(text: str | None) -> list[Any] | None:
    """The profiler's JSON text of a list, bounded (``MAX_TEXT``); None where it is not one."""
    if not text or len(text) > MAX_TEXT:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def parse_dims(text: str | None) -> list[list[int]] | None:
    """``"[[1, 2048], [2048, 32000], []]"`` -> ``[[1, 2048], [2048, 32000], []]``; None where the text says
    nothing usable."""
    value = _json_list(text)
    if value is None:
        return None
    slots: list[list[int]] = []
    for slot in value:
        if isinstance(slot, list) and slot and all(isinstance(t, list) for t in slot):
            slots.extend(_dims(t) for t in slot)  # a tensor list: one slot per tensor
        else:
            slots.append(_dims(slot))
    slots = slots[:MAX_SLOTS]
    return slots if any(slots) else None


def parse_types(text: str | None) -> list[str] | None:
    """``'["c10::BFloat16", "long int", "Scalar"]'`` -> that list; None where the text says nothing usable
    (each name kept short: a dtype's name, never a payload)."""
    value = _json_list(text)
    if not value:
        return None
    return [v[:MAX_TYPE_NAME] if isinstance(v, str) else "" for v in value[:MAX_SLOTS]]


def _dims(slot: object) -> list[int]:
    if isinstance(slot, list) and all(type(d) is int and 0 <= d < 2**62 for d in slot):
        return list(slot)
    return []


def launch_codes(kernels: int, kernel_index: np.ndarray, host_index: np.ndarray,
                 host_texts: pa.ChunkedArray | pa.Array, parse: Callable[[str | None], list[Any] | None],
                 value_type: pa.DataType) -> tuple[np.ndarray, pa.Array]:
    """Per kernel the code of its launching op's text (-1: none) and the parsed values by code (``parse``:
    ``parse_dims`` or ``parse_types``).

    ``kernel_index``/``host_index``: the flows' pairs (host -1 where the kernel links to no op). Only the
    linked host rows' codes are taken: a 5 GB trace holds 6.8 M host ops for 1.6 M kernels."""
    column = host_texts.combine_chunks() if isinstance(host_texts, pa.ChunkedArray) else host_texts
    encoded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    parsed = [parse(t) for t in encoded.dictionary.to_pylist()]
    usable = np.array([p is not None for p in parsed] + [False], bool)
    linked = host_index >= 0
    picked = pc.take(encoded.indices, pa.array(host_index[linked]))
    del encoded
    # -1 (a null text) reads the appended False
    picked_codes = pc.fill_null(picked, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    picked_codes[~usable[picked_codes]] = -1
    codes = np.full(kernels, -1, np.int32)
    codes[kernel_index[linked]] = picked_codes
    values = pa.array([p if p is not None else [] for p in parsed], value_type)
    return codes, values


# What a kernel takes from its launching op: the host column, how its text is read, the kernels' column.
_LAUNCHED: tuple[tuple[str, Callable[[str | None], list[Any] | None], pa.DataType, str], ...] = (
    ("input_shapes", parse_dims, SHAPES_TYPE, "input_shapes"),
    ("input_types", parse_types, TYPES_TYPE, "input_dtypes"),
)


def filler(kernels: int, flows: pa.Table | None, host: dict[str, pa.ChunkedArray | None]
           ) -> Callable[[pa.Table], pa.Table] | None:
    """A transform that gives the kernel rows passed to it in order (the whole table, or a file's row
    groups one after another) their launching ops' shapes and dtypes (``host``: the host ops' columns by
    name, ``input_shapes`` and ``input_types``); None where there is nothing to give: no links, or neither
    on the host."""
    if not kernels or flows is None or not flows.num_rows:
        return None
    kernel_index = pc.fill_null(flows["kernel_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
    host_index = pc.fill_null(flows["host_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
    if not (host_index >= 0).any():  # kernels linked to no op (older traces): the host texts are not read
        return None
    given: list[tuple[str, np.ndarray, pa.Array]] = []
    for host_column, parse, value_type, kernel_column in _LAUNCHED:
        texts = host.get(host_column)
        if texts is None or texts.null_count == len(texts):
            continue
        ok = (kernel_index >= 0) & (kernel_index < kernels) & (host_index < len(texts))
        codes, values = launch_codes(kernels, kernel_index[ok], host_index[ok], texts, parse, value_type)
        if (codes >= 0).any():
            given.append((kernel_column, codes, values))
    del kernel_index, host_index
    if not given:
        return None
    done = [0]

    def fill(rows: pa.Table) -> pa.Table:
        lo = done[0]
        done[0] += rows.num_rows
        copies = np.zeros(rows.num_rows, bool)
        if "core_type" in rows.column_names:
            # a copy or a memset its op issued (aten::linear's Memset of the output) computes nothing of the
            # op: its bytes are its own, and the op's shapes would plot it as a MatMul on the roofline
            copies = pc.fill_null(pc.is_in(rows["core_type"], COPY_TYPES), False).to_numpy(
                zero_copy_only=False)
        for kernel_column, codes, values in given:
            part = codes[lo:done[0]]
            column = pc.take(values, pa.array(part, pa.int32(), mask=(part < 0) | copies))
            rows = rows.set_column(rows.column_names.index(kernel_column), kernel_column, column)
        return rows

    return fill


def saved_links(folder: Path) -> tuple[pa.Table | None, dict[str, pa.ChunkedArray | None]]:
    """The flows and the host ops' shape and dtype texts of a profile folder being written (what ``filler``
    takes)."""
    flows_path, host_path = folder / "flows.parquet", folder / "host_ops.parquet"
    if not (flows_path.exists() and host_path.exists()):
        return None, {}
    flows = pq.read_table(flows_path, columns=["kernel_index", "host_index"])
    if flows["host_index"].null_count == flows.num_rows:  # kernels linked to no op (older traces)
        return None, {}
    present = set(pq.read_schema(host_path).names)
    wanted = [name for name, *_ in _LAUNCHED if name in present]
    host = pq.read_table(host_path, columns=wanted, read_dictionary=wanted)
    return flows, {name: host[name] for name in wanted}
