"""pypto_core.formats: one reader per input format, and ``open_profile`` that detects which.

    from pypto_core.formats import open_profile, open_profiles, detect_format
    profile = open_profile("rank0_ascend_pt")        # one Profile (the lowest rank of a multi-rank input)
    group = open_profiles("cluster_run.tar.gz")      # every rank, as a ProfileGroup
    saved = write_profiles("cluster_run.tar.gz", "out")  # every rank saved as Parquet, bounded memory

Every failure to read is an ``InputError`` naming the file and the reason; what could be skipped is listed
in ``profile.meta.warnings``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the readers import this package's modules; load them only when called
    from pypto_core.formats.detect import Detection
    from pypto_core.formats.opener import SavedProfiles
    from pypto_core.profile import ColumnSet, Profile, ProfileGroup

__all__ = ["open_profile", "open_profiles", "write_profiles", "detect_format"]


def open_profile(path: str | os.PathLike[str]) -> Profile:
    """Read one profile (folder, archive or single file).
    For several ranks, the lowest rank, with a warning."""
    from pypto_core.formats.opener import open_profile as _open

    return _open(path)


def open_profiles(path: str | os.PathLike[str], columns: ColumnSet | None = None) -> ProfileGroup:
    """Read every rank found at ``path`` into a ``ProfileGroup`` (one ``Profile`` per rank); ``columns``:
    only those (``Profile.load``), e.g. ``rules.diagnose_columns()`` for an analysis."""
    from pypto_core.formats.opener import open_profiles as _open

    return _open(path, columns)


def write_profiles(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> SavedProfiles:
    """Save every rank found at ``path`` under ``folder`` (``rank_N/`` each), one rank at a time; the big
    files stream into Parquet with bounded memory. ``Profile.load`` of each gives ``open_profiles(path)``."""
    from pypto_core.formats.opener import write_profiles as _write

    return _write(path, folder)


def detect_format(path: str | os.PathLike[str]) -> Detection:
    """What ``path`` holds, from its content; see ``pypto_core.formats.detect``.

    (Not named ``detect``: that name is the submodule, which Python binds on the package once imported.)
    """
    from pypto_core.formats.detect import detect as _detect

    return _detect(path)
