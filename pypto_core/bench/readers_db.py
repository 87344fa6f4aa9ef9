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

from pypto_core.bench._measure import child_json, cpu_s, median_of_runs, vm_hwm_mb

MB = 1024 * 1024
# synth's size_mb counts the text export it would write; its db is 0.29-0.30 of that (measured: size_mb 50,
# 1050, 3500 gave 14.4, 315, 1058 MB dbs), so the run asks for size_mb / 0.3 to get a db of about size_mb.
_DB_SHARE = 0.3


def measure_convert(folder: Path, out_dir: Path) -> dict[str, Any]:
    """In this process: the folder into saved rank folders; time, rows and peak RSS."""
    import pyarrow.parquet as pq

    from pypto_core.formats import write_profiles
    from pypto_core.memory import use_returning_allocator

    use_returning_allocator()  # as the CLI and the workers run
    t0, c0 = time.perf_counter(), cpu_s()
    saved = write_profiles(folder, out_dir)
    seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
    rank = out_dir / saved.primary()[0]
    rows = {name: pq.ParquetFile(rank / f"{name}.parquet").metadata.num_rows
            for name in ("kernels", "host_ops", "api_calls", "flows")}
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss_mb": vm_hwm_mb(), "rank_folder": saved.primary()[0], **rows}


def measure_load(rank_dir: Path) -> dict[str, Any]:
    from pypto_core.memory import use_returning_allocator
    from pypto_core.profile import Profile

    use_returning_allocator()
    t0 = time.perf_counter()
    profile = Profile.load(rank_dir)
    seconds = time.perf_counter() - t0
    rows = sum(profile.table(n).num_rows for n in ("kernels", "host_ops", "api_calls", "flows", "counters"))
    return {"seconds": seconds, "rows": rows, "peak_rss_mb": vm_hwm_mb()}


def _child(fn: str, *paths: Path) -> dict[str, Any]:
    code = ("import json,sys; from pathlib import Path; from pypto_core.bench import readers_db as b; "
            f"print(json.dumps(b.measure_{fn}(*[Path(p) for p in sys.argv[1:]])))")
    return child_json(code, *map(str, paths))


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

        def convert() -> dict[str, Any]:
            shutil.rmtree(out_dir, ignore_errors=True)
            return _child("convert", folder, out_dir)

        conv = median_of_runs(convert)
        if "error" in conv:
            entry["error"] = conv["error"]
        else:
            entry.update({
                "seconds": round(conv["seconds"], 2), "runs_s": conv["runs_s"],
                "mb_per_s": round(input_mb / conv["seconds"], 1),
                "cpu_s": round(conv["cpu_s"], 2),
                "peak_rss_mb": round(conv["peak_rss_mb"], 1),
                **{k: conv[k] for k in ("kernels", "host_ops", "api_calls", "flows")},
            })
            load = median_of_runs(lambda: _child("load", out_dir / conv["rank_folder"]))
            if "error" in load:
                entry["load_error"] = load["error"]
            else:
                entry.update({"parquet_load_s": round(load["seconds"], 3),
                              "parquet_load_rows_per_s": round(load["rows"] / load["seconds"]),
                              "parquet_load_input_mb_per_s": round(input_mb / load["seconds"], 1),
                              "parquet_load_peak_rss_mb": round(load["peak_rss_mb"], 1)})
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(synth_dir, ignore_errors=True)
        results.append(entry)
    return {"benchmark": "readers_db", "input": "simulated torch_npu db export (ascend_pytorch_profiler_0.db + "
            "analysis.db)", "path": "formats.write_profiles", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_db 300 /tmp/bench
    import json
    import sys

    print(json.dumps(run([int(sys.argv[1])], sys.argv[2]), indent=2))
