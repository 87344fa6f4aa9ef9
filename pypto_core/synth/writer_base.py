"""What the ascend_pt and msprof writers share: the kernel table and timeline streamed step by step, and the
op/api statistics written at the end. Each layout's writer names its files and writes its own step trace."""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from pypto_core.synth.model import RunConfig
from pypto_core.synth.schedule import StepColumns, StepRecord
from pypto_core.synth.statistics import API_STATISTIC_HEADER, OP_STATISTIC_HEADER, Statistics
from pypto_core.synth.table import KernelTable
from pypto_core.synth.templates import StepText, template_key
from pypto_core.synth.trace_events import TraceWriter, metadata_events, step_event

DEVICE_ID = 0


def stamp17(ns: int) -> str:
    t = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return t.strftime("%Y%m%d%H%M%S") + f"{(ns // 1_000_000) % 1000:03d}"


class CountingFile:
    """A text file that counts what it wrote (for ``--size-mb``)."""

    def __init__(self, path: Path, newline: str) -> None:
        self.f = path.open("w", encoding="utf-8", newline="")
        self.bytes = 0
        self.writer = csv.writer(self, lineterminator=newline)

    def write(self, text: str) -> int:
        self.bytes += len(text)
        return self.f.write(text)

    def close(self) -> None:
        self.f.close()


def write_csv(path: Path, header: list[str], rows: Iterable[Iterable[Any]], lineterminator: str) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator=lineterminator)
        w.writerow(header)
        w.writerows(rows)


class StepStreamWriter:
    """Streams each placed step's kernel rows and timeline events; subclasses set the layout's details."""

    row_prefix: ClassVar[list[str]]  # cells before each kernel row's own
    lineterminator: ClassVar[str]  # of the kernel table
    python: ClassVar[bool]  # the timeline has a Python process (torch_npu) with one event per step
    legacy: ClassVar[bool] = False  # CANN <= 7.0 op_summary columns (rows.op_summary_header)

    def __init__(self, cfg: RunConfig, *, variant: str, base_ns: int, synth_meta: dict[str, Any], out: Path,
                 kernels_path: Path, kernels_header: list[str], trace_path: Path) -> None:
        self.cfg = cfg
        self.variant = variant
        self.base_ns = base_ns
        self.synth_meta = synth_meta
        self.out = out
        self.kernels = CountingFile(kernels_path, self.lineterminator)
        self.kernels.writer.writerow(kernels_header)
        self.trace = TraceWriter(trace_path)
        for ev in metadata_events(python=self.python, freq_mhz=cfg.sku.freq_mhz, start_ns=base_ns):
            self.trace.write(ev)
        self.stats = Statistics()
        self.steps: list[StepRecord] = []
        self.prev_end_ns = base_ns
        self.kernel_count = 0
        self._texts: dict[tuple[object, ...], StepText] = {}

    @property
    def bytes_written(self) -> int:
        return self.kernels.bytes + self.trace.bytes

    def write_step(self, table: KernelTable, cols: StepColumns, rec: StepRecord, cache_len: int) -> None:
        """One placed step: its rows and events rendered from the step's columns (``templates``)."""
        self.steps.append(rec)
        key = template_key(table)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) > 4:  # prefill and decode share nothing; decode tables all share one
                self._texts.clear()
            sku = self.cfg.sku
            text = StepText(table, prefix=self.row_prefix, lineterminator=self.lineterminator,
                            python=self.python, dtype=self.cfg.dtype, coupled=sku.coupled,
                            freq_mhz=sku.freq_mhz, legacy=self.legacy)
            self._texts[key] = text
        in_cells, out_cells, dims = table.shape_cells(cache_len)
        self.kernels.write(text.rows(table, cols, in_cells, out_cells))
        if self.python:
            self.trace.write(step_event(rec))
        self.trace.write_events_text(text.events(cols, dims), table.n * text.events_per_kernel)
        if table.n:
            self.prev_end_ns = int(cols.start_ns[-1] + cols.dur_ns[-1])
        self.stats.add_columns(table, cols)
        self.kernel_count += table.n

    def _close_streams_and_write_statistics(self, op_statistic: Path, api_statistic: Path) -> None:
        """Close the kernel table and timeline; write op_statistic and api_statistic (CANN copies: LF)."""
        self.kernels.close()
        self.trace.close()
        write_csv(op_statistic, OP_STATISTIC_HEADER, self.stats.op_statistic_rows(str(DEVICE_ID)), "\n")
        write_csv(api_statistic, API_STATISTIC_HEADER, self.stats.api_statistic_rows(), "\n")
