"""What the pages and the timeline API read besides rows: page data (JSON) and the timeline index, both built
once per profile at the end of diagnosis and kept in storage beside the Parquet tables.

Storage layout (under the profile's ``parquet_prefix``, so a re-ingest replaces them with the tables):
``views/pages.json`` (``pypto_core.pagedata.profile_page_data``) and ``views/timeline/`` (the LOD index).
Web processes copy the index to a local cache folder once (memory-mapped from there) and keep a few open.
A profile analysed before this existed gets its views built on first use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from analysis.storage import ProfileStore, delete_prefix, fetch_folder, store_folder
from analysis.workdirs import make_workdir
from profiles.models import Profile

log = logging.getLogger(__name__)

_OPEN_INDEXES = 8  # timeline indexes kept open per process (memory maps; each holds its own window cache)
_lock = threading.Lock()
_indexes: OrderedDict[str, Any] = OrderedDict()


def _views_prefix(profile: Profile) -> str:
    return ProfileStore(profile).views_prefix()


def _cache_dir(profile: Profile) -> Path:
    tag = hashlib.sha256(profile.parquet_prefix.encode()).hexdigest()[:16]
    return Path(settings.PYPTO_WORK_DIR) / "views-cache" / f"{profile.pk}-{tag}"


def views_build(*, profile: Profile, core: Any, workdir: Path) -> dict[str, float]:
    """Compute page data and the timeline index of ``core`` (the profile's primary rank) and store both."""
    import time

    from pypto_core.pagedata import profile_page_data
    from pypto_core.timeline import build_timeline_index

    timings: dict[str, float] = {}
    prefix = _views_prefix(profile)
    delete_prefix(prefix)
    t0 = time.monotonic()
    data = profile_page_data(core, profile.sku or None)
    default_storage.save(f"{prefix}/pages.json", ContentFile(json.dumps(data).encode("utf-8")))
    timings["page_data_s"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    local = build_timeline_index(core, Path(workdir) / "timeline-index")
    store_folder(local, f"{prefix}/timeline")
    timings["timeline_index_s"] = round(time.monotonic() - t0, 3)
    return timings


def _build_missing(profile: Profile) -> None:
    """Views of a profile analysed before they existed (or whose build failed): build them now."""
    workdir = make_workdir(profile.pk, "views")
    try:
        core = ProfileStore(profile).load(workdir / "tables")
        views_build(profile=profile, core=core, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def page_data(*, profile: Profile, build: bool = True) -> dict[str, Any] | None:
    """The stored page data of a ready profile, or None when it has no parsed tables."""
    if not profile.parquet_prefix:
        return None
    name = f"{_views_prefix(profile)}/pages.json"
    if not default_storage.exists(name):
        if not build:
            return None
        try:
            _build_missing(profile)
        except Exception:  # a page must still render; the log says why
            log.exception("building the views of profile %s failed", profile.pk)
            return None
    with default_storage.open(name, "rb") as fh:
        return json.loads(fh.read())


def timeline_index(*, profile: Profile) -> Any:
    """The profile's open ``TimelineIndex`` (fetched to the local cache, or built, on first use)."""
    from pypto_core.timeline import TimelineIndex

    local = _cache_dir(profile) / "timeline"
    key = str(local)
    with _lock:
        if key in _indexes:
            _indexes.move_to_end(key)
            return _indexes[key]
    if not local.exists():
        prefix = f"{_views_prefix(profile)}/timeline"
        if not default_storage.exists(f"{prefix}/timeline.json"):
            _build_missing(profile)
        tmp = Path(tempfile.mkdtemp(prefix="tl-", dir=_ensure(local.parent)))
        fetch_folder(prefix, tmp / "timeline")
        try:
            (tmp / "timeline").rename(local)
        except OSError:  # another request fetched it first
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        index = TimelineIndex.open(local)
    except ValueError:  # built by an older version of the index: rebuild it once, from the saved tables
        log.info("timeline index of profile %s is out of date: rebuilding", profile.pk)
        shutil.rmtree(local, ignore_errors=True)
        _build_missing(profile)
        tmp = Path(tempfile.mkdtemp(prefix="tl-", dir=_ensure(local.parent)))
        fetch_folder(f"{_views_prefix(profile)}/timeline", tmp / "timeline")
        try:
            (tmp / "timeline").rename(local)
        except OSError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        index = TimelineIndex.open(local)
    with _lock:
        _indexes[key] = index
        while len(_indexes) > _OPEN_INDEXES:
            _indexes.popitem(last=False)
    return index


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def chrome_trace_path(*, profile: Profile) -> Path:
    """A chrome-trace file of the profile's primary rank, exported once per parse into the local cache."""
    from pypto_core.timeline import export_chrome_trace

    target = _cache_dir(profile) / "trace.json"
    if target.exists():
        return target
    workdir = make_workdir(profile.pk, "trace")
    try:
        core = ProfileStore(profile).load(workdir / "tables")
        tmp = workdir / "trace.json"
        export_chrome_trace(core, tmp)
        _ensure(target.parent)
        shutil.move(str(tmp), str(target))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return target
