"""Benchmark: trace_view.json and Kineto JSON (plain and .gz) -> canonical Profile -> Parquet; then the load.

``run([100, 1000], workdir)`` streams scaled copies of real samples to disk: the events of
``cnn_8npu_text_level2`` trace_view.json (Ascend 910B) and of the HTA ``trace_diff_pair/control`` Kineto trace
(A100), repeated with timestamps shifted by one capture span per copy and flow / correlation ids offset so
that links stay unique. Each conversion and each load runs in a fresh subprocess, whose VmHWM is its peak
RSS, three times; the median is reported. MB/s are input bytes per second end to end (read, decode,
columns, Parquet written); for .json.gz they are DECOMPRESSED bytes per second, gzip decoding included.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import child_json, cpu_s, load_avg, median_of_runs, samples_dir, vm_hwm_mb

MB = 1024 * 1024
TRACE_VIEW_REL = Path("ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
KINETO_REL = Path("kineto/trace_diff_pair/control.json.gz")
GZIP_MAX_MB = 200  # gzip inputs only up to this size: compressing 1 GB here would dominate the run
ID_STRIDE = 10**7  # per-copy offset of flow / correlation ids (> any id in the samples' ranges)
_ID_ARGS = ("connection_id", "correlation_id", "External id", "correlation", "Record function id")


def _us_to_ns(v: Any) -> int:
    if isinstance(v, str):
        whole, _, frac = v.partition(".")
        return int(whole) * 1000 + int((frac + "000")[:3])
    return round(float(v) * 1000)


Template = tuple[str, int | None, bool, Any, dict[str, Any]]


def _templates(events: list[dict[str, Any]]) -> tuple[list[Template], int]:
    """Each event as (JSON body without ts/id/args ids, ts_ns, ts-was-string, id, id-bearing args)."""
    out = []
    stamps = []
    for e in events:
        e = dict(e)
        ts = e.pop("ts", None)
        fid = e.pop("id", None)
        args = dict(e.pop("args", None) or {})
        id_args = {k: args.pop(k) for k in _ID_ARGS if isinstance(args.get(k), int)}
        if args:
            e["args"] = args
        body = json.dumps(e)[1:-1]
        ts_ns = None if ts is None else _us_to_ns(ts)
        if ts_ns is not None:
            stamps.append(ts_ns)
        out.append((body, ts_ns, isinstance(ts, str), fid, id_args))
    span = (max(stamps) - min(stamps) + 10**9) if stamps else 10**9  # one capture plus a second per copy
    return out, span


def _write_events(fh: Any, templates: list[Any], span: int, target: int, first_copy_only_meta: bool) -> int:
    """Append copies of the events until ``target`` bytes; returns the number of events written."""
    n = 0
    copy = 0
    written = 0
    first = True
    while written < target:
        shift = copy * span
        parts = []
        for body, ts_ns, ts_str, fid, id_args in templates:
            if ts_ns is None and copy and first_copy_only_meta:
                continue  # metadata (M) events once
            fields = [body] if body else []
            if ts_ns is not None:
                whole, frac = divmod(ts_ns + shift, 1000)
                fields.append(f'"ts": "{whole}.{frac:03d}"' if ts_str else f'"ts": {whole}.{frac:03d}')
            if fid is not None:
                if isinstance(fid, int):
                    # async_npu ids are the kernel's start in ns: shift them like times
                    fields.append(f'"id": {fid + (shift if fid > 10**17 else copy * ID_STRIDE)}')
                else:
                    fields.append(f'"id": "{int(fid) + copy * ID_STRIDE if fid.isdigit() else fid}"')
            if id_args:
                inner = ", ".join(f'"{k}": {v + copy * ID_STRIDE}' for k, v in id_args.items())
                if body.rstrip().endswith("}") and '"args": {' in body:
                    fields[0] = body[: body.rindex('"args": {') + len('"args": {')] + inner + ", " + \
                        body[body.rindex('"args": {') + len('"args": {'):]
                else:
                    fields.append(f'"args": {{{inner}}}')
            parts.append(("" if first else ",\n") + "{" + ", ".join(fields) + "}")
            first = False
            n += 1
        chunk = "".join(parts)
        fh.write(chunk)
        written += len(chunk)
        copy += 1
    return n


def generate_trace_view(path: Path, size_mb: int) -> dict[str, Any]:
    """A ``size_mb`` trace_view.json (bare array, string ts) from the real level2 sample's events."""
    events = json.loads((samples_dir() / TRACE_VIEW_REL).read_text(encoding="utf-8"))
    templates, span = _templates(events)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[")
        n = _write_events(fh, templates, span, size_mb * MB, first_copy_only_meta=True)
        fh.write("]")
    return {"events": n, "bytes": path.stat().st_size}


def generate_kineto(path: Path, size_mb: int) -> dict[str, Any]:
    """A ``size_mb`` Kineto trace (object with traceEvents, numeric ts) from the real A100 sample."""
    with gzip.open(samples_dir() / KINETO_REL, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc.pop("traceEvents")
    templates, span = _templates(events)
    header = json.dumps(doc)[1:-1]
    with path.open("w", encoding="utf-8") as fh:
        fh.write("{" + header + ', "traceEvents": [\n')
        n = _write_events(fh, templates, span, size_mb * MB, first_copy_only_meta=True)
        fh.write('\n], "displayTimeUnit": "ms"}\n')
    return {"events": n, "bytes": path.stat().st_size}


def _gzip(src: Path, dst: Path) -> None:
    with src.open("rb") as fi, gzip.open(dst, "wb", compresslevel=1) as fo:
        shutil.copyfileobj(fi, fo, 8 * MB)


def measure_convert(kind: str, src: Path, out_dir: Path) -> dict[str, Any]:
    """In this process: read ``src`` straight into a saved profile folder (Parquet); time, counts and peak
    RSS."""
    # imports and the first-ever compile of the scanner happen once per worker, not per file: untimed
    import pyarrow.parquet as pq

    import pypto_core.formats.chrome_trace  # noqa: F401
    import pypto_core.formats.kineto  # noqa: F401
    import pypto_core.profile  # noqa: F401
    from pypto_core.formats.eventscan import native_scanner
    from pypto_core.memory import use_returning_allocator

    native_scanner()
    use_returning_allocator()  # as the CLI and the workers run
    cpu0 = cpu_s()
    t0 = time.perf_counter()
    if kind == "kineto":
        # the product's path for a Kineto upload: streamed straight into the saved profile's Parquet files
        from pypto_core.formats.kineto import write_kineto as write
    else:
        # likewise for a trace_view.json: host ops, API calls, kernels and counters streamed as they are read
        from pypto_core.formats.chrome_trace import write_trace_view as write
    from pypto_core.profile import saved_summary

    meta = write(src, out_dir)
    seconds, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    peak = vm_hwm_mb()  # the conversion's: saved_summary below reads whole time columns (its own growth)
    summary = saved_summary(out_dir)
    flows = pq.ParquetFile(out_dir / "flows.parquet").metadata.num_rows
    return {"seconds": seconds, "read_s": seconds, "cpu_s": cpu, "events": int(meta.extra["events"]),
            "decoded_bytes": int(meta.extra["input_bytes"]), "kernels": summary["kernel_count"],
            "host_ops": summary["host_op_count"], "flows": flows, "peak_rss_mb": peak}


def measure_load(out_dir: Path) -> dict[str, Any]:
    from pypto_core.memory import use_returning_allocator
    from pypto_core.profile import Profile

    use_returning_allocator()
    cpu0 = cpu_s()
    t0 = time.perf_counter()
    profile = Profile.load(out_dir)
    seconds = time.perf_counter() - t0
    rows = sum(profile.table(n).num_rows for n in ("kernels", "host_ops", "api_calls", "flows", "counters"))
    return {"seconds": seconds, "cpu_s": cpu_s() - cpu0, "rows": rows, "peak_rss_mb": vm_hwm_mb()}


def _child(fn: str, *args: str) -> dict[str, Any]:
    code = (
        "import json,sys; from pathlib import Path; from pypto_core.bench import readers_json as b; "
        f"a=sys.argv[1:]; print(json.dumps(b.{fn}(*[a[0]] + [Path(x) for x in a[1:]] "
        f"if '{fn}'=='measure_convert' else [Path(x) for x in a])))"
    )
    return child_json(code, *args)


def _measure(kind: str, label: str, src: Path, work: Path, size_mb: int,
             gen: dict[str, Any]) -> dict[str, Any]:
    out_dir = work / f"{label}_{size_mb}mb.profile"

    def convert() -> dict[str, Any]:
        shutil.rmtree(out_dir, ignore_errors=True)
        return _child("measure_convert", kind, str(src), str(out_dir))

    conv = median_of_runs(convert)
    entry: dict[str, Any] = {"input": label, "size_mb": size_mb, "file_mb": round(src.stat().st_size / MB, 1),
                             "events_written": gen["events"]}
    if "error" in conv:
        entry["error"] = conv["error"]
        return entry
    decoded_mb = conv["decoded_bytes"] / MB
    entry.update({
        "decoded_mb": round(decoded_mb, 1),
        "events": conv["events"],
        "events_match": conv["events"] == gen["events"],
        "seconds": round(conv["seconds"], 2),
        "runs_s": conv["runs_s"],
        "read_s": round(conv["read_s"], 2),
        "mb_per_s": round(decoded_mb / conv["seconds"], 1),
        "events_per_s": round(conv["events"] / conv["seconds"]),
        "cpu_s": round(conv["cpu_s"], 2),
        "mb_per_cpu_s": round(decoded_mb / conv["cpu_s"], 1) if conv["cpu_s"] else None,
        "peak_rss_mb": round(conv["peak_rss_mb"], 1),
        "kernels": conv["kernels"], "host_ops": conv["host_ops"], "flows": conv["flows"],
        "parquet_mb": round(sum(f.stat().st_size for f in out_dir.iterdir()) / MB, 1),
    })
    load = median_of_runs(lambda: _child("measure_load", str(out_dir)))
    if "error" in load:
        entry["load_error"] = load["error"]
    else:
        took = load["seconds"]
        entry.update({"parquet_load_s": round(took, 3),
                      "parquet_load_rows_per_s": round(load["rows"] / took) if took else None,
                      "parquet_load_input_mb_per_s": round(decoded_mb / took, 1) if took else None,
                      "parquet_load_peak_rss_mb": round(load["peak_rss_mb"], 1)})
    shutil.rmtree(out_dir, ignore_errors=True)
    return entry


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Generate, convert and load each size and input kind; MB/s, events/s and peak RSS for each."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        tv = work / f"trace_view_{size}mb.json"
        gen = generate_trace_view(tv, size)
        results.append(_measure("trace_view", "trace_view.json", tv, work, size, gen))
        tv.unlink(missing_ok=True)
        kj = work / f"kineto_{size}mb.pt.trace.json"
        gen = generate_kineto(kj, size)
        results.append(_measure("kineto", "kineto.json", kj, work, size, gen))
        if size <= GZIP_MAX_MB:
            kgz = work / f"kineto_{size}mb.pt.trace.json.gz"
            _gzip(kj, kgz)
            results.append(_measure("kineto", "kineto.json.gz", kgz, work, size, gen))
            kgz.unlink(missing_ok=True)
        kj.unlink(missing_ok=True)
    from pypto_core.formats.eventscan import native_scanner

    return {"benchmark": "readers_json", "targets": {"mb_per_s": 200, "peak_rss_mb": 1024},
            "note": "mb_per_s counts decompressed bytes for .json.gz (gzip decoding included); mb_per_cpu_s "
                    "divides by the CPU time of all the reader's threads (what a busy shared machine cannot "
                    "blur)",
            "load_avg_at_start": load_avg(),
            "native_scanner": native_scanner() is not None, "cpu_count": os.cpu_count(), "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_json [MB ...]
    import tempfile

    sizes = [int(a) for a in sys.argv[1:]] or [100]
    with tempfile.TemporaryDirectory(prefix="pypto_bench_json_") as d:
        print(json.dumps(run(sizes, d), indent=2))
