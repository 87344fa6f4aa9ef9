"""Benchmark: a torch_npu db export (``ascend_pytorch_profiler_0.db`` + ``analysis.db``) read into a saved
profile, as an upload is.

The folder is a simulated db-only run (``pypto_core.synth``, ``db="only"``) whose db is about ``size_mb``:
TASK ⋈ COMPUTE_TASK_INFO with one TASK_PMU_INFO row per metric per task, PYTORCH_API, CANN_API and
CONNECTION_IDS, as the real samples. ``formats.write_profiles`` streams it into Parquet (``ascend_db``: SQLite
orders, pivots and numbers, rows fetched in blocks), in a fresh child process per run so that its peak RSS
is its own; the saved profile is then loaded with ``Profile.load``. MB/s are of the db file.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import write_profiles_figures

MB = 1024 * 1024
# synth's size_mb counts the text export it would write; its db is 0.29-0.30 of that (measured: size_mb 50,
# 1050, 3500 gave 14.4, 315, 1058 MB dbs), so the run asks for size_mb / 0.3 to get a db of about size_mb.
_DB_SHARE = 0.3


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Simulate, convert and load a db export of about each size: MB/s and peak RSS for both."""
    from pypto_core.synth import synthesize_run

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        synth_dir, out_dir = work / f"ascend_pt_db_{size}mb", work / f"ascend_pt_db_{size}mb.saved"
        shutil.rmtree(synth_dir, ignore_errors=True)
        t0 = time.perf_counter()
        folder = synthesize_run(synth_dir, size_mb=size / _DB_SHARE, db="only", tokens=4, prompt_tokens=128).path
        synth_s = time.perf_counter() - t0
        db = next(p for p in folder.rglob("*.db") if p.name != "analysis.db")
        input_mb = db.stat().st_size / MB
        entry: dict[str, Any] = {"size_mb": size, "input_mb": round(input_mb, 1), "synth_s": round(synth_s, 1)}
        entry.update(write_profiles_figures(folder, out_dir, input_mb))
        shutil.rmtree(synth_dir, ignore_errors=True)
        results.append(entry)
    return {"benchmark": "readers_db", "input": "simulated torch_npu db export (ascend_pytorch_profiler_0.db + "
            "analysis.db)", "path": "formats.write_profiles", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_db 300 /tmp/bench
    import json
    import sys

    print(json.dumps(run([int(sys.argv[1])], sys.argv[2]), indent=2))
