"""What a kernel's tensors say of its work: (batch, M, K, N) of a MatMul, its FLOPs, the bytes it ideally
moves, its element size and its roofline bound.

Each figure depends only on the kernel's input and output shapes and dtypes and its role, and a run has few
distinct such tuples (a few thousand for millions of kernels). Where the shapes and dtypes are coded (a
projected load), the figures are worked out once per distinct tuple and each kernel reads its group's: no
per-kernel temporaries, and one 4-byte group index a kernel is all that is held. On a 15.7 M-kernel table
the per-kernel figures held 615 MB (the four dims, three float arrays, the element size) and building them
1 GB more at their peak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pypto_core.grouping import code_totals, group_rows, int16_if_fits, int32_if_fits
from pypto_core.hardware import SkuSpec
from pypto_core.op_roles import ROLE
from pypto_core.shapes import Shapes, distinct_values, first_dtype_bytes, is_coded, slot_bytes, tensor_bytes

FIGURES = ("batch", "m", "k", "n", "flops", "bytes_moved", "element_bytes", "bound_ns")


@dataclass
class ShapeFigures:
    """``FIGURES`` per group of kernels, and each kernel's group (None: a group per kernel)."""

    group: np.ndarray | None
    rows: dict[str, np.ndarray]

    def per_kernel(self, name: str) -> np.ndarray:
        """Figure ``name`` of every kernel (a new array where kernels share groups)."""
        return self.spread(self.rows[name])

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        """A value per group (worked out from the figures' rows) given to every kernel of the group."""
        return per_group if self.group is None else per_group[self.group]

    def total(self, name: str, kernels: np.ndarray) -> float:
        """Figure ``name`` summed over the kernels of a mask, counted per group: no array over the kernels
        (the bytes moved of every busy kernel took 190 MB of a 15.7 M-kernel table). For the figures that are
        whole numbers (FLOPs, bytes moved) the sum is exact, so the same as adding kernel by kernel."""
        values = self.rows[name]
        if self.group is None:
            return float(values[kernels].sum())
        counts, _ = code_totals(self.group, len(values), rows=kernels)
        return float((counts * values).sum())

    def value_counts(self, name: str, kernels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values of figure ``name`` over the kernels of a mask, sorted, and how many kernels
        hold each (``np.unique(..., return_counts=True)`` of their figures), counted per group: no array
        over the kernels (a 15.7 M-kernel table's MatMul K dims and their sort took 110 MB)."""
        values = self.rows[name]
        if self.group is None:
            return np.unique(values[kernels], return_counts=True)
        counts, _ = code_totals(self.group, len(values), rows=kernels)
        distinct, of_group = np.unique(values, return_inverse=True)
        per_value = np.bincount(of_group.reshape(-1), weights=counts, minlength=len(distinct))
        held = per_value > 0
        return distinct[held], per_value[held].astype(np.int64)

    def at(self, name: str, kernels: np.ndarray) -> np.ndarray:
        """Figure ``name`` of the kernels ``kernels`` (indices or a mask) only."""
        values = self.rows[name]
        picked: np.ndarray = values[kernels] if self.group is None else values[self.group[kernels]]
        return picked


def shape_figures(input_shapes: Shapes, output_shapes: Shapes, input_dtypes: pa.ChunkedArray | pa.Array,
                  output_dtypes: pa.ChunkedArray | pa.Array, role: np.ndarray, sku: SkuSpec) -> ShapeFigures:
    """The figures of every kernel, once per distinct (shapes, dtypes, role) where all four are coded."""
    coded = (input_shapes.codes is not None and output_shapes.codes is not None and is_coded(input_dtypes)
             and is_coded(output_dtypes))
    if not coded or not len(role):
        every = _figures(input_shapes, output_shapes, input_dtypes, output_dtypes, role, sku)
        return ShapeFigures(None, every)
    assert input_shapes.codes is not None and output_shapes.codes is not None
    # the dtype lists' codes as the shapes' are read (a null row's code one past the dictionary)
    keys = (input_shapes.codes, output_shapes.codes, distinct_values(input_dtypes)[1],
            distinct_values(output_dtypes)[1], role)
    first, group = group_rows(*keys)
    del keys
    take = pa.array(first)
    rows = _figures(input_shapes.at(first), output_shapes.at(first), input_dtypes.take(take),
                    output_dtypes.take(take), role[first], sku)
    # held through the rules: in 2 bytes a kernel where the groups are fewer than 32767 (every profile seen)
    return ShapeFigures(int16_if_fits(group), rows)


def _figures(sh: Shapes, out: Shapes, in_dtypes: pa.ChunkedArray | pa.Array,
             out_dtypes: pa.ChunkedArray | pa.Array, role: np.ndarray, sku: SkuSpec) -> dict[str, np.ndarray]:
    """Every figure of ``FIGURES`` for these rows (kernels, or one kernel of each group)."""
    batch, m, k, n = _mkn(sh, out, role == ROLE["matmul"])
    flops = 2.0 * batch * m * k * n
    element = first_dtype_bytes(sh, in_dtypes)
    moved = _bytes_moved(sh, out, in_dtypes, out_dtypes, role == ROLE["embedding"])
    if sku.known:
        peak = sku.peak_flops_per_s()
        bound = np.maximum(flops / np.where(element == 1, peak * 2, peak), moved / sku.hbm_bytes_per_s) * 1e9
    else:
        bound = np.zeros(len(role))
    return {"batch": batch, "m": m, "k": k, "n": n, "flops": flops, "bytes_moved": moved,
            "element_bytes": element, "bound_ns": bound}


def _mkn(sh: Shapes, out: Shapes, is_mm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(batch, M, K, N) of every MatMul-like row from its first two inputs; zeros elsewhere.

    K is the dim the two inputs share (handles transposed weights); where the inputs disagree, M and N come
    from the output and K from A's inner axis.
    """
    a1, a2 = sh.dim(0, -1), sh.dim(0, -2)
    b1, b2 = sh.dim(1, -1), sh.dim(1, -2)
    a_rank, b_rank = sh.rank(0), sh.rank(1)
    a2 = np.where(a_rank >= 2, a2, 1)  # a 1-D A is a single row
    # Cases (m, k, n): A[M,K] B[K,N]; A[M,K] B[N,K] (transposed weight); A[K,M] B[K,N] (transposed A, a
    # weight gradient); A[K,M] B[N,K]. Two inputs of one shape fit two cases (X[32,4096] with
    # dY[32,4096]: X·dYᵀ is 32x32, Xᵀ·dY is 4096x4096): the output's shape tells which ran, and only
    # where it matches none do the cases go in this order.
    cases = (((a1 == b2) & (a1 > 0) & (b_rank >= 2), a2, a1, b1),
             ((a1 == b1) & (a1 > 0), a2, a1, b2),
             ((a2 == b2) & (a2 > 0) & (a_rank >= 2) & (b_rank >= 2), a1, a2, b1),
             ((a2 == b1) & (a2 > 0) & (a_rank >= 2), a1, a2, b2))
    out_n, out_m, out_rank = out.dim(0, -1), out.dim(0, -2), out.rank(0)
    chosen = np.full(len(a1), -1, np.int64)
    for i, (fits, cm, _ck, cn) in enumerate(cases):
        agrees = (out_n > 0) & (cn == out_n) & ((out_rank < 2) | (cm == out_m))
        chosen[(chosen < 0) & fits & agrees] = i
    for i, (fits, *_dims) in enumerate(cases[:3]):
        chosen[(chosen < 0) & fits] = i
    m, k, n = (np.select([chosen == i for i in range(len(cases))], [c[axis] for c in cases], default=0)
               for axis in (1, 2, 3))
    fallback = (m == 0) & (out_n > 0)
    m = np.where(fallback, np.maximum(out_m, 1), m)
    n = np.where(fallback, out_n, n)
    k = np.where(fallback, a1, k)
    batch = np.where(a_rank > 2, sh.leading(0, 2), 1)
    # dims fit int32 in any real model: 4 bytes a dim where a group per kernel is held
    dims = [int32_if_fits(np.where(is_mm, values, 0)) for values in (batch, m, k, n)]
    return dims[0], dims[1], dims[2], dims[3]


def _bytes_moved(sh: Shapes, out: Shapes, in_dtypes: pa.ChunkedArray | pa.Array,
                 out_dtypes: pa.ChunkedArray | pa.Array, lookup: np.ndarray) -> np.ndarray:
    """Ideal bytes per row: every input read once plus every output written once (docs/domain.md §6 #2)."""
    if not len(lookup):
        return np.zeros(0)
    written = tensor_bytes(out, out_dtypes)
    moved: np.ndarray = tensor_bytes(sh, in_dtypes) + written
    if not lookup.any():
        return moved
    # A lookup touches the rows its indices name, not its whole table: GatherV2 reads of a [151936, 1024]
    # vocabulary the 4096 rows it writes, and the embedding's gradient (EmbeddingDenseGradV2) adds its 4096
    # rows into a table a MemSet zeroed before. Counted whole, the Qwen3 sample's lookup moved 320 MB in
    # 49 µs (6.5 TB/s on a 1.6 TB/s device), its gradient 639 MB in 130 µs.
    rows_in = slot_bytes(sh, in_dtypes, 0)
    gather = lookup & (rows_in > written) & (written > 0)
    moved[gather] += written[gather] - rows_in[gather]
    scatter = lookup & (written > rows_in) & (rows_in > 0)
    moved[scatter] += rows_in[scatter] - written[scatter]
    unknown = lookup & (written == 0) & (rows_in > 0)
    if unknown.any():
        # a Kineto kernel carries its launching op's inputs only: aten::embedding(weight, indices) names its
        # rows in its second input, index_select(self, dim, index) and gather(self, dim, index) in their
        # third; what they name is read once and written once (an H200 decode's token: 4 KB of a 131 MB
        # table). An index of the table's own rank (torch.gather, which the prefill's embedding ran as)
        # names elements, a lower one rows.
        third = sh.slot_count() >= 3
        indices = np.where(third, sh.elements(2), sh.elements(1)).astype(np.float64)
        index_rank = np.where(third, sh.rank(2), sh.rank(1))
        vocab = sh.dim(0, 0).astype(np.float64)
        table_elements = sh.elements(0).astype(np.float64)
        per_index = np.where(index_rank >= sh.rank(0), table_elements, vocab)
        item = np.divide(rows_in, per_index, out=np.zeros(len(lookup)), where=per_index > 0)
        touched = np.minimum(indices * item, rows_in)
        fix = unknown & (touched > 0)
        moved[fix] += 2 * touched[fix] - rows_in[fix]
    return moved
