"""Small decoder profiles built in code, for unit tests of the rules (no reader, no simulator).

Each anti-pattern can be planted or not, with made-up but roofline-consistent durations, so a test can
check both that a rule fires and that it stays quiet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from pypto_core.hardware import get_sku
from pypto_core.profile import Profile, ProfileMeta

T0 = 1_736_408_883_688_177_930  # a real-looking epoch-ns start


@dataclass
class _Run:
    sku: str
    rows: dict[str, list] = field(default_factory=lambda: {k: [] for k in (
        "name", "op_type", "core_type", "stream_id", "task_id", "device_id", "step_id", "start_ns", "dur_ns",
        "block_dim", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes", "aic_mte2_ratio",
        "aiv_mte2_ratio", "aic_mac_ratio")})
    t: int = T0
    step: int = 0
    # the host's launch call for each kernel: it spans the gap before the kernel (an eager run issues each
    # op while the device waits), so the attribution calls that gap host_launch_bound
    host: dict[str, list] = field(default_factory=lambda: {"name": [], "start_ns": [], "dur_ns": []})

    def add(self, op_type: str, dur_us: float, inputs: list[list[int]], outputs: list[list[int]], *,
            core: str = "AI_VECTOR_CORE", gap_us: float = 2.0, mte2: float | None = None, block: int = 40,
            name: str | None = None, dtype: str = "FLOAT16") -> None:
        self.host["name"].append(f"aclnn{op_type}")
        self.host["start_ns"].append(self.t)
        self.host["dur_ns"].append(int(gap_us * 1e3))
        self.t += int(gap_us * 1e3)
        r = self.rows
        r["name"].append(name or f"aclnn{op_type}_{op_type}")
        r["op_type"].append(op_type)
        r["core_type"].append(core)
        r["stream_id"].append(2)
        r["task_id"].append(len(r["name"]))
        r["device_id"].append(0)
        r["step_id"].append(self.step)
        r["start_ns"].append(self.t)
        r["dur_ns"].append(int(dur_us * 1e3))
        r["block_dim"].append(block)
        r["input_shapes"].append(inputs)
        r["input_dtypes"].append([dtype] * len(inputs))
        r["output_shapes"].append(outputs)
        r["output_dtypes"].append([dtype] * len(outputs))
        r["aic_mte2_ratio"].append(mte2 if core in ("AI_CORE", "MIX_AIC") else None)
        r["aiv_mte2_ratio"].append(mte2 if core not in ("AI_CORE", "MIX_AIC") else None)
        r["aic_mac_ratio"].append(None)
        self.t += int(dur_us * 1e3)

    def matmul(self, m: int, k: int, n: int, eff: float, gap_us: float, core: str = "AI_CORE") -> None:
        spec = get_sku(self.sku)
        bound_s = spec.bound_time_s(2 * m * k * n, 2 * (m * k + k * n + m * n))
        self.add("MatMulV2", bound_s / eff * 1e6, [[m, k], [k, n]], [[m, n]], core=core, gap_us=gap_us,
                 block=20)


def decoder_profile(*, planted: frozenset[str] = frozenset(), tokens: int = 4, layers: int = 2,
                    batch: int = 1, hidden: int = 4096, heads: int = 32, head_dim: int = 128,
                    kv_len: int = 512, vocab: int = 32000, sku: str = "910B3", eager_gap_us: float = 20.0,
                    device: str | None = "Ascend910B3", extra: list[str] | None = None,
                    fused_norm_gap_us: float | None = None) -> Profile:
    """A decode-only run of ``tokens`` steps of a Llama-like model with the ``planted`` anti-patterns;
    ``fused_norm_gap_us``: the host gap before each fused norm kernel (one that waits on the host)."""
    run = _Run(sku)
    steps = {"step_id": [], "start_ns": [], "end_ns": []}
    gap = eager_gap_us if "norm_launch_overhead" in planted else 2.0
    norm_gap = fused_norm_gap_us if fused_norm_gap_us is not None else gap
    mm_k = hidden + 4 if "matmul_tiling" in planted else hidden  # 4100: not a multiple of 256, not 512 B
    mm_eff = 0.3 if "matmul_tiling" in planted else 0.8
    B, H, N, D = batch, hidden, heads, head_dim
    for tok in range(tokens):
        run.step = tok
        steps["step_id"].append(tok)
        steps["start_ns"].append(run.t)
        S = kv_len + tok
        for _layer in range(layers):
            _norm(run, planted, B, H, norm_gap)
            for _ in range(3):  # q, k, v projections
                run.matmul(B, mm_k, H, mm_eff, gap)
            run.add("RotaryMul", 3.0, [[B, 1, N, D]] * 3, [[B, 1, N, D]], gap_us=gap)
            if "kv_cache_layout" in planted:
                for _ in range(3):
                    run.add("Transpose", 4.0, [[B, 1, N, D]], [[B, N, 1, D]], gap_us=gap)
                for _ in range(2):
                    run.add("ConcatD", 12.0, [[B, N, S - 1, D], [B, N, 1, D]], [[B, N, S, D]], gap_us=gap)
            else:
                for _ in range(2):
                    run.add("ScatterUpdate", 3.0, [[B, S, N, D], [B], [B, 1, N, D]], [[B, S, N, D]],
                            gap_us=gap)
            if "attention_memory_bound" in planted:
                run.add("BatchMatMulV2", 30.0, [[B, N, 1, D], [B, N, D, S]], [[B, N, 1, S]], core="AI_CORE",
                        gap_us=gap)
                run.add("Muls", 2.0, [[B, N, 1, S]], [[B, N, 1, S]], gap_us=gap)
                run.add("SoftmaxV2", 6.0, [[B, N, 1, S]], [[B, N, 1, S]], gap_us=gap)
                run.add("BatchMatMulV2", 30.0, [[B, N, 1, S], [B, N, S, D]], [[B, N, 1, D]], core="AI_CORE",
                        gap_us=gap)
            else:
                run.add("IncreFlashAttention", 24.0, [[B, 1, N, D], [B, S, N, D], [B, S, N, D]],
                        [[B, 1, N, D]], core="MIX_AIC", gap_us=gap, mte2=0.5)
            run.matmul(B, H, H, mm_eff if "matmul_tiling" not in planted else 0.8, gap)
            _norm(run, planted, B, H, norm_gap)
            run.matmul(B, H, 11008, 0.8, gap)
            run.matmul(B, H, 11008, 0.8, gap)
            run.add("SwiGlu", 8.5, [[B, 2 * 11008]], [[B, 11008]], gap_us=gap, block=1)
            run.matmul(B, 11008, H, 0.8, gap)
        _norm(run, planted, B, H, norm_gap)
        run.matmul(B, H, vocab, 0.8, gap)
        run.add("ArgMaxV2", 5.0, [[B, vocab]], [[B]], gap_us=gap)
        steps["end_ns"].append(run.t + 1000)
        run.t += 1000
    for op in extra or []:
        if op == "aicpu":
            run.add("NonZero", 150.0, [[B, 4096]], [[B, 4096]], core="AI_CPU", gap_us=2.0)
        if op == "transdata":
            for _ in range(10 * tokens):
                run.add("TransData", 40.0, [[H, H]], [[H // 16, H // 16, 16, 16]], gap_us=2.0, block=20)
    kernels = pa.table({
        **{k: run.rows[k] for k in ("name", "op_type", "core_type")},
        **{k: pa.array(run.rows[k], pa.int64()) for k in ("stream_id", "task_id", "device_id", "step_id",
                                                           "start_ns", "dur_ns", "block_dim")},
        "input_shapes": pa.array(run.rows["input_shapes"], pa.list_(pa.list_(pa.int64()))),
        "input_dtypes": pa.array(run.rows["input_dtypes"], pa.list_(pa.string())),
        "output_shapes": pa.array(run.rows["output_shapes"], pa.list_(pa.list_(pa.int64()))),
        "output_dtypes": pa.array(run.rows["output_dtypes"], pa.list_(pa.string())),
        "aic_mte2_ratio": pa.array(run.rows["aic_mte2_ratio"], pa.float64()),
        "aiv_mte2_ratio": pa.array(run.rows["aiv_mte2_ratio"], pa.float64()),
    })
    steps_t = pa.table({k: pa.array(v, pa.int64()) for k, v in steps.items()})
    host = pa.table({"name": run.host["name"],
                     **{k: pa.array(run.host[k], pa.int64()) for k in ("start_ns", "dur_ns")}})
    return Profile(meta=ProfileMeta(format="ascend_pt", device=device, simulated=True), kernels=kernels,
                   steps=steps_t, host_ops=host)


def _norm(run: _Run, planted: frozenset[str], B: int, H: int, gap: float) -> None:
    if "norm_launch_overhead" in planted:
        for op in ("Cast", "Pow", "ReduceMean", "Add", "Rsqrt", "Mul", "Mul", "Cast"):
            shape = [[B, 1]] if op in ("Add", "Rsqrt") else [[B, H]]
            run.add(op, 2.0, shape, shape, gap_us=gap, block=1)
    else:
        run.add("RmsNorm", 3.0, [[B, H], [H]], [[B, H]], gap_us=gap, block=1)
