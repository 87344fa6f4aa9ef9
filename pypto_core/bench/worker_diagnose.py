"""Benchmark: the web worker's diagnosis step on a saved profile, without Django: the profile loaded as the
worker loads it (``Profile.load(columns=diagnosis_step_columns())``: the kernels' PMU counters no rule reads
stay on disk), every rule, the page data and the timeline index (whose event details read those counters
from the saved files).

Two saved profiles per size: the simulated ``*_ascend_pt`` folder of ``size_mb`` (``bench.analyze``'s) and
the kernel table of ``size_mb`` (``bench.analyze_saved``'s: real Qwen3 rows, 3.1 M kernels a GB). Each is
measured in a fresh child process (its VmHWM is its own), with the wall and CPU seconds and the peak after
each part. The peak is what a worker child needs for that profile (``docs/DEPLOYMENT.md``); 5 GB and larger
inputs are measured once, the smaller ones three times (median).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import child_json, load_avg, median_of_runs

_CHILD = r"""
import json, sys, tempfile, time
from pypto_core.bench._measure import cpu_s, vm_hwm_mb
from pypto_core.memory import use_returning_allocator
use_returning_allocator()  # as the workers run
from pypto_core.graph import OperatorCallGraph
from pypto_core.pagedata import profile_page_data
from pathlib import Path
from pypto_core.profile import Profile
from pypto_core.rules import diagnose
from pypto_core.rules.diagnose import diagnosis_step_columns
from pypto_core.timeline.index import build_timeline_index
parts = {}
t0, c0 = time.perf_counter(), cpu_s()
def part(label, t, c):
    parts[label] = {"s": round(time.perf_counter() - t, 2), "cpu_s": round(cpu_s() - c, 2),
                    "peak_rss_mb": round(vm_hwm_mb())}
    return time.perf_counter(), cpu_s()
t, c = t0, c0
profile = Profile.load(sys.argv[1], columns=diagnosis_step_columns())
t, c = part("load", t, c)
graph = OperatorCallGraph(profile)  # shared by the three, as the worker's diagnose step does
report = diagnose(profile, graph=graph)
t, c = part("rules", t, c)
profile_page_data(profile, graph=graph)
t, c = part("page_data", t, c)
graph.keep_only_attribution()
with tempfile.TemporaryDirectory() as folder:
    build_timeline_index(profile, folder, attribution=graph.attribution, saved=Path(sys.argv[1]))
part("timeline_index", t, c)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_s": round(cpu_s() - c0, 2),
                  "peak_rss_mb": round(vm_hwm_mb(), 1), "kernels": profile.kernels.num_rows,
                  "findings": sorted(f.rule for f in report.findings), "parts": parts}))
"""

ONCE_FROM_MB = 5000


def run(sizes_mb: list[int], workdir: str | Path) -> dict[str, Any]:
    """For each size: both saved profiles (built once), each measured in fresh children."""
    from pypto_core.bench import analyze, analyze_saved

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        repeats = 1 if size >= ONCE_FROM_MB else 3
        for kind, (saved, _) in (("ascend_pt_folder", analyze.prepare(size, work)),
                                 ("kernel_table", analyze_saved.prepare(size, work))):
            measured = median_of_runs(lambda p=str(saved): child_json(_CHILD, p), repeats)
            if "error" not in measured:
                measured["seconds"] = round(measured["seconds"], 2)
            results.append({"size_mb": size, "profile": kind, **measured, "load_avg": load_avg()})
    return {"benchmark": "worker_diagnose",
            "path": "Profile.load(columns=diagnosis_step_columns()), one call graph shared by diagnose, "
                    "profile_page_data and build_timeline_index(saved=...)", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.worker_diagnose 100 /tmp/bench
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [100]
    print(json.dumps(run(sizes, sys.argv[2] if len(sys.argv) > 2 else "/tmp/pypto_bench_worker"), indent=2))
