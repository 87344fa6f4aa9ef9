"""Benchmark: the time attribution and the what-if replay on a saved simulated profile (parse excluded).

Target (issue 15): on a 1 GB profile, attribution plus replay add under 3 s and stay under 1 GiB. The
child loads only the tables they read (kernels, steps, host ops, API calls, flows), then times the
attribution, building the replay's dependency graph, a replay with no change (which must reproduce the
run) and a replay of the heaviest change (every task launched from a graph, all host issuing removed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import child_json, saved_simulated_profile

_CHILD = r"""
import json, sys, time
import numpy as np
from pypto_core.bench._measure import vm_hwm_mb
from pypto_core.profile import Profile
from pypto_core.attribution import attribute
from pypto_core.replay import Change, Replay
t0 = time.perf_counter()
prof = Profile.load(sys.argv[1], tables=("kernels", "steps", "host_ops", "api_calls", "flows"))
t1 = time.perf_counter()
a = attribute(prof)
t2 = time.perf_counter()
replay = Replay(prof, a)
t3 = time.perf_counter()
same = replay.run()
t4 = time.perf_counter()
n = prof.kernels.num_rows
graph = replay.run(Change(all_from_graph=True, gap_cut_kernels=np.arange(n)))
t5 = time.perf_counter()
print(json.dumps({"load_s": round(t1 - t0, 3), "attribution_s": round(t2 - t1, 3),
                  "replay_build_s": round(t3 - t2, 3), "replay_identity_s": round(t4 - t3, 3),
                  "replay_graph_mode_s": round(t5 - t4, 3), "added_s": round(t5 - t1, 3),
                  "identity_exact": same.duration_ns == same.original_ns,
                  "graph_mode_speedup": round(graph.speedup, 3), "peak_rss_mb": round(vm_hwm_mb(), 1),
                  "kernels": n, "steps": len(a.steps), "dominant": a.run.dominant()}))
"""

TARGET_ADDED_S = 3.0
TARGET_RSS_MB = 1024.0


def run(sizes_mb: list[float], workdir: str | Path) -> dict[str, Any]:
    """For each size: build (once) the saved profile and time attribution and replay in a child process."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        saved, info = saved_simulated_profile(work / f"attribution_{int(size)}mb.profile",
                                              work / f"synth_{int(size)}mb", size)
        measured = child_json(_CHILD, str(saved), check=True)
        results.append({"size_mb": size, **info, **measured,
                        "meets_target": measured["added_s"] < TARGET_ADDED_S
                        and measured["peak_rss_mb"] < TARGET_RSS_MB})
    return {"benchmark": "attribution", "target": {"added_seconds": TARGET_ADDED_S, "rss_mb": TARGET_RSS_MB},
            "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.attribution 100 /tmp/bench
    sizes = [float(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [100.0]
    work = sys.argv[2] if len(sys.argv) > 2 else "/tmp/pypto_bench_attribution"
    print(json.dumps(run(sizes, work), indent=2))
