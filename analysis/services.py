"""The pipeline (ingest, diagnose), comparisons, and the one place that calls the engine.

Every step claims its profile with a conditional UPDATE (a lease), so a message delivered twice runs
once, and a message redelivered after its worker died takes over once the dead worker's lease ran out.
Optional engine parts (readers, rules, remedies, compare) are looked up in ``engine_function`` only: until
another issue lands them, the pipeline degrades to format detection and file sizes.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import shutil
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import InterfaceError, OperationalError, models, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from analysis.models import AnalysisRun, Comparison, Finding, JobStatus
from analysis.recovery import remove_dead_workdirs
from profiles.models import Profile, ProfileStatus
from pypto_core.archive import Limits, unpack_upload
from pypto_core.errors import InputError
from pypto_core.limits import use_limits

log = logging.getLogger(__name__)

# Errors worth a retry with backoff (the database or storage blinked); anything else is final.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, ConnectionError, TimeoutError)
try:  # an S3-compatible store that does not answer is transient too
    from botocore.exceptions import ConnectionError as _BotoConnectionError, ConnectTimeoutError, ReadTimeoutError

    TRANSIENT_ERRORS += (_BotoConnectionError, ConnectTimeoutError, ReadTimeoutError)
except ImportError:  # pragma: no cover - boto3 is in requirements.txt
    pass


def storage_full_reason(exc: BaseException) -> str | None:
    """The reason, when ``exc`` says the disk or the store is out of space (final: retrying won't help)."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"storage is full ({exc.strerror})"
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
    if code in ("QuotaExceeded", "EntityTooLarge", "InsufficientStorage", "XMinioStorageFull"):
        return f"object storage refused the write ({code})"
    return None
_COPY_BLOCK = 1024 * 1024


# --- the engine, optional parts looked up in one place ----------------------------------------------


def engine_function(module: str, name: str) -> Callable[..., Any] | None:
    """``module.name`` if that part of the engine exists yet, else None.

    Only a missing module or attribute means "not built yet"; an ImportError raised *inside* an existing
    module is a bug and propagates, so the pipeline fails loudly rather than silently skipping analysis.
    """
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return None
        raise
    fn = getattr(mod, name, None)
    return fn if callable(fn) else None


def upload_limits() -> Limits:
    """The deployment's limits on the work one upload may cause (pypto_core.limits)."""
    return Limits(
        max_members=settings.PYPTO_MAX_ARCHIVE_MEMBERS,
        max_unpacked_bytes=settings.PYPTO_MAX_UNPACKED_BYTES,
        max_ratio=settings.PYPTO_MAX_COMPRESSION_RATIO,
        max_text_chars=settings.PYPTO_MAX_TEXT_CHARS,
        max_table_rows=settings.PYPTO_MAX_TABLE_ROWS,
        sqlite_seconds=settings.PYPTO_SQLITE_SECONDS,
    )


# Names that identify a format when the readers (pypto_core.formats) are not installed yet.
def detect_format_by_names(names: list[str]) -> str:
    lower = [n.lower() for n in names]
    parts = {p for n in lower for p in n.split("/")}
    if any(p.endswith("_ascend_pt") for p in parts) or any(
        n.endswith(("kernel_details.csv", "trace_view.json", "operator_details.csv")) for n in lower
    ):
        return "ascend_pt"
    if any(n.rsplit("/", 1)[-1].startswith("ascend_pytorch_profiler") and n.endswith(".db") for n in lower):
        return "ascend_pt_db"
    if any(p.startswith("prof_") for p in parts) or any(
        n.rsplit("/", 1)[-1].startswith(("op_summary", "msprof")) for n in lower
    ):
        return "msprof_db" if any(n.endswith(".db") for n in lower) else "msprof"
    if any(n.endswith((".json", ".json.gz")) for n in lower):
        return "kineto"
    return "unknown"


# --- storage helpers --------------------------------------------------------------------------------


def storage_delete_prefix(prefix: str) -> None:
    """Delete every file under a storage folder (filesystem or S3)."""
    try:
        dirs, files = default_storage.listdir(prefix)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in files:
        default_storage.delete(f"{prefix}/{name}")
    for sub in dirs:
        storage_delete_prefix(f"{prefix}/{sub}")


def _store_folder(local: Path, prefix: str) -> list[str]:
    stored = []
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        name = f"{prefix}/{path.relative_to(local).as_posix()}"
        # Exact names: storage would save beside a stale file under a new name, and the folder's reader
        # would then find the stale one (a reused id after a database restore, say).
        if default_storage.exists(name):
            default_storage.delete(name)
        with open(path, "rb") as fh:
            stored.append(default_storage.save(name, File(fh, name=path.name)))
    return stored


def _fetch_folder(prefix: str, local: Path) -> None:
    dirs, files = default_storage.listdir(prefix)
    local.mkdir(parents=True, exist_ok=True)
    for name in files:
        with default_storage.open(f"{prefix}/{name}", "rb") as src, open(local / name, "wb") as dst:
            shutil.copyfileobj(src, dst, _COPY_BLOCK)
    for sub in dirs:
        _fetch_folder(f"{prefix}/{sub}", local / sub)


def _fetch_archive(profile: Profile, dest: Path) -> Path:
    """Copy the kept archive out of storage, verifying the checksum recorded at upload."""
    target = dest / profile.original_filename
    digest = hashlib.sha256()
    with profile.archive.open("rb") as src, open(target, "wb") as dst:
        while block := src.read(_COPY_BLOCK):
            digest.update(block)
            dst.write(block)
    if profile.sha256 and digest.hexdigest() != profile.sha256:
        raise InputError(profile.original_filename, "checksum mismatch: the stored archive changed since upload")
    return target


def load_saved_profile(profile: Profile, dest: Path, *, folder: str | None = None,
                       tables: tuple[str, ...] | None = None, columns: Any = None) -> Any:
    """The canonical ``pypto_core.profile.Profile`` of a parsed profile (one rank folder), fetched to ``dest``;
    ``tables`` limits which tables are read (the rest stay empty), ``columns`` which columns
    (``pypto_core.profile.ColumnSet``)."""
    from pypto_core.profile import Profile as CoreProfile

    if not profile.parquet_prefix:
        raise InputError(profile.name, "no parsed data (the readers did not run on this profile)")
    folders = profile.summary.get("rank_folders") or ["rank_0"]
    folder = folder if folder in folders else folders[0]
    local = dest / folder
    # A fanned-out upload keeps each rank's tables under that rank's own profile (rank_sources).
    source = (profile.summary.get("rank_sources") or {}).get(folder) or f"{profile.parquet_prefix}/{folder}"
    _fetch_folder(source, local)
    return CoreProfile.load(local, tables=tables, columns=columns)


def _load_for_diagnosis(profile: Profile, dest: Path) -> tuple[Any, Any]:
    """The primary rank, and the whole group when the upload had several ranks (cross-rank rules).

    Every table of the primary rank (the rules, page data and the timeline index read it); of the other ranks
    only what the group-scope rules read, so that a group never holds every rank's full tables. Text stays
    dictionary-encoded and the kernels' shape cells coded (``EVERY_COLUMN``)."""
    from pypto_core.profile import EVERY_COLUMN, Profile as CoreProfile, ProfileGroup
    from pypto_core.rules.diagnose import GROUP_TABLES

    folders = profile.summary.get("rank_folders") or []
    if len(folders) <= 1:
        return load_saved_profile(profile, dest, columns=EVERY_COLUMN), None
    ranks = [load_saved_profile(profile, dest, folder=folder, tables=GROUP_TABLES, columns=EVERY_COLUMN)
             for folder in folders]
    group = ProfileGroup(profiles=ranks, source=profile.original_filename)
    at = next(i for i, p in enumerate(ranks) if p is group.primary())
    group.profiles[at] = CoreProfile.load(dest / folders[at], columns=EVERY_COLUMN)  # already fetched there
    return group.profiles[at], group


# --- claims, progress, failure ------------------------------------------------------------------------


def _lease() -> datetime:
    return timezone.now() + timedelta(seconds=settings.PYPTO_TASK_LEASE_SECONDS)


def _claim(profile_id: int, statuses: tuple[str, ...], new_status: str) -> bool:
    """Take the profile for one step: one conditional UPDATE, so only one worker wins."""
    now = timezone.now()
    return bool(
        Profile.objects.filter(pk=profile_id, status__in=statuses)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(status=new_status, lease_until=_lease(), error="", updated_at=now)
    )


def _run_for(profile: Profile, kind: str) -> AnalysisRun:
    """The step's run row: a redelivered step reuses the row of the attempt that died."""
    run = profile.runs.filter(kind=kind, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).order_by("-id").first()
    if run is None:
        run = AnalysisRun.objects.create(profile=profile, kind=kind)
    AnalysisRun.objects.filter(pk=run.pk).update(
        status=JobStatus.RUNNING, attempts=F("attempts") + 1, started_at=timezone.now(), error=""
    )
    run.refresh_from_db()
    if run.attempts > 1:
        _log(run, f"attempt {run.attempts}: taking over from an attempt that did not finish")
    return run


def _log(run: AnalysisRun, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    log.info("profile %s %s: %s", run.profile_id, run.kind, line)
    run.log = (run.log + f"[{stamp}] {line}\n")[-100_000:]
    AnalysisRun.objects.filter(pk=run.pk).update(log=run.log)


def _progress(run: AnalysisRun, percent: int, note: str = "") -> None:
    """Write progress (shown live) and renew the lease: a live worker keeps its claim."""
    percent = max(0, min(100, int(percent)))
    Profile.objects.filter(pk=run.profile_id).update(progress=percent, lease_until=_lease())
    AnalysisRun.objects.filter(pk=run.pk).update(progress=percent)
    if note:
        _log(run, note)


def _hold_if_asked(run: AnalysisRun, *, point: str) -> None:
    """Pause while the hold file exists. An empty file holds right after the claim (``upload``, ``rank``);
    a file naming points (``upload``, ``rank``, ``unpacked``: after unpacking) holds only at those."""
    hold = settings.PYPTO_PIPELINE_HOLD_FILE
    if hold and Path(hold).exists():
        try:
            named = set(Path(hold).read_text().split())
        except OSError:
            named = set()
        if (named and point not in named) or (not named and point == "unpacked"):
            return
        _log(run, f"holding while {hold} exists")
        while Path(hold).exists():
            time.sleep(0.2)


def _fail(profile_id: int, run: AnalysisRun | None, message: str) -> None:
    """A final failure: status failed with the reason. The archive stays in storage for a re-run."""
    now = timezone.now()
    Profile.objects.filter(pk=profile_id).update(
        status=ProfileStatus.FAILED, error=message[:4000], lease_until=None, updated_at=now
    )
    if run is not None:
        AnalysisRun.objects.filter(pk=run.pk).update(status=JobStatus.FAILED, error=message[:4000], finished_at=now)
        _log(run, f"failed: {message}")


def _release(profile_id: int, status: str, exc: BaseException | None = None) -> None:
    """Give the claim back before a retry, so the retried message can claim again at once. The reason
    stays on the profile (a database or storage that does not answer) until the retry claims it."""
    reason = f"waiting to retry: {type(exc).__name__}: {exc}"[:4000] if exc is not None else ""
    Profile.objects.filter(pk=profile_id).update(status=status, lease_until=None, error=reason)


def _user_message(exc: InputError, workdir: Path) -> str:
    # Name the file as the user knows it, without the worker's temporary folder.
    return str(exc).replace(f"{workdir}/", "").replace(str(workdir), "")


def _workdir(profile_id: int, step: str) -> Path:
    base = Path(settings.PYPTO_WORK_DIR)
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"p{profile_id}-{step}-", dir=base))


# --- starting the pipeline ----------------------------------------------------------------------------


def pipeline_start(*, profile: Profile) -> None:
    """uploaded -> queued, then enqueue ingest once the row is committed."""
    from analysis import tasks

    updated = Profile.objects.filter(pk=profile.pk, status=ProfileStatus.UPLOADED).update(
        status=ProfileStatus.QUEUED, progress=0
    )
    if updated:
        profile.status = ProfileStatus.QUEUED
        transaction.on_commit(lambda: tasks.ingest.delay(profile.pk))


def pipeline_restart(*, profile: Profile) -> Profile:
    """Queue a finished (failed or ready) profile again from its kept archive."""
    from analysis import tasks
    from django.core.exceptions import ValidationError

    now = timezone.now()
    # Finished, or stuck: a step whose worker's lease ran out, or one no worker took for PYPTO_REQUEUE_AFTER_S
    # (its message was lost). A fanned-out upload waiting for its ranks (parsing, no lease) is not stuck.
    finished = Q(status__in=(ProfileStatus.FAILED, ProfileStatus.READY))
    waited = now - timedelta(seconds=settings.PYPTO_REQUEUE_AFTER_S)
    stuck = Q(status__in=(ProfileStatus.PARSING, ProfileStatus.ANALYZING), lease_until__lt=now) | Q(
        status__in=(ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.ANALYZING),
        lease_until__isnull=True, updated_at__lt=waited)
    with transaction.atomic():
        updated = Profile.objects.filter(finished | stuck, pk=profile.pk).update(
            status=ProfileStatus.QUEUED, progress=0, error="", lease_until=None, updated_at=now)
        if not updated:
            raise ValidationError(_("A worker is working on this profile now; it can be run again once it "
                                    "finishes, or once its claim runs out if that worker stopped."))
        # A fanned-out upload reads every rank again.
        Profile.objects.filter(group_id=profile.pk).update(
            status=ProfileStatus.QUEUED, progress=0, error="", lease_until=None
        )
        transaction.on_commit(lambda: tasks.ingest.delay(profile.pk))
    profile.refresh_from_db()
    return profile


# --- ingest -------------------------------------------------------------------------------------------


def pipeline_ingest(*, profile_id: int) -> None:
    """Unpack safely, read into the canonical tables, save Parquet to storage, then queue diagnose."""
    from analysis import tasks

    if not _claim(profile_id, (ProfileStatus.QUEUED, ProfileStatus.PARSING), ProfileStatus.PARSING):
        profile = Profile.objects.filter(pk=profile_id).first()
        if profile is not None and profile.status == ProfileStatus.ANALYZING and profile.lease_until is None:
            # This message was redelivered after ingest committed but before diagnose was queued.
            transaction.on_commit(lambda: tasks.diagnose.delay(profile_id))
        return  # gone, finished, or held by a live worker
    use_limits(upload_limits())  # every reader below, whatever the wrapper of the upload
    profile = Profile.objects.get(pk=profile_id)
    run = _run_for(profile, AnalysisRun.Kind.INGEST)
    timings: dict[str, float] = {}
    workdir = _workdir(profile_id, "ingest")
    remove_dead_workdirs(profile_id=profile_id, step="ingest", keep=workdir)  # a dead attempt's files
    try:
        _progress(run, 2, f"claimed {profile.original_filename} ({profile.size} bytes)")
        _hold_if_asked(run, point="rank" if profile.group_id is not None else "upload")

        t0 = time.monotonic()
        archive = _fetch_archive(profile, workdir)
        timings["fetch_s"] = round(time.monotonic() - t0, 3)
        _progress(run, 10, "archive fetched, checksum verified")

        t0 = time.monotonic()
        unpacked = workdir / "unpacked"
        files = unpack_upload(archive, unpacked, filename=profile.original_filename, limits=upload_limits())
        timings["unpack_s"] = round(time.monotonic() - t0, 3)
        total = sum(f.size for f in files)
        _progress(run, 30, f"unpacked {len(files)} files, {total} bytes")
        _hold_if_asked(run, point="unpacked")
        if not files:
            raise InputError(profile.original_filename, "the archive contains no files")
        if profile.group_id is None and _fan_out(profile, run, unpacked, workdir):
            return

        t0 = time.monotonic()
        summary = _read_and_store(profile, run, unpacked, files, workdir)
        timings["parse_s"] = round(time.monotonic() - t0, 3)

        with transaction.atomic():
            updated = Profile.objects.filter(pk=profile_id, status=ProfileStatus.PARSING).update(
                status=ProfileStatus.ANALYZING,
                progress=60,
                lease_until=None,
                detected_format=summary.get("format", "unknown"),
                summary=summary,
                parquet_prefix=summary.pop("_parquet_prefix", ""),
            )
            AnalysisRun.objects.filter(pk=run.pk).update(
                status=JobStatus.DONE, progress=100, finished_at=timezone.now(), timings=timings
            )
            if updated:
                transaction.on_commit(lambda: tasks.diagnose.delay(profile_id))
            if updated and profile.group_id is not None:
                _rank_finished(profile.group_id)
        _log(run, f"done: format {summary.get('format')}, timings {timings}")
    except InputError as exc:
        _fail(profile_id, run, _user_message(exc, workdir))
        if profile.group_id is not None:
            with transaction.atomic():
                _rank_finished(profile.group_id)
    except TRANSIENT_ERRORS as exc:
        _release(profile_id, ProfileStatus.QUEUED, exc)
        raise
    except Exception as exc:  # a bug in a reader must not leave the profile "parsing" for ever
        full = storage_full_reason(exc)
        if full:
            _fail(profile_id, run, f"{profile.original_filename}: {full} while saving the parsed tables; the "
                                   "uploaded archive is kept: run the analysis again once space is freed")
        else:
            log.exception("ingest of profile %s failed", profile_id)
            detail = str(exc).replace(f"{workdir}/unpacked/", "").replace(str(workdir), "")
            _fail(profile_id, run, f"{profile.original_filename}: internal error while reading "
                                   f"({type(exc).__name__}: {detail})")
        if profile.group_id is not None:
            with transaction.atomic():
                _rank_finished(profile.group_id)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read_and_store(profile: Profile, run: AnalysisRun, unpacked: Path, files: list[Any], workdir: Path) -> dict[str, Any]:
    """Call the readers if they exist; otherwise detect the format by names and record sizes."""
    biggest = sorted(files, key=lambda f: -f.size)[:20]
    summary: dict[str, Any] = {
        "files": len(files),
        "unpacked_bytes": sum(f.size for f in files),
        "largest_files": [f.to_dict() for f in biggest],
    }
    from pypto_core.profile import save_meta

    write_profiles = engine_function("pypto_core.formats", "write_profiles")
    saved_summary = engine_function("pypto_core.profile", "saved_summary")
    if write_profiles is None or saved_summary is None:
        summary["format"] = detect_format_by_names([f.name for f in files])
        summary["warnings"] = ["the profile readers are not installed yet: only the format and sizes are known"]
        _progress(run, 55, f"readers not installed; format by file names: {summary['format']}")
        return summary

    # A single file is read as itself; an archive as its folder (the reader finds the ranks). Each rank is
    # streamed into its Parquet folder in turn: memory is bounded by one rank's reader, not the upload.
    single = profile.upload_kind in ("json", "json.gz", "csv", "db")
    target = unpacked / files[0].name if single else unpacked
    local = workdir / "parquet"
    _progress(run, 35, "reading with pypto_core.formats.write_profiles")
    try:
        saved = write_profiles(target, local)
    except InputError as exc:
        inside = f"{unpacked}/"
        raise InputError(exc.path.replace(inside, ""), exc.reason.replace(inside, "")) from exc
    for name, meta in saved.ranks:  # sources as the user knows them, never the worker's folder
        _name_sources(meta, unpacked, profile.original_filename, single)
        save_meta(local / name, meta)
    saved.warnings = [_without_folder(w, unpacked, profile.original_filename, single) for w in saved.warnings]
    rank_folders = [name for name, _ in saved.ranks]
    _progress(run, 50, f"read {len(rank_folders)} rank(s) into Parquet")
    primary_summary = saved_summary(local / saved.primary()[0])
    group_warnings = list(saved.warnings)
    # A fresh prefix per attempt: a redelivered ingest never mixes its files with a dead attempt's.
    prefix = f"projects/{profile.project_id}/parquet/{profile.pk}/{run.pk}-{run.attempts}"
    storage_delete_prefix(prefix)
    _store_folder(local, prefix)
    summary.update(primary_summary)
    summary["ranks"] = len(rank_folders)
    summary["rank_folders"] = rank_folders
    summary["warnings"] = group_warnings + list(primary_summary["warnings"])
    summary["_parquet_prefix"] = prefix
    if profile.parquet_prefix and profile.parquet_prefix != prefix:
        storage_delete_prefix(profile.parquet_prefix)  # a previous run's tables
    return summary


def _without_folder(text: str, unpacked: Path, filename: str, single: bool) -> str:
    """``text`` with the worker's folder replaced by the upload's name (``upload.zip!member``)."""
    inside = f"{unpacked}/"
    text = text.replace(inside, "" if single else f"{filename}!")
    return text.replace(str(unpacked), filename)


def _name_sources(meta: Any, unpacked: Path, filename: str, single: bool) -> None:
    meta.source = _without_folder(meta.source, unpacked, filename, single)
    meta.source_files = [_without_folder(s, unpacked, filename, single) for s in meta.source_files]
    meta.warnings = [_without_folder(w, unpacked, filename, single) for w in meta.warnings]


# --- multi-rank fan-out -------------------------------------------------------------------------------


def _rank_paths(profile: Profile, unpacked: Path) -> list[Path]:
    """The rank folders (or files) of a multi-rank upload, when it has at least PYPTO_FANOUT_MIN_RANKS."""
    detect = engine_function("pypto_core.formats.detect", "detect")
    if detect is None or profile.upload_kind not in ("zip", "tar", "tar.gz"):
        return []
    try:
        found = detect(unpacked)
    except InputError:
        return []  # the ordinary read names the problem
    if found.kind != "group":
        return []
    paths = sorted({Path(c.path).resolve() for c in found.children})
    root = unpacked.resolve()
    # Only disjoint parts of the archive are split; anything nested or the root itself is read whole.
    if root in paths or any(a != b and b.is_relative_to(a) for a in paths for b in paths):
        return []
    return paths if len(paths) >= max(2, settings.PYPTO_FANOUT_MIN_RANKS) else []


def _fan_out(profile: Profile, run: AnalysisRun, unpacked: Path, workdir: Path) -> bool:
    """Split a multi-rank upload: one child profile per rank (its own small tar in storage), one ingest
    task per rank; the last rank to finish starts the cluster step (``_rank_finished``). A redelivered
    fan-out reuses the children it already made (keyed by file name) and queues only unfinished ranks.
    """
    import tarfile

    from analysis import tasks

    paths = _rank_paths(profile, unpacked)
    if not paths:
        return False
    _progress(run, 32, f"{len(paths)} ranks: one ingest task per rank")
    children = {c.original_filename: c for c in profile.ranks.all()}
    for i, path in enumerate(paths):
        rel = path.relative_to(unpacked.resolve()).as_posix()
        filename = f"{i:04d}-{rel.replace('/', '_')}.tar"[:200]
        child = children.get(filename)
        if child is not None and child.archive:
            continue
        tar_path = workdir / filename
        with tarfile.open(tar_path, "w") as tf:
            tf.add(path, arcname=rel)
        with open(tar_path, "rb") as fh:
            digest = hashlib.sha256()
            while block := fh.read(_COPY_BLOCK):
                digest.update(block)
            fh.seek(0)
            child = child or Profile(
                project_id=profile.project_id, group=profile, rank=i, name=f"{profile.name} · {rel}"[:200],
                sku=profile.sku, tags=profile.tags, original_filename=filename, upload_kind="tar",
                created_by_id=profile.created_by_id, status=ProfileStatus.QUEUED,
            )
            child.size = tar_path.stat().st_size
            child.sha256 = digest.hexdigest()
            child.archive.save(filename, File(fh, name=filename), save=False)
        child.save()
        children[filename] = child
        _progress(run, 32, f"rank archive {filename} stored")  # renews the lease while splitting
    with transaction.atomic():
        Profile.objects.filter(pk=profile.pk).update(
            progress=35, lease_until=None, summary={"ranks": len(paths), "fanout": True, "files": len(paths)}
        )
        AnalysisRun.objects.filter(pk=run.pk).update(
            status=JobStatus.DONE, progress=100, finished_at=timezone.now(), timings={"fanout_ranks": len(paths)}
        )
        pending = [c.pk for c in children.values() if c.status in (ProfileStatus.QUEUED, ProfileStatus.PARSING)]
        transaction.on_commit(lambda: [tasks.ingest.delay(pk) for pk in pending])
        if not pending:
            _rank_finished(profile.pk)
    _log(run, f"fanned out to {len(paths)} ranks ({len(pending)} queued)")
    return True


def _rank_finished(group_id: int) -> None:
    """Called in the transaction of a rank's last write. When no rank is left to read, one conditional
    UPDATE moves the upload to the cluster step, so exactly one finisher queues it."""
    from analysis import tasks

    ranks = list(Profile.objects.filter(group_id=group_id).order_by("rank", "id"))
    read = [r for r in ranks if r.parquet_prefix and r.status in (ProfileStatus.ANALYZING, ProfileStatus.READY)]
    waiting = [r for r in ranks if r.status in (ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.PARSING)]
    if waiting:
        share = (len(ranks) - len(waiting)) / max(len(ranks), 1)
        Profile.objects.filter(pk=group_id, status=ProfileStatus.PARSING).update(progress=35 + int(25 * share))
        return
    failed = [r for r in ranks if r.status == ProfileStatus.FAILED]
    if not read:
        reasons = "; ".join(f"{r.name}: {r.error}" for r in failed)[:3900]
        Profile.objects.filter(pk=group_id, status=ProfileStatus.PARSING).update(
            status=ProfileStatus.FAILED, error=f"no rank could be read ({reasons})", lease_until=None
        )
        return
    folders, sources = [], {}
    for r in read:
        for folder in r.summary.get("rank_folders") or ["rank_0"]:
            name = folder if folder not in sources else f"{folder}_{r.pk}"
            folders.append(name)
            sources[name] = f"{r.parquet_prefix}/{folder}"
    primary = read[0]
    summary = {k: v for k, v in primary.summary.items() if k not in ("rank_folders", "report", "finding_count")}
    summary.update({
        "fanout": True, "ranks": len(folders), "rank_folders": folders, "rank_sources": sources,
        "rank_profiles": [{"id": r.pk, "rank": r.rank, "name": r.name, "status": r.status} for r in ranks],
        "files": sum(int(r.summary.get("files", 0) or 0) for r in read),
        "unpacked_bytes": sum(int(r.summary.get("unpacked_bytes", 0) or 0) for r in read),
        "warnings": list(primary.summary.get("warnings", []))
        + [f"{r.name} was not read: {r.error}" for r in failed],
    })
    group = Profile.objects.get(pk=group_id)
    moved = Profile.objects.filter(pk=group_id, status=ProfileStatus.PARSING).update(
        status=ProfileStatus.ANALYZING, progress=60, lease_until=None, summary=summary,
        detected_format=primary.detected_format,
        # The upload's own folder, for its page data and timeline index (the tables stay with the ranks).
        parquet_prefix=f"projects/{group.project_id}/parquet/{group_id}/cluster-{uuid.uuid4().hex[:12]}",
    )
    if moved:
        transaction.on_commit(lambda: tasks.diagnose.delay(group_id))


# --- diagnose -----------------------------------------------------------------------------------------


def pipeline_diagnose(*, profile_id: int) -> None:
    """Rules and remedies on the saved tables; findings and artifacts replace the previous ones at once."""
    if not _claim(profile_id, (ProfileStatus.ANALYZING,), ProfileStatus.ANALYZING):
        return
    profile = Profile.objects.get(pk=profile_id)
    run = _run_for(profile, AnalysisRun.Kind.DIAGNOSE)
    workdir = _workdir(profile_id, "diagnose")
    remove_dead_workdirs(profile_id=profile_id, step="diagnose", keep=workdir)
    timings: dict[str, float] = {}
    try:
        _progress(run, 65, "diagnosing")
        diagnose = engine_function("pypto_core.rules", "diagnose")
        report_dict: dict[str, Any] | None = None
        findings: list[dict[str, Any]] = []
        artifacts: list[Any] = []  # pypto_core.remedies.Artifact
        if diagnose is None or not profile.parquet_prefix:
            why = "the rules are not installed yet" if diagnose is None else "no parsed tables"
            _log(run, f"skipping diagnosis: {why}")
        else:
            t0 = time.monotonic()
            core, group = _load_for_diagnosis(profile, workdir)
            timings["load_s"] = round(time.monotonic() - t0, 3)
            t0 = time.monotonic()
            report = diagnose(core, sku=profile.sku or None, group=group)
            timings["rules_s"] = round(time.monotonic() - t0, 3)
            report_dict = report.to_dict() if hasattr(report, "to_dict") else dict(report)
            findings = list(report_dict.get("findings", []))
            _progress(run, 80, f"{len(findings)} findings")
            t0 = time.monotonic()
            from analysis.artifact_services import artifact_profile_meta, model_source_of, remedies_generate

            model_source, model_filename = model_source_of(profile)
            artifacts = remedies_generate(report=report, profile_meta=artifact_profile_meta(profile, core.meta),
                                          model_source=model_source, model_filename=model_filename)
            timings["remedies_s"] = round(time.monotonic() - t0, 3)
            _progress(run, 90, f"{len(artifacts)} artifacts")
            try:  # page data and the timeline index (analysis/pagedata.py); never at the cost of the findings
                from analysis.pagedata import views_build

                timings.update(views_build(profile=profile, core=core, workdir=workdir))
                _progress(run, 95, "page data and timeline index built")
            except Exception as exc:
                log.exception("views of profile %s not built", profile_id)
                _log(run, f"views not built ({type(exc).__name__}: {exc}); they are built on first view")

        with transaction.atomic():
            # Replace, never append: a step that runs twice leaves one set of findings. A finding found again
            # keeps its row (its id is stable across re-runs: verifications and the fix ledger point at it).
            rows = finding_rows_replace(profile=profile, run=run, findings=findings,
                                        schema_version=(report_dict or {}).get("schema_version", 1))
            by_rule = {row.rule: row for row in rows}
            from analysis.artifact_services import artifact_set_store

            # The whole set is the profile's next artifact version; older versions are kept.
            artifact_set_store(profile=profile, run=run, artifacts=artifacts, findings_by_rule=by_rule)
            summary = dict(profile.summary)
            if report_dict is not None:
                summary["report"] = {k: v for k, v in report_dict.items() if k != "findings"}
                summary["finding_count"] = len(findings)
            became_ready = Profile.objects.filter(pk=profile_id, status=ProfileStatus.ANALYZING).update(
                status=ProfileStatus.READY, progress=100, lease_until=None, summary=summary
            )
            if became_ready:  # regression tracking: compare with the project's pinned baseline, after commit
                from analysis.regressions import comparison_auto_queue
                from analysis.verification import verification_compare_queue

                comparison_auto_queue(profile_id=profile_id)
                verification_compare_queue(profile_id=profile_id)  # a verification job's run: vs the original
            AnalysisRun.objects.filter(pk=run.pk).update(
                status=JobStatus.DONE, progress=100, finished_at=timezone.now(), timings=timings
            )
        _log(run, f"done, timings {timings}")
    except InputError as exc:
        _fail(profile_id, run, _user_message(exc, workdir))
    except TRANSIENT_ERRORS as exc:
        _release(profile_id, ProfileStatus.ANALYZING, exc)
        raise
    except Exception as exc:
        log.exception("diagnosis of profile %s failed", profile_id)
        detail = str(exc).replace(f"{workdir}/", "").replace(str(workdir), "")
        _fail(profile_id, run,
              f"{profile.name}: internal error while diagnosing ({type(exc).__name__}: {detail})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def finding_rows_replace(*, profile: Profile, run: AnalysisRun, findings: list[dict[str, Any]],
                         schema_version: int) -> list[Finding]:
    """The profile's findings become ``findings``: a rule found again updates its row in place (one row per
    rule and profile), rows of rules no longer found go, new rules get new rows. Call in a transaction."""
    kept = {row.rule: row for row in profile.findings.select_for_update().order_by("id")}
    rows: list[Finding] = []
    for i, f in enumerate(findings):
        fields = {"run": run, "rule": str(f.get("rule", ""))[:64], "severity": str(f.get("severity", ""))[:8],
                  "title": str(f.get("title", ""))[:300], "order": i, "data": f, "schema_version": schema_version}
        row = kept.pop(fields["rule"], None)
        if row is None:
            rows.append(Finding.objects.create(profile=profile, **fields))
            continue
        for name, value in fields.items():
            setattr(row, name, value)
        row.save(update_fields=list(fields))
        rows.append(row)
    Finding.objects.filter(pk__in=[row.pk for row in kept.values()]).delete()
    return rows


# --- comparisons --------------------------------------------------------------------------------------


WHAT_IF_MAX_KERNELS = 2_000_000  # a replay in a request; larger runs: pypto analyze --what-if [INFERRED]


def profile_what_if(*, profile: Profile, rules: list[str]) -> dict[str, Any]:
    """The run replayed with the listed findings fixed together (pypto_core.replay), for the profile page's
    "replay the ticked findings"; the same numbers as ``pypto analyze --what-if``."""
    from pypto_core.rules.registry import discover

    unknown = sorted(set(rules) - set(discover()))
    if not rules or unknown:
        raise InputError(profile.name, _("unknown rules: %(rules)s") % {"rules": ", ".join(unknown) or "-"})
    if int(profile.summary.get("kernel_count") or 0) > WHAT_IF_MAX_KERNELS:
        raise InputError(profile.name, _("too many tasks to replay here (more than %(n)s): use pypto analyze "
                                         "--what-if") % {"n": WHAT_IF_MAX_KERNELS})
    diagnose = engine_function("pypto_core.rules", "diagnose")
    if diagnose is None:
        raise InputError(profile.name, _("the rules are not installed"))
    workdir = _workdir(profile.pk, "what-if")
    try:
        core, group = _load_for_diagnosis(profile, workdir)
        report = diagnose(core, sku=profile.sku or None, group=group, what_if=list(rules))
        return dict(report.what_if or {})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def comparison_create(*, user: Any, base: Profile, candidate: Profile) -> Comparison:
    from django.core.exceptions import ValidationError

    from analysis import tasks

    if base.project_id != candidate.project_id:
        raise ValidationError(_("Both profiles must belong to the same project."))
    if base.pk == candidate.pk:
        raise ValidationError(_("Compare two different profiles."))
    with transaction.atomic():
        comparison = Comparison.objects.create(
            project_id=base.project_id, base=base, candidate=candidate, created_by=user
        )
        transaction.on_commit(lambda: tasks.compare.delay(comparison.pk))
    return comparison


class ProfilesNotReady(Exception):
    """A comparison's profiles are still in the pipeline: the task retries later instead of failing."""


_IN_PIPELINE = (ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.PARSING, ProfileStatus.ANALYZING)


def comparison_run(*, comparison_id: int) -> None:
    pending = Comparison.objects.filter(pk=comparison_id, status=JobStatus.QUEUED).filter(
        models.Q(base__status__in=_IN_PIPELINE) | models.Q(candidate__status__in=_IN_PIPELINE)).exists()
    if pending:  # e.g. a comparison made right after both uploads (the demo, CI scripts)
        raise ProfilesNotReady(comparison_id)
    claimed = Comparison.objects.filter(pk=comparison_id, status=JobStatus.QUEUED).update(status=JobStatus.RUNNING)
    if not claimed:
        return
    comparison = Comparison.objects.select_related("base", "candidate").get(pk=comparison_id)
    workdir = _workdir(comparison.base_id, "compare")
    try:
        compare = _compare_function()
        if compare is None:
            raise InputError("pypto_core.compare", "the comparison engine is not installed yet")
        for p in (comparison.base, comparison.candidate):
            if p.status != ProfileStatus.READY:
                raise InputError(p.name, f"profile is {p.status}, not ready")
        # only the columns a comparison reads (api_calls, the largest of the other tables, never is)
        from pypto_core.compare import COMPARE_COLUMNS as columns
        base = load_saved_profile(comparison.base, workdir / "base", columns=columns)
        new = load_saved_profile(comparison.candidate, workdir / "new", columns=columns)
        # The findings' status (fixed/persisting/new) comes from the stored findings of each profile's latest
        # diagnosis: no second diagnosis here. The metrics (per-token latency...) are measured on the tables.
        same_sku = comparison.base.sku if comparison.base.sku == comparison.candidate.sku else ""
        result = compare(base, new, base_report=_stored_report(comparison.base),
                         candidate_report=_stored_report(comparison.candidate), sku=same_sku or None)
        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        from analysis.regressions import comparison_regression_lines

        lines, threshold = comparison_regression_lines(comparison=comparison, result=data)
        Comparison.objects.filter(pk=comparison_id).update(
            status=JobStatus.DONE, result=data, error="", finished_at=timezone.now(),
            regression=lines, is_regression=bool(lines), threshold_pct=threshold,
        )
        from analysis.verification import verdicts_record

        verdicts_record(comparison_id=comparison_id)  # a verification job's comparison: a verdict per finding
    except TRANSIENT_ERRORS:
        Comparison.objects.filter(pk=comparison_id).update(status=JobStatus.QUEUED)
        raise
    except Exception as exc:
        if not isinstance(exc, InputError):
            log.exception("comparison %s failed", comparison_id)
        message = str(exc) if isinstance(exc, InputError) else f"internal error ({type(exc).__name__}: {exc})"
        Comparison.objects.filter(pk=comparison_id).update(
            status=JobStatus.FAILED, error=message, finished_at=timezone.now()
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stored_report(profile: Profile) -> dict[str, Any] | None:
    """The ``analyze`` JSON of a profile from its stored Finding rows; None when it was never diagnosed."""
    from analysis.selectors import findings_report

    if "report" not in (profile.summary or {}) and not profile.findings.exists():
        return None
    return findings_report(profile=profile)


def _compare_function() -> Callable[..., Any] | None:
    """``fn(base, new, *, base_report, candidate_report, sku)`` over ``pypto_core.compare.ProfileComparer``."""
    comparer = engine_function("pypto_core.compare", "ProfileComparer")
    if comparer is None:
        return None

    def run(base: Any, new: Any, *, base_report: Any = None, candidate_report: Any = None,
            sku: str | None = None) -> Any:
        return comparer(base, new, sku=sku, base_report=base_report, candidate_report=candidate_report).compare()

    return run
