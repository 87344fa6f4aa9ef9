"""The limits on the work any one input may cause, whatever its wrapper: the one home of these numbers.

Archives (member count, unpacked bytes, compression ratio) are checked by ``pypto_core.archive``; a single
``.gz`` file is held to the same unpacked bytes and ratio while it is decompressed
(``formats.eventscan``); every text cell written to a profile's Parquet is cut to ``max_text_chars`` and
every table to ``max_table_rows`` (``formats.parquet_sink``); SQLite readers stop after ``sqlite_seconds``.
The CLI uses the defaults; a deployment sets its own once per process with :func:`use_limits` (the web
workers do, from their settings). Each refusal is an ``InputError`` naming the file and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pypto_core.errors import InputError
from pypto_core.i18n import msg

# Sized for real multi-rank captures (tens of GB unpacked, ~10^5 files at level2).
DEFAULT_MAX_MEMBERS = 100_000
DEFAULT_MAX_UNPACKED_BYTES = 64 * 1024**3
# Profiler CSV/JSON text compresses 10-30x with deflate; 200x is only reached by padding (zip bombs).
DEFAULT_MAX_RATIO = 200
# Below this many unpacked bytes the ratio is not judged: a 1 KiB archive of repetitive CSV may reach
# 100x honestly, and a few MiB cannot hurt anyone.
RATIO_FLOOR_BYTES = 4 * 1024**2
# The longest operator names seen in real traces are a few hundred characters (fused graph op names);
# 4096 keeps every real one whole and bounds what a page or an API answer can be asked to carry.
DEFAULT_MAX_TEXT_CHARS = 4096
# A 10 GB trace_view.json holds about 50 M events; 500 M rows in one table is no real profile.
DEFAULT_MAX_TABLE_ROWS = 500_000_000
DEFAULT_SQLITE_SECONDS = 1800.0
CUT_MARK = "…"


@dataclass(frozen=True)
class Limits:
    max_members: int = DEFAULT_MAX_MEMBERS
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    max_table_rows: int = DEFAULT_MAX_TABLE_ROWS
    sqlite_seconds: float = DEFAULT_SQLITE_SECONDS


_current = Limits()


def current_limits() -> Limits:
    return _current


def use_limits(limits: Limits) -> None:
    """Set the limits every reader in this process applies from now on."""
    global _current
    _current = limits


class Inflation:
    """Counts the bytes decompressed from one compressed input against the unpacked size and ratio limits."""

    def __init__(self, name: str, compressed_bytes: int, limits: Limits | None = None) -> None:
        self.name = name
        self.compressed = max(compressed_bytes, 1)
        self.limits = limits or current_limits()
        self.written = 0

    def add(self, n: int) -> None:
        self.written += n
        if self.written > self.limits.max_unpacked_bytes:
            limit = self.limits.max_unpacked_bytes
            raise InputError(self.name, msg("decompressed size exceeds the limit of {n} bytes", n=limit))
        if self.written > RATIO_FLOOR_BYTES and self.written / self.compressed > self.limits.max_ratio:
            raise InputError(self.name, msg("compression ratio above the limit of {ratio:g}:1 ({written} "
                                            "bytes from {size}), refused as a decompression bomb",
                                            ratio=self.limits.max_ratio, written=self.written,
                                            size=self.compressed))
