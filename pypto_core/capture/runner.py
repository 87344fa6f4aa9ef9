"""``python -m pypto_core.capture.runner SCRIPT [ARGS...]``: run a script inside the SDK's Profiler.

For workloads that do not use the SDK themselves (``wrap = true`` in the agent config): the whole run is
recorded, with the job's options from the environment. A script that does use ``Profiler`` joins this one.
"""

from __future__ import annotations

import runpy
import sys

from pypto_core.capture.profiler import Profiler


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m pypto_core.capture.runner SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    with Profiler():
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
