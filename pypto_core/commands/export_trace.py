"""Write a profile as chrome-trace JSON that Perfetto and chrome://tracing load correctly."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="profile folder, archive or file")
    parser.add_argument("-o", "--output", required=True, help="trace file to write (.json or .json.gz)")


def run(args: argparse.Namespace) -> int:
    from pypto_core.formats import open_profile  # lazily: the readers are heavy and optional here
    from pypto_core.profile import ProfileGroup
    from pypto_core.timeline import export_chrome_trace

    loaded = open_profile(args.path)
    profile = loaded.primary() if isinstance(loaded, ProfileGroup) else loaded
    count = export_chrome_trace(profile, args.output)
    if isinstance(loaded, ProfileGroup) and loaded.ranks > 1:
        print(f"pypto: wrote rank {profile.meta.rank} of {loaded.ranks}", file=sys.stderr)
    print(f"{args.output}: {count} trace events")
    return 0
