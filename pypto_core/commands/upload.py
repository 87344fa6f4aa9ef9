"""Upload a profile (file, archive or folder) to the dashboard, resuming a broken upload."""

from __future__ import annotations

import argparse
import os
import sys

from pypto_core.capture.upload import upload_profile
from pypto_core.errors import PyptoError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a profile folder, archive (.zip, .tar, .tar.gz) or single file")
    parser.add_argument("--server", required=True, help="dashboard URL, e.g. https://pypto.example")
    parser.add_argument("--project", required=True, type=int, help="project id")
    parser.add_argument("--token", default=os.environ.get("PYPTO_TOKEN"),
                        help="API token (default: $PYPTO_TOKEN)")
    parser.add_argument("--name", help="profile name (default: the file name)")
    parser.add_argument("--sku", help="device SKU, e.g. 910B3, when the profile does not say")
    parser.add_argument("--tag", action="append", dest="tags", help="a tag (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    if not args.token:
        raise PyptoError("an API token is needed: --token or $PYPTO_TOKEN (POST /api/auth/token/ gives one)")

    def progress(sent: int, total: int) -> None:
        if not args.quiet:
            print(f"\ruploading {sent / 2**20:.1f} / {total / 2**20:.1f} MiB "
                  f"({100 * sent // max(total, 1)}%)",
                  end="", file=sys.stderr, flush=True)

    profile = upload_profile(
        args.path, server=args.server, project=args.project, token=args.token, name=args.name, sku=args.sku,
        tags=args.tags, progress=progress,
    )
    if not args.quiet:
        print(file=sys.stderr)
    print(f"{args.server.rstrip('/')}/profiles/{profile['id']}/")
    return 0
