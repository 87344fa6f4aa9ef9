"""What ran and on what: the device vendor and the kind of workload, from the evidence in the profile.

Advice depends on both (CUDA Graphs are no use on an NPU, decode metrics mean nothing for a training
step), so every rule declares the vendors and workloads it applies to and ``diagnose`` runs only those.
When the evidence is missing the answer is ``unknown``, never a guess: an unknown workload runs only the
rules that apply to every workload, and an unknown SKU is said on the page, not defaulted silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.grouping import text_codes, value_flags
from pypto_core.i18n import Message, msg
from pypto_core.launches import GRAPH_REPLAY_MIN_SHARE

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.graph import OperatorCallGraph
    from pypto_core.profile import Profile

VENDORS: tuple[str, ...] = ("ascend", "nvidia", "amd", "cpu", "unknown")
WORKLOADS: tuple[str, ...] = ("llm_decode", "llm_prefill", "llm_serving", "training", "inference_other",
                              "unknown")
LLM_WORKLOADS: tuple[str, ...] = ("llm_decode", "llm_prefill", "llm_serving")
DECODE_WORKLOADS: tuple[str, ...] = ("llm_decode", "llm_serving")
# Each workload in words (the ids stay in the JSON and the API): the pages, the comparison's warnings.
WORKLOAD_WORDS: dict[str, Message] = {
    "llm_decode": msg("LLM decode"), "llm_prefill": msg("LLM prefill"), "llm_serving": msg("LLM serving"),
    "training": msg("Training"), "inference_other": msg("Inference (not an LLM)"), "unknown": msg("Unknown"),
}

# What ``device_vendor`` and ``detect_workload`` read besides the call graph (a ``profile.ColumnSet``).
WORKLOAD_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "kernels": ("core_type", "op_type", "name"), "api_calls": ("name",), "host_ops": ("name",),
}
_ASCEND_FORMATS = ("ascend_pt", "ascend_pt_db", "msprof", "msprof_db")
_ASCEND_CORE_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA_SQE")
_AMD_DEVICE = re.compile(r"\bMI\d{3}|AMD|Radeon|Instinct|gfx9", re.I)
_NVIDIA_DEVICE = re.compile(r"NVIDIA|GeForce|Tesla|Quadro|\b[AHBVL]\d{2,3}\b|RTX", re.I)
_AMD_API = re.compile(r"^hip|^roctx|^hsa_", re.I)
_NVIDIA_API = re.compile(r"^cuda|^cu[A-Z]", re.I)

# Backward and optimizer evidence: autograd nodes on the host, gradient kernels on the device.
_BACKWARD_HOST = re.compile(r"autograd::engine::evaluate_function|Backward\d*$|^Optimizer\.step|"
                            r"optimizer\.step|\.backward$|zero_grad", re.I)
_BACKWARD_KERNEL = re.compile(r"Grad(V\d+)?$|Backprop|Backward|_bwd|bwd_|wgrad|dgrad|ApplyAdam|AdamW?Apply|"
                              r"^Foreach(Add|Mul|Addc)", re.I)
_SERVING_HOST = re.compile(r"vllm|sglang|execute_model|model_runner|LLMEngine|scheduler\.schedule", re.I)
MIN_BACKWARD_EVENTS = 3  # one stray *Grad op is not a training step [INFERRED]
MIN_KERNELS_TO_JUDGE = 10  # below this a profile says too little about what ran [INFERRED]


@dataclass(frozen=True)
class Workload:
    """The kind of run and the evidence it was judged from (shown beside the verdict)."""

    kind: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def is_llm(self) -> bool:
        return self.kind in LLM_WORKLOADS

    def has_decode(self) -> bool:
        return self.kind in DECODE_WORKLOADS

    def is_sequence_model(self) -> bool:
        """An LLM's run, or one with attention kernels (a transformer being trained): its inputs are token
        sequences, so sequence-length advice and transformer block names fit. A CNN's training step is not."""
        return self.is_llm() or bool(self.evidence.get("attention_kernels"))


def device_vendor(profile: Profile) -> str:
    """``ascend`` | ``nvidia`` | ``amd`` | ``cpu`` | ``unknown``: from the format, the device name the file
    carries (Kineto ``deviceProperties``, CANN info), the kernels' core types and the runtime API names."""
    meta = profile.meta
    if meta.format in _ASCEND_FORMATS:
        return "ascend"
    k = profile.kernels
    if k.num_rows and _any_in(k["core_type"], _ASCEND_CORE_TYPES):
        return "ascend"
    device = str(meta.device or "")
    from pypto_core.hardware import SKUS, normalize_sku_name  # hardware imports nothing of ours at load

    key = normalize_sku_name(device)
    if key:
        return "ascend" if SKUS[key].vendor == "huawei" else SKUS[key].vendor
    if _AMD_DEVICE.search(device):
        return "amd"
    if _NVIDIA_DEVICE.search(device):
        return "nvidia"
    api_names = _distinct(profile.api_calls["name"]) if profile.api_calls.num_rows else []
    if any(_AMD_API.search(n) for n in api_names):
        return "amd"
    if any(_NVIDIA_API.search(n) for n in api_names):
        return "nvidia"
    if not k.num_rows:
        return "cpu" if profile.host_ops.num_rows else "unknown"
    return "unknown"


def detect_workload(profile: Profile, graph: OperatorCallGraph) -> Workload:
    """The workload from backward/optimizer ops, decode structure (LM head per step, few token rows) and
    serving-engine host frames; ``unknown`` when the profile holds too little to tell."""
    host_names = _distinct(profile.host_ops["name"]) if profile.host_ops.num_rows else []
    backward_host = sum(1 for n in host_names if _BACKWARD_HOST.search(n))
    backward_kernels = (_count_matching(profile.kernels["op_type"], profile.kernels["name"], _BACKWARD_KERNEL)
                        if graph.n else 0)
    serving = any(_SERVING_HOST.search(n) for n in host_names)
    t = graph.tokens
    decode_steps = int(t.decode_step.sum()) if len(t.decode_step) else 0
    lm_head = int(graph.lm_head_mask.sum())
    attention = int(graph.attention_mask.sum())
    evidence: dict[str, Any] = {"backward_kernels": backward_kernels, "backward_host_ops": backward_host,
                                "decode_steps": decode_steps, "lm_head_kernels": lm_head,
                                "attention_kernels": attention, "serving_frames": serving,
                                "kernels": int(graph.n)}
    if backward_kernels >= MIN_BACKWARD_EVENTS or backward_host >= MIN_BACKWARD_EVENTS:
        return Workload("training", evidence)
    if graph.n < MIN_KERNELS_TO_JUDGE and not host_names:
        return Workload("unknown", evidence)
    prefill_steps = int((~t.decode_step).sum()) if t.source != "span" and len(t.decode_step) else 0
    if serving and not decode_steps:
        # a serving engine's frames (vLLM, SGLang) say LLM serving where no decode step could be told apart:
        # an engine step mixes prefills and decodes, and a CUDA-graph replay records no shapes to count rows
        return Workload("llm_serving", {**evidence, "prefill_steps": prefill_steps})
    if decode_steps:
        # an engine's frames, or prefills between decode tokens (continuous batching), mean serving
        if serving or _prefill_between_decodes(t.decode_step):
            return Workload("llm_serving", {**evidence, "prefill_steps": prefill_steps})
        return Workload("llm_decode", evidence)
    graph_share = graph.launches.share()
    if (lm_head or attention) and graph_share >= GRAPH_REPLAY_MIN_SHARE:
        # a transformer replayed from captured graphs, whose replays record no shapes to count token rows:
        # serving engines capture the decode step (vLLM's CUDA graphs, vLLM-Ascend's ACL graph), a prefill
        # of changing length runs eagerly
        return Workload("llm_decode", {**evidence, "graph_launched_share": round(graph_share, 4)})
    if lm_head or attention:  # attention without decode steps: a transformer's forward pass
        return Workload("llm_prefill", evidence)
    if graph.n < MIN_KERNELS_TO_JUDGE:
        return Workload("unknown", evidence)
    return Workload("inference_other", evidence)


def _prefill_between_decodes(decode_step: np.ndarray) -> bool:
    idx = np.nonzero(decode_step)[0]
    if len(idx) < 2:
        return False
    inner = decode_step[idx[0]:idx[-1] + 1]
    return bool((~inner).any())


def _distinct(column: pa.ChunkedArray) -> list[str]:
    return [v for v in pc.unique(pc.fill_null(column, "")).to_pylist() if v]


def _any_in(column: pa.ChunkedArray, values: tuple[str, ...]) -> bool:
    return bool(pc.any(pc.is_in(column, value_set=pa.array(values))).as_py())


def _count_matching(column: pa.ChunkedArray, fallback: pa.ChunkedArray, pattern: re.Pattern[str]) -> int:
    """Rows whose value (``fallback``'s where ``column`` is null, as ``coalesce``) matches, testing each
    distinct value once on the columns' codes: a coalesced column would be built as text, one string per
    row (300 MB at 2.1 M kernels, measured)."""
    codes, values = text_codes(column)
    fallback_codes, fallback_values = text_codes(fallback)
    hits = value_flags(values, pattern.search)
    fallback_hits = value_flags(fallback_values, pattern.search)
    own = codes >= 0
    return int(hits[codes[own]].sum() + fallback_hits[fallback_codes[~own]].sum())
