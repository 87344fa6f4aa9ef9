"""What the pages and the timeline API read besides rows: page data (JSON) and the timeline index, both built
once per profile at the end of diagnosis and kept in storage beside the Parquet tables.

Storage layout (under the profile's ``parquet_prefix``, so a re-ingest replaces them with the tables):
``views/pages.json`` (``pypto_core.pagedata.profile_page_data``) and ``views/timeline/`` (the LOD index);
the chrome-trace export, made on demand, is ``exports/trace.json``.
Web processes copy the index to a local cache folder once (memory-mapped from there) and keep a few open.
Nothing here is built in a request: the readers answer "absent" (None, ``ViewsMissing``), and a worker builds
what a page asked for (analysis/page_builds.py calls ``views_rebuild`` and ``trace_export``).
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
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from analysis.storage import ProfileStore, delete_prefix, fetch_folder, store_folder
from profiles.models import Profile

if TYPE_CHECKING:  # pragma: no cover
    from pypto_core.graph import OperatorCallGraph

log = logging.getLogger(__name__)

VIEWS = "views"
_OPEN_INDEXES = 8  # timeline indexes kept open per process (memory maps; each holds its own window cache)
_lock = threading.Lock()
_indexes: OrderedDict[str, Any] = OrderedDict()


def _views_prefix(profile: Profile) -> str:
    return ProfileStore(profile).views_prefix()


def _cache_dir(profile: Profile) -> Path:
    tag = hashlib.sha256(profile.parquet_prefix.encode()).hexdigest()[:16]
    return Path(settings.PYPTO_WORK_DIR) / "views-cache" / f"{profile.pk}-{tag}"


def views_build(*, profile: Profile, core: Any, workdir: Path, graph: OperatorCallGraph | None = None,
                saved: Path | None = None) -> dict[str, float]:
    """Compute page data and the timeline index of ``core`` (the profile's primary rank) and store both;
    ``graph``: the call graph diagnosis built of ``core`` (its attribution is not computed again); ``saved``:
    the folder ``core`` was loaded from, where the load left columns out (the event details read them)."""
    import time

    from pypto_core.pagedata import profile_page_data
    from pypto_core.timeline import build_timeline_index

    timings: dict[str, float] = {}
    prefix = _views_prefix(profile)
    delete_prefix(prefix)
    t0 = time.monotonic()
    data = profile_page_data(core, profile.sku or None, graph=graph)
    default_storage.save(f"{prefix}/pages.json", ContentFile(json.dumps(data).encode("utf-8")))
    timings["page_data_s"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    attribution = None
    if graph is not None:
        attribution = graph.attribution
        graph.keep_only_attribution()  # the index's peak must not stack on the rules' caches
    local = build_timeline_index(core, Path(workdir) / "timeline-index", attribution=attribution, saved=saved)
    store_folder(local, f"{prefix}/timeline")
    timings["timeline_index_s"] = round(time.monotonic() - t0, 3)
    return timings


class ViewsMissing(Exception):
    """The profile's timeline index is not in storage, or was built by an older version (``stale``)."""

    def __init__(self, profile_id: int, *, stale: bool = False) -> None:
        super().__init__(f"the views of profile {profile_id} are {'out of date' if stale else 'not built'}")
        self.stale = stale


def views_rebuild(*, profile: Profile, workdir: Path) -> dict[str, float]:
    """The views of a profile analysed before they existed (or whose build failed), from its saved tables
    (loaded as the diagnosis step loads them)."""
    from pypto_core.rules.diagnose import diagnosis_step_columns

    store = ProfileStore(profile)
    core = store.load(workdir / "tables", columns=diagnosis_step_columns())
    saved = store.local_folder(workdir / "tables")
    return views_build(profile=profile, core=core, workdir=workdir, saved=saved)


def views_stored(*, profile: Profile) -> bool:
    """Whether both views (page data and the timeline index) are in storage."""
    prefix = _views_prefix(profile)
    return bool(profile.parquet_prefix) and default_storage.exists(f"{prefix}/pages.json") \
        and default_storage.exists(f"{prefix}/timeline/timeline.json")


def page_data(*, profile: Profile) -> dict[str, Any] | None:
    """The stored page data of a ready profile, or None when it has none (no parsed tables, or not built)."""
    if not profile.parquet_prefix:
        return None
    try:
        with default_storage.open(f"{_views_prefix(profile)}/pages.json", "rb") as fh:
            return json.loads(fh.read())
    except FileNotFoundError:
        return None


def timeline_index_cached(*, profile: Profile) -> Any:
    """The profile's ``TimelineIndex`` if this process holds it open or has it in its local cache, else None
    (a local copy built by an older version is dropped, so the next ``timeline_index`` fetches it again)."""
    from pypto_core.timeline import TimelineIndex

    local = _cache_dir(profile) / "timeline"
    key = str(local)
    with _lock:
        if key in _indexes:
            _indexes.move_to_end(key)
            return _indexes[key]
    if not local.exists():
        return None
    try:
        return _keep_open(key, TimelineIndex.open(local))
    except ValueError:  # built by an older version of the index
        shutil.rmtree(local, ignore_errors=True)
        return None


def timeline_index(*, profile: Profile) -> Any:
    """The profile's open ``TimelineIndex``, fetched from storage to the local cache on first use; raises
    ``ViewsMissing`` when storage has none or one built by an older version (a worker builds it again)."""
    from pypto_core.timeline import TimelineIndex

    index = timeline_index_cached(profile=profile)
    if index is not None:
        return index
    local = _cache_dir(profile) / "timeline"
    prefix = f"{_views_prefix(profile)}/timeline"
    if not profile.parquet_prefix or not default_storage.exists(f"{prefix}/timeline.json"):
        raise ViewsMissing(profile.pk)
    tmp = Path(tempfile.mkdtemp(prefix="tl-", dir=_ensure(local.parent)))
    try:
        fetch_folder(prefix, tmp / "timeline")
        try:
            (tmp / "timeline").rename(local)
        except OSError:  # another request fetched it first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        index = TimelineIndex.open(local)
    except ValueError:  # built by an older version of the index: a worker builds it again
        log.info("timeline index of profile %s is out of date", profile.pk)
        shutil.rmtree(local, ignore_errors=True)
        raise ViewsMissing(profile.pk, stale=True) from None
    return _keep_open(str(local), index)


def _keep_open(key: str, index: Any) -> Any:
    with _lock:
        _indexes[key] = index
        _indexes.move_to_end(key)
        while len(_indexes) > _OPEN_INDEXES:
            _indexes.popitem(last=False)
    return index


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def trace_name(profile: Profile) -> str:
    """Where the chrome-trace export of the profile's current parse lives in storage."""
    return f"{profile.parquet_prefix}/exports/trace.json"


def trace_export(*, profile: Profile, workdir: Path) -> int:
    """Export the chrome trace of the profile's primary rank into storage (``trace_name``); returns the
    event count."""
    from pypto_core.timeline import export_chrome_trace

    core = ProfileStore(profile).load(workdir / "tables")
    local = workdir / "trace.json"
    count = export_chrome_trace(core, local)
    name = trace_name(profile)
    if default_storage.exists(name):  # the exact name: storage would save beside it under another one
        default_storage.delete(name)
    with open(local, "rb") as fh:
        default_storage.save(name, File(fh, name="trace.json"))
    return int(count)
