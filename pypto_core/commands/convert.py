"""Read a profile once into saved Parquet folders (one per rank), streaming; print what was read as JSON.

The saved folder opens directly in ``analyze``, ``compare``, ``info`` and ``export-trace`` (no re-parse),
and the conversion keeps its memory bounded whatever the input's size (``formats.write_profiles``), the
way the dashboard ingests an upload.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path",
                        help="profile folder, archive (.zip/.tar/.tar.gz/.tgz) or file "
                             "(.json/.json.gz/.csv/.db)")
    parser.add_argument("out", help="new or empty folder for the saved profile (rank_N/ per rank)")


def run(args: argparse.Namespace) -> int:
    from pypto_core.formats import write_profiles
    from pypto_core.i18n import render
    from pypto_core.profile import saved_summary

    out = Path(args.out)
    saved = write_profiles(args.path, out)
    doc = {
        "source": saved.source,
        "output": str(out),
        "ranks": [{"folder": str(out / name), **saved_summary(out / name)} for name, _ in saved.ranks],
        "warnings": [render(w) for w in saved.warnings],
    }
    json.dump(doc, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0
