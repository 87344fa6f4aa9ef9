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
