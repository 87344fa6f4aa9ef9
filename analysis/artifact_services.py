"""Remedy artifacts: made by the engine, stored per run as one versioned set, made again when a model file comes.

Every run that makes remedies (a diagnosis, or a remedies run after the user attached a model file) stores its
whole set as the profile's next version; older versions stay listed under ``?all=1`` and downloadable. The
version is allocated under a lock on the profile row, so a diagnosis and a remedies run never take one twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Iterable

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from analysis.models import AnalysisRun, Artifact, Finding, JobStatus
from analysis.services import TRANSIENT_ERRORS
from profiles.models import Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.remedies import generate_artifacts
from pypto_core.remedies.context import profile_meta_dict
from pypto_core.remedies.artifact import KINDS, Artifact as CoreArtifact
from pypto_core.remedies.bundle import bundle_zip
from pypto_core.rules.finding import Finding as CoreFinding

log = logging.getLogger(__name__)

# A model file is one Python module (transformers' modeling_llama.py is about 40 KB; the largest modeling
# files are a few hundred KB); the remedies read at most this much of it.
MODEL_FILE_MAX_BYTES = 4 * 1024 * 1024


# --- making and storing sets ----------------------------------------------------------------------------


def remedies_generate(*, report: Any, profile_meta: Any, model_source: str | None,
                      model_filename: str | None) -> list[CoreArtifact]:
    """The engine's artifacts for a report (or findings), with diffs against the model file when given."""
    return list(generate_artifacts(report, profile_meta=profile_meta, model_source=model_source,
                                   model_filename=model_filename))


def model_source_of(profile: Profile) -> tuple[str | None, str | None]:
    """The attached model file as text and its base name, or (None, None)."""
    if not profile.model_file:
        return None, None
    with profile.model_file.open("rb") as fh:
        raw = fh.read(MODEL_FILE_MAX_BYTES + 1)
    try:
        text = raw[:MODEL_FILE_MAX_BYTES].decode("utf-8")
    except UnicodeDecodeError:
        return None, None
    return text, profile.model_file.name.rsplit("/", 1)[-1]


def artifact_set_store(*, profile: Profile, run: AnalysisRun, artifacts: Iterable[CoreArtifact],
                       findings_by_rule: dict[str, Finding] | None = None) -> int:
    """Store ``artifacts`` as the profile's next version, made by ``run``; returns the version.

    Call inside a transaction. A run that already stored a set (a redelivered task) replaces its own set
    and keeps its version, so running twice leaves one set.
    """
    findings_by_rule = findings_by_rule or {}
    Profile.objects.select_for_update().filter(pk=profile.pk).first()  # one version allocation at a time
    run.refresh_from_db(fields=["artifact_version"])
    version = run.artifact_version
    if version is None:
        top_artifact = profile.artifacts.aggregate(v=Max("version"))["v"] or 0
        top_run = profile.runs.aggregate(v=Max("artifact_version"))["v"] or 0
        version = max(top_artifact, top_run) + 1
    else:
        old = list(profile.artifacts.filter(version=version))
        names = [a.file.name for a in old]
        Artifact.objects.filter(pk__in=[a.pk for a in old]).delete()
        transaction.on_commit(lambda: [default_storage.delete(n) for n in names])
    for item in artifacts:
        content = item.content if isinstance(item.content, bytes) else str(item.content).encode("utf-8")
        row = Artifact(
            profile=profile, run=run, finding=findings_by_rule.get(item.rule), rule=str(item.rule)[:64],
            header=item.header or {}, name=str(item.name)[:200], kind=str(item.kind)[:32], size=len(content),
            sha256=hashlib.sha256(content).hexdigest(), version=version,
        )
        row.file.save(row.name, ContentFile(content), save=False)
        row.save()
    AnalysisRun.objects.filter(pk=run.pk).update(artifact_version=version)
    run.artifact_version = version
    return version


# --- reading sets ----------------------------------------------------------------------------------------


def artifact_latest_version(*, profile: Profile) -> int | None:
    """The version of the last stored set (which may be empty), or None when no set was ever stored."""
    top_run = profile.runs.filter(artifact_version__isnull=False).aggregate(v=Max("artifact_version"))["v"]
    top_artifact = profile.artifacts.aggregate(v=Max("version"))["v"]
    versions = [v for v in (top_run, top_artifact) if v is not None]
    return max(versions) if versions else None


def artifact_content(artifact: Artifact) -> bytes:
    with artifact.file.open("rb") as fh:
        return fh.read()


def artifact_as_core(artifact: Artifact) -> CoreArtifact:
    kind = artifact.kind if artifact.kind in KINDS else "config"
    return CoreArtifact(name=artifact.name, kind=kind, content=artifact_content(artifact), rule=artifact.rule,
                        header=artifact.header or {})


def artifact_set_zip(*, artifacts: Iterable[Artifact]) -> bytes:
    """One zip of a set (``bundle_zip``: the files plus MANIFEST.json)."""
    return bundle_zip([artifact_as_core(a) for a in artifacts])


# --- remedies made again for the latest analysis (the user attached a model file) ------------------------


class ProfileBusy(Exception):
    """The profile is in the pipeline: its diagnosis will read the model file; retry after it finished."""


def remedies_start(*, profile: Profile) -> AnalysisRun | None:
    """Queue a remedies run for the latest analysis, once the current transaction commits.

    A profile that failed has no findings to make remedies for (a re-run reads the model file itself).
    """
    from analysis import tasks

    if profile.status == ProfileStatus.FAILED:
        return None
    run = AnalysisRun.objects.create(profile=profile, kind=AnalysisRun.Kind.REMEDIES)
    transaction.on_commit(lambda: tasks.remedies.delay(run.pk))
    return run


def remedies_run(*, run_id: int) -> None:
    """Make the remedies again from the stored findings with the attached model file; a new version."""
    run = AnalysisRun.objects.filter(pk=run_id, kind=AnalysisRun.Kind.REMEDIES).select_related("profile").first()
    if run is None or run.status in (JobStatus.DONE, JobStatus.FAILED):
        return
    profile = run.profile
    if profile.status not in (ProfileStatus.READY, ProfileStatus.FAILED):
        raise ProfileBusy(profile.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(status=JobStatus.RUNNING, started_at=timezone.now(),
                                                 attempts=run.attempts + 1)
    try:
        if profile.status == ProfileStatus.FAILED:
            raise InputError(profile.name, "the profile failed; run it again to make its remedies")
        findings = list(profile.findings.order_by("order", "id"))
        core_findings = [_core_finding(f.data) for f in findings]
        model_source, model_filename = model_source_of(profile)
        meta = artifact_profile_meta(profile, _profile_meta(profile))
        artifacts = remedies_generate(report=core_findings, profile_meta=meta,
                                      model_source=model_source, model_filename=model_filename)
        with transaction.atomic():
            locked = AnalysisRun.objects.select_for_update().get(pk=run.pk)
            if locked.status == JobStatus.DONE:
                return  # another delivery finished first
            version = artifact_set_store(profile=profile, run=locked, artifacts=artifacts,
                                         findings_by_rule={f.rule: f for f in findings})
            AnalysisRun.objects.filter(pk=run.pk).update(
                status=JobStatus.DONE, progress=100, finished_at=timezone.now(),
                log=run.log + f"version {version}: {len(artifacts)} artifacts"
                + (f", diffs against {model_filename}\n" if model_filename else "\n"),
            )
    except InputError as exc:
        AnalysisRun.objects.filter(pk=run.pk).update(status=JobStatus.FAILED, error=str(exc)[:4000],
                                                     finished_at=timezone.now())
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:
        log.exception("remedies run %s failed", run_id)
        AnalysisRun.objects.filter(pk=run.pk).update(
            status=JobStatus.FAILED, finished_at=timezone.now(),
            error=f"{profile.name}: internal error while making remedies ({type(exc).__name__}: {exc})"[:4000])


def artifact_profile_meta(profile: Profile, meta: Any) -> dict[str, Any]:
    """What the artifacts' headers say of the profile: its id and name on the dashboard (never the storage
    path it was read from) beside its format, device and versions."""
    out = profile_meta_dict(meta)
    out.pop("source", None)
    return {**out, "profile_id": profile.pk, "profile_name": profile.name}


def _core_finding(data: dict[str, Any]) -> CoreFinding:
    known = set(CoreFinding.__dataclass_fields__)
    return CoreFinding(**{k: v for k, v in data.items() if k in known})


def _profile_meta(profile: Profile) -> dict[str, Any]:
    """The primary rank's saved metadata (what the diagnosis gave the remedies), else the report's block."""
    folders = profile.summary.get("rank_folders") or ["rank_0"]
    source = (profile.summary.get("rank_sources") or {}).get(folders[0]) or f"{profile.parquet_prefix}/{folders[0]}"
    if profile.parquet_prefix:
        try:
            with default_storage.open(f"{source}/profile.json", "rb") as fh:
                return dict(json.loads(fh.read()).get("meta") or {})
        except (FileNotFoundError, OSError, ValueError):
            log.warning("profile %s: no saved profile.json under %s", profile.pk, source)
    return dict((profile.summary.get("report") or {}).get("profile") or {})
