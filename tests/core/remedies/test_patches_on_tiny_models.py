"""The generated patches on tiny randomly initialised Hugging Face models, on CPU, with the torch_npu test
double (the NPU cannot exist here): logits match the unpatched model for prefill and every decode step, greedy
generation is identical token for token, and the fused kernels were really called."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pypto_core.remedies import generate_artifacts  # noqa: E402

from .conftest import PROFILE_META, load_module, make_finding  # noqa: E402

TOL = {"rtol": 1e-4, "atol": 1e-5}  # fp32: the double computes in float32, in a different op order
NEW_TOKENS = 5
ARCHS = ("llama", "qwen2", "qwen3")


def tiny_model(arch: str, seed: int = 0):
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    config = {
        "llama": lambda: transformers.LlamaConfig(**common),
        "qwen2": lambda: transformers.Qwen2Config(**common),
        "qwen3": lambda: transformers.Qwen3Config(head_dim=16, **common),
    }[arch]()
    cls = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
           "qwen3": transformers.Qwen3ForCausalLM}[arch]
    torch.manual_seed(seed)
    model = cls(config).eval()
    with torch.no_grad():  # random norm weights, so a wrong norm swap cannot hide behind weights of 1
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    model.generation_config.pad_token_id = 0
    return model


def patch_module(tmp_path: Path, rule: str):
    artifact = generate_artifacts([make_finding(rule)], profile_meta=PROFILE_META)[-1]
    path = tmp_path / artifact.name
    path.write_bytes(artifact.content)
    return load_module(path)


def prompts():
    torch.manual_seed(1)
    ids = torch.randint(3, 96, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # the second prompt is left-padded
    return ids, mask


def run(model, ids, mask):
    with torch.no_grad():
        prefill = model(input_ids=ids, attention_mask=mask).logits
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
    return prefill, out.sequences, out.logits


def assert_same_run(reference, patched, mask) -> None:
    (ref_prefill, ref_tokens, ref_steps), (new_prefill, new_tokens, new_steps) = reference, patched
    keep = mask.bool()  # padded positions have no meaningful logits
    torch.testing.assert_close(new_prefill[keep], ref_prefill[keep], **TOL)
    assert len(new_steps) == len(ref_steps) == NEW_TOKENS
    for ref_step, new_step in zip(ref_steps, new_steps):
        torch.testing.assert_close(new_step, ref_step, **TOL)
    assert torch.equal(new_tokens, ref_tokens)


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_cache_layout_patch(tmp_path: Path, fake_torch_npu, arch: str) -> None:
    module = patch_module(tmp_path, "kv_cache_layout")
    ids, mask = prompts()
    reference = run(tiny_model(arch), ids, mask)
    model = tiny_model(arch)
    assert module.apply_kv_cache_layout_optimization(model, max_cache_len=32) == 2
    fake_torch_npu.calls.clear()
    assert_same_run(reference, run(model, ids, mask), mask)
    calls = fake_torch_npu.calls
    assert calls["npu_incre_flash_attention"] == 2 * (NEW_TOKENS - 1)  # two layers, every decode step
    assert calls["npu_prompt_flash_attention"] == 2 * 2  # the plain forward and generate's prefill
    assert calls["scatter_update_"] == (2 * calls["npu_prompt_flash_attention"]
                                       + 2 * calls["npu_incre_flash_attention"])


def test_kv_cache_layout_patch_without_mask_and_cache_overflow(tmp_path: Path, fake_torch_npu) -> None:
    module = patch_module(tmp_path, "kv_cache_layout")
    ids = prompts()[0][:1]
    reference = tiny_model("llama")
    model = tiny_model("llama")
    module.apply_kv_cache_layout_optimization(model, max_cache_len=10)
    with torch.no_grad():
        want = reference.generate(input_ids=ids, max_new_tokens=3, do_sample=False)
        assert torch.equal(model.generate(input_ids=ids, max_new_tokens=3, do_sample=False), want)
        with pytest.raises(RuntimeError, match="raise max_cache_len"):
            model.generate(input_ids=ids, max_new_tokens=6, do_sample=False)


@pytest.mark.parametrize("decode,prefill", [("incre", "prompt"), ("fused_infer", "fusion")])
def test_fused_attention_patch(tmp_path: Path, fake_torch_npu, decode: str, prefill: str) -> None:
    module = patch_module(tmp_path, "attention_memory_bound")
    ids, mask = prompts()
    reference = run(tiny_model("llama"), ids, mask)
    model = tiny_model("llama")
    module.apply_fused_attention(model, decode=decode, prefill=prefill)
    fake_torch_npu.calls.clear()
    assert_same_run(reference, run(model, ids, mask), mask)
    decode_fn = {"incre": "npu_incre_flash_attention",
                 "fused_infer": "npu_fused_infer_attention_score"}[decode]
    prefill_fn = {"prompt": "npu_prompt_flash_attention", "fusion": "npu_fusion_attention"}[prefill]
    assert fake_torch_npu.calls[decode_fn] == 2 * (NEW_TOKENS - 1)
    assert fake_torch_npu.calls[prefill_fn] == 2 * 2


@pytest.mark.parametrize("arch", ARCHS)
def test_norm_fusion_patch(tmp_path: Path, fake_torch_npu, arch: str) -> None:
    module = patch_module(tmp_path, "norm_launch_overhead")
    ids, mask = prompts()
    reference = run(tiny_model(arch), ids, mask)
    model = tiny_model(arch)
    swapped = module.register_layernorm_fusion(model)
    norms = sum(type(m).__name__.endswith("RMSNorm") for m in model.modules())
    assert swapped == {"npu_rms_norm": norms, "npu_add_norm_layers": 2}
    fake_torch_npu.calls.clear()
    assert_same_run(reference, run(model, ids, mask), mask)
    # 2 layers x (plain forward + prefill + decode steps)
    assert fake_torch_npu.calls["npu_add_rms_norm"] == 2 * (1 + NEW_TOKENS)


def test_norm_fusion_uses_add_layer_norm_for_layernorm_models(tmp_path: Path, fake_torch_npu) -> None:
    module = patch_module(tmp_path, "norm_launch_overhead")

    def layernorm_llama():
        model = tiny_model("llama")
        torch.manual_seed(2)
        for layer in model.model.layers:
            for attr in ("input_layernorm", "post_attention_layernorm"):
                norm = torch.nn.LayerNorm(64, eps=1e-5)
                with torch.no_grad():
                    norm.weight.uniform_(0.5, 1.5)
                    norm.bias.uniform_(-0.5, 0.5)
                setattr(layer, attr, norm)
        return model

    ids, mask = prompts()
    reference = run(layernorm_llama(), ids, mask)
    model = layernorm_llama()
    assert module.register_layernorm_fusion(model) == {"npu_rms_norm": 1, "npu_add_norm_layers": 2}
    fake_torch_npu.calls.clear()
    assert_same_run(reference, run(model, ids, mask), mask)
    assert fake_torch_npu.calls["npu_add_layer_norm"] == 2 * (1 + NEW_TOKENS)


def test_norm_fusion_leaves_other_norm_formulas_alone(tmp_path: Path, fake_torch_npu) -> None:
    module = patch_module(tmp_path, "norm_launch_overhead")

    class OnePlusWeightRMSNorm(torch.nn.Module):  # Gemma's formula: x * rstd * (1 + w)
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(8))
            self.eps = 1e-6

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    with pytest.raises(RuntimeError, match="no RMSNorm"):
        module.register_layernorm_fusion(torch.nn.Sequential(OnePlusWeightRMSNorm()))
