"""Writes a torch_npu ``{worker}_{timestamp}_ascend_pt`` folder (FORMATS.md §2), streaming kernels as they come.

Mirrors the CANN 8.3.RC1 / torch_npu 2.7.1 text export (samples/ascend_pt/qwen3_0.6b_train_4npu_level2) and,
for the 2026 variant, the ``Block Num`` rename. kernel_details.csv and step_trace_time.csv are written the way
torch_npu's Python csv writer does (CRLF); op_statistic and api_statistic are CANN copies (LF).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any

from pypto_core.synth.model import RunConfig
from pypto_core.synth.rows import kernel_details_header
from pypto_core.synth.schedule import StepColumns, StepRecord
from pypto_core.synth.table import KernelTable
from pypto_core.synth.templates import STEP_CELL, StepText, template_key
from pypto_core.synth.statistics import API_STATISTIC_HEADER, OP_STATISTIC_HEADER, Statistics
from pypto_core.synth.trace_events import HOST_PID, TraceWriter, metadata_events, step_event

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
DEVICE_ID = 0
VERSIONS = {"cann83": ("2.7.1", "8.3.RC1"), "2026": ("2.9.0", "8.5.0")}
STEP_TRACE_HEADER = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                     "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


def stamp17(ns: int) -> str:
    t = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return t.strftime("%Y%m%d%H%M%S") + f"{(ns // 1_000_000) % 1000:03d}"


class _CountingFile:
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


class AscendPtWriter:
    def __init__(self, out_dir: Path, cfg: RunConfig, *, variant: str, base_ns: int, synth_meta: dict[str, Any]):
        self.cfg = cfg
        self.variant = variant
        self.base_ns = base_ns
        self.synth_meta = synth_meta
        self.root = out_dir / f"pypto-synth_{HOST_PID}_{stamp17(base_ns)}_ascend_pt"
        out = self.root / OUTPUT_DIR
        out.mkdir(parents=True, exist_ok=False)
        self.out = out
        self.kernels = _CountingFile(out / "kernel_details.csv", "\r\n")
        self.kernels.writer.writerow(kernel_details_header(variant, cfg.sku.coupled))
        self.trace = TraceWriter(out / "trace_view.json")
        for ev in metadata_events(python=True, freq_mhz=cfg.sku.freq_mhz, start_ns=base_ns):
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
            text = StepText(table, prefix=[STEP_CELL, str(DEVICE_ID)], lineterminator="\r\n", python=True,
                            dtype=self.cfg.dtype, coupled=sku.coupled, freq_mhz=sku.freq_mhz)
            self._texts[key] = text
        in_cells, out_cells, dims = table.shape_cells(cache_len)
        self.kernels.write(text.rows(table, cols, in_cells, out_cells))
        self.trace.write(step_event(rec))
        self.trace.write_events_text(text.events(cols, dims), table.n * text.events_per_kernel)
        if table.n:
            self.prev_end_ns = int(cols.start_ns[-1] + cols.dur_ns[-1])
        self.stats.add_columns(table, cols)
        self.kernel_count += table.n

    def close(self, end_ns: int) -> Path:
        self.kernels.close()
        self.trace.close()
        with (self.out / "op_statistic.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(OP_STATISTIC_HEADER)
            w.writerows(self.stats.op_statistic_rows(str(DEVICE_ID)))
        with (self.out / "api_statistic.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(API_STATISTIC_HEADER)
            w.writerows(self.stats.api_statistic_rows())
        with (self.out / "step_trace_time.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\r\n")
            w.writerow(STEP_TRACE_HEADER)
            for rec in self.steps:
                stage = (rec.end_ns - rec.start_ns) / 1000
                computing = rec.compute_ns / 1000
                w.writerow([DEVICE_ID, rec.step, computing, 0.0, 0.0, 0.0, stage - computing, stage, 0, 0.0,
                            (rec.first_kernel_ns - rec.start_ns) / 1000])
        self._write_info(end_ns)
        return self.root

    def _write_info(self, end_ns: int) -> None:
        torch_npu, cann = VERSIONS[self.variant]
        info = {
            "config": {
                "common_config": {
                    "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                    "schedule": {"wait": 0, "active": len(self.steps), "warmup": 1, "repeat": 1, "skip_first": 0},
                    "record_shapes": True, "profile_memory": False, "with_stack": False, "with_flops": False,
                    "with_modules": False},
                "experimental_config": {
                    "_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION", "_l2_cache": False,
                    "_msprof_tx": False, "_mstx": False, "_data_simplification": True, "record_op_args": False,
                    "_export_type": ["text"], "_host_sys": [], "_op_attr": False, "_gc_detect_threshold": None,
                    "_mstx_domain_include": [], "_mstx_domain_exclude": [], "_sys_io": False,
                    "_sys_interconnection": False}},
            "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308,
                           "start_monotonic": 4699801002845430},
            "end_info": {"collectionTimeEnd": end_ns, "MonotonicTimeEnd": 4699801002845430 + (end_ns - self.base_ns)},
            "torch_npu_version": torch_npu,
            "cann_version": cann,
            "rank_id": "0",
            # Not in real files: this profile was generated by `pypto synth`, never measured on an NPU.
            "simulated": True,
        }
        (self.root / "profiler_info_0.json").write_text(json.dumps(info, indent=4), encoding="utf-8")
        metadata = {
            "simulated": True,
            "device": self.cfg.sku.name,
            "pypto_synth": self.synth_meta,
            "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_RDMA_TC": "", "HCCL_RDMA_SL": "",
                              "ACLNN_CACHE_LIMIT": "", "HOST_CACHE_CAPACITY": "", "ASCEND_ENHANCE_ENABLE": "",
                              "PYTORCH_NPU_ALLOC_CONF": "", "ASCEND_LAUNCH_BLOCKING": "", "HCCL_ALGO": "",
                              "TASK_QUEUE_ENABLE": "1"},
        }
        (self.root / "profiler_metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
