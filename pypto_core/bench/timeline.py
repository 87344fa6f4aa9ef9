"""Benchmark: timeline index build and window queries on a multi-million-event profile.

Targets (issue 7): window queries on a 10-million-event profile answer in p95 < 50 ms and < 200 KB of JSON,
at every zoom level. Events are generated directly as numpy columns (a realistic mix of host ops with
nesting, CANN API calls, device streams with idle gaps, communication and counters), so the benchmark
measures the index, not a reader. The build runs in a child process so that its peak RSS is its own;
``build`` reports its time and memory apart from the input profile's (the peak RSS is reset after the
profile is generated), ``query`` the window answers.

``run(sizes_mb, workdir)``: each size is the equivalent chrome-trace size in MB, at ~100 events per KB
(10 B/event is far too small, 150-250 B per X event is what torch_npu writes; 100 keeps round numbers:
1000 MB -> 10 million events).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pypto_core.bench._measure import vm_hwm_mb
from pypto_core.profile import Profile

EVENTS_PER_MB = 10_000
WIDTH_PX = 1600
POSITIONS_PER_ZOOM = 12
KERNEL_NAMES = ([f"MatMulV2_{i}" for i in range(40)] + [f"FlashAttentionScore_{i}" for i in range(20)]
                + ["Add", "Mul", "Cast", "RmsNorm", "Softmax", "Transpose", "ReshapeAndCache", "RotaryMul",
                   "aclnnInplaceCopy", "SwiGlu", "GatherV2", "ConcatD", "Slice", "ZerosLike"])
HOST_NAMES = ["aten::linear", "aten::matmul", "aten::add", "aten::mul", "aten::to", "aten::copy_",
              "npu::npu_fusion_attention", "aten::rms_norm", "aten::silu", "aten::cat", "aten::index_select"]


def _rss_mb() -> float:
    # VmHWM, not ru_maxrss: ru_maxrss carries a forking parent's peak across exec (1,786 MB was published
    # for a child whose own peak was 326 MB)
    return vm_hwm_mb()


def synthetic_profile(events: int, seed: int = 7) -> Profile:
    """A profile of about ``events`` slices, built from numpy columns."""
    import pyarrow as pa

    from pypto_core.profile import Profile, ProfileMeta

    rng = np.random.default_rng(seed)
    base = 1_736_408_883_688_177_930
    n_kernel = int(events * 0.64)
    n_host = int(events * 0.20) // 2 * 2
    n_api = int(events * 0.15)
    n_comm = max(1, events - n_kernel - n_host - n_api)

    def timeline(n: int, lanes: int, median_ns: float,
                 gap_ns: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lane = rng.integers(0, lanes, n)
        dur = np.clip(rng.lognormal(np.log(median_ns), 1.2, n), 200, 5e7).astype(np.int64)
        gap = rng.exponential(gap_ns, n).astype(np.int64)
        idle = rng.random(n) < 0.02  # host-bound stalls: the gaps the rules look for
        gap[idle] += rng.integers(50_000, 500_000, idle.sum())
        start = np.empty(n, np.int64)
        for k in range(lanes):
            m = np.flatnonzero(lane == k)
            ends = np.cumsum(gap[m] + dur[m])
            start[m] = ends - dur[m]
        return lane, start, dur

    k_lane, k_start, k_dur = timeline(n_kernel, 8, 8_000, 2_000)
    kernels = pa.table({
        "name": pa.DictionaryArray.from_arrays(rng.integers(0, len(KERNEL_NAMES), n_kernel).astype(np.int32),
                                               pa.array(KERNEL_NAMES)).cast(pa.string()),
        "stream_id": k_lane, "device_id": np.zeros(n_kernel, np.int64),
        "start_ns": k_start + base, "dur_ns": k_dur,
    })
    # Host: parents with one nested child each (depth 0 and 1), on 4 threads.
    parents = n_host // 2
    p_lane, p_start, p_dur = timeline(parents, 4, 20_000, 5_000)
    c_start = p_start + p_dur // 10
    c_dur = p_dur // 2
    host_names = pa.array(HOST_NAMES)
    name_ids = rng.integers(0, len(HOST_NAMES), n_host).astype(np.int32)
    host = pa.table({
        "name": pa.DictionaryArray.from_arrays(name_ids, host_names).cast(pa.string()),
        "pid": np.full(n_host, 4242, np.int64), "tid": np.r_[p_lane, p_lane] + 100,
        "start_ns": np.r_[p_start, c_start] + base, "dur_ns": np.r_[p_dur, c_dur],
    })
    a_lane, a_start, a_dur = timeline(n_api, 2, 5_000, 3_000)
    api_names = pa.array(["aclnnMatmul", "aclrtLaunchKernel", "aclnnAdd"])
    api = pa.table({"name": pa.DictionaryArray.from_arrays((a_start % 3).astype(np.int32),
                                                           api_names).cast(pa.string()),
                    "level": ["acl"] * n_api, "pid": np.full(n_api, 4242, np.int64), "tid": a_lane + 100,
                    "start_ns": a_start + base, "dur_ns": a_dur})
    m_lane, m_start, m_dur = timeline(n_comm, 2, 50_000, 20_000)
    comm = pa.table({"name": ["hcom_allReduce__123_0_1"] * n_comm,
                     "group": np.where(m_lane == 0, "tp_group", "dp_group"),
                     "start_ns": m_start + base, "elapse_ns": m_dur})
    span = int(k_start.max())
    t = np.sort(rng.integers(0, span, 400_000))
    counters = pa.table({"track": np.array(["AI Core freq (MHz)", "HBM read (GB/s)", "HBM write (GB/s)",
                                            "AI Core utilization (%)"])[rng.integers(0, 4, len(t))],
                         "ts_ns": t + base, "value": rng.random(len(t)) * 100})
    n_flow = min(parents, n_kernel)
    flows = pa.table({"host_index": np.arange(parents, parents + n_flow), "kernel_index": np.arange(n_flow),
                      "kind": ["async_npu"] * n_flow})
    return Profile(meta=ProfileMeta(format="synthetic", simulated=True), kernels=kernels, host_ops=host,
                   api_calls=api, communication=comm, counters=counters, flows=flows)


def _proc_status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak RSS (VmHWM) of this process, so that it then measures the build alone."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _build_child(events: int, out_dir: str) -> dict[str, Any]:
    import gc

    from pypto_core.timeline import build_timeline_index

    t0 = time.perf_counter()
    profile = synthetic_profile(events)
    generated = time.perf_counter()
    rss_generated = _rss_mb()
    gc.collect()
    profile_rss = _proc_status_mb("VmRSS")  # the interpreter and the input profile's own tables
    reset = _reset_peak_rss()
    t1 = time.perf_counter()
    build_timeline_index(profile, out_dir)
    built = time.perf_counter()
    build_peak = _proc_status_mb("VmHWM") if reset else None
    size = sum(f.stat().st_size for f in Path(out_dir).rglob("*") if f.is_file())
    tables = ("kernels", "host_ops", "api_calls", "communication", "counters", "flows")
    return {"events": int(sum(profile.table(t).num_rows for t in ("kernels", "host_ops", "api_calls",
                                                                    "communication"))),
            "generate_s": round(generated - t0, 2), "build_s": round(built - t1, 2),
            "peak_rss_after_generate_mb": round(rss_generated, 1),
            "peak_rss_after_build_mb": round(_rss_mb(), 1),
            # build memory on its own: RSS before the build (the profile's tables are most of it), the peak
            # during the build, and the difference (what the build itself adds)
            "build": {
                "seconds": round(built - t1, 2),
                "profile_tables_mb": round(sum(profile.table(t).nbytes for t in tables) / 1e6, 1),
                "rss_before_mb": None if profile_rss is None else round(profile_rss, 1),
                "peak_rss_mb": None if build_peak is None else round(build_peak, 1),
                "peak_extra_mb": None if build_peak is None or profile_rss is None
                else round(build_peak - profile_rss, 1),
                "targets": {"peak_extra_mb": 1024},
            },
            "index_mb": round(size / 1e6, 1)}


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def measure_queries(index_dir: str, seed: int = 11) -> dict[str, Any]:
    import orjson

    from pypto_core.timeline import TimelineIndex

    t0 = time.perf_counter()
    ix = TimelineIndex.open(index_dir)
    open_ms = (time.perf_counter() - t0) * 1000
    rng = np.random.default_rng(seed)
    span = ix.end_ns
    zooms = []
    all_ms: list[float] = []
    all_kb: list[float] = []
    window = span
    while window >= 2_000:  # from the whole profile down to 2 µs across the screen
        ms, kb, bars = [], [], []
        for _ in range(POSITIONS_PER_ZOOM):
            lo = int(rng.integers(0, max(1, span - window)))
            ix._cache.clear()  # measure the work, not the answer cache
            t = time.perf_counter()
            answer = ix.window(lo, lo + window, WIDTH_PX)
            body = orjson.dumps(answer)
            ms.append((time.perf_counter() - t) * 1000)
            kb.append(len(body) / 1024)
            bars.append(answer["bars"])
        zooms.append({"window_ns": int(window), "ns_per_px": answer["ns_per_px"], "p50_ms": _pct(ms, 50),
                      "p95_ms": _pct(ms, 95), "max_kb": round(max(kb), 1), "max_bars": int(max(bars))})
        all_ms += ms
        all_kb += kb
        window //= 4
    t = time.perf_counter()
    found = ix.search("FlashAttention", 100)
    search_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    for m in found["matches"][:20]:
        ix.event(m["lane"], m["idx"])
    event_ms = (time.perf_counter() - t) * 1000 / max(1, min(20, len(found["matches"])))
    return {"open_ms": round(open_ms, 2), "queries": len(all_ms), "window_p50_ms": _pct(all_ms, 50),
            "window_p95_ms": _pct(all_ms, 95), "window_max_ms": round(max(all_ms), 2),
            "answer_p95_kb": _pct(all_kb, 95), "answer_max_kb": round(max(all_kb), 1),
            "search_ms": round(search_ms, 1), "search_total": found["total"], "event_ms": round(event_ms, 2),
            "targets": {"window_p95_ms": 50, "answer_max_kb": 200},
            "meets_targets": _pct(all_ms, 95) < 50 and max(all_kb) < 200,
            "by_zoom": zooms}


def run(sizes_mb: list[int] | None, workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Build and query one index per size; returns JSON-ready results."""
    results = []
    for size in sizes_mb or [1000]:
        events = int(size * EVENTS_PER_MB)
        out = Path(workdir) / f"timeline-{events}"
        child = subprocess.run([sys.executable, "-m", "pypto_core.bench.timeline", "--build", str(events),
                                str(out)], capture_output=True, text=True, check=True)
        build = json.loads(child.stdout.strip().splitlines()[-1])
        results.append({"size_mb": size, **build, "query": measure_queries(str(out))})
    return {"benchmark": "timeline", "width_px": WIDTH_PX, "results": results}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--build":
        print(json.dumps(_build_child(int(sys.argv[2]), sys.argv[3])))
    else:
        sizes = [int(x) for x in sys.argv[1:]] or [1000]
        print(json.dumps(run(sizes, os.environ.get("PYPTO_BENCH_DIR", "bench-data")), indent=1))
