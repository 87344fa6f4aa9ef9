"""Accelerator specs (docs/domain.md §2) and the roofline helpers the rules use.

Every figure carries its evidence tag: ``official`` (vendor document or CANN platform INI as quoted),
``derived`` (arithmetic on tagged inputs, formula in ``source``), ``third_party`` (blogs, press) or
``inferred``. Huawei publishes no per-SKU HBM bandwidth for 910B, so those figures are third-party or
derived from the INI ``ddr_rate`` and a project may override them (docs/domain.md §2.2 "make HBM bandwidth a
per-SKU configurable").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pypto_core.errors import UnknownSku

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.profile import Profile

OFFICIAL = "official"
DERIVED = "derived"
THIRD_PARTY = "third_party"
INFERRED = "inferred"


@dataclass(frozen=True)
class Figure:
    value: float
    tag: str  # official | derived | third_party | inferred
    source: str = ""


def _cube_tflops(cores: int, mhz: float) -> float:
    # docs/domain.md §2.2: FP16 cube peak = 16*16*16 MAC x 2 FLOP x AIC x f
    return 16 * 16 * 16 * 2 * cores * mhz * 1e6 / 1e12


def _vector_tflops(cores: int, mhz: float) -> float:
    # docs/domain.md §2.2: vector FP16 = vec_calc_size(128) x 2 x AIV x f
    return 128 * 2 * cores * mhz * 1e6 / 1e12


@dataclass(frozen=True)
class SkuSpec:
    """One accelerator. Figures are per device (per die for 910_93)."""

    name: str
    vendor: str  # huawei | nvidia
    ai_cores: Figure  # cube cores (Ascend) or SMs (NVIDIA)
    vector_cores: Figure  # AIV cores (split architecture); 0 where cube and vector are coupled
    clock_mhz: Figure
    fp16_tflops: Figure
    int8_tops: Figure
    hbm_gbps: Figure  # GB/s (1e9 bytes per second)
    hbm_gib: Figure
    l2_mib: Figure
    vector_fp16_tflops: Figure | None = None
    notes: str = ""
    overridden: tuple[str, ...] = field(default=())

    # -- roofline ---------------------------------------------------------------------------------
    def peak_flops_per_s(self, dtype: str = "float16") -> float:
        d = dtype.lower()
        if "int8" in d:
            return self.int8_tops.value * 1e12
        if "float32" in d or d in ("float", "dt_float", "fp32"):
            # no FP32 cube path on 910B matching FP16 rate; HF32 is half rate [INFERRED], model as 1/2
            return self.fp16_tflops.value * 1e12 / 2
        return self.fp16_tflops.value * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gbps.value * 1e9

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where compute and memory bounds meet (docs/domain.md §2.2 ridge points); 0 for
        a device whose figures are not known (as they are: never NaN, which JSON cannot carry and a page's
        axis cannot place)."""
        return self.peak_flops_per_s() / self.hbm_bytes_per_s if self.hbm_bytes_per_s else 0.0

    @property
    def known(self) -> bool:
        """Whether the figures are real (an unknown device's are all 0)."""
        return self.hbm_gbps.value > 0 and self.fp16_tflops.value > 0

    def bound_time_s(self, flops: float, bytes_moved: float, dtype: str = "float16") -> float:
        """Roofline lower bound on the time of one op: max(compute time, memory time)."""
        return max(flops / self.peak_flops_per_s(dtype), bytes_moved / self.hbm_bytes_per_s)

    def cores_for(self, core_type: str) -> int:
        """The core count a kernel of this Accelerator Core type spreads over (advisor block_dim rule)."""
        ct = (core_type or "").upper()
        if ct in ("AI_VECTOR_CORE", "MIX_AIV") and self.vector_cores.value > 0:
            return int(self.vector_cores.value)
        return int(self.ai_cores.value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "vendor": self.vendor, "notes": self.notes,
                               "overridden": list(self.overridden)}
        for key in ("ai_cores", "vector_cores", "clock_mhz", "fp16_tflops", "int8_tops", "hbm_gbps",
                    "hbm_gib", "l2_mib", "vector_fp16_tflops"):
            fig = getattr(self, key)
            if fig is not None:
                out[key] = {"value": fig.value, "tag": fig.tag, "source": fig.source}
        return out


def _ascend(name: str, aic: int, aiv: int, mhz: float, mhz_tag: str, hbm_gbps: Figure, hbm_gib: Figure,
            l2_mib: Figure, notes: str = "", core_tag: str = OFFICIAL,
            core_src: str = "CANN platform_config INI as quoted (docs/domain.md §2.1)") -> SkuSpec:
    fp16 = _cube_tflops(aic, mhz)
    return SkuSpec(
        name=name, vendor="huawei",
        ai_cores=Figure(aic, core_tag, core_src),
        vector_cores=Figure(aiv, core_tag, core_src),
        clock_mhz=Figure(mhz, mhz_tag, "cube_freq (docs/domain.md §2.1)"),
        fp16_tflops=Figure(round(fp16, 2), DERIVED, "16*16*16 MAC x 2 x AIC x f (docs/domain.md §2.2)"),
        int8_tops=Figure(round(2 * fp16, 2), DERIVED, "DtypeMKN int8 16,32,16 doubles the fp16 rate"),
        vector_fp16_tflops=Figure(round(_vector_tflops(aiv, mhz), 2), DERIVED, "128 x 2 x AIV x f"),
        hbm_gbps=hbm_gbps, hbm_gib=hbm_gib, l2_mib=l2_mib, notes=notes,
    )


_HBM_910B = Figure(1600.0, THIRD_PARTY,
                   "~1.6 TB/s common figure; Huawei publishes none (docs/domain.md §2.2)")

SKUS: dict[str, SkuSpec] = {
    "910B1": _ascend("910B1", 24, 48, 1850, OFFICIAL, _HBM_910B, Figure(64, OFFICIAL, "INI memory_size"),
                     Figure(192, OFFICIAL, "INI l2_size")),
    "910B2": _ascend("910B2", 24, 48, 1800, OFFICIAL, _HBM_910B, Figure(64, OFFICIAL, "INI memory_size"),
                     Figure(192, OFFICIAL, "INI l2_size")),
    "910B3": _ascend("910B3", 20, 40, 1800, THIRD_PARTY, _HBM_910B,
                     Figure(64, INFERRED, "catlass arch header omits it (docs/domain.md §2.2)"),
                     Figure(192, OFFICIAL, "catlass AscendC910B3 L2CacheByte"),
                     core_src="INI quote and catlass MaxBlock=20 (docs/domain.md §2.1)"),
    "910B4": _ascend("910B4", 20, 40, 1500, OFFICIAL,
                     Figure(960.0, DERIVED, "INI ddr_rate: cann_ddr_derived_gbps=960; public 0.8-1.0 TB/s"),
                     Figure(32, OFFICIAL, "INI memory_size"), Figure(96, OFFICIAL, "INI l2_size")),
    "910_93": _ascend("910_93", 24, 48, 1800, OFFICIAL,
                      Figure(1600.0, THIRD_PARTY, "~1.6 TB/s per die, 3.2 TB/s per package"),
                      Figure(64, OFFICIAL, "INI memory_size per die"), Figure(192, OFFICIAL, "INI l2_size"),
                      notes="per die (Ascend910_9382); a 910C package has two"),
    "910A": SkuSpec(
        name="910A", vendor="huawei",
        ai_cores=Figure(32, THIRD_PARTY, "Linley / Hot Chips 2019"),
        vector_cores=Figure(0, THIRD_PARTY, "coupled cube+vector per core"),
        clock_mhz=Figure(1000, DERIVED, "from 256 TFLOPS / 32 cores"),
        fp16_tflops=Figure(256.0, OFFICIAL, "Huawei 2019 press"),
        int8_tops=Figure(512.0, OFFICIAL, "Huawei 2019 press"),
        hbm_gbps=Figure(1200.0, INFERRED, "~1.2 TB/s commonly quoted, unverified"),
        hbm_gib=Figure(32, THIRD_PARTY, "Linley: 32 GB HBM2"),
        l2_mib=Figure(32, THIRD_PARTY, "Linley: 32 MB"),
    ),
    "310P3": SkuSpec(
        name="310P3", vendor="huawei",
        ai_cores=Figure(8, OFFICIAL, "Ascend310P3.ini: 8 AI Cores (coupled)"),
        vector_cores=Figure(7, OFFICIAL, "Ascend310P3.ini: 7 independent Vector Cores"),
        clock_mhz=Figure(1070, DERIVED, "from ~70 TFLOPS"),
        fp16_tflops=Figure(70.0, THIRD_PARTY, "~70 TFLOPS per chip (Duo 140)"),
        int8_tops=Figure(140.0, THIRD_PARTY, "3DNews / Gamers Nexus: Duo 280 TOPS"),
        hbm_gbps=Figure(204.0, THIRD_PARTY, "Duo 408 GB/s total, ~204 GB/s per chip (LPDDR4X)"),
        hbm_gib=Figure(24, OFFICIAL, "INI memory"),
        l2_mib=Figure(16, OFFICIAL, "INI l2"),
    ),
    # NVIDIA figures: dense (no sparsity) tensor-core peaks from NVIDIA's data sheets, for Kineto traces.
    "A100": SkuSpec(
        name="A100", vendor="nvidia",
        ai_cores=Figure(108, OFFICIAL, "NVIDIA A100 datasheet: 108 SMs"),
        vector_cores=Figure(0, OFFICIAL, "n/a"),
        clock_mhz=Figure(1410, OFFICIAL, "boost clock"),
        fp16_tflops=Figure(312.0, OFFICIAL, "NVIDIA A100 datasheet, dense FP16/BF16 tensor"),
        int8_tops=Figure(624.0, OFFICIAL, "NVIDIA A100 datasheet, dense INT8"),
        hbm_gbps=Figure(2039.0, OFFICIAL, "A100 80GB SXM datasheet (40GB: 1555)"),
        hbm_gib=Figure(80, OFFICIAL, "A100 80GB"),
        l2_mib=Figure(40, OFFICIAL, "A100 whitepaper"),
    ),
    "H100": SkuSpec(
        name="H100", vendor="nvidia",
        ai_cores=Figure(132, OFFICIAL, "H100 SXM5: 132 SMs"),
        vector_cores=Figure(0, OFFICIAL, "n/a"),
        clock_mhz=Figure(1980, OFFICIAL, "H100 SXM5 max boost"),
        fp16_tflops=Figure(989.4, OFFICIAL, "NVIDIA H100 SXM datasheet, dense FP16/BF16 tensor"),
        int8_tops=Figure(1978.9, OFFICIAL, "NVIDIA H100 SXM datasheet, dense INT8"),
        hbm_gbps=Figure(3350.0, OFFICIAL, "H100 SXM 80GB HBM3"),
        hbm_gib=Figure(80, OFFICIAL, "H100 SXM"),
        l2_mib=Figure(50, OFFICIAL, "H100 whitepaper"),
    ),
    "V100": SkuSpec(
        name="V100", vendor="nvidia",
        ai_cores=Figure(80, OFFICIAL, "NVIDIA V100 SXM2 datasheet: 80 SMs"),
        vector_cores=Figure(0, OFFICIAL, "n/a"),
        clock_mhz=Figure(1530, OFFICIAL, "V100 SXM2 max boost"),
        fp16_tflops=Figure(125.0, OFFICIAL, "NVIDIA V100 SXM2 datasheet, FP16 tensor"),
        int8_tops=Figure(62.0, OFFICIAL, "NVIDIA V100 SXM2 datasheet, INT8 (dp4a)"),
        hbm_gbps=Figure(900.0, OFFICIAL, "V100 SXM2 HBM2, 900 GB/s"),
        hbm_gib=Figure(16, OFFICIAL, "V100 SXM2 16GB (also 32GB)"),
        l2_mib=Figure(6, OFFICIAL, "Volta whitepaper"),
    ),
    "H200": SkuSpec(
        name="H200", vendor="nvidia",
        ai_cores=Figure(132, OFFICIAL, "H200 SXM: 132 SMs (Hopper)"),
        vector_cores=Figure(0, OFFICIAL, "n/a"),
        clock_mhz=Figure(1980, OFFICIAL, "Hopper SXM max boost"),
        fp16_tflops=Figure(989.4, OFFICIAL, "NVIDIA H200 datasheet, dense FP16/BF16 tensor"),
        int8_tops=Figure(1978.9, OFFICIAL, "NVIDIA H200 datasheet, dense INT8"),
        hbm_gbps=Figure(4800.0, OFFICIAL, "H200 141GB HBM3e, 4.8 TB/s"),
        hbm_gib=Figure(141, OFFICIAL, "H200"),
        l2_mib=Figure(50, OFFICIAL, "Hopper whitepaper"),
    ),
}

DEFAULT_SKU = "910B3"  # the middle of the 910B range; used only when the profile does not say


def get_sku(name: str, overrides: dict[str, float] | None = None) -> SkuSpec:
    """The spec of ``name`` (any spelling ``normalize_sku_name`` accepts), with per-project overrides.

    ``overrides`` maps a figure name (``hbm_gbps``, ``fp16_tflops``, ``ai_cores``, ...) to a value; the
    overridden figure is tagged ``project override`` so reports say where the number came from.
    """
    key = normalize_sku_name(name)
    if key is None:
        raise UnknownSku(f"unknown SKU {name!r}; known: {', '.join(SKUS)}")
    spec = SKUS[key]
    if not overrides:
        return spec
    changes: dict[str, Any] = {}
    for fig_name, value in overrides.items():
        current = getattr(spec, fig_name, None)
        if not isinstance(current, Figure):
            raise KeyError(f"cannot override {fig_name!r} of {key}")
        changes[fig_name] = Figure(float(value), "project_override", f"was {current.value} ({current.tag})")
    return replace(spec, overridden=tuple(sorted(changes)), **changes)


_SKU_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"910_?93|910C|9382|9392|9362|9372", re.I), "910_93"),
    (re.compile(r"910B1", re.I), "910B1"),
    (re.compile(r"910B2", re.I), "910B2"),
    (re.compile(r"910B3", re.I), "910B3"),
    (re.compile(r"910B4", re.I), "910B4"),
    (re.compile(r"310P", re.I), "310P3"),
    (re.compile(r"910(?![0-9A-Z_])|910A|910ProA|910ProB|910PremiumA", re.I), "910A"),
    (re.compile(r"H200", re.I), "H200"),
    (re.compile(r"H100|H800", re.I), "H100"),
    (re.compile(r"A100|A800", re.I), "A100"),
    (re.compile(r"V100", re.I), "V100"),
)


def normalize_sku_name(text: str | None) -> str | None:
    """Map a device string as profilers write it (``Ascend910B3``, ``NVIDIA A100-SXM4-80GB``) to a key."""
    if not text:
        return None
    if text in SKUS:
        return text
    for pattern, key in _SKU_PATTERNS:
        if pattern.search(text):
            return key
    return None


def detect_sku(profile: Profile) -> str | None:
    """The SKU the profile says it ran on (meta.device, then device strings in meta.extra), else None."""
    meta = profile.meta
    candidates: list[str] = []
    if meta.device:
        candidates.append(str(meta.device))
    for key in ("device", "device_name", "soc_version", "chip", "sku", "deviceProperties",
                "device_properties"):
        value = meta.extra.get(key) if isinstance(meta.extra, dict) else None
        if value is not None:
            candidates.append(str(value))
    for text in candidates:
        sku = normalize_sku_name(text)
        if sku:
            return sku
    return None


def resolve_sku(profile: Profile, sku: str | SkuSpec | None = None,
                overrides: dict[str, float] | None = None) -> tuple[SkuSpec, str]:
    """The spec to use and how it was chosen: ``given``, ``detected``, ``default`` (an Ascend profile that
    does not name its part: 910B3) or ``unknown`` (a GPU/CPU device without figures here)."""
    if isinstance(sku, SkuSpec):
        return sku, "given"
    if sku:
        return get_sku(sku, overrides), "given"
    found = detect_sku(profile)
    if found:
        return get_sku(found, overrides), "detected"
    from pypto_core.workload import device_vendor  # the vendor decides whether a default makes sense

    vendor = device_vendor(profile)
    if vendor == "ascend":
        return get_sku(DEFAULT_SKU, overrides), "default"
    # A GPU or CPU trace that names no known device: say so, never judge it as an Ascend part
    return unknown_sku(vendor, profile.meta.device), "unknown"


def unknown_sku(vendor: str, name: str | None = None) -> SkuSpec:
    """A device the engine has no figures for: every figure 0 and tagged unknown, so that peak-based
    metrics read None and the page offers the project's override."""
    zero = Figure(0, "unknown", "no published figure known to PyPTO for this device")
    return SkuSpec(name=name or f"unknown {vendor} device", vendor=vendor, ai_cores=zero, vector_cores=zero,
                   clock_mhz=zero, fp16_tflops=zero, int8_tops=zero, hbm_gbps=zero, hbm_gib=zero, l2_mib=zero,
                   notes="unknown")
