"""Benchmark: ``pypto analyze`` of a saved kernel-table profile, and the worker's comparison of two.

The profile is the one ``readers_csv`` converts: a kernel_details.csv of ``size_mb`` built from the real
Qwen3 sample's rows (3.1 M kernels a GB, 48 columns), saved by ``write_profiles`` once under ``workdir`` and
reused. Measured in fresh child processes (their peak RSS, VmHWM, is their own; imports excluded from the
times, CPU seconds of all threads beside the wall time, the load average beside both):

* ``analyze``: the CLI's ``main(["analyze", saved, "--format", "json", ...])``: the columns diagnosis
  reads loaded, every rule, the JSON report;
* ``compare``: what the worker's comparison does: ``ProfileComparer`` given two loaders (each side loaded
  with ``COMPARE_COLUMNS`` and reduced before the other loads), then ``compare()``; the profile is compared
  with itself (two loads, as two profiles of that size hold).

Targets (issue 20): each within 1 GiB at 5 GB. Inputs of 5 GB and more are measured once, the smaller
ones three times (median).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import MB, child_json, load_avg, median_of_runs

_ANALYZE = r"""
import json, sys, time
from pypto_core.bench._measure import cpu_s, vm_hwm_mb
from pypto_core.cli import main
t0, c0 = time.perf_counter(), cpu_s()
code = main(["analyze", sys.argv[1], "--format", "json", "-o", sys.argv[2]])
seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
report = json.load(open(sys.argv[2], encoding="utf-8"))
print(json.dumps({"seconds": seconds, "cpu_s": round(cpu, 2), "peak_rss_mb": round(vm_hwm_mb(), 1),
                  "exit": code, "kernels": report["profile"]["kernel_count"],
                  "findings": sorted(f["rule"] for f in report["findings"])}))
"""

_COMPARE = r"""
import json, sys, time
from pypto_core.bench._measure import compare_side_loader, cpu_s, vm_hwm_mb
from pypto_core.memory import use_returning_allocator
use_returning_allocator()  # as the worker runs
from pypto_core.compare import ProfileComparer
loads = []
t0, c0 = time.perf_counter(), cpu_s()
result = ProfileComparer(compare_side_loader(sys.argv[1], loads),
                         compare_side_loader(sys.argv[1], loads)).compare()
seconds, cpu = time.perf_counter() - t0, cpu_s() - c0
print(json.dumps({"seconds": seconds, "load_s": round(sum(loads), 2), "cpu_s": round(cpu, 2),
                  "peak_rss_mb": round(vm_hwm_mb(), 1), "op_rows": len(result.ops)}))
"""

TARGET_RSS_MB = 1024.0  # at 5 GB, each
ONCE_FROM_MB = 5000  # inputs this large are measured once (minutes each, on a shared machine)


def prepare(size_mb: int, workdir: Path) -> tuple[Path, dict[str, Any]]:
    """The saved profile of a ``size_mb`` kernel_details.csv (built once: generate, ``write_profiles``)."""
    saved = workdir / f"kernel_table_{size_mb}mb.saved"
    info_path = saved / "bench_info.json"
    if info_path.exists():
        return saved / "rank_0", json.loads(info_path.read_text())
    from pypto_core.bench.readers_csv import generate
    from pypto_core.formats import write_profiles

    shutil.rmtree(saved, ignore_errors=True)
    csv = workdir / f"kernel_details_{size_mb}mb.csv"
    generated = generate(csv, size_mb)
    t0 = time.perf_counter()
    write_profiles(csv, saved)
    info = {"input_mb": round(generated["bytes"] / MB, 1), "rows": generated["rows"],
            "write_s": round(time.perf_counter() - t0, 1)}
    csv.unlink()
    info_path.write_text(json.dumps(info))
    return saved / "rank_0", info


def run(sizes_mb: list[int], workdir: str | Path) -> dict[str, Any]:
    """For each size: build the saved profile (once), then time analyze and compare in fresh children."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        rank, info = prepare(size, work)
        repeats = 1 if size >= ONCE_FROM_MB else 3
        report = work / f"report_{size}mb.json"
        entry: dict[str, Any] = {"size_mb": size, **info, "runs": repeats}
        steps = (("analyze", _ANALYZE, (str(rank), str(report))), ("compare", _COMPARE, (str(rank),)))
        for name, code, args in steps:
            measured = median_of_runs(lambda c=code, a=args: child_json(c, *a), repeats)
            if "error" in measured:
                entry[name] = measured
                continue
            seconds = measured.pop("seconds")
            entry[name] = {**measured, "seconds": round(seconds, 2), "load_avg": load_avg(),
                           "meets_target": measured["peak_rss_mb"] <= TARGET_RSS_MB}
        results.append(entry)
    return {"benchmark": "analyze_saved", "input": "saved profile of a kernel_details.csv (real Qwen3 rows "
            "repeated)", "target": {"rss_mb_at_5gb": TARGET_RSS_MB}, "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.analyze_saved 1000 /tmp/bench
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [100]
    work = sys.argv[2] if len(sys.argv) > 2 else "/tmp/pypto_bench_analyze_saved"
    print(json.dumps(run(sizes, work), indent=2))
