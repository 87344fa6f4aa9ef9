"""Verification workload: save a seeded tiny Llama, load it back with ``from_pretrained`` (where a patch to
``modeling_tiny.py`` takes effect) and decode a few tokens under the SDK's Profiler.

Usage: ``python run.py TOKENS WEIGHTS_DIR``. Each run appends its pid to $RUN_COUNTER_FILE when set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from modeling_tiny import TinyLlamaForCausalLM, tiny_config

from pypto_core.capture import Profiler


@torch.inference_mode()
def decode(model: TinyLlamaForCausalLM, tokens: int, prof: Profiler) -> list[int]:
    ids = torch.tensor([[1, 5, 9, 13, 17, 21, 25, 29]])
    out = model(input_ids=ids, use_cache=True)
    past, generated = out.past_key_values, []
    prof.step()
    for _ in range(tokens):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        generated.append(int(nxt))
        out = model(input_ids=nxt, past_key_values=past, use_cache=True)
        past = out.past_key_values
        prof.step()
    return generated


def main() -> int:
    tokens, weights = int(sys.argv[1]), Path(sys.argv[2])
    counter = os.environ.get("RUN_COUNTER_FILE")
    if counter:
        with open(counter, "a") as fh:
            fh.write(f"{os.getpid()}\n")
    if not (weights / "config.json").exists():
        torch.manual_seed(0)
        TinyLlamaForCausalLM(tiny_config()).save_pretrained(weights)
    model = TinyLlamaForCausalLM.from_pretrained(weights).eval()
    swapped = getattr(model.model.norm, "_pypto_original_forward", None) is not None
    print(f"model loaded; norms fused: {swapped}", flush=True)
    with Profiler() as prof:
        generated = decode(model, tokens, prof)
    print(f"generated {generated}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
