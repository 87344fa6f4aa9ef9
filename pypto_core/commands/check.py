"""CI gate: compare NEW with a baseline; exit 3 when a headline metric regressed beyond the limit."""

from __future__ import annotations

import argparse
import sys

from pypto_core.errors import PyptoError

EXIT_REGRESSION = 3  # distinct from 1 (failure) and 2 (unreadable input), so CI can tell them apart


def _percent(text: str) -> float:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("new", help="the candidate profile")
    parser.add_argument("--baseline", required=True, help="the baseline profile")
    parser.add_argument("--max-regression", type=_percent, default=5.0,
                        help="allowed slowdown, e.g. 5%% (default)")
    parser.add_argument("--sku", help="device SKU for both")


def run(args: argparse.Namespace) -> int:
    from pypto_core.commands.compare import load_any
    from pypto_core.compare import ProfileComparer, regression

    if args.max_regression < 0:
        raise PyptoError("--max-regression must be zero or more")
    result = ProfileComparer(lambda: load_any(args.baseline), lambda: load_any(args.new),
                             sku=args.sku).compare()
    worse = regression(result, args.max_regression)
    if worse:
        for line in worse:
            print(f"REGRESSION {line}")
        return EXIT_REGRESSION
    # the headline the run has: decode's per-token latency, else the step time of a stepped run
    head = result.metric("per_token_latency_ms")
    if head["base"] is None and result.metric("step_time_ms")["base"] is not None:
        head = result.metric("step_time_ms")
    print(f"OK {head['name']} {head['base']} -> {head['new']} "
          f"(limit {args.max_regression:g}%, significant={head['significant']})", file=sys.stdout)
    return 0
