"""Step templates: a whole step's kernel rows (CSV) or trace events (JSON) as one %-format string, filled
from the step's columns in one call.

Each kernel's template is rendered once by the same cell and event builders as the per-row reference
(``rows.row_cells``, ``trace_events.event_dicts``) with placeholders for the values that change; the
placeholders then become %-holes. So the fast path writes the reference's layout by construction, and tests
check it writes the same bytes for the same numbers. Formatting a step is then one ``%`` over a flat tuple,
built column by column with numpy: no Python object per event beyond the values themselves.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import numpy as np

from pypto_core.synth.rows import row_cells, static_cells
from pypto_core.synth.schedule import StepColumns
from pypto_core.synth.table import KernelTable
from pypto_core.synth.trace_events import event_dicts

_PLACEHOLDER = re.compile(r'"@@(\w+)@@"|@@(\w+)@@')
# How each placeholder is written: quoted ones replace a whole JSON string or CSV cell, bare ones sit inside
# a string (``HostToDevice123``, the start time before its TAB).
_QUOTED_SPEC = {"dims": "%s", "flow_id": "%d", "cid": "%d", "task_id": "%d", "cid_text": '"%d"'}
_TS_SPEC = '"%d.%03d"'  # us_text: epoch µs with 3 decimals, as two integers
_CSV_SPEC = {"step": "%d", "block": "%d", "mix": "%d", "task": "%d", "start": "%d.%03d", "dur": "%.3f",
             "wait": "%.6f", "in": "%s", "out": "%s"}
_PIPE_SPEC = {"r": "%r", "d": "%d", "f": "%.3f"}
# Pipe columns (rows._pipes_split / _pipes_coupled): r =
# round(x, 3) written as Python does, d = int, f = %.3f.
STEP_CELL = "@@step@@"  # a writer's ``Step Id`` prefix cell
SPLIT_PIPE_KINDS = "rd" + "r" * 11 + "rd" + "r" * 9 + "f"
COUPLED_PIPE_KINDS = "rd" + "r" * 13


# A column of values for a template, or a time's (µs, ns remainder) pair of columns.
Column = list[Any] | tuple[list[Any], list[Any]]


def _ph(name: str) -> str:
    """A placeholder for a value that changes from row to row."""
    return f"@@{name}@@"


def round3(x: np.ndarray) -> np.ndarray:
    """``round(v, 3)`` of every value, as Python rounds (the exact binary value, half to even). ``np.round``
    alone differs near decimal ties (``x * 1000`` rounds first), and ties are common here (a 3-decimal time
    times a 2-decimal fraction): those few go through Python's round."""
    y = x * 1000
    out: np.ndarray = np.rint(y) / 1000
    near = np.flatnonzero(np.abs(y - np.floor(y) - 0.5) < 1e-6)
    if len(near):
        values = x[near].tolist()
        out[near] = [round(v, 3) for v in values]
    return out


def _fill_holes(text: str, specs: list[tuple[str, str]]) -> str:
    """``text`` with %% escaped and each placeholder replaced
    by its %-spec (whole-step text, a few passes)."""
    text = text.replace("%", "%%")
    for placeholder, spec in specs:
        text = text.replace(placeholder, spec)
    return text


def _event_spec(name: str, quoted: bool) -> str:
    if not quoted:
        return "%d"  # HostToDevice{connection id}
    return _TS_SPEC if name.startswith("ts_") else _QUOTED_SPEC.get(name, "%r")


def template_key(table: KernelTable) -> tuple[object, ...]:
    """What a ``StepText`` depends on: each kernel's names and tensor types (not its shapes, Block Dim or
    times), so one StepText serves every decode table of a run."""
    return tuple((k.name, k.op_type, k.core, k.host_op, k.api, tuple((t.dtype, t.fmt) for t in k.inputs),
                  tuple((t.dtype, t.fmt) for t in k.outputs)) for k in table.kernels)


class StepText:
    """The CSV rows and trace events of steps whose tables share one ``template_key``, for one layout."""

    def __init__(self, table: KernelTable, *, prefix: list[str], lineterminator: str, python: bool,
                 dtype: str, coupled: bool, freq_mhz: int, legacy: bool = False) -> None:
        self.n = table.n
        self.coupled = coupled
        self.freq = freq_mhz
        self.kinds = COUPLED_PIPE_KINDS if coupled else SPLIT_PIPE_KINDS
        pipes = [_ph(f"p{j}") for j in range(len(self.kinds))]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator=lineterminator)
        ev_values = {name: _ph(name) for name in ("ts_host", "dur_host", "ts_launch", "dur_launch", "flow_id",
                                                  "ts_dev", "dur_dev", "cid", "cid_text", "ts_node",
                                                  "dur_node", "task_id", "ts_free", "dur_free", "dims")}
        kinds = self.kinds

        # Pipe cells of a core the kernel does not use are constant ("0.0", "0", "0.000"): written into its
        # template, so only the used ones are formatted per step (a vector kernel skips 14 of 25).
        n_pipes = len(kinds)
        if coupled:
            present = np.ones((table.n, n_pipes), dtype=bool)
        else:
            aic, aiv = table.has_aic[:, None], table.has_aiv[:, None]
            present = np.hstack([np.repeat(aic, 13, axis=1), np.repeat(aiv, 11, axis=1), aic])
        absent_text = ["0" if kind == "d" else "0.000" if kind == "f" else "0.0" for kind in kinds]
        rows: list[str] = []
        ev_texts: list[str] = []
        self.events_per_kernel = 0
        for i, k in enumerate(table.kernels):
            buf.seek(0)
            buf.truncate()
            static = dict(static_cells(k), block_dim=_ph("block"), mix_block_dim=_ph("mix"))
            cells = [pipes[j] if present[i, j] else absent_text[j] for j in range(n_pipes)]
            w.writerow(prefix + row_cells(static, task_id=_ph("task"), start=_ph("start"), dur=_ph("dur"),
                                          wait=_ph("wait"), in_shapes=_ph("in"), out_shapes=_ph("out"),
                                          pipes=cells, legacy=legacy))
            rows.append(buf.getvalue())
            # Every kernel has a Free bar before it: the jitter keeps each gap >= 20 ns (schedule._jitter).
            events = event_dicts(k, ev_values, python=python, dtype=dtype, free=True)
            self.events_per_kernel = len(events)
            ev_texts.append("".join(", " + json.dumps(e) for e in events))
        # The order of the values in a row (all pipe cells present) and in a kernel's events.
        self.row_order = [m.group(1) or m.group(2) for m in _PLACEHOLDER.finditer(
            "".join(prefix) + "@@task@@@@start@@@@dur@@@@wait@@@@block@@@@mix@@@@in@@@@out@@"
            + "".join(pipes))]
        self.ev_order = ([m.group(1) or m.group(2) for m in _PLACEHOLDER.finditer(ev_texts[0])]
                         if ev_texts else [])
        # Which values each row uses (a start time is two: µs and the ns remainder).
        width = [2 if name in ("start",) else 1 for name in self.row_order]
        head = np.ones((table.n, len(self.row_order) - n_pipes), dtype=bool)
        used = np.hstack([head, present]) if table.n else np.zeros((0, len(self.row_order)), dtype=bool)
        self.row_mask = np.repeat(used, width, axis=1)
        self.row_fmt = _fill_holes("".join(rows), [(_ph(n), _CSV_SPEC.get(n) or _PIPE_SPEC[kinds[int(n[1:])]])
                                                  for n in self.row_order])
        quoted = [('"' + _ph(n) + '"', _event_spec(n, True)) for n in dict.fromkeys(self.ev_order)]
        self.ev_fmt = _fill_holes("".join(ev_texts),
                                  quoted + [(_ph(n), "%d") for n in dict.fromkeys(self.ev_order)])

    # -- per step --------------------------------------------------------------------------------------------
    def _pipes(self, t_: KernelTable, cols: StepColumns, block: np.ndarray) -> list[list[float] | list[int]]:
        return pipe_columns(t_, cols, block, coupled=self.coupled, freq_mhz=self.freq)

    def _fill(self, fmt: str, order: list[str], columns: dict[str, Column],
              mask: np.ndarray | None = None) -> str:
        n = self.n
        width = sum(2 if name.startswith("ts_") or name == "start" else 1 for name in order)
        m = np.empty((n, width), dtype=object)
        j = 0
        for name in order:
            col = columns[name]
            if isinstance(col, tuple):  # (µs, ns remainder) of a time
                m[:, j] = col[0]
                m[:, j + 1] = col[1]
                j += 2
            else:
                m[:, j] = col
                j += 1
        values = m.ravel() if mask is None else m[mask]  # row-major either way
        return fmt % tuple(values.tolist())

    def rows(self, table: KernelTable, cols: StepColumns, in_cells: list[str], out_cells: list[str]) -> str:
        """The step's CSV rows; ``in_cells``/``out_cells`` are shape cells already quoted for CSV."""
        n = self.n
        block = table.block_dims(cols.cache_len)
        q, r = np.divmod(cols.start_ns, 1000)
        columns: dict[str, Column] = {
            "step": [cols.step] * n, "task": cols.task_id.tolist(), "start": (q.tolist(), r.tolist()),
            "dur": (cols.dur_ns / 1000).tolist(), "wait": (cols.wait_ns / 1000).tolist(),
            "in": in_cells, "out": out_cells, "block": block.tolist(), "mix": table.mix_block_dim.tolist()}
        for j, col in enumerate(self._pipes(table, cols, block)):
            columns[f"p{j}"] = col
        return self._fill(self.row_fmt, self.row_order, columns, self.row_mask)

    def events(self, cols: StepColumns, dims: list[str]) -> str:
        def ts(ns: np.ndarray) -> tuple[list[int], list[int]]:
            q, r = np.divmod(ns, 1000)
            return q.tolist(), r.tolist()

        def us(ns: np.ndarray) -> list[float]:
            # == round(ns / 1000, 3): a 3-decimal value's nearest double
            out: list[float] = (ns / 1000).tolist()
            return out

        node = cols.launch_start_ns + cols.launch_dur_ns // 2
        end = cols.start_ns + cols.dur_ns
        prev_end = np.concatenate(([cols.prev_end_ns], end[:-1])).astype(np.int64)
        cid = cols.connection_id.tolist()
        columns: dict[str, Column] = {
            "ts_host": ts(cols.host_start_ns), "dur_host": us(cols.host_dur_ns),
            "ts_launch": ts(cols.launch_start_ns), "dur_launch": us(cols.launch_dur_ns),
            "flow_id": cols.start_ns.tolist(), "ts_dev": ts(cols.start_ns), "dur_dev": us(cols.dur_ns),
            "cid": cid, "cid_text": cid, "ts_node": ts(node),
            "dur_node": us(cols.launch_start_ns + cols.launch_dur_ns - node),
            "task_id": cols.task_id.tolist(), "ts_free": ts(prev_end),
            "dur_free": us(cols.start_ns - prev_end), "dims": dims}
        return self._fill(self.ev_fmt, self.ev_order, columns)


def pipe_columns(t_: KernelTable, cols: StepColumns, block: np.ndarray, *, coupled: bool,
                 freq_mhz: int) -> list[list[float] | list[int]]:
    """A step's PipeUtilization cells as columns, in ``rows.PIPE_COLUMNS_*`` order (rows._pipes_split /
    _pipes_coupled, same float operations; the ``round(x, 3)`` cells rounded). The db writer stores the
    same numbers in TASK_PMU_INFO."""
    dur_us = cols.dur_ns / 1000
    t = dur_us * t_.busy
    s = cols.ratio_scale
    out: list[np.ndarray] = []
    if coupled:
        ratios = np.minimum(0.999, t_.coupled_ratios * s[:, None])
        out += [t, (t * freq_mhz * block).astype(np.int64)]
        for j in range(ratios.shape[1]):
            out += [t * ratios[:, j], ratios[:, j]]
        out.append(0.01 * s)
    else:
        a, v = t_.has_aic, t_.has_aiv
        ratios = np.minimum(0.999, t_.aic_ratios * s[:, None])
        aiv_blocks = np.where(a, t_.mix_block_dim, block)
        out += [np.where(a, t, 0.0), np.where(a, (t * freq_mhz * block).astype(np.int64), 0)]
        for j in range(ratios.shape[1]):
            out += [np.where(a, t * ratios[:, j], 0.0), np.where(a, ratios[:, j], 0.0)]
        out.append(np.where(a, 0.004 * s, 0.0))
        tv = t * np.where(a, 0.98, 1.0)
        ratios = np.minimum(0.999, t_.aiv_ratios * s[:, None])
        out += [np.where(v, tv, 0.0), np.where(v, (tv * freq_mhz * aiv_blocks).astype(np.int64), 0)]
        for j in range(ratios.shape[1]):
            out += [np.where(v, tv * ratios[:, j], 0.0), np.where(v, ratios[:, j], 0.0)]
        out.append(np.where(v, 0.03 * s, 0.0))
        out.append(np.where(a, t / dur_us * 100, 0.0))
    kinds = COUPLED_PIPE_KINDS if coupled else SPLIT_PIPE_KINDS
    return [round3(col).tolist() if kind == "r" else col.tolist() for kind, col in zip(kinds, out)]
