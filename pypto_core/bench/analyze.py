"""Benchmark: ``diagnose`` on a saved simulated profile of a given trace size (parse excluded).

Target (issue 5): a 1 GB simulated profile analysed in under 10 s and under 1 GiB. The profile is written
once by ``pypto_core.synth`` in the ascend_pt format at ``size_mb``, streamed by ``write_ascend_pt`` into
Parquet under ``workdir`` (reused on later runs); the measured part runs in a child process (so its
peak RSS is its own): load the Parquet tables, build the call graph, run every rule.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import child_json, load_avg, median_of_runs, saved_simulated_profile

_CHILD = r"""
import json, sys, time
# VmHWM, not ru_maxrss: Linux carries the forking parent's peak into ru_maxrss across exec, and the parent
# has just built the 1 GB profile
from pypto_core.bench._measure import vm_hwm_mb
from pypto_core.profile import Profile
from pypto_core.rules import diagnose, diagnose_columns
t0 = time.perf_counter()  # the load alone: imports are not the analysis's
prof = Profile.load(sys.argv[1], columns=diagnose_columns())  # as `pypto analyze` loads: what it reads
t1 = time.perf_counter()
report = diagnose(prof)
t2 = time.perf_counter()
tables_mb = sum(prof.table(n).nbytes for n in ("kernels", "host_ops", "api_calls", "flows")) / 2**20
print(json.dumps({"seconds": t2 - t0, "load_s": round(t1 - t0, 3), "analyze_s": round(t2 - t1, 3),
                  "peak_rss_mb": round(vm_hwm_mb(), 1), "tables_mb": round(tables_mb, 1),
                  "kernels": prof.kernels.num_rows, "findings": sorted(f.rule for f in report.findings),
                  "combined_speedup": report.estimated_combined_speedup}))
"""

TARGET_S = 10.0
TARGET_RSS_MB = 1024.0


def prepare(size_mb: float, workdir: Path) -> tuple[Path, dict[str, Any]]:
    """The saved Parquet profile for ``size_mb`` (built once: synth, read, save)."""
    return saved_simulated_profile(workdir / f"analyze_{int(size_mb)}mb.profile",
                                   workdir / f"synth_{int(size_mb)}mb", size_mb)


def run(sizes_mb: list[float], workdir: str | Path) -> dict[str, Any]:
    """For each size: build (once) and time ``diagnose`` in a child process; JSON-ready results."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        saved, info = prepare(size, work)
        # median of three fresh children, after the inputs are flushed
        measured = median_of_runs(lambda p=str(saved): child_json(_CHILD, p, check=True))
        total = measured.pop("seconds")
        results.append({"size_mb": size, **info, **measured, "load_plus_analyze_s": round(total, 3),
                        "meets_target": total < TARGET_S and measured["peak_rss_mb"] < TARGET_RSS_MB,
                        "load_avg": load_avg()})
    return {"benchmark": "analyze", "target": {"seconds": TARGET_S, "rss_mb": TARGET_RSS_MB},
            "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.analyze 100 /tmp/bench
    sizes = [float(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [100.0]
    print(json.dumps(run(sizes, sys.argv[2] if len(sys.argv) > 2 else "/tmp/pypto_bench_analyze"), indent=2))
