"""Places the kernels of each step in time, on the device and on the host, with a small seeded jitter.

The device runs one compute stream: each kernel starts after the previous one ends plus its launch gap. The
host thread issues one framework op per kernel; for a kernel with a long gap the op ends just before the
kernel starts (host-bound), otherwise the host is ahead of the device. Times are int64 ns since the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pypto_core.synth.kernels import Kernel

if TYPE_CHECKING:
    from pypto_core.synth.table import KernelTable

LAUNCH_LATENCY_NS = 1_200  # launch call returns -> device task may start
HOST_OP_US = {"aten::linear": 24.0, "npu::npu_fused_infer_attention_score": 38.0}
HOST_OP_DEFAULT_US = 16.0
HOST_AHEAD_US = 60.0  # how far ahead of the device a device-bound host gets, at most
STREAM_ID = 2
# Jitter (relative standard deviations): small, so that planted costs stay what plan.py computes.
DUR_JITTER = 0.015
GAP_JITTER = 0.08


@dataclass(slots=True)
class Placed:
    kernel: Kernel
    step: int
    start_ns: int
    dur_ns: int
    wait_ns: int  # device idle since the previous task ended (Wait Time(us))
    task_id: int
    connection_id: int
    host_start_ns: int  # the framework op (aten::*)
    host_dur_ns: int
    launch_start_ns: int  # the aclnn call / Node@launch inside it
    launch_dur_ns: int
    ratio_scale: float  # per-kernel jitter of the pipe ratios


@dataclass(slots=True)
class StepRecord:
    step: int
    start_ns: int  # ProfilerStep#N on the host
    end_ns: int
    first_kernel_ns: int
    last_kernel_end_ns: int
    compute_ns: int
    kernels: int


@dataclass(slots=True)
class StepColumns:
    """One placed step as int64 columns (ns), one entry per kernel of its ``KernelTable``."""

    step: int
    start_ns: np.ndarray
    dur_ns: np.ndarray
    wait_ns: np.ndarray  # device idle since the previous task ended (Wait Time(us))
    task_id: np.ndarray
    connection_id: np.ndarray
    host_start_ns: np.ndarray  # the framework op (aten::*)
    host_dur_ns: np.ndarray
    launch_start_ns: np.ndarray  # the aclnn call / Node@launch inside it
    launch_dur_ns: np.ndarray
    ratio_scale: np.ndarray  # per-kernel jitter of the pipe ratios (float)
    prev_end_ns: int  # where the device was before this step's first kernel
    cache_len: int  # context length of the step (its table moves with it)

    def placed(self, kernels: list[Kernel]) -> list[Placed]:
        """The same step as one object per kernel (the per-row reference path and tests; small steps only)."""
        cols = [c.tolist() for c in (self.start_ns, self.dur_ns, self.wait_ns, self.task_id,
                                     self.connection_id, self.host_start_ns, self.host_dur_ns,
                                     self.launch_start_ns, self.launch_dur_ns, self.ratio_scale)]
        return [Placed(k, self.step, *row) for k, row in zip(kernels, zip(*cols))]


class Scheduler:
    """Places whole steps at once: jitter and device times are numpy columns; only the host thread, whose
    next op waits for the previous one, is a plain loop over integers."""

    def __init__(self, *, seed: int, base_ns: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.device_end_ns = base_ns
        self.host_ns = base_ns
        self.task_id = 1000
        self.connection_id = 100

    @staticmethod
    def _jitter(values_us: np.ndarray, rel: float, z: np.ndarray) -> np.ndarray:
        factor = 1.0 + np.clip(z * rel, -3 * rel, 3 * rel)
        return np.maximum(20, np.rint(values_us * factor * 1000)).astype(np.int64)

    def place(self, step: int, table: KernelTable, cache_len: int) -> tuple[StepColumns, StepRecord]:
        n = table.n
        step_start = min(self.host_ns, self.device_end_ns)
        prev_end = self.device_end_ns
        z = self.rng.standard_normal((2, n))
        u = self.rng.random((2, n))
        gap = self._jitter(table.gap_us, GAP_JITTER, z[0])
        dur = self._jitter(table.durations_us(cache_len), DUR_JITTER, z[1])
        end = prev_end + np.cumsum(gap + dur)
        start = end - dur
        lead = np.where(table.host_bound, 0, ((0.3 + 0.7 * u[0]) * HOST_AHEAD_US * 1000).astype(np.int64))
        host_dur = table.host_dur_ns
        latest = start - LAUNCH_LATENCY_NS
        earliest = (latest - host_dur - lead).tolist()
        latest_l, host_dur_l = latest.tolist(), host_dur.tolist()
        hs_out = [0] * n
        hl_out = [0] * n
        host_ns = self.host_ns
        for i in range(n):
            le = latest_l[i]
            hs = earliest[i] if earliest[i] > host_ns else host_ns
            he = hs + host_dur_l[i]
            if he > le:
                he = le
            if he - hs < 400:  # squeezed: the host was barely in time
                hs = he - 400 if he - 400 > host_ns else host_ns
            hs_out[i] = hs
            hl_out[i] = he - hs if he - hs > 1 else 1
            host_ns = he + 300
        host_start = np.array(hs_out, dtype=np.int64)
        host_len = np.array(hl_out, dtype=np.int64)
        ids = np.arange(1, n + 1, dtype=np.int64)
        task = (self.task_id + ids - 1) % 65535 + 1
        conn = self.connection_id + ids
        cols = StepColumns(step, start, dur, gap, task, conn, host_start, host_len,
                           host_start + host_len * 2 // 5, np.maximum(1, host_len * 11 // 20),
                           1.0 + (u[1] * 0.08 - 0.04), prev_end, cache_len)
        if n:
            self.device_end_ns = int(end[-1])
            self.task_id, self.connection_id = int(task[-1]), int(conn[-1])
        self.host_ns = host_ns
        step_end = max(self.device_end_ns, self.host_ns) + 2_000
        self.host_ns = step_end
        rec = StepRecord(step, step_start, step_end, int(start[0]) if n else step_start, self.device_end_ns,
                         int(dur.sum()), n)
        return cols, rec
