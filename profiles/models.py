"""Projects, their members and invitations, uploaded profiles and resumable upload sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    OWNER = "owner", _("Owner")
    MAINTAINER = "maintainer", _("Maintainer")
    VIEWER = "viewer", _("Viewer")


# Roles that may change a project's data (upload, delete, re-run, compare). Viewers only read.
WRITE_ROLES = (Role.OWNER, Role.MAINTAINER)


class Project(models.Model):
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Regression tracking (issue 8): every new ready profile is compared with the pinned baseline, and a
    # headline metric worse by more than the threshold (and outside the noise) flags a regression.
    baseline = models.ForeignKey(
        "Profile", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    regression_threshold_pct = models.FloatField(default=5.0)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]
        ordering = ["project_id", "user__username"]

    @property
    def can_write(self) -> bool:
        return self.role in WRITE_ROLES


class Invitation(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        ACCEPTED = "accepted", _("Accepted")
        DECLINED = "declined", _("Declined")

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "user"],
                condition=models.Q(status="pending"),
                name="one_pending_invitation_per_user",
            )
        ]
        ordering = ["-created_at"]


class ProfileStatus(models.TextChoices):
    UPLOADED = "uploaded", _("Uploaded")
    QUEUED = "queued", _("Queued")
    PARSING = "parsing", _("Parsing")
    ANALYZING = "analyzing", _("Analyzing")
    READY = "ready", _("Ready")
    FAILED = "failed", _("Failed")


# --- the state machine of a profile's analysis ------------------------------------------------------------
# status -> the statuses it may move to. A step holds PARSING or ANALYZING under a lease (``lease_until``):
# moving to the same status is how a step claims it again after a dead worker's lease ran out, or gives it
# back for a retry. ``ProfileQuerySet.transition`` is the only way a status changes.
TRANSITIONS: dict[str, frozenset[str]] = {
    ProfileStatus.UPLOADED: frozenset({ProfileStatus.QUEUED}),  # the upload is committed: queue ingest
    ProfileStatus.QUEUED: frozenset({ProfileStatus.QUEUED,  # a re-run of a message that was lost
                                     ProfileStatus.PARSING}),  # ingest claims it
    ProfileStatus.PARSING: frozenset({
        ProfileStatus.PARSING,  # claimed again (lease ran out), or a fanned-out upload waiting for its ranks
        ProfileStatus.QUEUED,  # released for a retry, or queued again by the recovery sweep or a re-run
        ProfileStatus.ANALYZING,  # the tables are saved: diagnose next
        ProfileStatus.FAILED,
    }),
    ProfileStatus.ANALYZING: frozenset({
        ProfileStatus.ANALYZING,  # diagnose claims it, releases it for a retry, or the sweep queues it again
        ProfileStatus.QUEUED,  # a re-run of a stuck step
        ProfileStatus.READY,
        ProfileStatus.FAILED,
    }),
    ProfileStatus.READY: frozenset({ProfileStatus.QUEUED}),  # a re-run from the kept archive
    ProfileStatus.FAILED: frozenset({ProfileStatus.QUEUED}),
}
# Still in the pipeline: counted as uploads in flight, and a comparison waits for them.
IN_PIPELINE: tuple[str, ...] = (ProfileStatus.UPLOADED, ProfileStatus.QUEUED, ProfileStatus.PARSING,
                                ProfileStatus.ANALYZING)
FINISHED: tuple[str, ...] = (ProfileStatus.READY, ProfileStatus.FAILED)


class InvalidTransition(ValueError):
    """A transition the table does not allow: a bug in the caller, never bad input."""


def sources_of(status: str) -> frozenset[str]:
    """The statuses from which a profile may move to ``status``."""
    return frozenset(s for s, targets in TRANSITIONS.items() if status in targets)


class ProfileQuerySet(models.QuerySet["Profile"]):
    def transition(self, to: str, *, among: Iterable[str] | None = None, **fields: Any) -> int:
        """Move these profiles to ``to`` in one conditional UPDATE: only rows in one of ``among`` (default:
        every status allowed to reach ``to``) move, so two workers (or a worker and the sweep) racing for a
        row move it once. ``fields`` are written with the status. Returns how many rows moved."""
        allowed = sources_of(to)
        sources = allowed if among is None else frozenset(among)
        if not sources <= allowed:
            raise InvalidTransition(f"{sorted(sources - allowed)} -> {to} is not in TRANSITIONS")
        return self.filter(status__in=sources).update(status=to, updated_at=timezone.now(), **fields)

    def unleased(self) -> ProfileQuerySet:
        """Rows no live worker holds: no lease, or one that ran out (its worker died)."""
        return self.filter(models.Q(lease_until__isnull=True) | models.Q(lease_until__lt=timezone.now()))


def archive_upload_to(instance: Profile, filename: str) -> str:
    return f"projects/{instance.project_id}/archives/{uuid.uuid4().hex}/{filename}"


# A model file is one Python module (transformers' modeling_llama.py is about 40 KB; the largest modeling
# files are a few hundred KB); it is refused above this, and the remedies read at most this much of it.
MODEL_FILE_MAX_BYTES = 4 * 1024 * 1024


def model_file_upload_to(instance: Profile, filename: str) -> str:
    return f"projects/{instance.project_id}/models/{uuid.uuid4().hex}/{filename}"


class Profile(models.Model):
    """One uploaded profile. The archive is kept in storage for good, whatever happens to the analysis."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="profiles")
    name = models.CharField(max_length=200)
    sku = models.CharField(max_length=32, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=ProfileStatus.choices, default=ProfileStatus.UPLOADED, db_index=True
    )
    progress = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # ``error`` as its message (analysis.texts): a page shows it in its own language
    error_message = models.JSONField(null=True, blank=True, default=None)
    archive = models.FileField(upload_to=archive_upload_to, max_length=500)
    original_filename = models.CharField(max_length=255)
    upload_kind = models.CharField(max_length=16, blank=True, default="")  # pypto_core.archive kinds
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    detected_format = models.CharField(max_length=32, blank=True, default="")
    # What the analysis found out, as ``analysis.summary.ProfileSummary`` (versioned; parsed in one place).
    summary = models.JSONField(default=dict, blank=True)
    # The headline figures of ``summary``, as columns: the project page charts and sorts profiles by them.
    per_token_ms = models.FloatField(null=True, blank=True)  # decode latency per token (median)
    tokens_per_s = models.FloatField(null=True, blank=True)  # decode throughput
    # the median profiler step: a run's speed where no tokens are counted (a CUDA-graph decode, training)
    step_time_ms = models.FloatField(null=True, blank=True)
    simulated = models.BooleanField(default=False)  # written by pypto synth, not measured on hardware
    parquet_prefix = models.CharField(max_length=500, blank=True, default="")  # storage folder of Parquet
    model_file = models.FileField(upload_to=model_file_upload_to, max_length=500, blank=True, default="")
    # Multi-rank: a rank profile points at the profile of the whole upload (issue 10 fans out per rank).
    group = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="ranks")
    rank = models.IntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A worker holds a profile's pipeline step until this time; a redelivered task may take it over
    # after that (the worker that held it was killed). Renewed whenever progress is written.
    lease_until = models.DateTimeField(null=True, blank=True)

    objects = ProfileQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED


class UploadSession(models.Model):
    """A resumable chunked upload: bytes are appended in order; the client asks the offset to resume."""

    class Status(models.TextChoices):
        OPEN = "open", _("Open")
        COMPLETE = "complete", _("Complete")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="upload_sessions")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    filename = models.CharField(max_length=255)
    size = models.BigIntegerField()
    received = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="")  # optional, checked on completion
    name = models.CharField(max_length=200, blank=True, default="")
    sku = models.CharField(max_length=32, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    profile = models.ForeignKey(Profile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
