"""Run the speed and memory benchmarks and print their results as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from pypto_core.bench import registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="100,1000",
                        help="input sizes in MB, comma-separated (default 100,1000)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this benchmark (repeatable); names: the modules of pypto_core/bench")
    parser.add_argument("-o", "--output", metavar="FILE", help="also write the JSON to FILE")
    parser.add_argument("--workdir", metavar="DIR",
                        help="where generated inputs go (default: a temporary folder, deleted afterwards)")


def run(args: argparse.Namespace) -> int:
    try:
        sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    except ValueError:
        print(f"pypto bench: --sizes must be integers in MB, got {args.sizes!r}", file=sys.stderr)
        return 1
    benches = registry()
    names = args.only or sorted(benches)
    unknown = [n for n in names if n not in benches]
    if unknown:
        print(f"pypto bench: unknown benchmark {', '.join(unknown)}; known: {', '.join(sorted(benches))}",
              file=sys.stderr)
        return 1
    report: dict[str, object] = {"sizes_mb": sizes, "cpu_count": os.cpu_count(), "benchmarks": {}}
    for name in names:
        t0 = time.perf_counter()
        if args.workdir:
            work = Path(args.workdir) / name
            work.mkdir(parents=True, exist_ok=True)
            result = benches[name](sizes, str(work))
        else:
            with tempfile.TemporaryDirectory(prefix=f"pypto_bench_{name}_") as tmp:
                result = benches[name](sizes, tmp)
        result = dict(result)
        result.setdefault("wall_s", round(time.perf_counter() - t0, 1))
        report["benchmarks"][name] = result  # type: ignore[index]
        print(f"pypto bench: {name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0
