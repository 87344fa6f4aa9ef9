"""Compare a baseline and a candidate profile: metrics, op-level diff, findings fixed/persisting/new."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pypto_core.profile import Profile

FORMATS = ("json", "md", "csv")


def load_any(path: str) -> Profile:
    """Any input ``open_profile`` reads, a saved canonical profile folder included (it loads directly)."""
    from pypto_core.formats import open_profile

    return open_profile(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="baseline profile (folder, archive, file, or a saved profile folder)")
    parser.add_argument("new", help="candidate profile")
    parser.add_argument("--sku", help="device SKU for both (default: what each profile says)")
    parser.add_argument("--format", choices=FORMATS, default="json")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    parser.add_argument("--no-findings", action="store_true", help="skip diagnosing both (faster)")


def run(args: argparse.Namespace) -> int:
    from pypto_core.compare import compare_profiles, to_csv, to_markdown
    from pypto_core.hardware import get_sku

    if args.sku:
        get_sku(args.sku)  # an unknown name is refused before any reading, with the names known
    # loaders: one profile is held at a time (the baseline is reduced to what the comparison reads first)
    result = compare_profiles(lambda: load_any(args.base), lambda: load_any(args.new), sku=args.sku,
                              with_findings=not args.no_findings)
    if args.format == "md":
        text = to_markdown(result)
    elif args.format == "csv":
        text = to_csv(result)
    else:
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
