"""Diagnose one profile: findings with evidence, savings and remedies (JSON, Markdown or HTML)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pypto_core.errors import PyptoError
from pypto_core.report_render import FORMATS, render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path",
                        help="profile folder, archive (.zip, .tar, .tar.gz, .tgz) or file (.json, .csv, .db)")
    parser.add_argument("--sku",
                        help="device SKU (910B1-B4, 910_93, 910A, 310P3, A100, H100, H200); default: "
                                      "what the profile says")
    parser.add_argument("--format", choices=FORMATS, default="json")
    parser.add_argument("-o", "--output", help="write the report here instead of stdout")
    parser.add_argument("--config",
                        help="JSON file of threshold overrides, {rule: {key: value}, disabled: [...]}")
    parser.add_argument("--lang", default="en", metavar="en|zh-Hans",
                        help="language of the findings' text and the report's labels (ids and numbers never "
                             "change): en (default) or zh-Hans")
    parser.add_argument("--what-if", metavar="RULE[,RULE...]",
                        help="replay the run with these findings fixed together (report key what_if: "
                             "duration_ns, per_token_ms, speedup)")


def run(args: argparse.Namespace) -> int:
    from pypto_core.formats import open_profiles  # lazily: the readers are heavy
    from pypto_core.hardware import get_sku
    from pypto_core.i18n import LANGUAGES, loaded_texts, normalize_language, stored_texts, unique_texts
    from pypto_core.rules import diagnose_columns, diagnose_group

    language = normalize_language(args.lang)
    if language is None:
        raise PyptoError(f"unknown language {args.lang!r}; choose one of {', '.join(LANGUAGES)}")
    if args.sku:
        get_sku(args.sku)  # an unknown name is refused before any reading, with the names known
    config = None
    if args.config:
        try:
            config = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PyptoError(f"{args.config}: cannot read the config: {exc}") from exc
    group = open_profiles(args.path, columns=diagnose_columns())  # only what the analysis reads
    try:
        what_if = [r.strip() for r in args.what_if.split(",") if r.strip()] if args.what_if else None
        # the report is all that is wanted of the rows: they go before the replay's runs (keep_rows)
        report = diagnose_group(group, config, args.sku, what_if=what_if, keep_rows=False)
    except ValueError as exc:
        raise PyptoError(str(exc)) from exc
    # the group's own warnings (a rank that could not be read) first, each text beside its own message
    report.warnings, report.warning_messages = stored_texts(unique_texts(
        list(group.warnings) + loaded_texts(report.warnings, report.warning_messages)))
    text = render(report, args.format, language)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
