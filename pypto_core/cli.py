"""``pypto COMMAND ...`` (docs/contract.md). Each command lives in its own module as ``run(args) -> int``.

Exit status: 0 success; 2 unreadable input (one line on stderr naming the file and the reason); 1 other.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pypto_core.errors import InputError, PyptoError

# command name -> module that implements ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "analyze": "pypto_core.commands.analyze",
    "compare": "pypto_core.commands.compare",
    "check": "pypto_core.commands.check",
    "export-trace": "pypto_core.commands.export_trace",
    "synth": "pypto_core.commands.synth",
    "upload": "pypto_core.commands.upload",
    "verify": "pypto_core.commands.verify",
    "agent": "pypto_core.commands.agent",
    "bench": "pypto_core.commands.bench",
    "info": "pypto_core.commands.info",
    "convert": "pypto_core.commands.convert",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pypto",
                                     description="PyPTO: performance tuning for Ascend NPUs and GPUs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # not built yet
        cmd = sub.add_parser(name,
                             help=(module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else None)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pypto_core.memory import use_returning_allocator

    use_returning_allocator()  # as the workers do: freed Arrow memory goes back to the system
    try:
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"pypto: {exc}", file=sys.stderr)
        return 2
    except PyptoError as exc:
        print(f"pypto: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
