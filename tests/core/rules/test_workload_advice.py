"""Advice that fits the workload: a CNN training rank is not told vLLM-Ascend's ACL graph or sequence-length
buckets; a simulated LLM decode run still is (host_bound_gaps and dynamic_shape choose their text by
workload in one place)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pypto_core import formats, synth
from pypto_core.rules import diagnose, diagnose_group
from pypto_core.rules.finding import Report
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

LLM_ONLY = re.compile(r"vLLM|ACL graph|sequence length", re.I)


def _advice(report: Report) -> dict[str, str]:
    return {f.rule: f.description for f in report.findings if f.rule in ("host_bound_gaps", "dynamic_shape")}


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_cnn_training_rank_gets_training_advice() -> None:
    report = diagnose_group(formats.open_profiles(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2"))
    assert report.profile["workload"] == "training"
    advice = _advice(report)
    assert set(advice) == {"host_bound_gaps", "dynamic_shape"}, advice
    assert not [text for text in advice.values() if LLM_ONLY.search(text)], advice
    host = advice["host_bound_gaps"]
    assert "graph mode (TorchAir" in host and "TASK_QUEUE_ENABLE=2" in host and "host work per step" in host
    assert "images" in advice["dynamic_shape"] and "batch size" in advice["dynamic_shape"]
    # the Chinese page says the same, in CANN's words
    zh = {f.rule: f.localized("zh-Hans").description for f in report.findings
          if f.rule in ("host_bound_gaps", "dynamic_shape")}
    assert "图模式" in zh["host_bound_gaps"] and "vLLM" not in zh["host_bound_gaps"]
    assert "图像" in zh["dynamic_shape"] and "序列长度" not in zh["dynamic_shape"]


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_transformer_training_keeps_sequence_buckets() -> None:
    # attention kernels in a training step: its inputs are token sequences
    report = diagnose_group(formats.open_profiles(SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2"))
    shapes = _advice(report)["dynamic_shape"]
    assert "sequence lengths" in shapes and "images" not in shapes


def test_llm_decode_keeps_llm_advice(tmp_path: Path) -> None:
    report = diagnose(formats.open_profile(synth.synthesize(tmp_path / "decode", tokens=2)))
    assert report.profile["workload"] == "llm_decode"
    advice = _advice(report)
    assert "vLLM-Ascend ACL graph" in advice["host_bound_gaps"]
    assert "eager-mode decode" in advice["host_bound_gaps"]
    assert "sequence lengths to a few buckets" in advice["dynamic_shape"]
    assert "images" not in advice["dynamic_shape"]


@pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)
def test_gpu_training_is_told_to_give_each_launch_more_work() -> None:
    """The A100 DDP training rank is host-bound (76% idle): a training step is told a larger batch, the fused
    optimizer and a compiled step, not only the inference advice to capture CUDA graphs."""
    report = diagnose_group(formats.open_profiles(SAMPLES / "kineto" / "a100_nccl_2rank"))
    assert report.profile["workload"] == "training"
    host = _advice(report)["host_bound_gaps"]
    assert "batch size" in host and "fused=True" in host and "CUDA graphs" in host
    assert not LLM_ONLY.search(host) and "TASK_QUEUE_ENABLE" not in host
