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
