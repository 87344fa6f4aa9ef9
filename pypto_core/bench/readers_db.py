"""Benchmark: a torch_npu db export (``ascend_pytorch_profiler_0.db`` + ``analysis.db``) read into a saved
profile, as an upload is.

The folder is a simulated db-only run (``pypto_core.synth``, ``db="only"``) whose db is about ``size_mb``:
TASK ⋈ COMPUTE_TASK_INFO with one TASK_PMU_INFO row per metric per task, PYTORCH_API, CANN_API and
CONNECTION_IDS, as the real samples. ``formats.write_profiles`` streams it into Parquet (``ascend_db``: the
native fetch where a C compiler is found, else SQL; ``PYPTO_NO_NATIVE=1`` measures the SQL path), in a fresh
child process per run so that its peak RSS is its own; the saved profile is then loaded with
``Profile.load``. MB/s are of the db file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import simulated_inputs_figures

# synth's size_mb counts the text export it would write; its db is 0.29-0.30 of that (measured: size_mb 50,
# 1050, 3500 gave 14.4, 315, 1058 MB dbs), so the run asks for size_mb / 0.3 to get a db of about size_mb.
_DB_SHARE = 0.3


def _simulate(size_mb: int, folder: Path) -> Path:
    from pypto_core.synth import synthesize_run

    return synthesize_run(folder, size_mb=size_mb / _DB_SHARE, db="only", tokens=4, prompt_tokens=128).path


def _db_bytes(folder: Path) -> int:
    return next(p for p in folder.rglob("*.db") if p.name != "analysis.db").stat().st_size


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Simulate, convert and load a db export of about each size: MB/s and peak RSS for both."""
    results = simulated_inputs_figures(sizes_mb, workdir, "ascend_pt_db", _simulate, _db_bytes)
    return {"benchmark": "readers_db",
            "input": "simulated torch_npu db export (ascend_pytorch_profiler_0.db + analysis.db)",
            "path": "formats.write_profiles", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_db 300 /tmp/bench
    import json
    import sys

    print(json.dumps(run([int(sys.argv[1])], sys.argv[2]), indent=2))
