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
