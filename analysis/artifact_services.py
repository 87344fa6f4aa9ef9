"""Remedy artifacts: made by the engine, stored per run as one versioned set, made again when a model file
comes.

Every run that makes remedies (a diagnosis, or a remedies run after the user attached a model file) stores its
whole set as the profile's next version; older versions stay listed under ``?all=1`` and downloadable. The
version is allocated under a lock on the profile row, so a diagnosis and a remedies run never take one twice.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.translation import gettext_noop

from analysis.models import AnalysisRun, Artifact, Finding, JobStatus
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.pipeline.steps import Step, run_log, run_step
from analysis.storage import ProfileStore
from analysis.summary import summary_of
from analysis.texts import error_fields
from profiles.models import FINISHED, MODEL_FILE_MAX_BYTES, Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.i18n import Text, msg
from pypto_core.profile import ProfileMeta
from pypto_core.remedies import generate_artifacts
from pypto_core.remedies.artifact import KINDS
from pypto_core.remedies.artifact import Artifact as CoreArtifact
from pypto_core.remedies.bundle import bundle_zip
from pypto_core.remedies.context import profile_meta_dict
from pypto_core.rules import Report
from pypto_core.rules.finding import Finding as CoreFinding

log = logging.getLogger(__name__)


# --- making and storing sets ----------------------------------------------------------------------------


def remedies_generate(*, report: Report | list[CoreFinding], profile_meta: dict[str, Any],
                      model_source: str | None, model_filename: str | None) -> list[CoreArtifact]:
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
    return text, (profile.model_file.name or "").rsplit("/", 1)[-1]


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
        names = [a.file.name for a in old if a.file.name]
        Artifact.objects.filter(pk__in=[a.pk for a in old]).delete()

        def remove_files() -> None:
            for name in names:
                default_storage.delete(name)

        transaction.on_commit(remove_files)
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
    if profile.status == ProfileStatus.FAILED:
        return None
    run = AnalysisRun.objects.create(profile=profile, kind=AnalysisRun.Kind.REMEDIES)
    enqueue_on_commit(TaskName.REMEDIES, run.pk)
    return run


def remedies_run(*, run_id: int) -> None:
    """Make the remedies again from the stored findings with the attached model file; a new version."""
    run_step(RemediesStep(run_id))


class RemediesStep(Step):
    """The claim is the run row (no lease: a redelivered run takes over, and the set is stored once, under a
    lock on the run); the profile must have left the pipeline first (``ProfileBusy``: the task retries)."""

    kind = "remedies"
    internal_error_reason = gettext_noop(
        "{subject}: internal error while making remedies ({error}: {detail})")
    run: AnalysisRun
    profile: Profile

    def __init__(self, run_id: int) -> None:
        super().__init__()
        self.run_id = run_id

    @property
    def owner_id(self) -> int:
        return self.profile.pk

    def subject(self) -> str:
        return self.profile.name

    def claim(self) -> bool:
        run = (AnalysisRun.objects.filter(pk=self.run_id, kind=AnalysisRun.Kind.REMEDIES)
               .select_related("profile").first())
        if run is None or run.status in (JobStatus.DONE, JobStatus.FAILED):
            return False
        if run.profile.status not in FINISHED:
            raise ProfileBusy(run.profile_id)
        open_run = AnalysisRun.objects.filter(pk=run.pk, status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
        claimed = open_run.update(status=JobStatus.RUNNING, started_at=timezone.now(),
                                  attempts=F("attempts") + 1)
        if not claimed:
            return False
        run.refresh_from_db()
        self.run, self.profile = run, run.profile
        return True

    def work(self, workdir: Path) -> None:
        profile, run = self.profile, self.run
        if profile.status == ProfileStatus.FAILED:
            raise InputError(profile.name, msg(gettext_noop("the profile failed; run it again to make its "
                                                            "remedies")))
        findings = list(profile.findings.order_by("order", "id"))
        model_source, model_filename = model_source_of(profile)
        with self.timed("remedies_s"):
            artifacts = remedies_generate(report=[_core_finding(f.data) for f in findings],
                                          profile_meta=artifact_profile_meta(profile, _profile_meta(profile)),
                                          model_source=model_source, model_filename=model_filename)
        with transaction.atomic():
            locked = AnalysisRun.objects.select_for_update().get(pk=run.pk)
            if locked.status == JobStatus.DONE:
                return  # another delivery finished first
            version = artifact_set_store(profile=profile, run=locked, artifacts=artifacts,
                                         findings_by_rule={f.rule: f for f in findings})
            AnalysisRun.objects.filter(pk=run.pk).update(
                status=JobStatus.DONE, progress=100, finished_at=timezone.now(), timings=self.timings)
            made = (msg(gettext_noop("version {version}: {n} artifacts, diffs against {file}"),
                        version=version, n=len(artifacts), file=model_filename) if model_filename
                    else msg(gettext_noop("version {version}: {n} artifacts"), version=version,
                             n=len(artifacts)))
            run_log(locked, made)

    def fail(self, reason: Text) -> None:
        AnalysisRun.objects.filter(pk=self.run.pk).update(status=JobStatus.FAILED, finished_at=timezone.now(),
                                                          **error_fields(reason))

    def release(self, exc: BaseException) -> None:
        """Nothing to give back: the retry claims the run row again (a claim takes a running run too)."""


def artifact_profile_meta(profile: Profile, meta: ProfileMeta | dict[str, Any]) -> dict[str, Any]:
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
    meta = ProfileStore(profile).rank_meta()
    if meta is not None:
        return meta
    if profile.parquet_prefix:
        log.warning("profile %s: no saved profile.json for its primary rank", profile.pk)
    return summary_of(profile).report_profile
