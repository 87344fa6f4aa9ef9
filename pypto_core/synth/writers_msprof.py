"""Writes an msprof ``PROF_{6}_{17}_{suffix}`` folder in the CANN >= 8.0 layout (FORMATS.md §1.1):
``mindstudio_profiler_output/{op_summary,op_statistic,api_statistic,step_trace}_{14-digit ts}.csv`` and
``msprof_{ts}.json``, plus empty ``device_0/data``, ``host/data`` and ``mindstudio_profiler_log`` folders.

There is no Python process in msprof timelines, and msprof's C++ exporter writes LF line endings. The simulated
mark lives in ``device_0/info.json.0`` (beside the device facts the advisor reads: ai_core_num, aiv_num) and in
``mindstudio_profiler_output/README.txt``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pypto_core.synth.model import RunConfig
from pypto_core.synth.rows import op_summary_header
from pypto_core.synth.schedule import StepColumns, StepRecord
from pypto_core.synth.table import KernelTable
from pypto_core.synth.templates import StepText, template_key
from pypto_core.synth.statistics import API_STATISTIC_HEADER, OP_STATISTIC_HEADER, Statistics
from pypto_core.synth.trace_events import TraceWriter, metadata_events
from pypto_core.synth.writers_ascend_pt import _CountingFile, stamp17

DEVICE_ID = 0
STEP_TRACE_HEADER = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)",
                     "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)",
                     "Model ID"]


class MsprofWriter:
    def __init__(self, out_dir: Path, cfg: RunConfig, *, variant: str, base_ns: int, synth_meta: dict[str, Any],
                 seed: int):
        self.cfg = cfg
        self.variant = variant
        self.base_ns = base_ns
        self.synth_meta = synth_meta
        self.ts14 = stamp17(base_ns)[:14]
        self.root = out_dir / f"PROF_000001_{stamp17(base_ns)}_PYPTOSYN{seed & 0xFFFFFFFF:08X}"
        self.out = self.root / "mindstudio_profiler_output"
        self.out.mkdir(parents=True, exist_ok=False)
        for sub in ("device_0/data", "host/data", "mindstudio_profiler_log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.kernels = _CountingFile(self.out / f"op_summary_{self.ts14}.csv", "\n")
        self.kernels.writer.writerow(op_summary_header(variant, cfg.sku.coupled))
        self.trace = TraceWriter(self.out / f"msprof_{self.ts14}.json")
        for ev in metadata_events(python=False, freq_mhz=cfg.sku.freq_mhz, start_ns=base_ns):
            self.trace.write(ev)
        self.stats = Statistics()
        self.steps: list[StepRecord] = []
        self.prev_end_ns = base_ns
        self.kernel_count = 0
        self._texts: dict[tuple, StepText] = {}

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
            text = StepText(table, prefix=[str(DEVICE_ID)], lineterminator="\n", python=False,
                            dtype=self.cfg.dtype, coupled=sku.coupled, freq_mhz=sku.freq_mhz)
            self._texts[key] = text
        in_cells, out_cells, dims = table.shape_cells(cache_len)
        self.kernels.write(text.rows(table, cols, in_cells, out_cells))
        self.trace.write_events_text(text.events(cols, dims), table.n * text.events_per_kernel)
        if table.n:
            self.prev_end_ns = int(cols.start_ns[-1] + cols.dur_ns[-1])
        self.stats.add_columns(table, cols)
        self.kernel_count += table.n

    def close(self, end_ns: int) -> Path:
        self.kernels.close()
        self.trace.close()
        ts = self.ts14
        with (self.out / f"op_statistic_{ts}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(OP_STATISTIC_HEADER)
            w.writerows(self.stats.op_statistic_rows(str(DEVICE_ID)))
        with (self.out / f"api_statistic_{ts}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(API_STATISTIC_HEADER)
            w.writerows(self.stats.api_statistic_rows())
        with (self.out / f"step_trace_{ts}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(STEP_TRACE_HEADER)
            prev_end: int | None = None
            for i, rec in enumerate(self.steps, start=1):
                fp, bp, end = rec.first_kernel_ns, rec.last_kernel_end_ns, rec.end_ns
                w.writerow([DEVICE_ID, i, f"{fp / 1000:.3f}\t", f"{bp / 1000:.3f}\t", f"{end / 1000:.3f}\t",
                            f"{(end - rec.start_ns) / 1000:.3f}", f"{(bp - fp) / 1000:.3f}",
                            f"{(end - bp) / 1000:.3f}",
                            "N/A" if prev_end is None else f"{(fp - prev_end) / 1000:.3f}", 1])
                prev_end = end
        sku = self.cfg.sku
        info = {"DeviceInfo": [{"id": DEVICE_ID, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55",
                                "ai_core_num": sku.ai_cores, "aiv_num": sku.vector_cores,
                                "aic_frequency": str(sku.freq_mhz), "hwts_frequency": "50", "chip_name": sku.soc}],
                "simulated": True, "pypto_synth": self.synth_meta}
        (self.root / "device_0" / "info.json.0").write_text(json.dumps(info), encoding="utf-8")
        (self.out / "README.txt").write_text(
            "SIMULATED profile written by `pypto synth` (PyPTO); never measured on an NPU.\n"
            f"op_summary_{ts}.csv: one row per device task. msprof_{ts}.json: timeline.\n", encoding="utf-8")
        return self.root
