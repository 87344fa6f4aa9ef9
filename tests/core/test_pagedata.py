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


def test_roofline_points_above_the_hbm_roof_are_the_weight_gradients_l2_holds() -> None:
    # CNN 8-NPU rank 0 (no part named: 910B3 assumed, HBM 1.6 TB/s third-party, L2 192 MiB). Its two weight
    # gradients, Xᵀ·dY with fp32 outputs of 4096x9216 and 4096x4096, write 151 and 67 MB in 72.9 and
    # 30.3 µs: faster than HBM could take them, and less than L2 holds. Worked out here from the kernel rows.
    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    profile = formats.open_profiles(SAMPLES / "ascend_pt/cnn_8npu_text_level2").primary()
    roof = profile_page_data(profile)["roofline"]
    k = profile.kernels.to_pydict()
    expected: dict[str, float] = {}
    for i, shapes in enumerate(k["input_shapes"]):
        if not k["op_type"][i].startswith("MatMul") or not k["output_shapes"][i]:
            continue
        (r1, c1), (r2, c2) = shapes[0], shapes[1]
        m, n = k["output_shapes"][i][0]
        # A·B, A·Bᵀ, Aᵀ·B, Aᵀ·Bᵀ: the one whose result has the output's shape, and its shared dim
        [inner] = [kk for (mm, nn, kk, ok) in ((r1, c2, c1, c1 == r2), (r1, r2, c1, c1 == c2),
                                               (c1, c2, r1, r1 == r2), (c1, r2, r1, r1 == c2))
                   if ok and (mm, nn) == (m, n)][:1]
        moved = 4 * (r1 * c1 + r2 * c2 + sum(d for s in shapes[2:] for d in s) + m * n)  # FLOAT throughout
        flops = 2 * m * n * inner
        if flops / (k["dur_ns"][i] / 1e9) > flops / moved * roof["hbm_bytes_per_s"]:
            assert moved <= roof["l2_bytes"]
            expected[";".join("x".join(map(str, s)) for s in shapes)] = flops / (k["dur_ns"][i] / 1e9)
    assert len(expected) == 2
    above = {p["shape"]: p["flops_per_s"] for p in roof["points"] if p["above_hbm_roof"]}
    assert above.keys() == expected.keys()
    for shape, achieved in expected.items():  # the FLOPs of Xᵀ·dY, not of X·dYᵀ (32x smaller a side)
        assert above[shape] == pytest.approx(achieved, rel=0.001)
    assert all(p["bytes_per_kernel"] <= roof["l2_bytes"] for p in roof["points"] if p["above_hbm_roof"])
