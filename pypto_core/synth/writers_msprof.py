"""Writes an msprof ``PROF_{6}_{17}_{suffix}`` folder in the CANN >= 8.0 layout (docs/formats.md §1.1):
``mindstudio_profiler_output/{op_summary,op_statistic,api_statistic,step_trace}_{14-digit ts}.csv`` and
``msprof_{ts}.json``, plus empty ``device_0/data``, ``host/data`` and ``mindstudio_profiler_log`` folders.

There is no Python process in msprof timelines, and msprof's C++ exporter writes LF line endings. The
simulated mark lives in ``device_0/info.json.0`` (beside the device facts the advisor reads: ai_core_num,
aiv_num) and in ``mindstudio_profiler_output/README.txt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pypto_core.synth.model import RunConfig
from pypto_core.synth.rows import op_summary_header
from pypto_core.synth.writer_base import DEVICE_ID, StepStreamWriter, stamp17, write_csv

STEP_TRACE_HEADER = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)",
                     "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)",
                     "Model ID"]


class MsprofWriter(StepStreamWriter):
    row_prefix = [str(DEVICE_ID)]
    lineterminator = "\n"
    python = False

    def __init__(self, out_dir: Path, cfg: RunConfig, *, variant: str, base_ns: int,
                 synth_meta: dict[str, Any], seed: int):
        self.ts14 = stamp17(base_ns)[:14]
        self.root = out_dir / f"PROF_000001_{stamp17(base_ns)}_PYPTOSYN{seed & 0xFFFFFFFF:08X}"
        out = self.root / "mindstudio_profiler_output"
        out.mkdir(parents=True, exist_ok=False)
        for sub in ("device_0/data", "host/data", "mindstudio_profiler_log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        super().__init__(cfg, variant=variant, base_ns=base_ns, synth_meta=synth_meta, out=out,
                         kernels_path=out / f"op_summary_{self.ts14}.csv",
                         kernels_header=op_summary_header(variant, cfg.sku.coupled),
                         trace_path=out / f"msprof_{self.ts14}.json")

    def close(self, end_ns: int) -> Path:
        ts = self.ts14
        self._close_streams_and_write_statistics(self.out / f"op_statistic_{ts}.csv",
                                                 self.out / f"api_statistic_{ts}.csv")
        rows = []
        prev_end: int | None = None
        for i, rec in enumerate(self.steps, start=1):
            fp, bp, end = rec.first_kernel_ns, rec.last_kernel_end_ns, rec.end_ns
            rows.append([DEVICE_ID, i, f"{fp / 1000:.3f}\t", f"{bp / 1000:.3f}\t", f"{end / 1000:.3f}\t",
                         f"{(end - rec.start_ns) / 1000:.3f}", f"{(bp - fp) / 1000:.3f}",
                         f"{(end - bp) / 1000:.3f}",
                         "N/A" if prev_end is None else f"{(fp - prev_end) / 1000:.3f}", 1])
            prev_end = end
        write_csv(self.out / f"step_trace_{ts}.csv", STEP_TRACE_HEADER, rows, "\n")
        sku = self.cfg.sku
        info = {"DeviceInfo": [{"id": DEVICE_ID, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55",
                                "ai_core_num": sku.ai_cores, "aiv_num": sku.vector_cores,
                                "aic_frequency": str(sku.freq_mhz), "hwts_frequency": "50",
                                "chip_name": sku.soc}],
                "simulated": True, "pypto_synth": self.synth_meta}
        (self.root / "device_0" / "info.json.0").write_text(json.dumps(info), encoding="utf-8")
        (self.out / "README.txt").write_text(
            "SIMULATED profile written by `pypto synth` (PyPTO); never measured on an NPU.\n"
            f"op_summary_{ts}.csv: one row per device task. msprof_{ts}.json: timeline.\n", encoding="utf-8")
        return self.root
