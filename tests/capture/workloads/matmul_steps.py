"""A small PyTorch workload under the SDK's Profiler
(quicker than the Llama: for the agent's plumbing tests)."""

import os

import torch

from pypto_core.capture import Profiler

counter = os.environ.get("RUN_COUNTER_FILE")
if counter:
    with open(counter, "a") as fh:
        fh.write(f"{os.getpid()}\n")
a = torch.randn(32, 32)
with Profiler() as prof:
    for _ in range(12):
        for _ in range(20):
            a = torch.tanh(a @ a)
        prof.step()
print("matmul steps done", flush=True)
