"""The profile page's own figures (pypto_core.pagedata) on real traces."""

from __future__ import annotations

import pytest

from pypto_core import formats
from pypto_core.pagedata import profile_page_data
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

pytestmark = pytest.mark.skipif(not HAVE_SAMPLES, reason=MISSING_SAMPLES)


def test_a_cuda_trace_without_op_types_is_broken_down_by_kernel() -> None:
    # Kineto records no op type for a CUDA kernel: grouped under one "?" the chart said nothing. The A100
    # run's own kernels: NCCL's AllReduce first (28% of the device time), then cuDNN's batch norm.
    profile = formats.open_profiles(SAMPLES / "kineto/a100_nccl_2rank").primary()
    rows = profile_page_data(profile)["op_types"]
    assert len(rows) > 5 and "?" not in {r["op_type"] for r in rows}
    assert rows[0]["op_type"].startswith("NCCL AllReduce")
    assert rows[0]["share"] == pytest.approx(0.283, abs=0.01)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-6)


def test_ascend_op_types_are_kept() -> None:
    profile = formats.open_profiles(SAMPLES / "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt").primary()
    types = {r["op_type"] for r in profile_page_data(profile)["op_types"]}
    assert "?" not in types and any(t.startswith("hcom_") or t.isidentifier() for t in types)
