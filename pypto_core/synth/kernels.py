"""The device kernels of one simulated step: real op types, shapes, Block Dim, durations and pipe counters.

Every duration is a roofline time divided by an efficiency, plus a fixed per-kernel overhead; every kernel
carries the device idle gap before it (its host launch gap). Kernels that belong to one of the four
anti-patterns carry that rule's id in ``rule``, in both the planted and the fixed variant, so that each rule's
cost is the difference of two sums that share nothing with the other rules (see ``plan.py``).

Op types, kernel names and aclnn APIs are the ones real Ascend profiles show (docs/domain.md §3.1,
and HF-eager
profiles on 910B: ``aclnnPowTensorScalar_PowsAiCore_Pows``, ``aclnnMean_ReduceMeanAiCore_ReduceMean``,
``aclnnSilu_SiluAiCore_Swish``, ``aclnnInplaceCopy_TransposeAiCore_Transpose``, ``aclnnCat_ConcatD_ConcatD``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np

from pypto_core.synth.model import RunConfig

# --- calibration (docs/domain.md §7: 7B fp16 decode on 910B ~40-60 ms/token eager, 12-20 ms fused)
# -------------
# Host launch gap of one small eager op when the host is the bottleneck: docs/domain.md §7 gives 20-60 µs of
# host
# time per small op; the device idles nearly that long between tiny kernels.
EAGER_LAUNCH_GAP_US = 22.0
# Gap in front of a kernel whose launch the host issued ahead of time (device-bound stretch).
QUEUED_GAP_US = 1.5
# Small non-rule vector ops (SiLU, Mul, RoPE) in an otherwise fused run: the host is partly ahead.
PARTLY_QUEUED_GAP_US = 6.0
# Host work between two decode steps: sampling sync, next input, H2D copy of positions.
STEP_GAP_US = 150.0
# Fraction of peak HBM bandwidth a decode GEMV reaches: tuned and 256-aligned vs unaligned K/N (the MTE2
# bursts are not 512 B aligned, docs/domain.md §2.3; the A3 roofline write-up measures big GEMMs within 10-21%
# of model).
MATMUL_BW_EFF_TUNED = 0.78
MATMUL_BW_EFF_UNALIGNED = 0.45
# Cube efficiency of prefill GEMMs: docs/domain.md §1 measured 62% -> 82% of peak for 6144^3 with L2-aware
# tiling.
MATMUL_CUBE_EFF_TUNED = 0.75
MATMUL_CUBE_EFF_UNALIGNED = 0.45
MATMUL_OVERHEAD_US = 3.5
MIX_ND2NZ_EXTRA_US = 10.0  # the AIV-side ND->NZ conversion of a MIX_AIC MatMul (docs/domain.md §2.3)
# Unfused decode attention BatchMatMul: one query row per head, strided K/V reads, mte2-bound.
BMM_BW_EFF = 0.30
FIA_BW_EFF = 0.55
FIA_CUBE_EFF = 0.50
FIA_OVERHEAD_US = 6.0
COPY_BW_EFF = 0.60  # ConcatD / TensorMove / BroadcastTo of cache-shaped tensors
VECTOR_BW_EFF = 0.50
TINY_VECTOR_US = 2.0  # docs/domain.md §7: unfused norm kernels 1.5-5 µs each
FUSED_NORM_US = 3.0  # docs/domain.md §3.1: AddRmsNorm 3.3-3.5 µs measured

DTYPE_NAMES = {"fp16": "FLOAT16", "bf16": "DT_BF16"}
HOST_TYPE_NAMES = {"fp16": "c10::Half", "bf16": "c10::BFloat16"}


@dataclass(frozen=True, slots=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str  # as the profiler writes it: FLOAT16, DT_BF16, FLOAT, INT64, INT32
    fmt: str = "ND"

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * {"FLOAT": 4, "INT64": 8, "INT32": 4, "BOOL": 1}.get(self.dtype, 2)


@dataclass(slots=True)
class Kernel:
    """One device task, before it is placed in time (durations in µs, nominal: no jitter)."""

    name: str
    op_type: str
    core: str  # Task Type: AI_CORE, AI_VECTOR_CORE, MIX_AIC
    block_dim: int
    mix_block_dim: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    dur_us: float
    gap_us: float
    pipes: dict[str, float]  # PipeUtilization ratios, keys like "aic_mte2" / "aiv_vec"
    host_op: str  # the framework op that launched it (aten::*, npu::*)
    api: str  # the aclnn API (CANN acl level)
    rule: str | None = None  # the anti-pattern whose segment this kernel belongs to
    busy: float = 0.96  # aicore_time / Duration


@overload
def vector_block_dim(nbytes: int, vector_cores: int) -> int: ...
@overload
def vector_block_dim(nbytes: np.ndarray, vector_cores: int) -> np.ndarray: ...
def vector_block_dim(nbytes: int | np.ndarray, vector_cores: int) -> int | np.ndarray:
    """Block Dim of a vector kernel moving ``nbytes``: one block per 8 KiB, the whole chip above 256 KiB."""
    if isinstance(nbytes, np.ndarray):
        return np.where(nbytes > 256 << 10, vector_cores,
                        np.maximum(1, np.minimum(vector_cores, nbytes // 8192)))
    return vector_cores if nbytes > 256 << 10 else max(1, min(vector_cores, nbytes // 8192))


def _mem_us(nbytes: float, bw: float, eff: float) -> float:
    return nbytes / (bw * eff) * 1e6


# --- pipe-ratio profiles (fractions of total cycles; docs/domain.md §3.2-3.3 thresholds)
# ---------------------------
# Tuned decode GEMV: mte2-heavy but below the advisor's 0.95 mte2-bound line.
PIPES_MM_TUNED = {"aic_mac": 0.22, "aic_scalar": 0.10, "aic_mte1": 0.30, "aic_mte2": 0.86,
                  "aic_fixpipe": 0.04}
# Unaligned GEMV: small bursts, scalar tiling overhead, nothing bound ("operator no bound", docs/domain.md
# §3.3).
PIPES_MM_UNALIGNED = {"aic_mac": 0.12, "aic_scalar": 0.38, "aic_mte1": 0.22, "aic_mte2": 0.55,
                      "aic_fixpipe": 0.05}
PIPES_MM_MIX = dict(PIPES_MM_UNALIGNED, aiv_vec=0.31, aiv_scalar=0.20, aiv_mte2=0.48, aiv_mte3=0.36)
PIPES_MM_PREFILL_TUNED = {"aic_mac": 0.82, "aic_scalar": 0.08, "aic_mte1": 0.55, "aic_mte2": 0.52,
                          "aic_fixpipe": 0.18}
PIPES_MM_PREFILL_UNALIGNED = {"aic_mac": 0.48, "aic_scalar": 0.30, "aic_mte1": 0.40, "aic_mte2": 0.61,
                              "aic_fixpipe": 0.15}
PIPES_MM_PREFILL_MIX = dict(PIPES_MM_PREFILL_UNALIGNED, aiv_vec=0.35, aiv_scalar=0.18, aiv_mte2=0.44,
                            aiv_mte3=0.33)
# Unfused decode attention BatchMatMul: the memory-bound signature (mte2 > 0.7, docs/domain.md §6.1).
PIPES_BMM_DECODE = {"aic_mac": 0.04, "aic_scalar": 0.21, "aic_mte1": 0.12, "aic_mte2": 0.83,
                    "aic_fixpipe": 0.09}
PIPES_BMM_PREFILL = {"aic_mac": 0.46, "aic_scalar": 0.15, "aic_mte1": 0.35, "aic_mte2": 0.72,
                     "aic_fixpipe": 0.30}
PIPES_FIA_DECODE = {"aic_mac": 0.16, "aic_scalar": 0.26, "aic_mte1": 0.18, "aic_mte2": 0.58,
                    "aic_fixpipe": 0.11, "aiv_vec": 0.36, "aiv_scalar": 0.22, "aiv_mte2": 0.31,
                    "aiv_mte3": 0.12}
PIPES_FIA_PREFILL = {"aic_mac": 0.62, "aic_scalar": 0.12, "aic_mte1": 0.41, "aic_mte2": 0.47,
                     "aic_fixpipe": 0.38, "aiv_vec": 0.58, "aiv_scalar": 0.20, "aiv_mte2": 0.21,
                     "aiv_mte3": 0.17}
# Tiny vector op: launch-dominated, every ratio low.
PIPES_TINY = {"aiv_vec": 0.12, "aiv_scalar": 0.41, "aiv_mte2": 0.19, "aiv_mte3": 0.08}
PIPES_VECTOR = {"aiv_vec": 0.46, "aiv_scalar": 0.14, "aiv_mte2": 0.52, "aiv_mte3": 0.31}
PIPES_COPY = {"aiv_vec": 0.03, "aiv_scalar": 0.06, "aiv_mte2": 0.78, "aiv_mte3": 0.71}
PIPES_NORM_FUSED = {"aiv_vec": 0.38, "aiv_scalar": 0.24, "aiv_mte2": 0.35, "aiv_mte3": 0.14}


class StepBuilder:
    """Builds the kernel list of one step (prefill or one decode token) for a ``RunConfig``."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.m = cfg.model
        self.sku = cfg.sku
        self.dt = DTYPE_NAMES[cfg.dtype]
        self.bw = cfg.sku.hbm_bytes_per_s
        self.peak = cfg.sku.peak_flops

    # -- generic kernel shapes -------------------------------------------------------------------------------
    def _t(self, *shape: int, dtype: str | None = None, fmt: str = "ND") -> Tensor:
        return Tensor(tuple(shape), dtype or self.dt, fmt)

    def vector(self, name: str, op_type: str, api: str, host_op: str, inputs: tuple[Tensor, ...],
               outputs: tuple[Tensor, ...], *, gap: float, rule: str | None, base_us: float = TINY_VECTOR_US,
               pipes: dict[str, float] | None = None, eff: float = VECTOR_BW_EFF) -> Kernel:
        nbytes = sum(t.nbytes for t in inputs) + sum(t.nbytes for t in outputs)
        dur = base_us + _mem_us(nbytes, self.bw, eff)
        big = nbytes > 4 << 20
        blocks = vector_block_dim(nbytes, self.sku.vector_cores)
        return Kernel(name, op_type, "AI_VECTOR_CORE", blocks, 0, inputs, outputs, dur, gap,
                      pipes or (PIPES_VECTOR if big else PIPES_TINY), host_op, api, rule,
                      busy=0.95 if big else 0.80)

    def matmul(self, x: Tensor, w: Tensor, bias: Tensor | None, *, rule: str | None, unaligned: bool,
               gap: float, decode: bool) -> Kernel:
        """x [M,K] @ w[N,K]^T (nn.Linear weights, as aclnnMatmul records them)."""
        m_, k_ = x.shape
        n_ = w.shape[0]
        out = self._t(m_, n_)
        nbytes = x.nbytes + w.nbytes + out.nbytes
        flops = 2.0 * m_ * n_ * k_
        bw_eff = MATMUL_BW_EFF_UNALIGNED if unaligned else MATMUL_BW_EFF_TUNED
        cube_eff = MATMUL_CUBE_EFF_UNALIGNED if unaligned else MATMUL_CUBE_EFF_TUNED
        dur = MATMUL_OVERHEAD_US + max(_mem_us(nbytes, self.bw, bw_eff), flops / (self.peak * cube_eff) * 1e6)
        # docs/domain.md §2.3: an A2/A3 MatMul whose inner axis (> 1000) is not 512 B aligned becomes MIX_AIC.
        inner_unaligned = (k_ * 2) % 512 != 0
        mix = unaligned and inner_unaligned and k_ > 1000 and not self.sku.coupled
        if mix:
            dur += MIX_ND2NZ_EXTRA_US
            core, blocks, mix_blocks = "MIX_AIC", self.sku.ai_cores, self.sku.vector_cores
            pipes = PIPES_MM_MIX if decode else PIPES_MM_PREFILL_MIX
        else:
            core = "AI_CORE"
            # Unaligned tilings leave cores idle: a Block Dim that is not a multiple of the core count is what
            # the advisor's block_dim_analysis flags (docs/domain.md §3.3 / docs/formats.md §4.3).
            blocks = self.sku.ai_cores - 3 if unaligned else self.sku.ai_cores
            mix_blocks = 0
            if decode:
                pipes = PIPES_MM_UNALIGNED if unaligned else PIPES_MM_TUNED
            else:
                pipes = PIPES_MM_PREFILL_UNALIGNED if unaligned else PIPES_MM_PREFILL_TUNED
        inputs = (x, w) if bias is None else (x, w, bias)
        api = "aclnnMatmul" if bias is None else "aclnnAddmm"
        return Kernel(f"{api}_MatMulCommon_MatMulV2", "MatMulV2", core, blocks, mix_blocks, inputs, (out,),
                      dur, gap, pipes, "aten::linear", api, rule)

    # -- the rule segments -----------------------------------------------------------------------------------
    def norm(self, rows: tuple[int, int], *, residual: bool, first: bool) -> list[Kernel]:
        """RMSNorm of [B,S,h] (plus the residual add before it, except for the very first norm)."""
        cfg, h = self.cfg, self.m.hidden
        b, s = rows
        rule = "norm_launch_overhead"
        x = self._t(b, s, h)
        if not cfg.planted(rule):
            w = self._t(h)
            rstd = self._t(b, s, 1, dtype="FLOAT")
            if residual:
                return [self.vector("aclnnAddRmsNorm_AddRmsNorm_AddRmsNorm", "AddRmsNorm", "aclnnAddRmsNorm",
                                    "npu::npu_add_rms_norm", (x, x, w), (x, rstd, x), gap=QUEUED_GAP_US,
                                    rule=rule, base_us=FUSED_NORM_US, pipes=PIPES_NORM_FUSED)]
            return [self.vector("aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "aclnnRmsNorm",
                                "npu::npu_rms_norm", (x, w), (x, rstd),
                                gap=QUEUED_GAP_US if not first else PARTLY_QUEUED_GAP_US, rule=rule,
                                base_us=FUSED_NORM_US * 0.9, pipes=PIPES_NORM_FUSED)]
        # HF LlamaRMSNorm in eager mode: to(fp32), pow(2), mean(-1), +eps, rsqrt, mul, to(dtype), weight mul.
        x32 = self._t(b, s, h, dtype="FLOAT")
        r32 = self._t(b, s, 1, dtype="FLOAT")
        g = EAGER_LAUNCH_GAP_US
        out: list[Kernel] = []
        if residual:
            out.append(self.vector("aclnnAdd_AddAiCore_Add", "Add", "aclnnAdd", "aten::add", (x, x), (x,),
                                   gap=g, rule=rule))
        out += [
            self.vector("aclnnInplaceCopy_CastAiCore_Cast", "Cast", "aclnnInplaceCopy", "aten::to", (x,),
                        (x32,), gap=g, rule=rule),
            self.vector("aclnnPowTensorScalar_PowsAiCore_Pows", "Pows", "aclnnPowTensorScalar", "aten::pow",
                        (x32,), (x32,), gap=g, rule=rule),
            self.vector("aclnnMean_ReduceMeanAiCore_ReduceMean", "ReduceMean", "aclnnMean", "aten::mean",
                        (x32,), (r32,), gap=g, rule=rule, base_us=TINY_VECTOR_US * 1.4),
            self.vector("aclnnAdds_AddAiCore_Add", "Add", "aclnnAdds", "aten::add", (r32,), (r32,), gap=g,
                        rule=rule, base_us=TINY_VECTOR_US * 0.8),
            self.vector("aclnnRsqrt_RsqrtAiCore_Rsqrt", "Rsqrt", "aclnnRsqrt", "aten::rsqrt", (r32,), (r32,),
                        gap=g, rule=rule, base_us=TINY_VECTOR_US * 0.8),
            self.vector("aclnnMul_MulAiCore_Mul", "Mul", "aclnnMul", "aten::mul", (x32, r32), (x32,), gap=g,
                        rule=rule),
            self.vector("aclnnInplaceCopy_CastAiCore_Cast", "Cast", "aclnnInplaceCopy", "aten::to", (x32,),
                        (x,), gap=g, rule=rule),
            self.vector("aclnnMul_MulAiCore_Mul", "Mul", "aclnnMul", "aten::mul", (self._t(h), x), (x,),
                        gap=g, rule=rule),
        ]
        return out

    def attention_layout(self, b: int, s: int, cache_len: int) -> tuple[list[Kernel], list[Kernel], str]:
        """KV-cache update around attention: (kernels before
        attention, kernels after, layout attention reads)."""
        m, rule = self.m, "kv_cache_layout"
        n, nk, d = m.heads, m.kv_heads, m.head_dim
        if not self.cfg.planted(rule):
            # BSND cache (B, S_max, N_kv, D) updated in place: torch_npu.scatter_update_(cache, pos, k, 1).
            smax = self.cfg.prompt_tokens + max(self.cfg.tokens, 1)
            smax = -(-smax // 128) * 128
            cache = self._t(b, smax, nk, d)
            pos = self._t(b, dtype="INT64")
            new = self._t(b, s, nk, d)
            before = [self.vector("aclnnScatterUpdate_ScatterUpdate_ScatterUpdate", "ScatterUpdate",
                                  "aclnnScatterUpdate", "npu::scatter_update_", (cache, pos, new), (cache,),
                                  gap=QUEUED_GAP_US, rule=rule, base_us=TINY_VECTOR_US * 1.2)
                      for _ in range(2)]
            # Only the new rows move: correct the roofline bytes (the cache itself is not read).
            for k in before:
                k.dur_us = TINY_VECTOR_US * 1.2 + _mem_us(2 * new.nbytes, self.bw, VECTOR_BW_EFF)
                k.pipes = PIPES_TINY
            return before, [], "BSND"
        # HF DynamicCache: BNSD tensors, q/k/v transposed to BNSD every step, cache grown with torch.cat and
        # made contiguous again (docs/domain.md §5, §6.4; the honest proxy of a layout tax).
        g = EAGER_LAUNCH_GAP_US
        before = []
        for heads in (n, nk, nk):
            before.append(self.vector("aclnnInplaceCopy_TransposeAiCore_Transpose", "Transpose",
                                      "aclnnInplaceCopy", "aten::contiguous", (self._t(b, s, heads, d),),
                                      (self._t(b, heads, s, d),), gap=g, rule=rule))
        old_len = cache_len - s
        for _ in range(2):
            full = self._t(b, nk, cache_len, d)
            if old_len > 0:
                before.append(self.vector("aclnnCat_ConcatD_ConcatD", "ConcatD", "aclnnCat", "aten::cat",
                                          (self._t(b, nk, old_len, d), self._t(b, nk, s, d)), (full,), gap=g,
                                          rule=rule, pipes=PIPES_COPY, eff=COPY_BW_EFF))
            before.append(self.vector("aclnnInplaceCopy_TensorMoveAiCore_TensorMove", "TensorMove",
                                      "aclnnInplaceCopy", "aten::contiguous", (full,), (full,), gap=g,
                                      rule=rule, pipes=PIPES_COPY, eff=COPY_BW_EFF))
        after = [self.vector("aclnnInplaceCopy_TransposeAiCore_Transpose", "Transpose", "aclnnInplaceCopy",
                             "aten::contiguous", (self._t(b, n, s, d),), (self._t(b, s, n, d),), gap=g,
                             rule=rule)]
        return before, after, "BNSD"

    def attention_core(self, b: int, s: int, cache_len: int, layout: str) -> list[Kernel]:
        m, rule = self.m, "attention_memory_bound"
        n, nk, d = m.heads, m.kv_heads, m.head_dim
        decode = s == 1
        if not self.cfg.planted(rule):
            def bsnd_or_bnsd(heads: int, seq: int) -> Tensor:
                return self._t(b, seq, heads, d) if layout == "BSND" else self._t(b, heads, seq, d)

            q, kv, o = bsnd_or_bnsd(n, s), bsnd_or_bnsd(nk, cache_len), bsnd_or_bnsd(n, s)
            mask = self._t(2048, 2048, dtype="BOOL")
            lens = self._t(b, dtype="INT64")
            kv_bytes = 2 * kv.nbytes + q.nbytes + o.nbytes
            flops = 4.0 * b * n * s * cache_len * d * (0.5 if s > 1 else 1.0)
            dur = FIA_OVERHEAD_US + max(_mem_us(kv_bytes, self.bw, FIA_BW_EFF),
                                        flops / (self.peak * FIA_CUBE_EFF) * 1e6)
            blocks = self.sku.ai_cores if (b * n > 8 or not decode) else max(1, b * n)
            # 310P has no split cube/vector cores: a fused op runs as a plain AI_CORE task there.
            core, mix_blocks = ("AI_CORE", 0) if self.sku.coupled else ("MIX_AIC", blocks * 2)
            name = "aclnnFusedInferAttentionScoreV2_FusedInferAttentionScore_FusedInferAttentionScore"
            return [Kernel(name,
                           "FusedInferAttentionScore", core, blocks, mix_blocks, (q, kv, kv, mask, lens),
                           (o,), dur, QUEUED_GAP_US, PIPES_FIA_DECODE if decode else PIPES_FIA_PREFILL,
                           "npu::npu_fused_infer_attention_score", "aclnnFusedInferAttentionScoreV2", rule,
                           busy=0.95)]
        # HF eager attention: repeat_kv (GQA), q@k^T, *scale, +mask, softmax in fp32, @v.
        g = EAGER_LAUNCH_GAP_US
        out: list[Kernel] = []
        k_full = self._t(b, n, cache_len, d)
        if nk != n:
            for _ in range(2):
                out.append(self.vector("aclnnExpand_BroadcastToAiCore_BroadcastTo", "BroadcastTo",
                                       "aclnnExpand", "aten::expand", (self._t(b, nk, 1, cache_len, d),),
                                       (k_full,), gap=g, rule=rule, pipes=PIPES_COPY, eff=COPY_BW_EFF))
        q = self._t(b, n, s, d)
        scores = self._t(b, n, s, cache_len)
        scores32 = self._t(b, n, s, cache_len, dtype="FLOAT")
        out.append(self.bmm(q, self._t(b, n, d, cache_len), scores, rule=rule, decode=decode))
        out.append(self.vector("aclnnMuls_MulAiCore_Mul", "Mul", "aclnnMuls", "aten::mul", (scores,),
                               (scores,), gap=g, rule=rule))
        out.append(self.vector("aclnnAdd_AddAiCore_Add", "Add", "aclnnAdd", "aten::add",
                               (scores, self._t(b, 1, s, cache_len)), (scores,), gap=g, rule=rule))
        out.append(self.vector("aclnnInplaceCopy_CastAiCore_Cast", "Cast", "aclnnInplaceCopy", "aten::to",
                               (scores,), (scores32,), gap=g, rule=rule))
        out.append(self.vector("aclnnSoftmax_SoftmaxV2AiCore_SoftmaxV2", "SoftmaxV2", "aclnnSoftmax",
                               "aten::_softmax", (scores32,), (scores32,), gap=g, rule=rule))
        out.append(self.vector("aclnnInplaceCopy_CastAiCore_Cast", "Cast", "aclnnInplaceCopy", "aten::to",
                               (scores32,), (scores,), gap=g, rule=rule))
        out.append(self.bmm(scores, k_full, q, rule=rule, decode=decode))
        return out

    def bmm(self, a: Tensor, b_: Tensor, out: Tensor, *, rule: str, decode: bool) -> Kernel:
        bsz, heads, m_, k_ = a.shape
        n_ = out.shape[-1]
        nbytes = a.nbytes + b_.nbytes + out.nbytes
        flops = 2.0 * bsz * heads * m_ * n_ * k_
        dur = MATMUL_OVERHEAD_US + max(_mem_us(nbytes, self.bw, BMM_BW_EFF),
                                       flops / (self.peak * MATMUL_CUBE_EFF_UNALIGNED) * 1e6)
        return Kernel("aclnnMatmul_BatchMatMulV2_BatchMatMulV2", "BatchMatMulV2", "AI_CORE",
                      self.sku.ai_cores, 0, (a, b_), (out,), dur, EAGER_LAUNCH_GAP_US,
                      PIPES_BMM_DECODE if decode else PIPES_BMM_PREFILL, "aten::matmul", "aclnnMatmul", rule)

    # -- a whole step ----------------------------------------------------------------------------------------
    def step(self, s: int, cache_len: int) -> list[Kernel]:
        """Kernels of one forward pass over ``s`` new tokens per sequence with ``cache_len`` tokens of context
        after it (prefill: s == cache_len == prompt; decode: s == 1)."""
        cfg, m = self.cfg, self.m
        b, h, d = cfg.batch, m.hidden, m.head_dim
        decode = s == 1
        rows = b * s
        tiling = "matmul_tiling"
        unaligned = cfg.planted(tiling)
        f, vocab = cfg.ffn, cfg.vocab
        ks: list[Kernel] = []
        ids = self._t(b, s, dtype="INT64")
        ks.append(self.vector("aclnnEmbedding_GatherV2AiCore_GatherV2", "GatherV2", "aclnnEmbedding",
                              "aten::embedding", (self._t(vocab, h), ids), (self._t(b, s, h),),
                              gap=STEP_GAP_US, rule=None, base_us=TINY_VECTOR_US * 1.5))
        # A gather reads only the looked-up rows, not the whole table.
        ks[-1].dur_us = TINY_VECTOR_US * 1.5 + _mem_us(2 * rows * h * 2, self.bw, VECTOR_BW_EFF)
        x2 = self._t(rows, h)
        for layer in range(m.layers):
            ks += self.norm((b, s), residual=layer > 0, first=layer == 0)
            for heads in (m.heads, m.kv_heads, m.kv_heads):
                bias = self._t(heads * d) if m.qkv_bias else None
                ks.append(self.matmul(x2, self._t(heads * d, h), bias, rule=None, unaligned=False,
                                      gap=QUEUED_GAP_US, decode=decode))
            ks.append(self.vector("aclnnApplyRotaryPosEmb_ApplyRotaryPosEmb_ApplyRotaryPosEmb",
                                  "ApplyRotaryPosEmb", "aclnnApplyRotaryPosEmb",
                                  "npu::npu_apply_rotary_pos_emb",
                                  (self._t(b, s, m.heads, d), self._t(b, s, m.kv_heads, d),
                                   self._t(1, s, 1, d), self._t(1, s, 1, d)),
                                  (self._t(b, s, m.heads, d), self._t(b, s, m.kv_heads, d)),
                                  gap=PARTLY_QUEUED_GAP_US, rule=None, base_us=TINY_VECTOR_US * 1.6))
            before, after, layout = self.attention_layout(b, s, cache_len)
            ks += before
            ks += self.attention_core(b, s, cache_len, layout)
            ks += after
            ks.append(self.matmul(x2, self._t(h, h), None, rule=None, unaligned=False, gap=QUEUED_GAP_US,
                                  decode=decode))
            ks += self.norm((b, s), residual=True, first=False)
            gate = self.matmul(x2, self._t(f, h), None, rule=tiling, unaligned=unaligned, gap=QUEUED_GAP_US,
                               decode=decode)
            up = self.matmul(x2, self._t(f, h), None, rule=tiling, unaligned=unaligned, gap=QUEUED_GAP_US,
                             decode=decode)
            act = self._t(rows, f)
            ks.append(gate)
            ks.append(self.vector("aclnnSilu_SiluAiCore_Swish", "Swish", "aclnnSilu", "aten::silu", (act,),
                                  (act,), gap=PARTLY_QUEUED_GAP_US, rule=None))
            ks.append(up)
            ks.append(self.vector("aclnnMul_MulAiCore_Mul", "Mul", "aclnnMul", "aten::mul", (act, act),
                                  (act,), gap=PARTLY_QUEUED_GAP_US, rule=None))
            ks.append(self.matmul(act, self._t(h, f), None, rule=tiling, unaligned=unaligned,
                                  gap=QUEUED_GAP_US, decode=decode))
        ks += self.norm((b, s), residual=True, first=False)
        # HF generate keeps only the last position's logits.
        ks.append(self.matmul(self._t(b, h), self._t(vocab, h), None, rule=tiling, unaligned=unaligned,
                              gap=QUEUED_GAP_US, decode=True))
        ks.append(self.vector("aclnnArgMax_ArgMaxV2AiCore_ArgMaxV2", "ArgMaxV2", "aclnnArgMax",
                              "aten::argmax", (self._t(b, vocab),), (self._t(b, dtype="INT64"),),
                              gap=PARTLY_QUEUED_GAP_US, rule=None, base_us=TINY_VECTOR_US * 1.5))
        return ks


def nominal_step_us(kernels: list[Kernel]) -> float:
    """Device time of a step as the profile shows it: every kernel plus the idle gap in front of it."""
    return sum(k.dur_us + k.gap_us for k in kernels)
