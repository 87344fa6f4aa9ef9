"""Diffs against the user's model file: they apply cleanly with patch(1), and the patched file really patches.

The model file is a copy of the installed transformers' modeling_llama.py, written at test time (not
committed), with its package-relative imports made absolute so it imports from a temporary folder."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pypto_core.remedies import generate_artifacts  # noqa: E402
from pypto_core.remedies.model_diff import causal_lm_classes, model_file_diff  # noqa: E402

from .conftest import PROFILE_META, load_module, make_finding  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("patch") is None, reason="patch(1) is not installed")
DIFFS = {"matmul_tiling": "matmul_weight_format_patch.diff", "kv_cache_layout": "kv_cache_layout_patch.diff",
         "attention_memory_bound": "fused_attention_patch.diff",
         "norm_launch_overhead": "norm_fusion_patch.diff"}


@pytest.fixture(scope="module")
def model_source() -> str:
    from transformers.models.llama import modeling_llama

    text = Path(modeling_llama.__file__).read_text(encoding="utf-8")
    text = text.replace("from .configuration_llama import",
                        "from transformers.models.llama.configuration_llama import")
    return re.sub(r"^from \.\.\.", "from transformers.", text, flags=re.MULTILINE)


def diff_for(rule: str, source: str) -> str:
    finding = make_finding(rule) if rule != "matmul_tiling" else make_finding(
        rule, ops=[{"name": "q_proj/MatMulV2", "op_type": "MatMulV2", "input_shapes": [[7, 64], [64, 64]]}])
    artifacts = generate_artifacts([finding], profile_meta=PROFILE_META, model_source=source,
                                   model_filename="modeling_llama.py")
    by_name = {a.name: a for a in artifacts}
    assert by_name[DIFFS[rule]].kind == "diff"
    return by_name[DIFFS[rule]].text()


def apply(tmp_path: Path, source: str, diff: str, dry_run: bool) -> subprocess.CompletedProcess:
    (tmp_path / "modeling_llama.py").write_text(source, encoding="utf-8")
    (tmp_path / "remedy.diff").write_text(diff, encoding="utf-8")
    args = ["patch", "-p1", "--batch", "--forward", "-i", "remedy.diff"] + (["--dry-run"] if dry_run else [])
    return subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)


@pytest.mark.parametrize("rule", list(DIFFS))
def test_diff_applies_cleanly(tmp_path: Path, model_source: str, rule: str) -> None:
    result = apply(tmp_path, model_source, diff_for(rule, model_source), dry_run=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout and "fuzz" not in result.stdout.lower()


def test_diff_applies_to_a_file_without_final_newline(tmp_path: Path) -> None:
    source = "import torch\n\nclass TinyForCausalLM(torch.nn.Module):\n    pass"
    diff = model_file_diff(source, "tiny.py", module_text="def apply(model):\n    return model\n",
                           module_name="x.py", apply_function="apply")
    (tmp_path / "tiny.py").write_text(source)
    (tmp_path / "d.diff").write_text(diff)
    result = subprocess.run(["patch", "-p1", "--batch", "-i", "d.diff"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    patched = (tmp_path / "tiny.py").read_text()
    assert patched.startswith(source + "\n") and "_pypto_apply_after_init(TinyForCausalLM, apply)" in patched
    compile(patched, "tiny.py", "exec")


def test_only_identifiers_become_hooks() -> None:
    assert causal_lm_classes("class AForCausalLM(Base):\nclass B_ForCausalLM:\n# class CForCausalLM(\n") == [
        "AForCausalLM", "B_ForCausalLM"]


def test_patched_model_file_applies_the_kv_cache_patch_on_construction(tmp_path: Path, model_source: str,
                                                                       fake_torch_npu) -> None:
    result = apply(tmp_path, model_source, diff_for("kv_cache_layout", model_source), dry_run=False)
    assert result.returncode == 0, result.stdout
    patched = load_module(tmp_path / "modeling_llama.py")
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    stock = transformers.LlamaForCausalLM(config).eval()
    model = patched.LlamaForCausalLM(config).eval()
    model.load_state_dict(stock.state_dict())
    ids = torch.randint(3, 96, (1, 6))
    fake_torch_npu.calls.clear()
    with torch.no_grad():
        want = stock.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
        got = model.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert torch.equal(got, want)
    assert fake_torch_npu.calls["scatter_update_"] > 0


def test_patched_model_file_applies_norm_fusion_after_from_pretrained(tmp_path: Path, model_source: str,
                                                                      fake_torch_npu) -> None:
    result = apply(tmp_path, model_source, diff_for("norm_launch_overhead", model_source), dry_run=False)
    assert result.returncode == 0, result.stdout
    patched = load_module(tmp_path / "modeling_llama.py")
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64)
    torch.manual_seed(0)
    stock = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in stock.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    stock.save_pretrained(tmp_path / "ckpt")
    model = patched.LlamaForCausalLM.from_pretrained(tmp_path / "ckpt").eval()
    ids = torch.randint(3, 96, (1, 6))
    fake_torch_npu.calls.clear()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, stock(ids).logits, rtol=1e-4, atol=1e-5)
    assert fake_torch_npu.calls["npu_add_rms_norm"] == 2 and fake_torch_npu.calls["npu_rms_norm"] == 3
