"""Arrow's allocator for the engine's own processes (CLI, workers): one that gives freed memory back.

pyarrow's default pool on Linux is mimalloc, which keeps freed pages in its arenas: streaming a trace into
Parquet frees every batch, and the kept pages made peak RSS grow by ~250 MB per GB of input. jemalloc,
bundled in pyarrow's wheels, returns them after its decay time. Measured with the readers_json bench on a
2 GB Kineto trace: peak 725 MB -> 554 MB at the same speed (trace_view: 637 -> 581 MB).
"""

from __future__ import annotations

import ctypes
import os
import sys

# Arrow's C++ code (Parquet reading and writing, compute kernels) allocates from its own default pool, which
# ``set_memory_pool`` does not change: it is chosen from this variable when pyarrow loads. ``pypto_core``
# sets it before its first pyarrow import (``choose_pool_before_pyarrow``); measured on a 1 GB ascend_pt
# folder, ``pypto analyze`` peaked at 620 MB with mimalloc there and 570 MB with jemalloc, at the same CPU.
POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
# Arrow's jemalloc hands decayed pages back with MADV_FREE by default: the kernel takes them only under
# pressure, so they stay in the resident set (and VmHWM) of the next phase. Handed back at once instead
# (muzzy decay 0): the same CPU, ~10 MB less at the peak of pypto analyze on a 1 GB folder, and no
# "LazyFree" memory left in the process after the read.
# Dirty pages (freed, not yet handed back) wait 100 ms, not jemalloc's 1 s: a table let go of (the load's
# decoding buffers, the rows diagnosis is done with) would otherwise stay resident through the next second
# of numpy work, which allocates from glibc and never reuses them. pyarrow 26's ``release_unused`` cannot
# purge them: it asks jemalloc for "arena.MALLCTL_ARENAS_ALL.purge", a name whose macro was never expanded.
# Measured back to back on 2026-12-05, ``pypto analyze`` of simulated folders: 1 GB 373-388 MiB against
# 414-440 MiB, 5 GB 969-987 MiB against 1,013-1,016 MiB, at the same wall and CPU time. dirty_decay_ms:0
# (every free handed back at once) took 35% longer on a 5 GB folder (84 s, was 62 s), in the kernel.
# One arena (``narenas:1``): jemalloc decays an arena's dirty pages only when that arena is used again, and
# gives each thread an arena of its own; what a pool thread (a join of the flows' binding, a Parquet write)
# freed then stayed resident for good once the thread was done. One arena is used by every thread, so its
# pages decay as the next phase allocates (see ``ONE_ARENA`` for glibc's side).
JEMALLOC_VARIABLE, JEMALLOC_CONF = "JE_ARROW_MALLOC_CONF", "muzzy_decay_ms:0,dirty_decay_ms:100,narenas:1"


def choose_pool_before_pyarrow() -> None:
    """Make jemalloc Arrow's C++ default pool too, where it can still be chosen (pyarrow not loaded yet, a
    Linux build: its wheels bundle jemalloc) and nobody chose another one."""
    if "pyarrow" not in sys.modules and sys.platform.startswith("linux"):
        os.environ.setdefault(POOL_VARIABLE, "jemalloc")
        os.environ.setdefault(JEMALLOC_VARIABLE, JEMALLOC_CONF)


# glibc maps an allocation of its own (handed back on free) only from a threshold that it raises, up to
# 32 MB, each time such a block is freed: after the first profile of a comparison, the arrays of one byte or
# two a kernel (15-31 MB of a 15.7 M-kernel table) came from the heap, whose freed middle stays resident. The
# second side of two saved 5 GB tables' comparison peaked 115 MB above the first and held 240 MB it had
# freed. A fixed threshold keeps every array of 4 MB or more mapped of its own, so both sides peak alike.
# Fixing it also fixes the heap's trim threshold, at 128 KB unless set: the heap's top was then handed back
# and faulted in again at nearly every free (10 s of system time in that comparison's 28 s); 64 MB keeps it.
# Measured on that comparison: 1,118 MiB in 27.5 s with glibc's own policy, 972 MiB in 29.2-29.9 s so.
MMAP_THRESHOLD_BYTES = 4 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
# glibc gives each new thread an arena of its own as it first allocates (up to 8 a core),
# and what a thread's arena keeps below its trim threshold (64 MB) stays resident after the thread ends:
# the reader's threads (scan, columns, Parquet writers, the flows' binding) left 60-100 MB each read. With one
# arena the next phase reuses it. Measured on a 1 GB ascend_pt folder, pypto analyze, with jemalloc's one
# arena: the flows' binding peaked at 332-339 MB (it was 417-480 MB), diagnosis at 330 MB (427 MB), the
# same wall time. ``MALLOC_ARENA_MAX`` in the environment, glibc's own setting, wins.
ONE_ARENA = 1
_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD, _M_ARENA_MAX = -3, -1, -8  # mallopt's parameter numbers (malloc.h)


def use_returning_allocator() -> str:
    """Make jemalloc Arrow's default pool where this build has it, glibc's thresholds for mapping a block of
    its own and trimming the heap fixed (``MMAP_THRESHOLD_BYTES``, ``TRIM_THRESHOLD_BYTES``) and its arenas
    one (``ONE_ARENA``); the name of the Arrow pool in use. Call it before the process starts threads."""
    import pyarrow as pa  # here, not above: this module is imported before pyarrow loads (see above)

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (NotImplementedError, pa.ArrowNotImplementedError):  # a build without jemalloc: keep the default
        pass
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        if "MALLOC_ARENA_MAX" not in os.environ:
            libc.mallopt(_M_ARENA_MAX, ONE_ARENA)
    except (OSError, AttributeError):  # not glibc (musl, macOS): its own policy
        pass
    return str(pa.default_memory_pool().backend_name)


def release_freed_memory() -> None:
    """Hand memory freed by a finished phase back to the system before the next one starts.

    Arrow's pool and glibc's malloc (numpy's buffers) both keep freed pages for reuse; between two big
    phases of one read (a kernel table, then a timeline) the next phase's peak would stack on top of them.
    Measured on a 1 GB ascend_pt folder: 150 MB left after the kernel table, returned by ``malloc_trim``.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # mimalloc's and the system pool's; jemalloc's: see above
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return
    trim(0)
