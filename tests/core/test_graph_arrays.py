"""The call graph's per-kernel arrays, kept narrow and worked out without sorted copies where the kernels
are already in order (issue 20), give what the plain formulas give: the gap before each kernel, the busy
union, the MTE2 share, the findings' combined saving; ids too large for int32 stay exact."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_core.graph import OperatorCallGraph
from pypto_core.profile import Profile, ProfileMeta
from pypto_core.rules.context import Coverage, combined_saving_ns


def _graph(start: list[int], dur: list[int], device: list[int], stream: list[int] | None = None,
           **columns: pa.Array) -> OperatorCallGraph:
    n = len(start)
    kernels = pa.table({"start_ns": pa.array(start, pa.int64()), "dur_ns": pa.array(dur, pa.int64()),
                        "device_id": pa.array(device, pa.int64()),
                        "stream_id": pa.array(stream if stream is not None else [1] * n, pa.int64()),
                        "name": pa.array(["k"] * n), "op_type": pa.array(["Add"] * n), **columns})
    return OperatorCallGraph(Profile(meta=ProfileMeta(format="ascend_pt", device="910B3"), kernels=kernels))


def _gaps_reference(start: np.ndarray, end: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Per kernel: the time since every earlier-starting kernel of its device ended (0 if none ended)."""
    gap = np.zeros(len(start), np.int64)
    order = np.lexsort((start, device))
    for pos, i in enumerate(order):
        earlier = [j for j in order[:pos] if device[j] == device[i]]
        if earlier:
            gap[i] = max(start[i] - max(end[j] for j in earlier), 0)
    return gap


_KERNELS = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50), st.integers(0, 2)), min_size=1,
                    max_size=40)


@settings(max_examples=200, deadline=None)
@given(_KERNELS, st.booleans())
def test_gap_before_each_kernel_is_the_plain_formula(rows: list[tuple[int, int, int]],
                                                     in_order: bool) -> None:
    if in_order:  # one device, stored by start: the path with no sorted copies
        rows = sorted((s, d, 0) for s, d, _ in rows)
    start, dur, device = (list(c) for c in zip(*rows))
    g = _graph(start, dur, device)
    expected = _gaps_reference(np.array(start), np.array(start) + np.array(dur), np.array(device))
    np.testing.assert_array_equal(g.gap_before_ns, expected)
    assert g.gap_before_ns.dtype == np.int32  # every gap here is under 2.1 s
    import pypto_core.graph as graph_module

    kept = graph_module._END_SLICE
    graph_module._END_SLICE = 3  # slices of three kernels: the running end carried across their edges
    try:
        sliced = _graph(start, dur, device)
        np.testing.assert_array_equal(sliced.gap_before_ns, expected)
        assert sliced.last_end == max(s + d for s, d in zip(start, dur))
    finally:
        graph_module._END_SLICE = kept


def test_a_gap_past_int32_keeps_eight_bytes() -> None:
    """Gaps are kept in 4 bytes only where every one fits: an idle device for 3 s (data loading between
    steps) keeps them all in 8."""
    g = _graph([0, 10, 3_000_000_010], [5, 5, 5], [0, 0, 0])
    assert g.gap_before_ns.dtype == np.int64 and g.gap_before_ns.tolist() == [0, 5, 2_999_999_995]
    import pypto_core.graph as graph_module

    kept = graph_module._END_SLICE
    graph_module._END_SLICE = 2  # the wide gap in the second slice: the first slice's were kept in 4 bytes
    try:
        g = _graph([0, 10, 3_000_000_010], [5, 5, 5], [0, 0, 0])
        assert g.gap_before_ns.dtype == np.int64 and g.gap_before_ns.tolist() == [0, 5, 2_999_999_995]
    finally:
        graph_module._END_SLICE = kept




def test_mte2_share_is_the_larger_known_ratio_and_minus_one_where_neither_is() -> None:
    nan = float("nan")
    aic = pa.array([0.2, nan, nan, 0.9, None], pa.float64())
    aiv = pa.array([0.5, 0.3, nan, 0.1, None], pa.float64())
    g = _graph([0, 10, 20, 30, 40], [5] * 5, [0] * 5, aic_mte2_ratio=aic, aiv_mte2_ratio=aiv)
    mf = g.move_fraction()
    assert mf is not None and mf.tolist() == [0.5, 0.3, -1.0, 0.9, -1.0]
    # of some kernels only: theirs, and "known" stays the profile's (these two have none of their own)
    some = g.move_fraction(np.array([False, False, True, False, True]))
    assert some is not None and some.tolist() == [-1.0, -1.0]
    assert g.move_fraction(np.array([3, 1])).tolist() == [0.9, 0.3]  # type: ignore[union-attr]
    # one column only, read straight from Arrow's buffer (read-only): worked on in a copy of its own
    only = _graph([0, 10], [5, 5], [0, 0], aic_mte2_ratio=pa.array([0.4, 0.6], pa.float64()))
    only_mf = only.move_fraction()
    assert only_mf is not None and only_mf.tolist() == [0.4, 0.6]


def test_ids_and_dims_narrow_only_where_they_fit() -> None:
    g = _graph([0, 10, 20], [5, 5, 5], [0, 0, 1], stream=[3, 7, 2**40])
    assert g.device.dtype == np.int32
    assert g.stream.dtype == np.int64 and g.stream[2] == 2**40  # a stream id past int32 stays exact
    assert g.stream_order.dtype == np.int32
    # what the rules hold per kernel in 2 bytes while the steps and op types are fewer than 32767
    assert g.tokens.step_of_kernel.dtype == np.int16 and g.op_codes[0].dtype == np.int16


def _combined_reference(g: OperatorCallGraph, coverage: list[Coverage]) -> float:
    """The combined saving over every kernel of the run (what ``combined_saving_ns`` did before it worked on
    the named kernels only)."""
    from pypto_core.intervals import union_length

    total = np.zeros(g.n)
    for c in coverage:
        np.add.at(total, c.kernels, c.saving_ns)
    dur = g.dur.astype(np.float64)
    gap = np.minimum(np.maximum(total - dur, 0.0), g.gap_before_ns.astype(np.float64))
    busy = float(np.minimum(total, dur).sum())
    a = g.attribution
    if a is not None:
        b = a.run.buckets
        busy = min(busy, float(b["compute"] + b["communication_not_overlapped"] + b["memcpy"]))
    has = gap > 0
    starts = [c.intervals[0] for c in coverage if c.intervals is not None]
    ends = [c.intervals[1] for c in coverage if c.intervals is not None]
    starts.append((g.start[has] - gap[has]).astype(np.int64))
    ends.append(g.start[has].astype(np.int64))
    closed = union_length(np.concatenate(starts), np.concatenate(ends))
    return busy + closed + sum(c.extra_ns for c in coverage)


@pytest.mark.parametrize("seed", range(5))
def test_combined_saving_over_the_named_kernels_is_the_whole_run_formula(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    start = np.sort(rng.integers(0, 100_000, n))
    g = _graph(start.tolist(), rng.integers(1, 400, n).tolist(), [0] * n)
    coverage = []
    for _ in range(3):  # findings naming overlapping sets of kernels, one with closed intervals too
        kernels = np.sort(rng.choice(n, size=int(rng.integers(1, 60)), replace=False))
        coverage.append(Coverage(kernels=kernels, saving_ns=rng.uniform(0, 600, len(kernels)),
                                 extra_ns=float(rng.integers(0, 100))))
    coverage[0].intervals = (np.array([10, 5000], np.int64), np.array([900, 7000], np.int64))
    assert combined_saving_ns(g, coverage) == pytest.approx(_combined_reference(g, coverage), rel=1e-12)


@pytest.mark.parametrize(("distinct", "index"), [(5, pa.int8()), (126, pa.int8()), (127, pa.int16()),
                                                 (40_000, pa.int32())])
def test_a_projected_load_keeps_codes_as_narrow_as_their_dictionary(tmp_path, distinct: int,
                                                                    index: pa.DataType) -> None:
    """Dictionary codes take 1 or 2 bytes where the dictionary is that small, one code left free for the
    null code ``distinct_values`` appends; the values read back are the same."""
    import pyarrow.parquet as pq

    from pypto_core.profile import read_table
    from pypto_core.shapes import distinct_values

    names = [f"op_{i % distinct}" for i in range(max(distinct, 1000))] + [None]
    path = tmp_path / "kernels.parquet"
    pq.write_table(pa.table({"name": names, "start_ns": list(range(len(names)))}), path)
    table = read_table(path, "kernels", {"name", "start_ns"}, dictionary_text=True)
    assert table.schema.field("name").type.index_type == index
    assert table["name"].cast(pa.string()).to_pylist() == names
    values, codes = distinct_values(table["name"])  # the null code is one past the dictionary
    assert codes[-1] == len(values) - 1 and values[int(codes[-1])].as_py() is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([-128, -1, 0, 1, 126, 127]),
                          st.sampled_from([-1, 0, 5, 127])), min_size=1, max_size=40))
def test_the_stream_order_of_kernels_in_start_order_is_the_lexsort(rows) -> None:
    """Kernels stored in start order (ties included) are put in stream order by their device and stream
    alone, a slice of three rows at a time, with 1-byte ids at their limits: the lexsort's order. The chains
    found in it then hold their members' rows, so the order can be let go."""
    import pypto_core.grouping as grouping

    start = np.cumsum([gap for gap, _, _ in rows]).astype(np.int64)
    device = np.array([d for _, d, _ in rows], np.int8)
    stream = np.array([s for _, _, s in rows], np.int8)
    kept = grouping._SLICE
    grouping._SLICE = 3
    try:
        order = grouping.pair_order(device, stream)
    finally:
        grouping._SLICE = kept
    assert order is not None and order.dtype == np.int32
    assert order.tolist() == np.lexsort((start, stream, device)).tolist()


def test_sparse_pairs_are_left_to_the_lexsort_and_chains_keep_their_rows() -> None:
    from pypto_core.grouping import pair_order

    assert pair_order(np.array([0, 2**40]), np.array([0, 2**40])) is None
    # a norm chain on stream 2 interleaved with another stream's kernels, stored in start order
    ops = ["Pow", "MatMul", "ReduceMean", "MatMul", "Add", "Rsqrt", "Mul", "Mul"]
    n = len(ops)
    g = _graph(list(range(0, 10 * n, 10)), [5] * n, [0] * n, stream=[2, 5, 2, 5, 2, 2, 2, 2],
               name=pa.array(ops), op_type=pa.array(ops))
    order = np.lexsort((g.start, g.stream, g.device))
    assert g.stream_order.tolist() == order.tolist()
    chains = g.chains
    assert "stream_order" not in g.__dict__  # let go once the chains hold their rows
    for name, chain in chains.items():
        assert chain.rows.tolist() == order[chain.positions].tolist(), name
    members = g.chain_mask("rms_norm")
    assert chains["rms_norm"].count == 1
    assert np.flatnonzero(members).tolist() == [0, 2, 4, 5, 6, 7]  # the MatMuls of stream 5 are not in it


def test_a_projected_load_keeps_lanes_in_a_byte_and_lengths_in_four(tmp_path) -> None:
    """Devices, streams and launch blocks load in 1 byte while they fit (2 past 127), kernel lengths in 4
    (8 once one is 2.1 s or longer); the call graph and the attribution read them in that width, and the
    figures are those of the whole load's 8 bytes."""
    from pypto_core.attribution import attribute
    from pypto_core.rules import diagnose_columns

    n = 300
    start = np.arange(n, dtype=np.int64) * 1000
    kernels = pa.table({"start_ns": pa.array(start), "dur_ns": pa.array(np.full(n, 900, np.int64)),
                        "device_id": pa.array(np.zeros(n, np.int64)),
                        "stream_id": pa.array(np.arange(n, dtype=np.int64) % 200),  # 2 bytes
                        "block_dim": pa.array(np.full(n, 20, np.int64)),
                        "name": pa.array(["k"] * n), "op_type": pa.array(["Add"] * n)})
    profile = Profile(meta=ProfileMeta(format="ascend_pt", device="910B3"), kernels=kernels)
    folder = profile.save(tmp_path / "saved")
    loaded = Profile.load(folder, columns=diagnose_columns())
    types = {name: loaded.kernels.schema.field(name).type for name in ("device_id", "stream_id", "block_dim",
                                                                        "dur_ns", "start_ns")}
    assert types == {"device_id": pa.int8(), "stream_id": pa.int16(), "block_dim": pa.int8(),
                     "dur_ns": pa.int32(), "start_ns": pa.int64()}
    g = OperatorCallGraph(loaded)
    assert g.device.dtype == np.int8 and g.stream.dtype == np.int16 and g.dur.dtype == np.int32
    whole = attribute(Profile.load(folder))
    narrow = attribute(loaded)
    assert whole is not None and narrow is not None
    assert narrow.run.to_dict() == whole.run.to_dict() and narrow.streams == whole.streams
    # one kernel of 3 s: the lengths widen to 8 bytes, the value exact
    long = kernels.set_column(1, "dur_ns", pa.array([3 * 10**9] + [900] * (n - 1), pa.int64()))
    folder = Profile(meta=profile.meta, kernels=long).save(tmp_path / "long")
    loaded = Profile.load(folder, columns=diagnose_columns())
    assert loaded.kernels.schema.field("dur_ns").type == pa.int64()
    assert loaded.kernels["dur_ns"][0].as_py() == 3 * 10**9
