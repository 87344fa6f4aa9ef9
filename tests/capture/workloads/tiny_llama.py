"""A randomly initialised tiny Hugging Face Llama generating a few tokens under the SDK's Profiler.

The agent runs this with PYPTO_CAPTURE_DIR / PYPTO_CAPTURE_OPTIONS set; ``Profiler()`` picks them up.
Each run appends a line to $RUN_COUNTER_FILE (when set), so a test can prove a job ran exactly once.
"""

from __future__ import annotations

import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from pypto_core.capture import Profiler


def build_model(hidden: int = 64, layers: int = 2, vocab: int = 256) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    return LlamaForCausalLM(config).eval()


@torch.inference_mode()
def decode(model: LlamaForCausalLM, tokens: int, prof: Profiler | None = None) -> list[int]:
    """Greedy decoding with a KV cache, one profiler step per generated token (prefill is step 0)."""
    ids = torch.tensor([[1, 5, 9, 13, 17, 21, 25, 29]])
    out = model(input_ids=ids, use_cache=True)
    past, generated = out.past_key_values, []
    if prof:
        prof.step()
    for _ in range(tokens):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        generated.append(int(nxt))
        out = model(input_ids=nxt, past_key_values=past, use_cache=True)
        past = out.past_key_values
        if prof:
            prof.step()
    return generated


def main() -> int:
    tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    counter = os.environ.get("RUN_COUNTER_FILE")
    if counter:
        with open(counter, "a") as fh:
            fh.write(f"{os.getpid()}\n")
    model = build_model()
    print(f"model ready: {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    with Profiler() as prof:
        generated = decode(model, tokens, prof)
    print(f"generated {generated}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
