"""The kernels of one step as columns: static facts per position, and for decode steps, how they move with the
context length.

A decode step at context ``L`` has the same kernels in the same order for every ``L``; only some durations and
the cache-shaped tensors grow (every decode duration is affine in bytes, every cache dimension is ``L`` plus a
constant). ``decode_table`` learns that from two built steps, checks it on a third, and then gives any step's
durations and shape cells without building a Python object per kernel. Where the check fails it returns None
and the caller builds each step (slow, always right).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from pypto_core.synth.kernels import EAGER_LAUNCH_GAP_US, Kernel, StepBuilder, Tensor, vector_block_dim
from pypto_core.synth.rows import csv_cell, shapes_cell
from pypto_core.synth.schedule import HOST_OP_DEFAULT_US, HOST_OP_US
from pypto_core.synth.trace_events import host_dims

AIC_PIPES = ("mac", "scalar", "mte1", "mte2", "fixpipe")
AIV_PIPES = ("vec", "scalar", "mte2", "mte3")
COUPLED_PIPES = ("vec", "mac", "scalar", "mte1", "mte2", "mte3")

# One tensor whose dimensions move with the context: (base dims, dims per context token).
_Moving = tuple[tuple[int, ...], tuple[int, ...]]


def _coupled_ratios(k: Kernel) -> list[float]:
    g = k.pipes.get
    return [g("aiv_vec", 0.0), g("aic_mac", 0.0), max(g("aic_scalar", 0.0), g("aiv_scalar", 0.0)),
            g("aic_mte1", 0.0), max(g("aic_mte2", 0.0), g("aiv_mte2", 0.0)), g("aiv_mte3", 0.0)]


@dataclass
class KernelTable:
    """One step's kernels, position by position (``kernels`` are the step at ``base_len``)."""

    kernels: list[Kernel]
    base_len: int
    dur_us: np.ndarray  # at base_len
    slope_us: np.ndarray  # per context token (zeros for a step that is never moved)
    gap_us: np.ndarray
    host_dur_ns: np.ndarray  # int64
    host_bound: np.ndarray  # bool: the host issues this launch just in time (no lead)
    busy: np.ndarray
    block_dim: np.ndarray
    mix_block_dim: np.ndarray
    # PipeUtilization inputs (rows.py): split cores use aic_*/aiv_* ratios, coupled chips one set.
    has_aic: np.ndarray
    has_aiv: np.ndarray
    aic_ratios: np.ndarray  # (n, 5)
    aiv_ratios: np.ndarray  # (n, 4)
    coupled_ratios: np.ndarray  # (n, 6)
    op_keys: list[tuple[str, str]]  # (op type, core) per position, for op_statistic
    api_names: list[str]
    moving: dict[int, tuple[list[_Moving], list[_Moving]]] = field(default_factory=dict)
    # Vector kernels whose bytes grow with the context: positions, bytes at base_len, bytes per token.
    vec_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    vec_nbytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    vec_slope: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    vector_cores: int = 0
    _shape_cache: dict[int, tuple[list[str], list[str], list[str]]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.kernels)

    @classmethod
    def from_kernels(cls, kernels: list[Kernel], base_len: int = 0) -> KernelTable:
        n = len(kernels)
        core = [k.core for k in kernels]
        has_aic = np.array([c in ("AI_CORE", "MIX_AIC", "MIX_AIV") for c in core])
        has_aiv = np.array([c in ("AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV") for c in core])
        block = np.array([k.block_dim for k in kernels], dtype=np.int64)
        mix = np.array([k.mix_block_dim for k in kernels], dtype=np.int64)
        return cls(
            kernels=kernels, base_len=base_len,
            dur_us=np.array([k.dur_us for k in kernels], dtype=np.float64), slope_us=np.zeros(n),
            gap_us=np.array([k.gap_us for k in kernels], dtype=np.float64),
            host_dur_ns=np.array([int(HOST_OP_US.get(k.host_op, HOST_OP_DEFAULT_US) * 1000) for k in kernels],
                                 dtype=np.int64),
            host_bound=np.array([k.gap_us >= EAGER_LAUNCH_GAP_US / 2 for k in kernels]),
            busy=np.array([k.busy for k in kernels], dtype=np.float64), block_dim=block, mix_block_dim=mix,
            has_aic=has_aic, has_aiv=has_aiv,
            aic_ratios=np.array([[k.pipes.get("aic_" + p, 0.0) for p in AIC_PIPES] for k in kernels],
                                dtype=np.float64).reshape(n, len(AIC_PIPES)),
            aiv_ratios=np.array([[k.pipes.get("aiv_" + p, 0.0) for p in AIV_PIPES] for k in kernels],
                                dtype=np.float64).reshape(n, len(AIV_PIPES)),
            coupled_ratios=np.array([_coupled_ratios(k) for k in kernels], dtype=np.float64).reshape(n, 6),
            op_keys=[(k.op_type, k.core) for k in kernels], api_names=[k.api for k in kernels])

    def block_dims(self, cache_len: int) -> np.ndarray:
        if not len(self.vec_pos):
            return self.block_dim
        out = self.block_dim.copy()
        nbytes = self.vec_nbytes + self.vec_slope * (cache_len - self.base_len)
        out[self.vec_pos] = vector_block_dim(nbytes, self.vector_cores)
        return out

    def durations_us(self, cache_len: int) -> np.ndarray:
        durations: np.ndarray = self.dur_us + self.slope_us * (cache_len - self.base_len)
        return durations

    def shape_cells(self, cache_len: int) -> tuple[list[str], list[str], list[str]]:
        """Input-shape and output-shape cells (quoted for CSV) and host ``Input Dims`` (JSON text)."""
        base = self._shape_cache.get(-1)
        if base is None:
            base = ([csv_cell(shapes_cell(k.inputs)) for k in self.kernels],
                    [csv_cell(shapes_cell(k.outputs)) for k in self.kernels],
                    [json.dumps(host_dims(k)) for k in self.kernels])
            self._shape_cache[-1] = base
        if not self.moving or cache_len == self.base_len:
            return base
        ins, outs, dims = list(base[0]), list(base[1]), list(base[2])
        delta = cache_len - self.base_len
        for i, (mov_in, mov_out) in self.moving.items():
            t_in = [",".join([str(b + s * delta) for b, s in zip(*m)]) for m in mov_in]
            t_out = [",".join([str(b + s * delta) for b, s in zip(*m)]) for m in mov_out]
            # shapes_cell + csv_cell: '"a;b"' quoted for CSV is
            # '"""a;b"""' (digits, commas and semicolons only)
            ins[i] = '"""' + ";".join(t_in) + '"""'
            outs[i] = '"""' + ";".join(t_out) + '"""'
            dims[i] = '"' + ";\\r\\n".join(t_in) + '"'  # json.dumps of host_dims: CR LF escaped
        return ins, outs, dims


def _at(m: _Moving, delta: int) -> Tensor:
    base, slope = m
    return Tensor(tuple(b + s * delta for b, s in zip(base, slope)), "")


def _nbytes(k: Kernel) -> int:
    return sum(t.nbytes for t in k.inputs) + sum(t.nbytes for t in k.outputs)


def _same_kernel(a: Kernel, b: Kernel) -> bool:
    """Same kernel up to shapes, durations and (for vector kernels, checked apart) Block Dim."""
    def key(k: Kernel) -> tuple[object, ...]:
        return (k.name, k.op_type, k.core, k.mix_block_dim, k.gap_us, k.host_op, k.api, k.rule, k.busy,
                k.pipes, len(k.inputs), len(k.outputs), None if k.core == "AI_VECTOR_CORE" else k.block_dim)
    return key(a) == key(b)


def _moving(t0: tuple[Tensor, ...], t1: tuple[Tensor, ...]) -> list[_Moving] | None:
    out: list[_Moving] = []
    for a, b in zip(t0, t1):
        if len(a.shape) != len(b.shape) or (a.dtype, a.fmt) != (b.dtype, b.fmt):
            return None
        out.append((a.shape, tuple(y - x for x, y in zip(a.shape, b.shape))))
    return out


def decode_table(builder: StepBuilder, base_len: int, check_len: int) -> KernelTable | None:
    """The decode step at ``base_len`` with durations and shapes moving per context token, checked against a
    step built at ``check_len``; None when decode steps do not move that way."""
    k0, k1, kc = builder.step(1, base_len), builder.step(1, base_len + 1), builder.step(1, check_len)
    if not (len(k0) == len(k1) == len(kc)) or not all(_same_kernel(a, b) and _same_kernel(a, c)
                                                      for a, b, c in zip(k0, k1, kc)):
        return None
    table = KernelTable.from_kernels(k0, base_len)
    table.slope_us = np.array([b.dur_us - a.dur_us for a, b in zip(k0, k1)], dtype=np.float64)
    for i, (a, b) in enumerate(zip(k0, k1)):
        if a.inputs == b.inputs and a.outputs == b.outputs:
            continue
        mov_in, mov_out = _moving(a.inputs, b.inputs), _moving(a.outputs, b.outputs)
        if mov_in is None or mov_out is None:
            return None
        table.moving[i] = (mov_in, mov_out)
    vec = [i for i in table.moving if k0[i].core == "AI_VECTOR_CORE"]
    table.vec_pos = np.array(vec, dtype=np.int64)
    table.vec_nbytes = np.array([_nbytes(k0[i]) for i in vec], dtype=np.int64)
    table.vec_slope = np.array([_nbytes(k1[i]) - _nbytes(k0[i]) for i in vec], dtype=np.int64)
    table.vector_cores = builder.sku.vector_cores
    # The check: shapes and Block Dims exact, durations to float rounding.
    for length, ks in ((base_len, k0), (base_len + 1, k1), (check_len, kc)):
        if table.block_dims(length).tolist() != [k.block_dim for k in ks]:
            return None
    delta = check_len - base_len
    for i, c in enumerate(kc):
        mov = table.moving.get(i)
        if mov is None:
            if c.inputs != k0[i].inputs or c.outputs != k0[i].outputs:
                return None
        elif ([t.shape for t in c.inputs] != [_at(m, delta).shape for m in mov[0]]
              or [t.shape for t in c.outputs] != [_at(m, delta).shape for m in mov[1]]):
            return None
    if not np.allclose(table.durations_us(check_len), [c.dur_us for c in kc], rtol=1e-9, atol=1e-9):
        return None
    return table


class DecodePlan:
    """Decode tables for a run, each checked over a stretch of context lengths. The pipe profile and busy
    fraction of a vector kernel step at a byte threshold (kernels.StepBuilder.vector), all monotone in the
    context, so a table that matches a built step at both ends of a stretch holds inside it; stretches double
    while they hold and halve when a threshold falls inside. (Block Dims are computed per step.)"""

    MAX_STRETCH = 256

    def __init__(self, builder: StepBuilder) -> None:
        self.builder = builder
        self.current: KernelTable | None = None
        self.valid_until = -1
        self.stretch = 16

    def table(self, cache_len: int) -> KernelTable:
        if self.current is not None and cache_len <= self.valid_until:
            return self.current
        k = self.stretch
        while k >= 1:
            found = decode_table(self.builder, cache_len, cache_len + k)
            if found is not None:
                self.current, self.valid_until = found, cache_len + k
                self.stretch = min(2 * k, self.MAX_STRETCH)
                return found
            k //= 2
        # A threshold between this step and the next: this step alone.
        self.current = KernelTable.from_kernels(self.builder.step(1, cache_len), cache_len)
        self.valid_until, self.stretch = cache_len, 16
        return self.current
