"""Writes an msprof ``PROF_*`` folder in the CANN <= 7.0 layout (docs/formats.md §1.1, file names of CANN
7.0.0):
``device_0/summary/{op_summary,op_statistic,api_statistic,step_trace}_0_1_{14-digit ts}.csv`` and
``device_0/timeline/msprof_0_1_{ts}.json``, beside ``device_0/info.json.0`` (device facts, the simulated mark
and ``cannVersion`` 7.0.0) and empty ``device_0/data`` / ``host/data`` folders.

op_summary has the columns of that era (rows.op_summary_header(legacy=True)): ``Block Dim``/``Mix Block Dim``,
no ``Device_id``, ``OP State`` or ``HF32 Eligible``, start times without the trailing TAB. The ``0_1`` in the
names is ``{device}_{model}`` [INF: the version config only gives ``op_summary_\\d+_\\d+_\\d{14}.csv``].
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pypto_core.synth.model import RunConfig
from pypto_core.synth.rows import op_summary_header
from pypto_core.synth.writer_base import DEVICE_ID, StepStreamWriter, stamp17
from pypto_core.synth.writers_msprof import MsprofWriter

CANN_VERSION = "7.0.0"


class MsprofLegacyWriter(MsprofWriter):
    row_prefix = []
    legacy = True

    def __init__(self, out_dir: Path, cfg: RunConfig, *, variant: str, base_ns: int,
                 synth_meta: dict[str, Any], seed: int):
        # MsprofWriter.close names every file {module}_{ts14}: here ts14 carries the device and model ids.
        self.ts14 = f"{DEVICE_ID}_1_{stamp17(base_ns)[:14]}"
        self.root = out_dir / f"PROF_000001_{stamp17(base_ns)}_PYPTOSYN{seed & 0xFFFFFFFF:08X}"
        device = self.root / f"device_{DEVICE_ID}"
        summary, timeline = device / "summary", device / "timeline"
        for sub in (summary, timeline, device / "data", self.root / "host" / "data"):
            sub.mkdir(parents=True, exist_ok=sub != summary)
        StepStreamWriter.__init__(self, cfg, variant=variant, base_ns=base_ns, synth_meta=synth_meta,
                                  out=summary, kernels_path=summary / f"op_summary_{self.ts14}.csv",
                                  kernels_header=op_summary_header(variant, cfg.sku.coupled, legacy=True),
                                  trace_path=timeline / f"msprof_{self.ts14}.json")

    def close(self, end_ns: int) -> Path:
        root = super().close(end_ns)
        info_path = root / f"device_{DEVICE_ID}" / f"info.json.{DEVICE_ID}"
        info = json.loads(info_path.read_text(encoding="utf-8"))
        info["cannVersion"] = CANN_VERSION
        info_path.write_text(json.dumps(info), encoding="utf-8")
        return root
