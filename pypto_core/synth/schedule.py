"""Places the kernels of each step in time, on the device and on the host, with a small seeded jitter.

The device runs one compute stream: each kernel starts after the previous one ends plus its launch gap. The
host thread issues one framework op per kernel; for a kernel with a long gap the op ends just before the
kernel starts (host-bound), otherwise the host is ahead of the device. Times are int64 ns since the epoch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pypto_core.synth.kernels import EAGER_LAUNCH_GAP_US, Kernel

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


class Scheduler:
    def __init__(self, *, seed: int, base_ns: int) -> None:
        self.rng = random.Random(seed)
        self.device_end_ns = base_ns
        self.host_ns = base_ns
        self.task_id = 1000
        self.connection_id = 100

    def _jitter(self, value_us: float, rel: float) -> int:
        factor = 1.0 + max(-3 * rel, min(3 * rel, self.rng.gauss(0.0, rel)))
        return max(20, int(round(value_us * factor * 1000)))

    def place(self, step: int, kernels: list[Kernel]) -> tuple[list[Placed], StepRecord]:
        step_start = min(self.host_ns, self.device_end_ns)
        placed: list[Placed] = []
        compute = 0
        for k in kernels:
            gap = self._jitter(k.gap_us, GAP_JITTER)
            dur = self._jitter(k.dur_us, DUR_JITTER)
            start = self.device_end_ns + gap
            self.device_end_ns = start + dur
            compute += dur
            host_dur = int(HOST_OP_US.get(k.host_op, HOST_OP_DEFAULT_US) * 1000)
            host_bound = k.gap_us >= EAGER_LAUNCH_GAP_US / 2
            lead = 0 if host_bound else int(self.rng.uniform(0.3, 1.0) * HOST_AHEAD_US * 1000)
            latest_end = start - LAUNCH_LATENCY_NS
            host_start = max(self.host_ns, latest_end - host_dur - lead)
            host_end = min(host_start + host_dur, latest_end)
            if host_end - host_start < 400:  # squeezed: the host was barely in time
                host_start = max(self.host_ns, host_end - 400)
            host_len = max(1, host_end - host_start)
            launch_start = host_start + host_len * 2 // 5
            launch_dur = max(1, host_len * 11 // 20)
            self.host_ns = host_end + 300
            self.task_id = self.task_id + 1 if self.task_id < 65535 else 1
            self.connection_id += 1
            placed.append(Placed(k, step, start, dur, gap, self.task_id, self.connection_id, host_start, host_len,
                                 launch_start, launch_dur, 1.0 + self.rng.uniform(-0.04, 0.04)))
        end = max(self.device_end_ns, self.host_ns) + 2_000
        self.host_ns = end
        rec = StepRecord(step, step_start, end, placed[0].start_ns if placed else step_start,
                         self.device_end_ns, compute, len(placed))
        return placed, rec
