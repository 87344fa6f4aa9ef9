"""Helpers the benchmarks share: child-process measurement, peak RSS, load average, saved simulated profiles.

Private (the leading underscore keeps it out of :func:`pypto_core.bench.registry`): it has no ``run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MB = 1024 * 1024

ROOT = Path(__file__).resolve().parents[2]  # the checkout that holds ``pypto_core``


def samples_dir() -> Path:
    """The real sample captures: ``$PYPTO_SAMPLES``, else ``shared/samples`` beside the checkout."""
    env = os.environ.get("PYPTO_SAMPLES")
    return Path(env) if env else ROOT.parent / "shared" / "samples"


def vm_hwm_mb() -> float:
    """This process's peak RSS in MiB: VmHWM where /proc has it, else ``ru_maxrss`` (KiB on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """User plus system CPU seconds of all the threads of this process so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def compare_side_loader(path: str, seconds: list[float]) -> Callable[[], Any]:
    """What the worker gives ``ProfileComparer`` for one side: a loader of the saved profile at ``path``
    with ``COMPARE_COLUMNS`` (so one side is held at a time); each load's seconds are added to
    ``seconds``."""
    def load() -> Any:
        from pypto_core.compare import COMPARE_COLUMNS
        from pypto_core.profile import Profile

        t = time.perf_counter()
        profile = Profile.load(path, columns=COMPARE_COLUMNS)
        seconds.append(time.perf_counter() - t)
        return profile
    return load


def load_avg() -> list[float] | None:
    """The machine's 1, 5 and 15-minute load averages (other work competing for the cores), if known."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def child_json(code: str, *args: str, check: bool = False) -> dict[str, Any]:
    """Run ``python -c code *args`` in a fresh process (so its peak RSS is its own) with this checkout first
    on the path; the JSON object on the last line it prints.

    A failed child gives ``{"error": <its last stderr line>}``, or raises ``CalledProcessError`` if ``check``.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                         check=check)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


REPEATS = 3  # conversions timed per input; the median is reported (the shared machine's noise is +-30%)


def median_of_runs(run: Any, repeats: int = REPEATS) -> dict[str, Any]:
    """``run()`` (a fresh child process each time) ``repeats`` times: the run with the median ``seconds``,
    plus ``runs_s`` (every run's seconds) and ``peak_rss_mb`` the highest of them all. The first failure
    is returned as it is. Dirty pages (the input just written) are flushed first, so that the kernel's
    writeback does not run inside the timing."""
    os.sync()
    runs = []
    for _ in range(repeats):
        result: dict[str, Any] = run()
        if "error" in result:
            return result
        runs.append(result)
    runs.sort(key=lambda r: r["seconds"])
    chosen = dict(runs[len(runs) // 2])
    chosen["runs_s"] = [round(r["seconds"], 3) for r in runs]
    chosen["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return chosen


def saved_simulated_profile(saved: Path, synth_dir: Path, size_mb: float,
                            fixed: frozenset[str] = frozenset()) -> tuple[Path, dict[str, Any]]:
    """The simulated ascend_pt run of ``size_mb`` saved as Parquet at ``saved``, built once (synth into
    ``synth_dir``, streamed into Parquet) and reused on later runs; with how long synth and parse took."""
    info_path = saved / "bench_info.json"
    if info_path.exists():
        return saved, json.loads(info_path.read_text())
    from pypto_core.formats.ascend_pt import write_ascend_pt
    from pypto_core.synth import synthesize_run

    t0 = time.perf_counter()
    run = synthesize_run(synth_dir, size_mb=size_mb, tokens=4, prompt_tokens=128, fixed=fixed)
    t1 = time.perf_counter()
    write_ascend_pt(run.path, saved)  # as an upload is read: streamed into the saved profile
    t2 = time.perf_counter()
    info = {"trace_bytes": run.bytes_written, "synth_s": round(t1 - t0, 1), "parse_s": round(t2 - t1, 1),
            "decode_tokens": run.decode_tokens}
    info_path.write_text(json.dumps(info))
    return saved, info


def measure_write_profiles(folder: Path, out_dir: Path) -> dict[str, Any]:
    """In this process: ``formats.write_profiles`` of ``folder`` (as an upload is ingested); time, rows and
    peak RSS."""
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
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss_mb": vm_hwm_mb(), "rank_folder": saved.primary()[0],
            **rows}


def measure_profile_load(rank_dir: Path) -> dict[str, Any]:
    """In this process: ``Profile.load`` of a saved rank folder; time, rows and peak RSS."""
    from pypto_core.memory import use_returning_allocator
    from pypto_core.profile import Profile

    use_returning_allocator()
    t0 = time.perf_counter()
    profile = Profile.load(rank_dir)
    seconds = time.perf_counter() - t0
    rows = sum(profile.table(n).num_rows for n in ("kernels", "host_ops", "api_calls", "flows", "counters"))
    return {"seconds": seconds, "rows": rows, "peak_rss_mb": vm_hwm_mb()}


def _child_measure(fn: str, *paths: Path) -> dict[str, Any]:
    code = ("import json,sys; from pathlib import Path; from pypto_core.bench import _measure as m; "
            f"print(json.dumps(m.{fn}(*[Path(p) for p in sys.argv[1:]])))")
    return child_json(code, *map(str, paths))


def write_profiles_figures(folder: Path, out_dir: Path, input_mb: float) -> dict[str, Any]:
    """``write_profiles`` of ``folder`` and ``Profile.load`` of what it saved, each in fresh child processes
    (median of runs): MB/s of ``input_mb``, rows, peak RSS for both; ``out_dir`` removed afterwards."""
    import shutil

    def convert() -> dict[str, Any]:
        shutil.rmtree(out_dir, ignore_errors=True)
        return _child_measure("measure_write_profiles", folder, out_dir)

    entry: dict[str, Any] = {}
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
        load = median_of_runs(lambda: _child_measure("measure_profile_load", out_dir / conv["rank_folder"]))
        if "error" in load:
            entry["load_error"] = load["error"]
        else:
            entry.update({"parquet_load_s": round(load["seconds"], 3),
                          "parquet_load_rows_per_s": round(load["rows"] / load["seconds"]),
                          "parquet_load_input_mb_per_s": round(input_mb / load["seconds"], 1),
                          "parquet_load_peak_rss_mb": round(load["peak_rss_mb"], 1)})
    shutil.rmtree(out_dir, ignore_errors=True)
    return entry


def simulated_inputs_figures(sizes_mb: list[int], workdir: str | os.PathLike[str], label: str,
                             simulate: Callable[[int, Path], Path],
                             input_bytes: Callable[[Path], int]) -> list[dict[str, Any]]:
    """For each size: ``simulate(size, folder)`` writes a simulated input and returns what to read; then
    :func:`write_profiles_figures` of it, with ``input_bytes(input)`` as the MB the rates count, how long
    the simulation took and the files over 1 MB. Each input is removed once measured."""
    import shutil

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        synth_dir, out_dir = work / f"{label}_{size}mb", work / f"{label}_{size}mb.saved"
        shutil.rmtree(synth_dir, ignore_errors=True)
        t0 = time.perf_counter()
        source = simulate(size, synth_dir)
        synth_s = time.perf_counter() - t0
        input_mb = input_bytes(source) / MB
        entry: dict[str, Any] = {
            "size_mb": size, "input_mb": round(input_mb, 1), "synth_s": round(synth_s, 1),
            "files_mb": {f.name: round(f.stat().st_size / MB, 1) for f in sorted(synth_dir.rglob("*"))
                         if f.is_file() and f.stat().st_size > MB},
        }
        entry.update(write_profiles_figures(source, out_dir, input_mb))
        shutil.rmtree(synth_dir, ignore_errors=True)
        results.append(entry)
    return results
