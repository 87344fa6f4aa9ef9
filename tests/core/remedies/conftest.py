"""Fixtures for the remedy tests: findings like the rules emit, and the torch_npu CPU test double.

The real torch_npu needs an Ascend NPU and its driver, which cannot exist on this machine; the generated
patches run here against ``fake_torch_npu/torch_npu`` (a test double written from the documented semantics).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pypto_core.rules.finding import Finding

FAKE_TORCH_NPU = Path(__file__).parent / "fake_torch_npu"
HOSTILE_NAME = 'evil"""\nimport os; os.system("touch /tmp/pwned")  # \'\r\u2028x\\'

PROFILE_META = {"format": "ascend_pt", "source": "llama2_7b_decode_ascend_pt", "device": "910B3", "rank": 0,
                "simulated": True}


def make_finding(rule: str, ops: list[dict] | None = None, **details) -> Finding:
    default_ops = {
        "matmul_tiling": [
            {"name": "model.layers.0.mlp.down_proj/MatMulV2", "op_type": "MatMulV2",
             "input_shapes": [[1, 11008], [11008, 4096]], "count": 32},
            {"name": "model.layers.0.self_attn.q_proj/MatMulV2", "op_type": "MatMulV2",
             "input_shapes": [[1, 4096], [4096, 4096]], "count": 32},
        ],
        "attention_memory_bound": [{"name": "attn/BatchMatMulV2", "op_type": "BatchMatMulV2",
                                    "input_shapes": [[1, 32, 1, 128], [1, 32, 128, 1024]], "count": 32}],
        "kv_cache_layout": [{"name": "cache/ConcatD", "op_type": "ConcatD", "count": 64}],
        "norm_launch_overhead": [{"name": "norm/Rsqrt", "op_type": "Rsqrt", "count": 65}],
    }
    return Finding(rule=rule, severity="high", title=f"{rule} finding", description="from a test",
                   ops=[o["op_type"] for o in (ops or default_ops[rule])], time_share=0.3,
                   estimated_saving_us=1200.0, estimated_speedup=1.25,
                   details={"ops": ops if ops is not None else default_ops[rule], **details})


@pytest.fixture(scope="session")
def fake_torch_npu() -> ModuleType:
    sys.path.insert(0, str(FAKE_TORCH_NPU))
    import torch_npu

    assert getattr(torch_npu, "IS_TEST_DOUBLE", False), "the real torch_npu must not be used here"
    return torch_npu


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem + "_under_test", path)
    module = importlib.util.module_from_spec(spec)
    # inspect.getsource and transformers' docstring helpers look modules up here
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
