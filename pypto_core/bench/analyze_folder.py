"""Benchmark: ``pypto analyze`` on a raw simulated ``*_ascend_pt`` folder, end to end (read, save as Parquet,
load what diagnosis reads, diagnose, render the JSON report).

The folder is a simulated run (``pypto_core.synth``) of ``size_mb``: kernel_details.csv plus trace_view.json
and the small files, as ``readers_folder`` reads. Each run is the CLI's own ``main(["analyze", folder,
"--format", "json", "-o", report])`` in a fresh child process, so that its peak RSS (VmHWM) is its own;
the median of three runs is reported, with the machine's load average (the machine is shared). MB/s are of
the folder's bytes over the command's wall time, interpreter start-up and imports excluded.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import MB, child_json, load_avg, median_of_runs

_CHILD = r"""
import json, sys, time
from pypto_core.bench._measure import cpu_s, vm_hwm_mb
from pypto_core.cli import main
t0, c0 = time.perf_counter(), cpu_s()
code = main(["analyze", sys.argv[1], "--format", "json", "-o", sys.argv[2]])
seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
report = json.load(open(sys.argv[2], encoding="utf-8"))
print(json.dumps({"seconds": seconds, "cpu_s": round(cpu, 2), "peak_rss_mb": round(vm_hwm_mb(), 1), "exit": code,
                  "kernels": report["profile"]["kernel_count"],
                  "findings": sorted(f["rule"] for f in report["findings"]),
                  "combined_speedup": report["estimated_combined_speedup"]}))
"""

TARGET_MB_PER_S = 200.0  # issue 20, at 1 GB
TARGET_RSS_MB = {1000: 512.0, 5000: 1024.0}


def _simulate(size_mb: float, folder: Path) -> Path:
    from pypto_core.synth import synthesize_run

    return synthesize_run(folder, size_mb=size_mb, tokens=4, prompt_tokens=128).path


def run(sizes_mb: list[float], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """For each size: simulate a folder, then time ``pypto analyze`` of it in fresh children; JSON-ready."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        synth_dir = work / f"ascend_pt_{int(size)}mb"
        shutil.rmtree(synth_dir, ignore_errors=True)
        t0 = time.perf_counter()
        folder = _simulate(size, synth_dir)
        synth_s = time.perf_counter() - t0
        input_mb = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / MB
        report = work / f"report_{int(size)}mb.json"
        measured = median_of_runs(lambda: child_json(_CHILD, str(folder), str(report), check=True))
        seconds = measured.pop("seconds")
        target = TARGET_RSS_MB.get(int(size))
        results.append({
            "size_mb": size, "input_mb": round(input_mb, 1), "synth_s": round(synth_s, 1), **measured,
            "seconds": round(seconds, 2), "mb_per_s": round(input_mb / seconds, 1),
            "meets_target": None if target is None else (input_mb / seconds >= TARGET_MB_PER_S
                                                         and measured["peak_rss_mb"] <= target),
            "load_avg": load_avg()})
        shutil.rmtree(synth_dir, ignore_errors=True)
    return {"benchmark": "analyze_folder", "input": "simulated *_ascend_pt folder (kernel_details.csv + "
            "trace_view.json)", "path": "pypto analyze (cli.main in a fresh process)",
            "target": {"mb_per_s_at_1gb": TARGET_MB_PER_S, "rss_mb": TARGET_RSS_MB}, "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.analyze_folder 100 /tmp/bench
    sizes = [float(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [100.0]
    print(json.dumps(run(sizes, sys.argv[2] if len(sys.argv) > 2 else "/tmp/pypto_bench_analyze_folder"), indent=2))
