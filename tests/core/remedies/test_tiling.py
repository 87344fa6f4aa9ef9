"""The AOE bundle: exactly the flagged ops, a script that passes bash -n and shellcheck, golden files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pypto_core.remedies import generate_artifacts
from pypto_core.remedies.context import FlaggedOp
from pypto_core.remedies.tiling import weight_shapes

from .conftest import PROFILE_META, load_module, make_finding

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PYPTO_UPDATE_GOLDEN") == "1"  # regenerate: PYPTO_UPDATE_GOLDEN=1 pytest this file


def artifacts_by_name() -> dict:
    return {a.name: a for a in generate_artifacts([make_finding("matmul_tiling")], profile_meta=PROFILE_META)}


def test_tune_ops_file_lists_exactly_the_flagged_ops() -> None:
    """By kernel name only: a type would tune every MatMulV2 of the model, flagged shape or not."""
    config = json.loads(artifacts_by_name()["aoe_tune_ops.json"].content)
    assert config == {"tune_ops_name": ["model.layers.0.mlp.down_proj/MatMulV2",
                                        "model.layers.0.self_attn.q_proj/MatMulV2"]}


def test_names_other_shapes_share_go_by_shape_and_a_group_without_names_or_shapes_by_type() -> None:
    finding = make_finding("matmul_tiling", ops=[
        {"names": ["mm_a", "mm_b"], "op_type": "MatMulV2", "input_shapes": [[1, 100], [100, 96]], "count": 4},
        {"names": ["aclnnMatmul_MatMulCommon_MatMulV2"],
         "shared_names": ["aclnnMatmul_MatMulCommon_MatMulV2"], "op_type": "MatMulV2",
         "input_shapes": [[1, 4096], [11008, 4096]], "input_dtypes": ["FLOAT16"] * 2,
         "input_formats": ["ND", "ND"], "output_shapes": [[1, 11008]], "count": 2},
        {"op_type": "GroupedMatmul", "count": 2}])
    arts = {a.name: a for a in generate_artifacts([finding], profile_meta=PROFILE_META)}
    assert json.loads(arts["aoe_tune_ops.json"].content) == {"tune_ops_name": ["mm_a", "mm_b"],
                                                             "tune_ops_type": ["GroupedMatmul"]}
    assert "which tunes every op of that type" in arts["aoe_tune.sh"].text()
    singleop = json.loads(arts["aoe_singleop.json"].content)
    assert [e["input_desc"][1]["shape"] for e in singleop] == [[100, 96], [11008, 4096]]
    assert singleop[1]["input_desc"][0] == {"format": "ND", "shape": [1, 4096], "type": "float16"}
    assert singleop[1]["attr"][1] == {"name": "transpose_x2", "type": "bool", "value": True}
    assert singleop[0]["attr"][1]["value"] is False


def test_script_runs_the_real_aoe_steps(tmp_path: Path) -> None:
    script = artifacts_by_name()["aoe_tune.sh"]
    text = script.text()
    assert script.kind == "script" and text.startswith("#!/usr/bin/env bash\n")
    for step in ("torch_npu.npu.set_aoe(dump_dir)", "aoe --job_type=2 --model_path=", "--tune_ops_file=",
                 "export TUNE_BANK_PATH", "export AOE_MODE=2"):
        assert step in text
    assert "ACL_OP_TUNER_CONFIG" not in text and "op_tuning_runner" not in text
    path = tmp_path / "aoe_tune.sh"
    path.write_bytes(script.content)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck)")
    result = subprocess.run(["shellcheck", "--severity=style", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_script_refuses_to_run_without_aoe(tmp_path: Path) -> None:
    for artifact in artifacts_by_name().values():
        (tmp_path / artifact.name).write_bytes(artifact.content)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(["bash", str(tmp_path / "aoe_tune.sh"), "infer.py"], capture_output=True,
                            text=True, env=env, cwd=tmp_path)
    assert result.returncode == 2 and "aoe not found" in result.stderr


@pytest.mark.parametrize("name", ["aoe_tune_ops.json", "aoe_tune.sh", "matmul_weight_format_patch.py"])
def test_golden(name: str) -> None:
    content = artifacts_by_name()[name].content
    golden = GOLDEN / name
    if UPDATE:
        golden.write_bytes(content)
    assert content == golden.read_bytes(), f"{name} changed; review and rerun with PYPTO_UPDATE_GOLDEN=1"


def test_no_weight_patch_without_weight_shapes() -> None:
    finding = make_finding("matmul_tiling", ops=[{"name": "bmm", "op_type": "BatchMatMulV2",
                                                   "input_shapes": [[1, 8, 4, 64], [1, 8, 64, 4]]}])
    names = [a.name for a in generate_artifacts([finding], profile_meta=PROFILE_META)]
    assert names == ["aoe_tune_ops.json", "aoe_tune.sh", "aoe_singleop.json"]
    assert weight_shapes([FlaggedOp("x", "MatMulV2", ((1, 100), (100, 96))),
                          FlaggedOp("y", "MatMulV2", ((1, 100), (100, 96))),
                          FlaggedOp("z", "MatMulV2", ((1, 100),))]) == [(100, 96)]


def test_weight_patch_keeps_results_and_casts_only_flagged_layers(tmp_path: Path, fake_torch_npu) -> None:
    import torch

    finding = make_finding("matmul_tiling", ops=[{"name": "mm", "op_type": "MatMulV2",
                                                  "input_shapes": [[3, 100], [100, 96]]}])
    patch = {a.name: a for a in generate_artifacts([finding], profile_meta=PROFILE_META)}
    path = tmp_path / "matmul_weight_format_patch.py"
    path.write_bytes(patch["matmul_weight_format_patch.py"].content)
    module = load_module(path)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(100, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64)).eval()
    x = torch.randn(3, 100)
    with torch.no_grad():
        expected = model(x)
        changed = module.apply_matmul_weight_format(model, pad_inner_axis=True)
        got = model(x)
    assert changed == ["0"]
    assert model[0].weight.shape == (96, 256)  # in_features 100 padded to 256 elements
    assert fake_torch_npu.get_npu_format(model[0].weight) == 29
    assert fake_torch_npu.get_npu_format(model[2].weight) == 2
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
