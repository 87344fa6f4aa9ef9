"""The engine's processes use an Arrow allocator that returns freed memory (pypto_core/memory.py)."""

import pyarrow as pa

from pypto_core.memory import use_returning_allocator


def test_jemalloc_becomes_the_default_pool_where_the_build_has_it() -> None:
    try:
        pa.jemalloc_memory_pool()
        expected = "jemalloc"
    except NotImplementedError:
        expected = pa.default_memory_pool().backend_name  # kept as it was
    assert use_returning_allocator() == expected == pa.default_memory_pool().backend_name
    assert pa.array(range(1000)).sum().as_py() == 499500  # and Arrow works on it


def test_arrows_own_cpp_allocations_return_memory_too(tmp_path) -> None:
    """Parquet reading runs in Arrow's C++ code on its C++ default pool, which is chosen as pyarrow loads:
    importing the engine first makes it jemalloc, so mimalloc (which keeps freed pages) is never used."""
    import os
    import subprocess
    import sys

    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": list(range(100_000)), "s": [str(i % 97) for i in range(100_000)]}),
                   tmp_path / "t.parquet")
    code = ("import pypto_core, pyarrow as pa, pyarrow.parquet as pq, sys; "
            "t = pq.read_table(sys.argv[1]); assert t.num_rows == 100000; "
            "print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory() or 0)")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.parquet")], capture_output=True,
                         text=True, env=env, check=True).stdout.split()
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:  # a build without jemalloc keeps its default
        return
    assert out == ["jemalloc", "0"]


def test_a_reads_scratch_copy_takes_the_cheap_codec_and_a_kept_profile_zstd(tmp_path) -> None:
    import pyarrow.parquet as pq
    import pytest

    from pypto_core.formats import write_profiles
    from pypto_core.profile import output_compression, scratch_output
    from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES

    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    sample = SAMPLES / "msprof/op_summary_fixture"

    def codecs(folder) -> set[str]:
        return {pq.ParquetFile(f).metadata.row_group(0).column(0).compression
                for f in folder.rglob("*.parquet") if pq.ParquetFile(f).metadata.num_row_groups}

    write_profiles(sample, tmp_path / "kept")
    with scratch_output():
        write_profiles(sample, tmp_path / "scratch")
    assert output_compression() == "zstd"  # restored
    assert codecs(tmp_path / "kept") == {"ZSTD"}
    assert codecs(tmp_path / "scratch") <= {"LZ4", "LZ4_RAW"} and codecs(tmp_path / "scratch")


def test_a_null_column_of_numbers_holds_no_memory_and_reads_as_nulls(tmp_path) -> None:
    """``profile.null_column``: what ``conform`` gives for an absent or all-null number column (a kernel
    table's correlation ids). It equals ``pa.nulls`` everywhere it is read, written or filled, and its
    buffers stay unmapped: 400 MB of int64 nulls add next to nothing to the process's resident set."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pypto_core.profile import conform, null_column

    def rss_mb() -> float:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

    small = null_column(1000, pa.int64())
    assert small.equals(pa.nulls(1000, pa.int64())) and small.null_count == 1000
    assert pc.fill_null(small, -1).to_pylist() == [-1] * 1000
    pq.write_table(pa.table({"c": small}), tmp_path / "n.parquet")
    assert pq.read_table(tmp_path / "n.parquet")["c"].to_pylist() == [None] * 1000
    assert null_column(3, pa.string()).to_pylist() == [None] * 3  # other types: Arrow's own nulls
    before = rss_mb()
    big = null_column(50_000_000, pa.int64())
    grown = rss_mb() - before
    assert big.null_count == 50_000_000 and grown < 40, grown
    # conform puts one in place of a column read as all nulls, and of a column that is absent
    table = conform("kernels", pa.table({"start_ns": pa.array(np.arange(5)), "correlation_id":
                                         pa.nulls(5, pa.int64())}))
    assert table["correlation_id"].null_count == 5 and table["stream_id"].null_count == 5
    assert table["start_ns"].to_pylist() == [0, 1, 2, 3, 4]


def test_an_array_of_a_few_mb_freed_is_handed_back_even_after_others_were() -> None:
    """glibc's own policy raises the size from which a block is mapped of its own each time one is freed: the
    next arrays of that size came from the heap and stayed resident once freed (the second side of a
    comparison peaked 115 MB higher). With the engine's thresholds every 4 MB block or larger is mapped of
    its own, so a freed 24 MB array leaves the resident set, however many were freed before it. Run in a
    child process: its allocator starts from glibc's defaults, as the CLI's and a worker's do."""
    import subprocess
    import sys

    code = r"""
import ctypes, sys
import numpy as np
from pypto_core.memory import use_returning_allocator
if sys.argv[1] == "engine":
    use_returning_allocator()
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
before = rss()
for _ in range(3):  # 24 MB written and freed: glibc's own policy raises its threshold past that size
    a = np.ones(3_000_000)
    del a
print(rss() - before)
"""
    def grown_mb(policy: str) -> float:
        run = subprocess.run([sys.executable, "-c", code, policy], capture_output=True, text=True, check=True)
        return float(run.stdout)

    grown = {policy: grown_mb(policy) for policy in ("engine", "glibc")}
    assert grown["engine"] < 4, grown  # handed back
    assert grown["glibc"] > 20, grown  # kept resident by glibc's own policy: what the thresholds change


def test_threads_share_one_malloc_arena() -> None:
    """glibc gives each new thread an arena of its own, whose freed memory stays resident once the thread
    ends (the reader's threads left 60-100 MB each read); the engine's setting keeps one arena for every
    thread. Counted from ``malloc_info``'s heaps in child processes of eight threads, with and without the
    setting."""
    import os
    import subprocess
    import sys

    code = r"""
import ctypes, os, re, sys, tempfile, threading
import numpy as np
from pypto_core.memory import use_returning_allocator
if sys.argv[1] == "engine":
    use_returning_allocator()
held, ready = [], threading.Barrier(8)
def work():
    held.append([np.ones(1000 + i) for i in range(100)])  # small blocks: from an arena, not mapped
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
path = os.path.join(tempfile.mkdtemp(), "info.xml")
fh = libc.fopen(path.encode(), b"w")
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info(0, fh)
libc.fclose(fh)
print(len(re.findall(r"<heap nr=", open(path).read())))
"""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}

    def heaps(policy: str) -> int:
        run = subprocess.run([sys.executable, "-c", code, policy], capture_output=True, text=True, check=True,
                             env=env)
        return int(run.stdout)

    counted = {policy: heaps(policy) for policy in ("engine", "glibc")}
    # the heaps made before the setting stay: the main one, and one a thread of numpy's BLAS may have made
    # as it was imported (the engine's imports come first)
    assert counted["engine"] <= 2, counted
    assert counted["glibc"] >= 5, counted  # eight threads, eight arenas or so: what the setting changes
