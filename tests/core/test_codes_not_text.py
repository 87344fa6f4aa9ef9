"""Figures worked out on the columns' dictionary codes give what the per-row text gave: op-type codes (values
in first-use order), some rows' codes (``row_codes``, ``op_type_codes_of``: what a finding groups its kernels
by), the workload's backward-kernel count, and chains kept as their members only."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pypto_core.grouping import op_type_codes_of, row_codes
from pypto_core.op_roles import op_type_codes
from pypto_core.sequences import RMS_NORM, ChainPattern, match_chains
from pypto_core.workload import _BACKWARD_KERNEL, _count_matching

_OPS = st.one_of(st.none(), st.sampled_from(["MatMul", "matmul", "Rsqrt", "MulGrad", "", "Add", "ADD"]))
_NAMES = st.one_of(st.none(), st.sampled_from(["aclnnMatmul_0", "Softmax", "layer.1/AddGrad", "Mul"]))


def _kernels(rows: list[tuple[str | None, str | None]], dictionary: bool, chunks: int) -> pa.Table:
    op_type, name = (list(c) for c in zip(*rows))
    table = pa.table({"name": pa.array(name, pa.string()), "op_type": pa.array(op_type, pa.string())})
    if dictionary:
        table = pa.table({c: pc.dictionary_encode(table[c]) for c in table.column_names})
    size = max(len(rows) // chunks, 1)
    return pa.Table.from_batches(table.to_batches(max_chunksize=size))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_OPS, _NAMES), min_size=1, max_size=40), st.booleans(), st.integers(1, 3))
def test_op_type_codes_match_the_lower_cased_text(rows: list[tuple[str | None, str | None]],
                                                  dictionary: bool, chunks: int) -> None:
    kernels = _kernels(rows, dictionary, chunks)
    codes, values = op_type_codes(kernels)
    text = [(op if op is not None else (name if name is not None else "")).lower() for op, name in rows]
    first_use = list(dict.fromkeys(text))
    assert values == first_use
    assert [values[c] for c in codes] == text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_OPS, _NAMES), min_size=1, max_size=40), st.booleans(), st.integers(1, 3))
def test_backward_kernels_counted_as_the_coalesced_text(rows: list[tuple[str | None, str | None]],
                                                        dictionary: bool, chunks: int) -> None:
    kernels = _kernels(rows, dictionary, chunks)
    expected = sum(1 for op, name in rows
                   if (v := op if op is not None else name) is not None and _BACKWARD_KERNEL.search(v))
    assert _count_matching(kernels["op_type"], kernels["name"], _BACKWARD_KERNEL) == expected


def _dense_reference(codes: list[int], vocab: list[str], same: list[bool],
                     p: ChainPattern) -> tuple[list[bool], list[int]]:
    """Chains matched one anchor at a time; where two chains claim one kernel, the claim made at the larger
    distance from its anchor holds (at one distance, the one after its anchor)."""
    def ok(regex: str | None, at: int) -> bool:
        return regex is not None and re.search(regex, vocab[codes[at]]) is not None

    n = len(codes)
    claims: list[tuple[int, int, int, int]] = []  # (distance, after?, position, anchor)
    for a in range(n):
        if not ok(p.anchor, a):
            continue
        before = 0
        while (before < p.max_before and a - before - 1 >= 0 and same[a - before]
               and ok(p.before, a - before - 1)):
            before += 1
        after = 0
        while (after < p.max_after and a + after + 1 < n and same[a + after + 1]
               and ok(p.after, a + after + 1)):
            after += 1
        if p.require_before and not any(ok(p.require_before, a - k) for k in range(1, before + 1)):
            continue
        if p.require_after and not any(ok(p.require_after, a + k) for k in range(1, after + 1)):
            continue
        claims.append((0, 0, a, a))
        claims += [(k, 0, a - k, a) for k in range(1, before + 1)]
        claims += [(k, 1, a + k, a) for k in range(1, after + 1)]
    members, chain_of = [False] * n, [-1] * n
    for _, _, at, anchor in sorted(claims, key=lambda c: (c[0], c[1])):
        members[at], chain_of[at] = True, anchor
    return members, chain_of


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cast", "reducemean", "add", "rsqrt", "mul", "matmul"]),
                          st.booleans()), min_size=1, max_size=60))
# two chains claim the cast between them: the one it follows (after its anchor, at the same distance) holds it
@example([(op, True) for op in ("reducemean", "rsqrt", "mul", "cast", "reducemean", "rsqrt", "mul")])
def test_chains_kept_as_members_match_a_dense_matcher(rows: list[tuple[str, bool]]) -> None:
    vocab = sorted({op for op, _ in rows})
    codes = np.array([vocab.index(op) for op, _ in rows], np.int32)
    same = np.array([False] + [s for _, s in rows[1:]], bool)
    chain = match_chains(codes, vocab, same, RMS_NORM)
    members, chain_of = _dense_reference(codes.tolist(), vocab, same.tolist(), RMS_NORM)
    assert chain.positions.tolist() == [i for i, m in enumerate(members) if m]
    assert chain.anchor_of.tolist() == [chain_of[i] for i, m in enumerate(members) if m]
    assert sorted(chain.anchors.tolist()) == sorted({c for c in chain_of if c >= 0})


def _column(values: list[str | None], dictionary: bool, chunks: int) -> pa.ChunkedArray:
    """A text column in ``chunks`` pieces; coded, each piece with a dictionary of its own (as row groups)."""
    size = max(-(-len(values) // chunks), 1)
    parts = [pa.array(values[at:at + size], pa.string()) for at in range(0, len(values), size)]
    return pa.chunked_array([pc.dictionary_encode(p) if dictionary else p for p in parts])


def _encoded(text: list[str]) -> tuple[list[int], list[str]]:
    """What the per-row text gave: ``dictionary_encode`` of the rows' text (first-use order)."""
    enc = pa.array(text, pa.string()).dictionary_encode()
    return enc.indices.to_pylist(), enc.dictionary.to_pylist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_OPS, _NAMES), min_size=1, max_size=40), st.booleans(), st.integers(1, 3),
       st.data())
def test_codes_of_some_rows_number_their_text_as_dictionary_encode_does(
        rows: list[tuple[str | None, str | None]], dictionary: bool, chunks: int,
        data: st.DataObject) -> None:
    op_type, name = (list(c) for c in zip(*rows))
    kernels = pa.table({"name": _column(name, dictionary, chunks),
                        "op_type": _column(op_type, dictionary, chunks)})
    picked = np.array(data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=30)), np.int64)
    codes, values = row_codes(kernels["name"], picked)
    assert (codes.tolist(), values) == _encoded([name[i] or "" for i in picked])
    codes, values = op_type_codes_of(kernels, picked, null="?")
    text = [op_type[i] if op_type[i] is not None else (name[i] if name[i] is not None else "?")
            for i in picked]
    assert (codes.tolist(), values) == _encoded(text)
    assert codes.dtype == np.int32
