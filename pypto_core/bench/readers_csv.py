"""Benchmark: kernel_details.csv → canonical kernel columns → Parquet, streamed; then the Parquet load.

The conversion measured is :func:`pypto_core.formats.kernel_csv.kernels_to_parquet`, the product's own.

``run([100, 1000], workdir)`` writes scaled copies of the real Qwen3 kernel_details.csv sample (its rows
repeated with start times shifted by one capture span per copy, so times stay increasing and exact), then
converts each in a fresh subprocess so that peak RSS (VmHWM) belongs to the conversion alone; each
conversion and load runs three times and the median is reported (``_measure.median_of_runs``).
Prints nothing itself; ``pypto bench`` prints the JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import child_json, cpu_s, load_avg, median_of_runs, samples_dir, vm_hwm_mb

SAMPLE_REL = Path("ascend_pt/qwen3_0.6b_train_4npu_level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT",
                  "kernel_details.csv")
MB = 1024 * 1024


def generate(path: Path, size_mb: int, sample: Path | None = None) -> dict[str, Any]:
    """Write a ``size_mb`` kernel_details.csv built from the real sample's rows; returns rows and bytes."""
    sample = sample or samples_dir() / SAMPLE_REL
    lines = sample.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], [r for r in lines[1:] if r]
    start_col = header.split(",").index("Start Time(us)")
    # Split each row around its start time once; each copy then only formats one integer.
    parts = []
    lo: int | None = None
    hi: int | None = None
    for r in rows:
        cells = r.split(",", start_col + 1)
        head = ",".join(cells[:start_col])
        stamp, tail = cells[start_col], cells[start_col + 1]
        int_us, _, frac = stamp.strip().partition(".")
        parts.append((head + ",", int(int_us), "." + frac + "\t," + tail + "\n"))
        lo = int(int_us) if lo is None else min(lo, int(int_us))
        hi = int(int_us) if hi is None else max(hi, int(int_us))
    if lo is None or hi is None:
        raise ValueError(f"{sample}: no kernel rows to repeat")
    span_us = (hi - lo) + 1_000_000  # one capture plus a second of gap per copy
    target = size_mb * MB
    written = 0
    n_rows = 0
    copy = 0
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(header + "\n")
        written += len(header) + 1
        while written < target:
            shift = copy * span_us
            chunk = "".join(f"{h}{us + shift}{t}" for h, us, t in parts)
            fh.write(chunk)
            written += len(chunk.encode("utf-8"))
            n_rows += len(parts)
            copy += 1
    return {"rows": n_rows, "bytes": path.stat().st_size}


def measure_convert(csv_path: Path, parquet_path: Path) -> dict[str, Any]:
    """In this process: stream the CSV into Parquet; wall and CPU time, rows and peak RSS.

    CPU seconds (all threads) are reported beside the wall time because the shared machine is often
    loaded by other work: wall MB/s then says more about the neighbours than about the reader.
    """
    from pypto_core.formats.kernel_csv import kernels_to_parquet
    from pypto_core.memory import use_returning_allocator

    use_returning_allocator()  # as the CLI and the workers run
    t0 = time.perf_counter()
    c0 = time.process_time()
    rows, warnings = kernels_to_parquet(csv_path, parquet_path)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {"rows": rows, "seconds": seconds, "cpu_s": cpu, "peak_rss_mb": vm_hwm_mb(),
            "warnings": [str(w) for w in warnings[:3]]}


def measure_load(parquet_path: Path) -> dict[str, Any]:
    """Load the saved table as the product does (``profile.read_table``: canonical types, lists expanded)."""
    from pypto_core.memory import use_returning_allocator
    from pypto_core.profile import read_table

    use_returning_allocator()
    t0, c0 = time.perf_counter(), cpu_s()
    table = read_table(parquet_path, "kernels")
    seconds = time.perf_counter() - t0
    return {"rows": table.num_rows, "seconds": seconds, "cpu_s": cpu_s() - c0, "arrow_mb": table.nbytes / MB,
            "peak_rss_mb": vm_hwm_mb()}


def _child(kind: str, *paths: Path) -> dict[str, Any]:
    code = (
        "import json,sys; from pathlib import Path; from pypto_core.bench import readers_csv as b; "
        f"print(json.dumps(b.measure_{kind}(*[Path(p) for p in sys.argv[1:]])))"
    )
    return child_json(code, *map(str, paths))


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Generate, convert and load each size; returns MB/s, rows/s and peak RSS per size."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        csv_path = work / f"kernel_details_{size}mb.csv"
        pq_path = work / f"kernels_{size}mb.parquet"
        t0 = time.perf_counter()
        gen = generate(csv_path, size)
        gen_s = time.perf_counter() - t0
        conv = median_of_runs(lambda c=csv_path, p=pq_path: _child("convert", c, p))
        load: dict[str, Any] = (median_of_runs(lambda p=pq_path: _child("load", p)) if "error" not in conv
                                else {"error": "conversion failed"})
        input_mb = gen["bytes"] / MB
        entry: dict[str, Any] = {"size_mb": size, "input_mb": round(input_mb, 1), "rows": gen["rows"],
                                 "generate_s": round(gen_s, 2)}
        if "error" in conv:
            entry["error"] = conv["error"]
        else:
            entry.update({
                "csv_to_parquet_s": round(conv["seconds"], 3),
                "csv_to_parquet_runs_s": conv["runs_s"],
                "csv_mb_per_s": round(input_mb / conv["seconds"], 1),
                "csv_cpu_s": round(conv["cpu_s"], 3),
                "csv_mb_per_cpu_s": round(input_mb / conv["cpu_s"], 1) if conv["cpu_s"] else None,
                "csv_rows_per_s": round(conv["rows"] / conv["seconds"]),
                "csv_peak_rss_mb": round(conv["peak_rss_mb"], 1),
                "parquet_mb": round(pq_path.stat().st_size / MB, 1),
                "rows_match": conv["rows"] == gen["rows"],
            })
            if "error" not in load:
                entry.update({
                    "parquet_load_s": round(load["seconds"], 3),
                    "parquet_load_cpu_s": round(load["cpu_s"], 3),
                    "parquet_load_rows_per_s": (round(load["rows"] / load["seconds"]) if load["seconds"]
                                                else None),
                    "parquet_load_input_mb_per_s": (round(input_mb / load["seconds"], 1) if load["seconds"]
                                                    else None),
                    "parquet_load_peak_rss_mb": round(load["peak_rss_mb"], 1),
                    "arrow_mb": round(load["arrow_mb"], 1),
                })
        results.append(entry)
        for p in (csv_path, pq_path):
            p.unlink(missing_ok=True)
    return {"benchmark": "readers_csv", "targets": {"csv_mb_per_s": 300, "peak_rss_mb": 1024},
            "cpu_count": os.cpu_count(), "load_avg_1min": loads[0] if (loads := load_avg()) else None,
            "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_csv [MB ...]
    import tempfile

    sizes = [int(a) for a in sys.argv[1:]] or [100]
    with tempfile.TemporaryDirectory(prefix="pypto_bench_csv_") as d:
        print(json.dumps(run(sizes, d), indent=2))
