"""Capture agents registered per project, and the capture jobs the dashboard sends them."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

# An agent heartbeats every HEARTBEAT_S (told at registration); after ONLINE_WINDOW without any request it
# is shown offline. Three missed beats, so one slow request does not flap the page.
HEARTBEAT_S = 15
ONLINE_WINDOW = timedelta(seconds=3 * HEARTBEAT_S)


class Agent(models.Model):
    """A capture agent on a host. Its token is shown once at creation and stored only as a SHA-256 hash."""

    project = models.ForeignKey("profiles.Project", on_delete=models.CASCADE, related_name="capture_agents")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=12)  # shown on the page, to tell tokens apart
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    version = models.CharField(max_length=32, blank=True, default="")
    capabilities = models.JSONField(default=dict, blank=True)
    workloads = models.JSONField(default=list, blank=True)  # [{"name", "kind", "description", "timeout_s"}]

    class Meta:
        ordering = ["project_id", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_agent_name_per_project")]

    def __str__(self) -> str:
        return self.name

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def online(self) -> bool:
        return (not self.revoked and self.last_seen is not None
                and timezone.now() - self.last_seen < ONLINE_WINDOW)

    def workload_names(self) -> list[str]:
        return [w["name"] for w in self.workloads if isinstance(w, dict) and w.get("name")]


class JobStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    CLAIMED = "claimed", _("Claimed")
    RUNNING = "running", _("Running")
    UPLOADING = "uploading", _("Uploading")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")


FINAL_STATUSES = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)
ACTIVE_STATUSES = (JobStatus.CLAIMED, JobStatus.RUNNING, JobStatus.UPLOADING)  # an agent holds the job
# What an agent may report after each status (done is set only by completing the job's upload).
AGENT_TRANSITIONS: dict[str, tuple[str, ...]] = {
    JobStatus.CLAIMED: (JobStatus.RUNNING, JobStatus.FAILED, JobStatus.CANCELLED),
    JobStatus.RUNNING: (JobStatus.RUNNING, JobStatus.UPLOADING, JobStatus.FAILED, JobStatus.CANCELLED),
    JobStatus.UPLOADING: (JobStatus.UPLOADING, JobStatus.FAILED, JobStatus.CANCELLED),
}


class CaptureJob(models.Model):
    project = models.ForeignKey("profiles.Project", on_delete=models.CASCADE, related_name="capture_jobs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="jobs")
    workload = models.CharField(max_length=100)
    params = models.JSONField(default=dict, blank=True)  # validated by pypto_core.capture.options
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED,
                              db_index=True)
    cancel_requested = models.BooleanField(default=False)
    message = models.TextField(blank=True, default="")  # why it failed, or the last note
    # the server's own message as a template and parameters (pypto_core.i18n), shown in each reader's
    # language; None for the agent's own text, which is shown as it came
    message_i18n = models.JSONField(null=True, blank=True, default=None)
    log_tail = models.TextField(blank=True, default="")
    upload = models.ForeignKey(
        "profiles.UploadSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    profile = models.ForeignKey("profiles.Profile", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # set at the claim: the workload's timeout (as its agent reported it) plus a grace; past it, a job still
    # claimed or running is failed by services.jobs_expire
    deadline = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A verification job (issue 21): the profile whose findings it verifies, which findings, the remedies it
    # carries to the agent ([{kind, name, content, sha256, rule, finding}]: the agent decides what it
    # applies), those left out with the reason, and the comparison made once its own profile is ready.
    verifies = models.ForeignKey("profiles.Profile", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="verification_jobs")
    verify_findings = models.JSONField(default=list, blank=True)
    remedies = models.JSONField(default=list, blank=True)
    remedies_left_out = models.JSONField(default=list, blank=True)
    comparison = models.ForeignKey("analysis.Comparison", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["agent", "status", "created_at"])]

    @property
    def is_finished(self) -> bool:
        return self.status in FINAL_STATUSES
