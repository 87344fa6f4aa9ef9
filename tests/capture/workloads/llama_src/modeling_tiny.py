"""The model file of the verification workload: a tiny Llama class of its own, as a user's model file
defines one. A norm-fusion diff made against this file hooks ``TinyLlamaForCausalLM.from_pretrained``."""

from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM


def tiny_config() -> LlamaConfig:
    return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)


class TinyLlamaForCausalLM(LlamaForCausalLM):
    pass
