"""What each kernel does, from its op type and core type (pypto_core/op_roles.py)."""

from __future__ import annotations

import pytest

from pypto_core import formats
from pypto_core.graph import OperatorCallGraph
from pypto_core.op_roles import ROLE, classify_op_type
from tests.paths import SAMPLES, sample_cases


@pytest.mark.parametrize(("op_type", "core_type", "role"), [
    # Ascend's BroadcastTo is a vector-core copy, not the broadcast collective
    ("BroadcastTo", "AI_VECTOR_CORE", "other"),
    ("aclnnEqTensor_BroadcastToAiCore_BroadcastTo", None, "other"),
    ("hcom_broadcast_", "COMMUNICATION", "communication"),
    ("hcom_allReduce_", None, "communication"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t", None, "communication"),
    ("c10d::broadcast_", None, "communication"),
    ("MatMulV2", "AI_CORE", "matmul"),
])
def test_collectives_are_told_by_their_names(op_type: str, core_type: str | None, role: str) -> None:
    assert classify_op_type(op_type, core_type) == role


@pytest.mark.parametrize("sample", sample_cases(["ascend_pt/cnn_8npu_text_level1"]))
def test_a_real_ranks_communication_is_its_hccl_tasks_only(sample: str) -> None:
    """The CNN rank's kernel_details lists BroadcastTo on the vector cores: its time is compute, and the
    communication role holds exactly the tasks the profiler put on the communication lane."""
    profile = formats.open_profiles(SAMPLES / sample).primary()
    g = OperatorCallGraph(profile)
    comm = g.role == ROLE["communication"]
    core = profile.kernels["core_type"].to_pylist()
    op_type = profile.kernels["op_type"].to_pylist()
    assert any(t == "BroadcastTo" for t in op_type)
    assert not any(comm[i] for i, t in enumerate(op_type) if t == "BroadcastTo")
    assert comm.sum() > 0 and all(str(core[i]).upper() in ("COMMUNICATION", "HCCL") or
                                  str(op_type[i]).startswith("hcom_") for i in range(len(core)) if comm[i])


def test_an_inductor_fused_kernel_is_never_the_attention_or_the_matmul_it_feeds() -> None:
    """Inductor names a fused pointwise or reduction kernel after the ops it fuses, the ones it feeds
    included: the H200 compiled decode's ``triton_poi_fused__scaled_dot_product_cudnn_attention_...`` kernels
    prepare attention's inputs, three a layer, and had made 16 layers read 64."""
    from pypto_core.op_roles import classify_op_type

    prepare = "triton_poi_fused__scaled_dot_product_cudnn_attention__unsafe_view_add_0"
    assert classify_op_type(prepare) == "other"
    assert classify_op_type("triton_poi_fused_mm_view_3") == "other"
    assert classify_op_type("triton_red_fused__softmax_1") == "softmax"  # a reduction is what it names here
    assert classify_op_type("triton_poi_fused_rotary_emb_2") == "rope"
    assert classify_op_type("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16") == "attention"
    assert classify_op_type("triton_tem_fused_mm_0") == "matmul"  # a template is the MatMul itself
