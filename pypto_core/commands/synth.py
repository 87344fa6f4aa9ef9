"""Write a simulated LLM-inference profile in the real on-disk format (torch_npu *_ascend_pt or msprof PROF_*,
CANN >= 8.0 or <= 7.0 layout; text, and with --db / --db-only the SQLite export)."""

from __future__ import annotations

import argparse
import json
import sys

from pypto_core.synth import FIXES, LAYOUTS, MODELS, RULES, SKUS, VARIANTS, synthesize_run


def _rules(text: str) -> frozenset[str]:
    if text.strip().lower() == "all":
        return frozenset(RULES)
    rules = frozenset(r.strip() for r in text.split(",") if r.strip())
    unknown = rules - set(RULES)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown rule(s) {', '.join(sorted(unknown))}; "
                                         f"known: {', '.join(RULES)}")
    return rules


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", metavar="OUT", help="folder to write into (created if missing)")
    parser.add_argument("--model", default="llama2-7b", choices=sorted(MODELS))
    parser.add_argument("--sku", default="910B3", choices=sorted(SKUS))
    parser.add_argument("--tokens", type=int, default=8, help="decode steps (default 8)")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens of the prefill (default 512)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--layout", default="ascend_pt", choices=LAYOUTS,
                        help="ascend_pt (torch_npu), msprof (CANN >= 8.0 mindstudio_profiler_output) or "
                             "msprof_legacy (CANN <= 7.0 device_0/summary and device_0/timeline, 7.0.0 "
                             "columns)")
    parser.add_argument("--variant", default="cann83", choices=VARIANTS,
                        help="column names: cann83 (Block Dim) or 2026 (Block Num); ignored by msprof_legacy")
    db = parser.add_mutually_exclusive_group()
    db.add_argument("--db", action="store_const", const=True, default=False,
                    help="also write the SQLite export (ascend_pytorch_profiler_0.db + analysis.db, or "
                         "msprof_*.db)")
    db.add_argument("--db-only", dest="db", action="store_const", const="only",
                    help="write the SQLite export instead of the text one")
    parser.add_argument("--fixed", type=_rules, default=frozenset(), metavar="RULE,...|all",
                        help="anti-patterns to remove (all are planted by default): "
                             + "; ".join(f"{r}: {FIXES[r]}" for r in RULES))
    parser.add_argument("--size-mb", type=float, default=None,
                        help="add decode steps until the kernel table and timeline reach about N MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        result = synthesize_run(args.out, model=args.model, sku=args.sku, tokens=args.tokens,
                                prompt_tokens=args.prompt, batch=args.batch, dtype=args.dtype,
                                layout=args.layout, variant=args.variant, fixed=args.fixed,
                                size_mb=args.size_mb, seed=args.seed, db=args.db)
    except ValueError as exc:  # combinations the simulator refuses (msprof_legacy --db)
        print(f"pypto synth: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dict(result.summary(), path=str(result.path), bytes=result.bytes_written), indent=2))
    else:
        planted = ", ".join(result.config.planted_rules) or "none"
        print(f"{result.path}  ({result.kernel_count} kernels, {result.decode_tokens} decode tokens, "
              f"{result.per_token_ms:.1f} ms/token, {result.bytes_written / 1e6:.1f} MB; planted: {planted})")
    return 0
