"""Work folders: a step works in its own temporary folder under PYPTO_WORK_DIR, named
``p<profile id>-<step>-<random>`` and removed when the step ends; the recovery sweep removes the folders a
killed worker left behind (``remove_dead_workdirs``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from profiles.models import Profile, ProfileStatus

# Steps that hold their profile under a lease: their folder is dead once the profile holds no live lease.
LEASED_STEPS: dict[str, tuple[str, ...]] = {"ingest": (ProfileStatus.QUEUED, ProfileStatus.PARSING),
                                            "diagnose": (ProfileStatus.ANALYZING,)}
# The others (a what-if replay, a comparison, remedies, page views, a trace export): dead once older than a
# step can live.
OTHER_STEPS = ("what-if", "compare", "remedies", "views", "trace", "sweep")
_NAME = re.compile(r"^p(\d+)-(" + "|".join(re.escape(s) for s in (*LEASED_STEPS, *OTHER_STEPS)) + r")-")


def make_workdir(profile_id: int, step: str) -> Path:
    """A fresh folder for one attempt of ``step`` on ``profile_id``."""
    assert step in LEASED_STEPS or step in OTHER_STEPS, step
    base = Path(settings.PYPTO_WORK_DIR)
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"p{profile_id}-{step}-", dir=base))


def without_workdir(text: str, workdir: Path) -> str:
    """``text`` without the worker's folder: a user sees the names of their own files, never a server path."""
    return (text.replace(f"{workdir}/unpacked/", "").replace(f"{workdir}/", "")
            .replace(str(workdir), ""))


def remove_dead_workdirs(*, profile_id: int | None = None, step: str | None = None,
                         keep: Path | None = None) -> int:
    """Remove work folders nobody is using: a leased step's folder once its profile holds no live lease (the
    worker finished or died), any other folder once older than a step can live. With ``profile_id`` and
    ``step``: that step's folders other than ``keep`` (the step just claimed its profile, so every other
    folder of it belongs to a dead attempt)."""
    base = Path(settings.PYPTO_WORK_DIR)
    try:
        entries = list(base.iterdir())
    except FileNotFoundError:
        return 0
    now = timezone.now()
    oldest = time.time() - settings.PYPTO_TASK_LEASE_SECONDS
    removed = 0
    for entry in entries:
        match = _NAME.match(entry.name)
        if not match or not entry.is_dir() or (keep is not None and entry == keep):
            continue
        pk, kind = int(match.group(1)), match.group(2)
        if profile_id is not None:
            dead = pk == profile_id and kind == step
        elif kind in LEASED_STEPS:
            held = Profile.objects.filter(pk=pk, status__in=LEASED_STEPS[kind], lease_until__gte=now)
            dead = not held.exists()
        else:
            try:
                dead = entry.stat().st_mtime < oldest
            except FileNotFoundError:
                continue
        if dead:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed
