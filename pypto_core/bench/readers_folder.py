"""Benchmark: a whole torch_npu ``*_ascend_pt`` folder read into a saved profile, as an upload is.

The folder is a simulated run (``pypto_core.synth``) of ``size_mb``: kernel_details.csv plus trace_view.json
and the small files, the pair that real uploads carry. ``formats.write_profiles`` streams it into Parquet
(the kernel table and the timeline each with bounded memory, then the flows re-pointed and the steps
bounded one row group at a time), in a fresh child process per run so that its peak RSS is its own; the
saved profile is then loaded with ``Profile.load``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import simulated_inputs_figures


def _simulate(size_mb: int, folder: Path) -> Path:
    from pypto_core.synth import synthesize_run

    return synthesize_run(folder, size_mb=size_mb, tokens=4, prompt_tokens=128).path


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Simulate, convert and load an ascend_pt folder of each size: MB/s and peak RSS for both."""
    results = simulated_inputs_figures(sizes_mb, workdir, "ascend_pt", _simulate, _folder_bytes)
    return {"benchmark": "readers_folder", "input": "simulated *_ascend_pt folder (kernel_details.csv + "
            "trace_view.json)", "path": "formats.write_profiles", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_folder 100 /tmp/bench
    import json
    import sys

    print(json.dumps(run([int(sys.argv[1])], sys.argv[2]), indent=2))
