"""The model of one simulated inference run: which LLM, on which chip, with which anti-patterns.

Numbers carry their evidence (docs/domain.md §2 for the chips, the models' public configs for the LLMs).
Nothing here writes files; ``kernels`` turns a ``RunConfig`` into device kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The anti-patterns the simulator plants: the seed's four, each under the fixed id of the rule that finds it
# (docs/contract.md), with what the fixed run's kernels use instead (the remedies' output), for docs and the
# CLI help. Each is planted by default and removed by ``RunConfig.fixed``. This is the simulator's own table
# (how ``kernels`` writes each pattern); what a rule is lives in its module (pypto_core/rules), and
# tests/core/rules/test_rule_declarations.py checks that every id here is a registered rule.
FIXES: dict[str, str] = {
    "matmul_tiling": "weights padded to multiples of 256 elements, tuned MatMul at good efficiency",
    "attention_memory_bound": "FusedInferAttentionScore instead of BatchMatMulV2 + SoftmaxV2 + BatchMatMulV2",
    "kv_cache_layout": "BSND cache updated in place (ScatterUpdate), no Transpose/ConcatD/TensorMove",
    "norm_launch_overhead": ("RmsNorm / AddRmsNorm instead of Cast-Pows-ReduceMean-Add-Rsqrt-Mul-Cast-Mul "
                             "chains"),
}
RULES: tuple[str, ...] = tuple(FIXES)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as its Hugging Face config.json describes it."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    qkv_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def pruned_ffn(self) -> int:
        """The planted ``matmul_tiling`` checkpoint: structurally pruned so that the intermediate size is a
        multiple of 2 but neither of 16 nor of 256 (ffn - 86 ≡ 170 mod 256 for every model here)."""
        return self.ffn - 86

    @property
    def padded_vocab(self) -> int:
        """Vocabulary after the planted checkpoint added one pad token (vocab + 1, unaligned)."""
        return self.vocab + 1


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


# Public configs: meta-llama/Llama-2-7b-hf, meta-llama/Meta-Llama-3-8B, Qwen/Qwen2.5-7B-Instruct
# (docs/domain.md §7 repeats the llama2 numbers).
MODELS: dict[str, ModelSpec] = {
    "llama2-7b": ModelSpec("llama2-7b", layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008,
                           vocab=32000),
    "llama3-8b": ModelSpec("llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                           vocab=128256),
    "qwen2.5-7b": ModelSpec("qwen2.5-7b", layers=28, hidden=3584, heads=28, kv_heads=4, ffn=18944,
                            vocab=152064, qkv_bias=True),
}


@dataclass(frozen=True)
class SkuSpec:
    """Roofline inputs of one Ascend SoC (docs/domain.md §2.2)."""

    name: str
    soc: str  # the name npu-smi and the profiler's NPU_INFO use
    ai_cores: int  # cube cores (AIC); also the Block Dim of a full-chip cube kernel
    vector_cores: int  # AIV
    freq_mhz: int
    fp16_tflops: float  # 16*16*16 MAC * 2 * AIC * f
    hbm_gbps: float  # GB/s, 1e9 bytes
    hbm_gib: int
    coupled: bool = False  # 310P: cube and vector units share one AI Core (no aic_/aiv_ split)

    @property
    def peak_flops(self) -> float:
        return self.fp16_tflops * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gbps * 1e9


# docs/domain.md §2.2: 910B2 24/48 @1.8 GHz 353.9 T; 910B3 20/40 @1.8 GHz 294.9 T; 910B4 20/40 @1.5 GHz
# 245.8 T with the INI-derived 0.96 TB/s; 1.6 TB/s is the common 910B1-B3 figure [3P]; 310P3 8 cores ~70 T
# (1070 MHz, as pypto_core.hardware derives it), ~204 GB/s per chip.
SKUS: dict[str, SkuSpec] = {
    "910B2": SkuSpec("910B2", "Ascend910B2", ai_cores=24, vector_cores=48, freq_mhz=1800, fp16_tflops=353.9,
                     hbm_gbps=1600.0, hbm_gib=64),
    "910B3": SkuSpec("910B3", "Ascend910B3", ai_cores=20, vector_cores=40, freq_mhz=1800, fp16_tflops=294.9,
                     hbm_gbps=1600.0, hbm_gib=64),
    "910B4": SkuSpec("910B4", "Ascend910B4", ai_cores=20, vector_cores=40, freq_mhz=1500, fp16_tflops=245.8,
                     hbm_gbps=960.0, hbm_gib=32),
    "310P3": SkuSpec("310P3", "Ascend310P3", ai_cores=8, vector_cores=7, freq_mhz=1070, fp16_tflops=70.0,
                     hbm_gbps=204.0, hbm_gib=24, coupled=True),
}

DTYPES = ("fp16", "bf16")


@dataclass(frozen=True)
class RunConfig:
    """One simulated run: a prefill of ``prompt_tokens`` then ``tokens`` decode steps."""

    model: ModelSpec
    sku: SkuSpec
    tokens: int = 8
    prompt_tokens: int = 512
    batch: int = 1
    dtype: str = "fp16"
    fixed: frozenset[str] = field(default_factory=frozenset)
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.fixed) - set(RULES)
        if unknown:
            raise ValueError(f"unknown rule(s) {sorted(unknown)}; known: {', '.join(RULES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.batch < 1 or self.prompt_tokens < 1 or self.tokens < 0:
            raise ValueError("batch and prompt_tokens must be >= 1 and tokens >= 0")

    def planted(self, rule: str) -> bool:
        return rule not in self.fixed

    @property
    def planted_rules(self) -> tuple[str, ...]:
        return tuple(r for r in RULES if r not in self.fixed)

    @property
    def elem_bytes(self) -> int:
        return 2  # fp16 and bf16

    @property
    def ffn(self) -> int:
        pruned = self.model.pruned_ffn
        return pruned if self.planted("matmul_tiling") else round_up(pruned, 256)

    @property
    def vocab(self) -> int:
        v = self.model.padded_vocab
        return v if self.planted("matmul_tiling") else round_up(v, 256)


def resolve_model(name: str) -> ModelSpec:
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def resolve_sku(name: str) -> SkuSpec:
    key = name.upper().removeprefix("ASCEND")
    try:
        return SKUS[key]
    except KeyError:
        raise ValueError(f"unknown SKU {name!r}; known: {', '.join(SKUS)}") from None
