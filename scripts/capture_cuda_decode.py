"""Capture real GPU traces of an LLM decode with the SDK, to judge the diagnosis on (not part of the product).

A Llama-style decoder (RMSNorm, rotary, grouped-query attention over a static KV cache, SwiGLU) with
random bf16 weights - no model hub is reachable, and the kernels do not depend on the weights' values.
Runs under ``TuningSession`` (torch.profiler on CUDA), each into its own folder under ``--out``:

- ``eager``: greedy decode, batch 1, every kernel launched from Python, one ``.item()`` per token as a
  streaming server does to emit it; ``eager_batch16``: the same for ``--batch`` sequences;
- ``cuda_graph``: the same decode step captured once as a CUDA graph and replayed per token;
- ``prefill``: causal prefill of ``--prefill-batch`` x ``--prefill-len`` tokens, one step per batch;
- ``hf_generate`` (``--hf``): transformers' ``LlamaForCausalLM`` of the same shape, decoded by ``generate``;
  ``hf_generate_compiled`` (``--hf-compile``, a run of its own): the same with a static cache, for which
  ``generate`` compiles the forward with CUDA graphs itself;
- ``compiled`` / ``compiled_static`` (``--compile`` [``--static-weights``], a run of its own): the decode
  step under ``torch.compile(mode="reduce-overhead")``, with the weights copied into the graph before each
  replay, or marked static.

``timing*.json`` hold the measured milliseconds per token of both decodes without the profiler (the ground
truth for an estimated gain) and the model's shape. Run on a CUDA host:

    python scripts/capture_cuda_decode.py --out runs/h200 --hf
    python scripts/capture_cuda_decode.py --out runs/h200 --compile [--static-weights]
    pypto analyze runs/h200/eager;  pypto compare runs/h200/eager runs/h200/cuda_graph

tests/data/h200_decode holds what it captured on an H200 (docs/gpu_decode.md).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pypto_core.capture import TuningSession


@dataclass(frozen=True)
class Shape:
    hidden: int = 2048
    layers: int = 16
    heads: int = 32
    kv_heads: int = 8
    intermediate: int = 5632
    vocab: int = 32000
    max_len: int = 1024

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class Decoder:
    """The forward pass written the way transformers' eager Llama writes it, so the kernel mix is the one
    an eager PyTorch server launches."""

    def __init__(self, shape: Shape, batch: int, device: str, dtype: torch.dtype) -> None:
        s = self.s = shape
        g = torch.Generator(device=device).manual_seed(0)

        def w(*dims: int) -> torch.Tensor:
            return (torch.randn(*dims, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)

        kv = s.kv_heads * s.head_dim
        self.embed, self.lm_head = w(s.vocab, s.hidden), w(s.vocab, s.hidden)
        self.norm = torch.ones(s.hidden, device=device, dtype=dtype)
        self.layers = [dict(ln1=torch.ones(s.hidden, device=device, dtype=dtype),
                            ln2=torch.ones(s.hidden, device=device, dtype=dtype),
                            wq=w(s.hidden, s.hidden), wk=w(kv, s.hidden), wv=w(kv, s.hidden),
                            wo=w(s.hidden, s.hidden), gate=w(s.intermediate, s.hidden),
                            up=w(s.intermediate, s.hidden), down=w(s.hidden, s.intermediate))
                       for _ in range(s.layers)]
        cache = (s.layers, batch, s.kv_heads, s.max_len, s.head_dim)
        self.k_cache = torch.zeros(cache, device=device, dtype=dtype)
        self.v_cache = torch.zeros(cache, device=device, dtype=dtype)
        inv = 1.0 / (10000 ** (torch.arange(0, s.head_dim, 2, device=device).float() / s.head_dim))
        angles = torch.outer(torch.arange(s.max_len, device=device).float(), inv)
        emb = torch.cat((angles, angles), dim=-1)
        self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)
        self.positions = torch.arange(s.max_len, device=device)

    @staticmethod
    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return weight * x.to(dtype)

    @staticmethod
    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor, *, cached: bool) -> torch.Tensor:
        """Next-token ids for ``tokens`` [batch, n] at positions ``pos`` [n]. ``cached``: write keys and
        values into the static cache and attend over it (decode); else causal attention over the tokens
        themselves (prefill)."""
        s = self.s
        b, n = tokens.shape
        x = F.embedding(tokens, self.embed)
        cos = self.cos.index_select(0, pos)[None, None]
        sin = self.sin.index_select(0, pos)[None, None]
        mask = (self.positions[None, :] <= pos[:, None])[None, None] if cached else None
        for i, p in enumerate(self.layers):
            h = self.rms_norm(x, p["ln1"])
            q = F.linear(h, p["wq"]).view(b, n, s.heads, s.head_dim).transpose(1, 2)
            k = F.linear(h, p["wk"]).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            v = F.linear(h, p["wv"]).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if cached:
                self.k_cache[i].index_copy_(2, pos, k)
                self.v_cache[i].index_copy_(2, pos, v)
                k, v = self.k_cache[i], self.v_cache[i]
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=not cached,
                                               enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(b, n, s.hidden), p["wo"])
            h = self.rms_norm(x, p["ln2"])
            x = x + F.linear(F.silu(F.linear(h, p["gate"])) * F.linear(h, p["up"]), p["down"])
        logits = F.linear(self.rms_norm(x[:, -1:], self.norm), self.lm_head)
        return logits.argmax(-1)


class GraphStep:
    """One decode step captured as a CUDA graph: inputs copied into static buffers, then one replay."""

    def __init__(self, model: Decoder, batch: int) -> None:
        self.tokens = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
        self.pos = torch.zeros(1, dtype=torch.long, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm the allocator and cuBLAS's workspaces outside the capture
                model.forward(self.tokens, self.pos, cached=True)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = model.forward(self.tokens, self.pos, cached=True)

    def __call__(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.tokens.copy_(tokens)
        self.pos.copy_(pos)
        self.graph.replay()
        return self.out


def decode(step: Any, first: torch.Tensor, start: int, n: int, prof: Any = None) -> list[int]:
    """Greedy decode of ``n`` tokens from position ``start``; one host sync per token (the server
    streams each token out), one profiler step per token."""
    token, out = first, []
    for i in range(n):
        pos = torch.tensor([start + i], device=first.device)
        token = step(token, pos)
        out.append(int(token[0, 0].item()))
        if prof is not None:
            prof.step()
    return out


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def ms_per_token(step: Any, first: torch.Tensor, start: int, n: int) -> float:
    decode(step, first, start, 8)  # warm
    sync()
    t = time.perf_counter()
    decode(step, first, start, n)
    sync()
    return (time.perf_counter() - t) * 1000 / n


def hf_generate(session: TuningSession, shape: Shape, dev: str, prompt: torch.Tensor, active: int,
                compiled: bool = False) -> dict[str, Any]:
    """The same shape as transformers' LlamaForCausalLM, decoded with ``generate`` (its default dynamic
    cache, eager): what a plain Hugging Face server runs. One profiler step per generated token."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList
    except ImportError as exc:
        return {"skipped": f"transformers: {exc}"}

    class StepMarker(LogitsProcessor):
        def __init__(self, prof: Any) -> None:
            self.prof = prof

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            self.prof.step()
            return scores

    config = LlamaConfig(hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                         num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
                         intermediate_size=shape.intermediate, vocab_size=shape.vocab,
                         max_position_embeddings=shape.max_len)
    with torch.device(dev):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    kwargs: dict[str, Any] = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    label = "hf_generate"
    if compiled:  # transformers' own fast path: with a static cache, generate compiles the forward itself
        kwargs["cache_implementation"] = "static"
        label = "hf_generate_compiled"
    model.generate(prompt, max_new_tokens=8, **kwargs)  # warm
    sync()
    t = time.perf_counter()
    model.generate(prompt, max_new_tokens=64, min_new_tokens=64, **kwargs)
    sync()
    ms = (time.perf_counter() - t) * 1000 / 64
    with session.run(label) as prof:
        model.generate(prompt, max_new_tokens=4 + active + 1, min_new_tokens=4 + active + 1,
                       logits_processor=LogitsProcessorList([StepMarker(prof)]), **kwargs)
    return {"ms_per_token_with_prefill": ms, "transformers": __import__("transformers").__version__}


def compile_run(args: argparse.Namespace, model: Decoder, first: torch.Tensor, dev: str,
                timing: dict[str, Any]) -> None:
    """The remedy the diagnosis names for eager decode, measured: torch.compile's fusion plus CUDA graphs
    (cudagraph trees). The caches are marked static so that writing them does not turn the graphs off."""
    import torch._dynamo

    static = [model.k_cache, model.v_cache]
    if args.static_weights:  # what the diagnosis of the first compiled run advised (memcpy_bound)
        static += [model.embed, model.lm_head, model.norm, model.cos, model.sin, model.positions]
        static += [t for layer in model.layers for t in layer.values()]
    for tensor in static:
        torch._dynamo.mark_static_address(tensor)
    compiled = torch.compile(lambda tokens, pos: model.forward(tokens, pos, cached=True),
                             mode="reduce-overhead")

    def step(tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(tokens, pos).clone()  # the graph's output buffer is reused by the next replay

    t = time.perf_counter()
    decode(step, first, args.prompt, 3)
    sync()
    timing["compile_s"] = time.perf_counter() - t
    timing["compiled_ms_per_token"] = ms_per_token(step, first, args.prompt, args.timed)
    timing["compiled_speedup"] = timing["eager_ms_per_token"] / timing["compiled_ms_per_token"]
    session = TuningSession("cuda-decode", output_dir=args.out, backend=dev, wait=2, warmup=2,
                            active=args.active)
    label = "compiled_static" if args.static_weights else "compiled"
    with session.run(label) as prof:
        decode(step, first, args.prompt, 4 + args.active, prof)
    (args.out / f"timing_{label}.json").write_text(json.dumps(timing, indent=1))
    print(json.dumps(timing, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--layers", type=int, default=Shape.layers)
    ap.add_argument("--active", type=int, default=8, help="decode tokens recorded per run")
    ap.add_argument("--prompt", type=int, default=256, help="prompt length before the decode")
    ap.add_argument("--timed", type=int, default=128, help="tokens timed without the profiler")
    ap.add_argument("--prefill-batch", type=int, default=8)
    ap.add_argument("--prefill-len", type=int, default=1024)
    ap.add_argument("--prefill-steps", type=int, default=2, help="prefill steps recorded")
    ap.add_argument("--batch", type=int, default=16, help="batch of the batched eager decode (1: none)")
    ap.add_argument("--hf", action="store_true", help="also decode with transformers' generate")
    ap.add_argument("--hf-compile", action="store_true",
                    help="only transformers' generate, static cache, torch.compile(mode='reduce-overhead')")
    ap.add_argument("--compile", action="store_true",
                    help="only the decode under torch.compile(mode='reduce-overhead'), into "
                         "timing_compiled.json")
    ap.add_argument("--static-weights", action="store_true",
                    help="with --compile: mark the weights as static addresses (no copy per replay)")
    ap.add_argument("--dry-run-on-cpu", action="store_true",
                    help="check the script without a GPU: CPU profiler, no CUDA graph")
    args = ap.parse_args()
    dev = "cpu" if args.dry_run_on_cpu else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("this script needs a CUDA GPU (or --dry-run-on-cpu)")
    shape = Shape(layers=args.layers)
    model = Decoder(shape, batch=1, device=dev, dtype=torch.bfloat16)
    prompt = torch.randint(0, shape.vocab, (1, args.prompt), device=dev)
    with torch.no_grad():
        first = model.forward(prompt, torch.arange(args.prompt, device=dev), cached=True)

        def eager(tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            return model.forward(tokens, pos, cached=True)

        graph = GraphStep(model, batch=1) if dev == "cuda" else eager
        timing: dict[str, Any] = {
            "gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu (dry run)",
            "torch": torch.__version__, "shape": asdict(shape),
            "params_b": round(sum(t.numel() for p in model.layers for t in p.values()) / 1e9
                              + 2 * shape.vocab * shape.hidden / 1e9, 3),
            "eager_ms_per_token": ms_per_token(eager, first, args.prompt, args.timed),
            "cuda_graph_ms_per_token": ms_per_token(graph, first, args.prompt, args.timed),
        }
        same = decode(eager, first, args.prompt, 16) == decode(graph, first, args.prompt, 16)
        timing["graph_matches_eager"] = same
        timing["measured_speedup"] = timing["eager_ms_per_token"] / timing["cuda_graph_ms_per_token"]
        if args.compile:
            compile_run(args, model, first, dev, timing)
            return
        if args.hf_compile:
            timing["hf_generate_compiled"] = hf_generate(
                TuningSession("cuda-decode", output_dir=args.out, backend=dev, wait=2, warmup=2,
                              active=args.active), shape, dev, prompt, args.active, compiled=True)
            (args.out / "timing_hf_generate_compiled.json").write_text(json.dumps(timing, indent=1))
            print(json.dumps(timing, indent=1))
            return

        # wait 2 and warmup 2 tokens, then `active` tokens recorded: ProfilerStep#4.. in the trace
        session = TuningSession("cuda-decode", output_dir=args.out, backend=dev, wait=2, warmup=2,
                                active=args.active)
        for label, step in (("eager", eager), ("cuda_graph", graph)):
            with session.run(label) as prof:
                decode(step, first, args.prompt, 4 + args.active, prof)
        if args.batch > 1:  # the same decode for a batch of sequences: more token rows per MatMul
            wide = Decoder(shape, batch=args.batch, device=dev, dtype=torch.bfloat16)
            prompts = torch.randint(0, shape.vocab, (args.batch, args.prompt), device=dev)
            firsts = wide.forward(prompts, torch.arange(args.prompt, device=dev), cached=True)

            def eager_batch(tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
                return wide.forward(tokens, pos, cached=True)

            timing[f"eager_batch{args.batch}_ms_per_step"] = ms_per_token(eager_batch, firsts, args.prompt,
                                                                         args.timed)
            with session.run(f"eager_batch{args.batch}") as prof:
                decode(eager_batch, firsts, args.prompt, 4 + args.active, prof)
            del wide
        batch = torch.randint(0, shape.vocab, (args.prefill_batch, args.prefill_len), device=dev)
        positions = torch.arange(args.prefill_len, device=dev)
        with session.run("prefill") as prof:
            for _ in range(4 + args.prefill_steps):
                model.forward(batch, positions, cached=False)
                sync()
                prof.step()
        sync()
        t = time.perf_counter()
        for _ in range(3):
            model.forward(batch, positions, cached=False)
        sync()
        step_s = (time.perf_counter() - t) / 3
        flops = 2 * timing["params_b"] * 1e9 * args.prefill_batch * args.prefill_len
        timing["prefill_ms_per_step"] = step_s * 1000
        timing["prefill_tflops_weights_only"] = flops / step_s / 1e12
        timing["prefill_shape"] = [args.prefill_batch, args.prefill_len]
        if args.hf:
            timing["hf_generate"] = hf_generate(session, shape, dev, prompt, args.active)
    (args.out / "timing.json").write_text(json.dumps(timing, indent=1))
    print(json.dumps(timing, indent=1))
    assert math.isfinite(timing["measured_speedup"])


if __name__ == "__main__":
    main()
